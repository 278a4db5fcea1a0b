package store

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func mailItem(to, from string, i int, at time.Time) MailItem {
	return MailItem{ID: fmt.Sprintf("mail_%03d", i), To: to, From: from, MessageID: fmt.Sprintf("msg_%s_%d", from, i),
		Received: at, Expires: at.Add(time.Hour), Message: make([]byte, 100)}
}

func TestMailQuotasOrderAckAndPrune(t *testing.T) {
	s, _ := openTemp(t)
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	q := MailQuota{MaxMessages: 3, MaxBytes: 250, MaxPerSender: 2}

	for i, from := range []string{"alice", "carol"} {
		if _, err := s.Mailboxes().PutMail(mailItem("bob", from, i, now), q); err != nil {
			t.Fatal(err)
		}
	}
	// Bytes: a third 100-byte message would make 300 > 250.
	if _, err := s.Mailboxes().PutMail(mailItem("bob", "dave", 2, now), q); !errors.Is(err, ErrMailQuota) {
		t.Fatalf("over the byte quota: %v", err)
	}
	// Total: the relay's own ceiling across recipients.
	if _, err := s.Mailboxes().PutMail(mailItem("zoe", "yann", 9, now), MailQuota{MaxMessages: 9, MaxBytes: 1000, MaxPerSender: 9, MaxTotalBytes: 250}); !errors.Is(err, ErrMailQuota) {
		t.Fatalf("over the total quota: %v", err)
	}
	// Per sender: alice may leave two across recipients.
	if _, err := s.Mailboxes().PutMail(mailItem("erin", "alice", 3, now), q); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mailboxes().PutMail(mailItem("frank", "alice", 4, now), q); !errors.Is(err, ErrMailQuota) {
		t.Fatalf("over the sender quota: %v", err)
	}
	// A retry of a held message returns the first ID and stores nothing.
	dup := mailItem("bob", "alice", 0, now)
	dup.ID = "mail_999"
	if id, err := s.Mailboxes().PutMail(dup, q); err != nil || id != "mail_000" {
		t.Fatalf("retry: id %q err %v, want mail_000", id, err)
	}

	got, more, err := s.Mailboxes().Mail("bob", now, 1, 1<<20)
	if err != nil || len(got) != 1 || !more || got[0].ID != "mail_000" {
		t.Fatalf("first page: %+v more=%v err=%v", got, more, err)
	}
	got, more, _ = s.Mailboxes().Mail("bob", now, 10, 1<<20)
	if len(got) != 2 || more || got[1].From != "carol" {
		t.Fatalf("all of bob's mail: %+v more=%v", got, more)
	}
	// A byte budget smaller than one message still returns one.
	if got, more, _ := s.Mailboxes().Mail("bob", now, 10, 10); len(got) != 1 || !more {
		t.Fatalf("tight budget: %d messages more=%v", len(got), more)
	}
	// Another recipient cannot acknowledge bob's mail.
	if n, err := s.Mailboxes().AckMail("erin", []string{"mail_000", "mail_001"}); err != nil || n != 0 {
		t.Fatalf("erin acked %d of bob's (%v)", n, err)
	}
	if n, _ := s.Mailboxes().AckMail("bob", []string{"mail_000", "nope"}); n != 1 {
		t.Fatalf("bob acked %d, want 1", n)
	}
	// Acknowledging frees alice's sender quota.
	if _, err := s.Mailboxes().PutMail(mailItem("frank", "alice", 5, now), q); err != nil {
		t.Fatalf("after the ack alice should have room: %v", err)
	}

	// Expired mail is not served, and pruning removes it with stale registrations.
	later := now.Add(2 * time.Hour)
	if got, _, _ := s.Mailboxes().Mail("bob", later, 10, 1<<20); len(got) != 0 {
		t.Fatalf("expired mail served: %+v", got)
	}
	if err := s.Mailboxes().RegisterMailbox("bob", now, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Mailboxes().RegisterMailbox("carol", now, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Mailboxes().RegisterMailbox("dave", now, 2); !errors.Is(err, ErrTooManyMailboxes) {
		t.Fatalf("a third mailbox with room for two: %v", err)
	}
	if err := s.Mailboxes().RegisterMailbox("bob", now.Add(time.Second), 2); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Mailboxes().MailboxRegistered("bob", now.Add(-time.Minute)); !ok {
		t.Fatal("bob not registered")
	}
	if b, _ := s.Mailboxes().MailBytes(); b != 3*100 {
		t.Fatalf("mail bytes %d, want 300 (three messages held)", b)
	}
	n, err := s.Mailboxes().PruneMail(later, now.Add(time.Minute))
	if err != nil || n != 3 {
		t.Fatalf("pruned %d (%v), want 3", n, err)
	}
	if ok, _ := s.Mailboxes().MailboxRegistered("bob", time.Time{}); ok {
		t.Fatal("a stale registration survived pruning")
	}
	// Everything survives a reopen (crash safety is bbolt's; the layout is ours).
	if _, err := s.Mailboxes().PutMail(mailItem("bob", "alice", 6, later), q); err != nil {
		t.Fatal(err)
	}
	if err := s.Mailboxes().PutOutbox(OutboxItem{ID: "msg_1", To: "bob", Message: []byte{1}, Queued: now}); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	if got, _, _ := s.Mailboxes().Mail("bob", later, 10, 1<<20); len(got) != 1 {
		t.Fatalf("after reopen bob has %d messages", len(got))
	}
	if b, _ := s.Mailboxes().MailBytes(); b != 100 {
		t.Fatalf("mail bytes after pruning and one more message: %d, want 100", b)
	}
	if items, _ := s.Mailboxes().Outbox(); len(items) != 1 || items[0].ID != "msg_1" {
		t.Fatalf("outbox after reopen: %+v", items)
	}
	if err := s.Mailboxes().DeleteOutbox("msg_1"); err != nil {
		t.Fatal(err)
	}
	if items, _ := s.Mailboxes().Outbox(); len(items) != 0 {
		t.Fatalf("outbox after delete: %+v", items)
	}
}

func TestSeenForget(t *testing.T) {
	s, _ := openTemp(t)
	seen := s.Seen()
	exp := time.Now().Add(time.Hour)
	if added, err := seen.Add("p msg:1", exp); !added || err != nil {
		t.Fatalf("first add: %v %v", added, err)
	}
	if err := seen.Forget("p msg:1"); err != nil {
		t.Fatal(err)
	}
	if err := seen.Forget("p never-seen"); err != nil {
		t.Fatalf("forgetting an unknown ID: %v", err)
	}
	if added, _ := seen.Add("p msg:1", exp); !added {
		t.Fatal("a forgotten ID is still seen")
	}
	// The expiry index was cleaned too: pruning later finds nothing stale to trip on.
	if err := seen.Prune(exp.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if added, _ := seen.Add("p msg:1", exp.Add(time.Hour)); !added {
		t.Fatal("pruned ID still seen")
	}
}
