package api

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/converse"
)

// waitHolds waits until alice's answer for peer says it holds a view
// that matches: the record is written once the view left, which the
// peer may see first.
func waitHolds(t *testing.T, alice *daemon, peer string, match func(*SeenHolds) bool) *Seen {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := alice.c.Seen(testContext(t), SeenQuery{Peer: peer})
		if err != nil {
			t.Fatal(err)
		}
		if s.Holds != nil && match(s.Holds) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("what %s holds: %+v", peer, s.Holds)
		}
		time.Sleep(5 * time.Millisecond) // polling for a record written just after a send
	}
}

// After a grant, /v1/seen answers what the peer holds (the public view
// of its greeting) beside what it would get now, capability by
// capability; revoked, the peer is refused, and its refused greeting is
// in the record of refusals, found by code, peer, text and instant.
func TestSeenHoldsAndRefused(t *testing.T) {
	ctx := testContext(t)
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	bobID := bob.peerID()
	if s, err := alice.c.Seen(ctx, SeenQuery{Peer: bobID}); err != nil || s.Holds != nil || s.Refused != nil {
		t.Fatalf("before any greeting: holds %+v, refused %+v, %v", s.Holds, s.Refused, err)
	}
	if _, err := bob.c.Connect(ctx, alice.n.Addrs()[0].String()+"/p2p/"+alice.peerID()); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.c.Greet(ctx, GreetRequest{Peer: alice.peerID()}); err != nil {
		t.Fatal(err)
	}
	waitHolds(t, alice, bobID, func(h *SeenHolds) bool { return h.Via == converse.SentInGreeting })
	if _, err := alice.c.SetDisclosure(ctx, DisclosureChange{Peer: bobID, Tier: "professional"}); err != nil {
		t.Fatal(err)
	}
	s := waitHolds(t, alice, bobID, func(h *SeenHolds) bool { return true })
	h := s.Holds
	if h.Tier != "public" || !h.Open || h.ConversationID == "" || h.Seq != s.Seq || !slices.Equal(h.Eligible, []string{"ping"}) ||
		!slices.Equal(h.Shown, []string{"calendar.availability"}) || len(h.Gone) != 0 {
		t.Errorf("what bob holds after the grant: %+v", h)
	}
	if s.Facts.Tier != "professional" {
		t.Errorf("what bob would get: tier %q", s.Facts.Tier)
	}
	for name, want := range map[string][2]string{"ping": {StandingEligible, HeldEligible}, "calendar.availability": {StandingEligible, HeldShown},
		"diary.read": {StandingHidden, HeldNone}} {
		if c := seenCap(t, s, name); c.Standing != want[0] || c.Held != want[1] {
			t.Errorf("%s: would get %q, holds %q; want %q, %q", name, c.Standing, c.Held, want[0], want[1])
		}
	}
	// A capability removed since is gone from what it holds.
	if _, err := alice.c.RemoveCapability(ctx, "ping"); err != nil {
		t.Fatal(err)
	}
	s = waitHolds(t, alice, bobID, func(h *SeenHolds) bool { return h.Via == converse.SentInUpdate })
	if s.Holds.Tier != "public" || len(s.Holds.Gone) != 0 || slices.Contains(s.Holds.Eligible, "ping") {
		t.Errorf("after the push in the open conversation: %+v", s.Holds)
	}

	// Revoked: refused, and its greeting in the record of refusals.
	if _, err := alice.c.TrustPeer(ctx, bobID, TrustAction{Revoke: true}); err != nil {
		t.Fatal(err)
	}
	s, err := alice.c.Seen(ctx, SeenQuery{Peer: bobID})
	if err != nil || s.Refused == nil || s.Refused.Code != "key_revoked" {
		t.Fatalf("a revoked peer: refused %+v, %v", s.Refused, err)
	}
	if _, err := bob.c.Greet(ctx, GreetRequest{Peer: alice.peerID(), Disclosure: "professional"}); err == nil {
		t.Fatal("alice took the greeting of a peer she revoked")
	}
	var found []gossip.Refusal
	for _, q := range []RefusalQuery{{Code: "key_revoked"}, {Peer: bobID}, {Text: "KEY_REVOKED"}, {Text: "revoked trust"}} {
		l, err := alice.c.Refusals(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		// The greeting, and whatever bob said in the conversation he had open.
		i := slices.IndexFunc(l.Refusals, func(r gossip.Refusal) bool { return r.Phase == "greeting" })
		if i < 0 || l.Refusals[i].Peer != bobID || l.Refusals[i].Code != "key_revoked" || len(l.Days) != 1 || len(l.Read) != 1 {
			t.Fatalf("refusals for %+v: %+v", q, l)
		}
		found = append(found, l.Refusals[i])
	}
	at := found[0].At
	if l, err := alice.c.Refusals(ctx, RefusalQuery{At: at}); err != nil || len(l.Refusals) != 1 || l.Refusals[0].Phase != "greeting" {
		t.Errorf("the refusal at its instant: %+v, %v", l, err)
	}
	for _, q := range []RefusalQuery{{Code: "wrong_key"}, {At: at.Add(time.Nanosecond)}, {Text: "nothing like it"}} {
		if l, err := alice.c.Refusals(ctx, q); err != nil || len(l.Refusals) != 0 {
			t.Errorf("refusals for %+v: %+v, %v", q, l, err)
		}
	}
	for _, bad := range []string{"day=29-11-2026", "at=yesterday", "limit=0", "limit=1001"} {
		var out RefusalList
		err := alice.c.call(ctx, http.MethodGet, "/v1/audit/refusals?"+bad, nil, &out)
		apiError(t, err, http.StatusBadRequest)
	}
}
