package node

import (
	"context"
	"testing"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"go.uber.org/goleak"
)

// TestNoGoroutineLeftBehind runs a conversation with a refused message and
// an update push, closes both daemons, and checks that no goroutine they
// started is still running.
func TestNoGoroutineLeftBehind(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	r, err := bob.Greet(context.Background(), alice.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Say(r.ConversationID, gossip.PhaseContext, "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = d.Capabilities[:1]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	raw := newRawPeer(t, alice)
	raw.exchange(t, alice, "/ifp/4/conversation/1.0.0", []byte{0x03, 0xff, 0x00, 0x13})
	raw.Close()
	bob.Close()
	alice.Close()
}
