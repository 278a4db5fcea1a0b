package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// waitSent waits until d's record of the view it last sent pid matches:
// the record is written once the message left, which the peer may see
// first.
func waitSent(t *testing.T, d *testDaemon, pid peer.ID, match func(store.SentView) bool) store.SentView {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, ok, err := d.SentView(pid)
		if err != nil {
			t.Fatal(err)
		}
		if ok && match(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record of the view sent to %s: %+v (held %v), not the one expected", pid, v, ok)
		}
		time.Sleep(5 * time.Millisecond) // polling for a record written just after a send
	}
}

// What a peer holds is the view last sent it, not what it would get now:
// a grant changes nothing until its next greeting; an update pushed in a
// conversation is recorded with the conversation's grant; the greeting
// after the grant records the new one.
func TestSentViewIsWhatThePeerHolds(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	bobID := bob.id.PeerID()
	if _, ok, err := alice.SentView(bobID); ok || err != nil {
		t.Fatalf("a record before any greeting: %v, %v", ok, err)
	}
	r, err := bob.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	first := waitSent(t, alice, bobID, func(v store.SentView) bool { return v.ConversationID == r.ConversationID })
	if first.Via != converse.SentInGreeting || first.Tier != "public" || first.Seq != alice.Document().Seq ||
		!slices.Equal(first.Eligible, []string{"ping"}) || !slices.Equal(first.Shown, []string{"calendar.availability"}) || first.Sum == "" {
		t.Fatalf("the view sent at bob's greeting: %+v", first)
	}
	// Bob's own record of what he sent alice.
	waitSent(t, bob, alice.id.PeerID(), func(v store.SentView) bool {
		return v.ConversationID == r.ConversationID && v.Via == converse.SentInGreeting
	})

	// A grant changes what bob would get, not what he holds.
	if err := alice.Policy().SetDisclosure("default", bobID.String(), "professional"); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := alice.SentView(bobID); v.Tier != "public" || v.At != first.At {
		t.Fatalf("after the grant, before bob greets again: %+v", v)
	}

	// A change of the document is pushed in the open conversation, cut
	// for the grant the conversation keeps.
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "doc.summarize", Description: "Summarize a document"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pushed := waitSent(t, alice, bobID, func(v store.SentView) bool { return v.Via == converse.SentInUpdate })
	if pushed.Tier != "public" || pushed.Seq != first.Seq+1 || !slices.Equal(pushed.Eligible, []string{"ping", "doc.summarize"}) {
		t.Fatalf("the view pushed: %+v", pushed)
	}

	// Bob greets again: now he holds the professional view.
	r2, err := bob.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{Disclosure: "professional"})
	if err != nil {
		t.Fatal(err)
	}
	again := waitSent(t, alice, bobID, func(v store.SentView) bool { return v.ConversationID == r2.ConversationID })
	if again.Tier != "professional" || !slices.Contains(again.Eligible, "calendar.availability") || slices.Contains(again.Shown, "diary.read") {
		t.Fatalf("the view sent at bob's greeting after the grant: %+v", again)
	}
	// bob is known now (granted above public): the record is in the file.
	if _, err := alice.Store().SentView(bobID.String()); err != nil {
		t.Fatal(err)
	}

	// A capabilities query is recorded as one, outside any conversation.
	if _, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	waitSent(t, alice, bobID, func(v store.SentView) bool { return v.Via == converse.SentInQuery && v.ConversationID == "" })
}
