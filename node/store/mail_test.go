package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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
	if _, err := s.Mailboxes().RegisterMailbox("bob", "", now, MailboxLimits{Max: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mailboxes().RegisterMailbox("carol", "", now, MailboxLimits{Max: 2}); err != nil {
		t.Fatal(err)
	}
	// A third mailbox with room for two takes the place of the one holding
	// no mail (carol's), not bob's.
	if evicted, err := s.Mailboxes().RegisterMailbox("dave", "", now, MailboxLimits{Max: 2}); err != nil || evicted != "carol" {
		t.Fatalf("a third mailbox with room for two: evicted %q (%v), want carol", evicted, err)
	}
	if _, err := s.Mailboxes().RegisterMailbox("bob", "", now.Add(time.Second), MailboxLimits{Max: 2}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Mailboxes().MailboxOpen("bob", now.Add(-time.Minute)); !ok {
		t.Fatal("bob not registered")
	}
	if b, _ := s.Mailboxes().MailBytes(); b != 3*100 {
		t.Fatalf("mail bytes %d, want 300 (three messages held)", b)
	}
	n, err := s.Mailboxes().PruneMail(later, now.Add(time.Minute))
	if err != nil || n != 3 {
		t.Fatalf("pruned %d (%v), want 3", n, err)
	}
	if ok, _ := s.Mailboxes().MailboxOpen("bob", time.Time{}); ok {
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

// TestMailboxTableEvictsLeastRecentlyUsedEmptyFirst: a full table makes
// room rather than refuse, taking the least recently registered mailbox
// that holds no mail, and one holding mail (with its mail) only when none
// is empty.
func TestMailboxTableEvictsLeastRecentlyUsedEmptyFirst(t *testing.T) {
	s, _ := openTemp(t)
	mb := s.Mailboxes()
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	q := MailQuota{MaxMessages: 10, MaxBytes: 1 << 20, MaxPerSender: 10}
	// Four registrations, the oldest two holding mail.
	for i, p := range []string{"m1", "m2", "e1", "e2"} {
		if ev, err := mb.RegisterMailbox(p, "", at(i), MailboxLimits{Max: 4}); err != nil || ev != "" {
			t.Fatalf("registering %s: evicted %q (%v)", p, ev, err)
		}
	}
	for i, p := range []string{"m1", "m2"} {
		if _, err := mb.PutMail(mailItem(p, "alice", i, t0), q); err != nil {
			t.Fatal(err)
		}
	}
	// e1 comes back (a fetch refreshes it): e2 is now the least recent empty one.
	if _, err := mb.RegisterMailbox("e1", "", at(10), MailboxLimits{Max: 4}); err != nil {
		t.Fatal(err)
	}
	var order []string
	for i, p := range []string{"n1", "n2", "n3", "n4"} {
		ev, err := mb.RegisterMailbox(p, "", at(20+i), MailboxLimits{Max: 4})
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, ev)
	}
	// e2, e1 (empty, by age), then n1, n2 (empty, newer than m1 and m2
	// but empty first).
	if want := []string{"e2", "e1", "n1", "n2"}; !slices.Equal(order, want) {
		t.Fatalf("evicted %v, want %v", order, want)
	}
	// Now every registration but n3 and n4 holds mail; fill those too and
	// the least recently registered mailbox with mail goes, mail and all.
	for i, p := range []string{"n3", "n4"} {
		if _, err := mb.PutMail(mailItem(p, "carol", 10+i, t0), q); err != nil {
			t.Fatal(err)
		}
	}
	if ev, err := mb.RegisterMailbox("late", "", at(30), MailboxLimits{Max: 4}); err != nil || ev != "m1" {
		t.Fatalf("evicted %q (%v), want m1, the oldest holding mail", ev, err)
	}
	if got, _, _ := mb.Mail("m1", t0, 10, 1<<20); len(got) != 0 {
		t.Fatalf("m1's mail outlived its mailbox: %d messages", len(got))
	}
	if b, _ := mb.MailBytes(); b != 3*100 {
		t.Fatalf("mail bytes %d, want 300 (m2, n3, n4)", b)
	}
	if n, _ := mb.Registrations(); n != 4 {
		t.Fatalf("%d registrations, want the cap of 4", n)
	}
}

// TestOneAddressCannotPushOthersOutOfTheMailboxTable: past its own limit,
// an address's new registrations take the place of its own oldest, never
// of others'.
func TestOneAddressCannotPushOthersOutOfTheMailboxTable(t *testing.T) {
	s, _ := openTemp(t)
	mb := s.Mailboxes()
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	lim := MailboxLimits{Max: 10, PerAddress: 3}
	for i, p := range []string{"bob", "carol"} {
		if _, err := mb.RegisterMailbox(p, fmt.Sprint("192.0.2.", i), t0, lim); err != nil {
			t.Fatal(err)
		}
	}
	var evicted []string
	for i := range 50 {
		ev, err := mb.RegisterMailbox(fmt.Sprintf("key%02d", i), "198.51.100.7", t0.Add(time.Duration(i+1)*time.Second), lim)
		if err != nil {
			t.Fatal(err)
		}
		if ev != "" {
			evicted = append(evicted, ev)
		}
	}
	if n, _ := mb.Registrations(); n != 2+3 {
		t.Fatalf("%d registrations after 50 from one address, want bob, carol and the address's 3", n)
	}
	for _, p := range []string{"bob", "carol", "key47", "key48", "key49"} {
		if ok, _ := mb.MailboxOpen(p, t0); !ok {
			t.Fatalf("%s lost its mailbox", p)
		}
	}
	if len(evicted) != 47 || evicted[0] != "key00" || slices.Contains(evicted, "bob") || slices.Contains(evicted, "carol") {
		t.Fatalf("evicted %v, want key00…key46, the address's own", evicted)
	}
	// A peer registering again from the same address is not charged twice.
	if ev, err := mb.RegisterMailbox("key49", "198.51.100.7", t0.Add(time.Hour), lim); err != nil || ev != "" {
		t.Fatalf("re-registering: evicted %q (%v)", ev, err)
	}
}

// TestEmptyMailboxesLapse: a registration holding no mail is open for the
// idle period after its last registration, one holding mail while it does.
func TestEmptyMailboxesLapse(t *testing.T) {
	s, _ := openTemp(t)
	mb := s.Mailboxes()
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	idle := 10 * time.Minute
	for _, p := range []string{"empty", "full"} {
		if _, err := mb.RegisterMailbox(p, "", t0, MailboxLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	item := mailItem("full", "alice", 1, t0)
	item.Expires = t0.Add(24 * time.Hour)
	if _, err := mb.PutMail(item, MailQuota{MaxMessages: 10, MaxBytes: 1 << 20, MaxPerSender: 10}); err != nil {
		t.Fatal(err)
	}
	open := func(p string, now time.Time) bool {
		t.Helper()
		ok, err := mb.MailboxOpen(p, now.Add(-idle))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !open("empty", t0.Add(idle-time.Second)) {
		t.Fatal("an empty mailbox closed before its idle period ran out")
	}
	later := t0.Add(idle + time.Second)
	if open("empty", later) {
		t.Fatal("an empty mailbox still open after its idle period")
	}
	if !open("full", later) {
		t.Fatal("a mailbox holding mail closed after the idle period")
	}
	if _, err := mb.PruneMail(later, later.Add(-idle)); err != nil {
		t.Fatal(err)
	}
	if n, _ := mb.Registrations(); n != 1 {
		t.Fatalf("%d registrations after pruning, want only the one holding mail", n)
	}
	// Once its mail has expired and gone, it lapses too.
	end := t0.Add(25 * time.Hour)
	if _, err := mb.PruneMail(end, end.Add(-idle)); err != nil {
		t.Fatal(err)
	}
	if n, _ := mb.Registrations(); n != 0 {
		t.Fatalf("%d registrations after the mail expired, want 0", n)
	}
}

// TestMailQuotasHoldUnderManySenderKeys: fresh sender keys cost nothing,
// so what one address leaves is bounded whatever the keys, and a full
// pool still leaves each registered recipient its own share.
func TestMailQuotasHoldUnderManySenderKeys(t *testing.T) {
	s, _ := openTemp(t)
	mb := s.Mailboxes()
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	for _, p := range []string{"bob", "mallory1", "mallory2"} {
		if _, err := mb.RegisterMailbox(p, "", now, MailboxLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	put := func(q MailQuota, to, from, addr string) error {
		n++
		item := mailItem(to, from, n, now)
		item.Addr = addr
		_, err := mb.PutMail(item, q)
		return err
	}

	// One address, 50 fresh keys, each far from its own quota of 5: the
	// address quota stops them at 20.
	q := MailQuota{MaxMessages: 1000, MaxBytes: 1 << 20, MaxPerSender: 5, MaxPerAddress: 20}
	held := 0
	for i := range 50 {
		err := put(q, fmt.Sprintf("mallory%d", 1+i%2), fmt.Sprintf("key%02d", i), "198.51.100.7")
		if err == nil {
			held++
		} else if !errors.Is(err, ErrMailQuota) || !strings.Contains(err.Error(), "198.51.100.7") {
			t.Fatalf("message %d: %v, want a quota error naming the address", i, err)
		}
	}
	if held != 20 {
		t.Fatalf("held %d messages from one address's 50 keys, want 20", held)
	}
	// Another address is not charged for it.
	if err := put(q, "bob", "alice", "192.0.2.1"); err != nil {
		t.Fatalf("genuine mail from another address: %v", err)
	}
	// Acknowledging frees the address's quota.
	got, _, _ := mb.Mail("mallory1", now, 1, 1<<20)
	if _, err := mb.AckMail("mallory1", []string{got[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := put(q, "mallory2", "key99", "198.51.100.7"); err != nil {
		t.Fatalf("after an ack the address should have room: %v", err)
	}

	// The total: 2,100 bytes held; a pool of 2,500 bytes, a share of 300
	// bytes per registered recipient. Fresh keys from fresh addresses fill
	// the pool for mallory's mailboxes, then are refused...
	q = MailQuota{MaxMessages: 1000, MaxBytes: 1 << 20, MaxPerSender: 5, MaxPerAddress: 20, MaxTotalBytes: 2500, Share: 300}
	refused := 0
	for i := range 20 {
		if err := put(q, fmt.Sprintf("mallory%d", 1+i%2), fmt.Sprintf("fresh%02d", i), fmt.Sprintf("203.0.113.%d", i)); errors.Is(err, ErrMailQuota) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if refused != 16 {
		t.Fatalf("%d of 20 refused past the pool, want 16 (room for 4)", refused)
	}
	// ...while bob, registered, still gets his share (he holds 100 bytes:
	// two more messages), and a recipient that is not registered nothing.
	for i := range 2 {
		if err := put(q, "bob", "alice", "192.0.2.1"); err != nil {
			t.Fatalf("genuine message %d for bob with the pool full: %v", i, err)
		}
	}
	if err := put(q, "bob", "alice", "192.0.2.1"); !errors.Is(err, ErrMailQuota) {
		t.Fatalf("past bob's share with the pool full: %v", err)
	}
	if err := put(q, "stranger", "alice", "192.0.2.1"); !errors.Is(err, ErrMailQuota) {
		t.Fatalf("an unregistered recipient with the pool full: %v", err)
	}
	// At most the pool plus one share per registration.
	if b, _ := mb.MailBytes(); b > 2500+3*300 {
		t.Fatalf("holding %d bytes, above the pool and three shares", b)
	}
}
