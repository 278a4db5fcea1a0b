package node

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/internal/testkit"
)

// A peer asked again answers without its view when the asker holds it
// unchanged, and with it as soon as it changed.
func TestUnchangedViewIsNotSentAgain(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	pid := alice.id.PeerID()

	first, err := bob.QueryCapabilities(ctx, pid, negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := bob.QueryCapabilities(ctx, pid, negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if testkit.CapNames(second.View) != testkit.CapNames(first.View) || second.View.Seq != first.View.Seq {
		t.Fatalf("second view %q seq %d, first %q seq %d", testkit.CapNames(second.View), second.View.Seq, testkit.CapNames(first.View), first.View.Seq)
	}
	answer := answerOf(t, bob, second.ConversationID)
	if _, ok := answer.Body.Part(negotiate.PartCapabilities); ok {
		t.Fatal("the view came again though bob holds it unchanged")
	}
	// Alice said in her first answer that she holds bob's view: his second
	// greeting leaves it out too, and she still knows who he is.
	entries, _ := bob.Audit().Entries(second.ConversationID)
	if _, ok := entries[0].Message.Body.Part(negotiate.PartCapabilities); ok {
		t.Fatal("bob's view went again though alice said she holds it")
	}
	if got := proposalOf(entries[0].Message).ViewUnchanged; got == "" {
		t.Fatal("bob's greeting does not say his view is unchanged")
	}
	if rec, err := alice.store.Peer(bob.id.PeerID().String()); err != nil || rec.AgentID != bob.id.DID() {
		t.Fatalf("alice's cache of bob after a greeting without his view: %+v, %v", rec, err)
	}
	held, _ := bob.convs.HeldView(pid)
	if got := proposalOf(answer).ViewUnchanged; got != hex.EncodeToString(held.Sum[:]) {
		t.Fatalf("view_unchanged %q, want the hash bob holds", got)
	}
	if !strings.Contains(answer.Body.Text, "the one you hold") {
		t.Errorf("the answer's text does not say the view is the one held: %q", answer.Body.Text)
	}
	// The answer was signed and audited on both sides like any other.
	if err := answer.Verify(alice.id.PublicKey()); err != nil {
		t.Fatal(err)
	}
	if entries, err := alice.Audit().Entries(second.ConversationID); err != nil || len(entries) != 2 {
		t.Fatalf("alice's audit of the second query: %d entries, %v", len(entries), err)
	}

	// A change of document changes the view's hash: the view comes again.
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "weather.today", Description: "Today's weather"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	third, err := bob.QueryCapabilities(ctx, pid, negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := answerOf(t, bob, third.ConversationID).Body.Part(negotiate.PartCapabilities); !ok {
		t.Fatal("a changed view was not sent")
	}
	if !strings.Contains(testkit.CapNames(third.View), "weather.today") || third.View.Seq <= first.View.Seq {
		t.Fatalf("third view %q seq %d", testkit.CapNames(third.View), third.View.Seq)
	}

	// A greeter whose view the responder no longer holds (evicted, or a
	// restart, as here) still gets an answer, and the view flows again
	// after it.
	if err := alice.Close(); err != nil {
		t.Fatal(err)
	}
	alice = restartDaemon(t, alice)
	connect(t, bob, alice)
	if _, held := alice.convs.HeldView(bob.id.PeerID()); held {
		t.Fatal("alice holds bob's view in memory after a restart")
	}
	if _, err := bob.QueryCapabilities(ctx, pid, negotiate.Proposal{}); err != nil {
		t.Fatalf("a greeting whose unchanged view the responder forgot: %v", err)
	}
	fifth, err := bob.QueryCapabilities(ctx, pid, negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := bob.Audit().Entries(fifth.ConversationID); len(e) != 2 {
		t.Fatal("no audit of the fifth query")
	} else if _, ok := e[0].Message.Body.Part(negotiate.PartCapabilities); !ok {
		t.Fatal("bob left out his view again though alice said she no longer holds it")
	}
}

// An answer that claims an unchanged view the asker did not name is refused.
func TestUnchangedViewClaimMustMatch(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	pid := alice.id.PeerID()
	if _, err := bob.QueryCapabilities(context.Background(), pid, negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	held, ok := bob.convs.HeldView(pid)
	if !ok {
		t.Fatal("bob holds no view of alice after a query")
	}
	claim := func(hash string) *gossip.Message {
		return &gossip.Message{Body: gossip.Body{Parts: []gossip.Part{{ContentType: "application/json", Name: negotiate.PartGreeting,
			Content: negotiate.MustJSONValue(negotiate.Proposal{ViewUnchanged: hash})}}}}
	}
	for name, tc := range map[string]struct {
		m    *gossip.Message
		held *converse.HeldView
	}{
		"another hash":          {claim(strings.Repeat("ab", 32)), &held},
		"not a hash":            {claim("x"), &held},
		"nothing named":         {claim(hex.EncodeToString(held.Sum[:])), nil},
		"no view and no claims": {claim(""), &held},
	} {
		if _, err := bob.convs.CheckView(pid, tc.m, proposalOf(tc.m).ViewUnchanged, true, tc.held); !errors.Is(err, gossip.ErrInvalidMessage) {
			t.Errorf("%s: %v, want %v", name, err, gossip.ErrInvalidMessage)
		}
	}
	matching := claim(hex.EncodeToString(held.Sum[:]))
	if doc, err := bob.convs.CheckView(pid, matching, proposalOf(matching).ViewUnchanged, true, &held); err != nil || doc != held.Doc {
		t.Fatalf("a matching claim: %v", err)
	}
}

// answerOf is the greeting d received in a conversation it started.
func answerOf(t *testing.T, d *testDaemon, convID string) *gossip.Message {
	t.Helper()
	entries, err := d.Audit().Entries(convID)
	if err != nil || len(entries) != 2 || entries[1].Direction != gossip.Received {
		t.Fatalf("audit of %s: %d entries, %v", convID, len(entries), err)
	}
	return entries[1].Message
}

// proposalOf is the proposal of greeting m, as the daemon reads it.
func proposalOf(m *gossip.Message) negotiate.Proposal {
	g, _ := negotiate.ReadGreeting(m)
	return g.Proposal
}

// A responder keeps of a greeter's view its bytes and the fields it reads,
// not the decoded document; the initiator, whose caller reads the view,
// keeps the document with it.
func TestHeldViewsKeepBytesNotDocuments(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	r, err := bob.QueryCapabilities(context.Background(), alice.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	atAlice, ok := alice.convs.HeldView(bob.id.PeerID())
	if !ok {
		t.Fatal("alice holds no view of bob")
	}
	if atAlice.Doc != nil || len(atAlice.Canon) == 0 || atAlice.AgentID != bob.id.DID() || atAlice.Seq == 0 || atAlice.DocHash == "" {
		t.Fatalf("alice's held view of bob: doc %v, %d bytes, agent %q, seq %d", atAlice.Doc != nil, len(atAlice.Canon), atAlice.AgentID, atAlice.Seq)
	}
	atBob, ok := bob.convs.HeldView(alice.id.PeerID())
	if !ok || atBob.Doc == nil || atBob.Doc != r.View {
		t.Fatal("bob, who asked, does not hold alice's view with its document")
	}
	// Greeting alice in turn, alice reads bob's view from the bytes she held.
	back, err := alice.Greet(context.Background(), bob.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if back.View == nil || back.View.AgentID != bob.id.DID() {
		t.Fatalf("alice's greeting of bob returned view %+v", back.View)
	}
}

// presignedView is the view the owner's document holds once it has
// signed the view for strangers ahead of time, read without signing.
func presignedView(t *testing.T, d *testDaemon) *negotiate.SignedView {
	t.Helper()
	var v *negotiate.SignedView
	testkit.WaitFor(t, "the view for strangers signed ahead of time", func() bool {
		v = d.docs.Presigned()
		return v != nil && v.Doc.Seq == d.Document().Seq
	})
	return v
}

// A daemon signs the view a stranger's first greeting is shown when it
// starts and when its document changes, before any stranger asks: a new
// peer's greeting (both ways) is shown that very signature, and nothing
// is signed while the greeting waits.
func TestStrangersViewIsSignedAheadOfTime(t *testing.T) {
	cfg := func() *config.Config {
		c := loopbackConfig()
		c.Capabilities = testkit.TwentyCapabilities()
		return c
	}
	alice, bob := startDaemon(t, cfg()), startDaemon(t, cfg())
	alicePre, bobPre := presignedView(t, alice), presignedView(t, bob)
	connect(t, bob, alice)
	r, err := bob.QueryCapabilities(context.Background(), alice.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if r.View.Seq != alicePre.Doc.Seq || len(r.View.Capabilities) != len(alicePre.Doc.Capabilities) {
		t.Fatalf("Bob was shown seq %d with %d capabilities; signed ahead: seq %d with %d", r.View.Seq, len(r.View.Capabilities),
			alicePre.Doc.Seq, len(alicePre.Doc.Capabilities))
	}
	for _, d := range []struct {
		who *testDaemon
		pre *negotiate.SignedView
	}{{alice, alicePre}, {bob, bobPre}} {
		if held := d.who.docs.Held(); held.Views != 1 {
			t.Fatalf("%s holds %d signed views after greeting a new peer, want the one signed ahead", d.who.pid(), held.Views)
		}
		if v := d.who.docs.Presigned(); v != d.pre {
			t.Fatalf("%s signed its view again for the new peer", d.who.pid())
		}
	}
	rec, err := bob.Store().Peer(alice.pid().String())
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.View) != string(alicePre.Content.Canonical()) {
		t.Fatal("the view Bob cached is not the one Alice signed ahead of time")
	}

	// A new document: its stranger view is signed ahead too.
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = d.Capabilities[1:]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v := presignedView(t, alice); v.Doc.Seq != alicePre.Doc.Seq+1 || len(v.Doc.Capabilities) != len(alicePre.Doc.Capabilities)-1 {
		t.Fatalf("after the change, signed ahead: seq %d with %d capabilities", v.Doc.Seq, len(v.Doc.Capabilities))
	}
}
