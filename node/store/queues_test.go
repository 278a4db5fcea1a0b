package store

import (
	"os"
	"testing"
	"time"
)

// TestQueuesAndSize: the counts the metrics read follow the mail held and
// queued, and Size is the file's.
func TestQueuesAndSize(t *testing.T) {
	s, _ := openTemp(t)
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	q := MailQuota{MaxMessages: 10, MaxBytes: 10000, MaxPerSender: 10}
	if got, err := s.Mailboxes().Queues(); err != nil || got != (Queues{}) {
		t.Fatalf("an empty store: %+v %v", got, err)
	}
	for i, to := range []string{"bob", "bob", "carol"} {
		if _, err := s.Mailboxes().PutMail(mailItem(to, "alice", i, now), q); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Mailboxes().PutOutbox(OutboxItem{ID: "msg_1", To: "dave", Message: []byte{1}, Queued: now}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Mailboxes().Queues()
	if err != nil || got != (Queues{Held: 3, HeldBytes: 300, Outbox: 1}) {
		t.Errorf("three held, one queued: %+v %v", got, err)
	}
	if _, err := s.Mailboxes().AckMail("bob", []string{"mail_000"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Mailboxes().Queues(); err != nil || got != (Queues{Held: 2, HeldBytes: 200, Outbox: 1}) {
		t.Errorf("one acknowledged: %+v %v", got, err)
	}
	size, err := s.Size()
	fi, statErr := os.Stat(s.Path())
	if err != nil || statErr != nil || size <= 0 || size > fi.Size() {
		t.Errorf("Size %d (%v), the file %v (%v)", size, err, fi.Size(), statErr)
	}
}
