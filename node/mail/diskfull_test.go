package mail

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/wire"
)

// A relay whose disk is full refuses a deposit with wire code unavailable
// (admit.Unstored), not the store's error naming its file; the sender
// keeps the mail in its outbox and tries again, as for a full mailbox,
// rather than dropping it as undeliverable.
func TestFullRelayDiskKeepsTheMailInTheOutbox(t *testing.T) {
	err := admit.Unstored(fmt.Errorf("holding mail: write /srv/relay/ifaced.db: %w", syscall.ENOSPC))
	body := wire.NewErrorBody(err)
	if body.Code != wire.CodeUnavailable || !errors.Is(err, admit.ErrStoreDiskFull) || strings.Contains(body.Message, "/srv/relay") {
		t.Fatalf("a deposit on a full disk is answered %s %q; want unavailable saying the disk is full", body.Code, body.Message)
	}
	if permanentMailError(body.Code) {
		t.Errorf("a relay answering %s (its disk full) makes the sender drop the mail; want it kept and retried", body.Code)
	}
}
