package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/config"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/internal/costlru"
	"github.com/libp2p/go-libp2p/core/peer"
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
	if capNames(second.View) != capNames(first.View) || second.View.Seq != first.View.Seq {
		t.Fatalf("second view %q seq %d, first %q seq %d", capNames(second.View), second.View.Seq, capNames(first.View), first.View.Seq)
	}
	answer := answerOf(t, bob, second.ConversationID)
	if _, ok := answer.Body.Part(partCapabilities); ok {
		t.Fatal("the view came again though bob holds it unchanged")
	}
	// Alice said in her first answer that she holds bob's view: his second
	// greeting leaves it out too, and she still knows who he is.
	entries, _ := bob.Audit().Entries(second.ConversationID)
	if _, ok := entries[0].Message.Body.Part(partCapabilities); ok {
		t.Fatal("bob's view went again though alice said she holds it")
	}
	if got := proposalOf(entries[0].Message).ViewUnchanged; got == "" {
		t.Fatal("bob's greeting does not say his view is unchanged")
	}
	if rec, err := alice.store.Peer(bob.id.PeerID().String()); err != nil || rec.AgentID != bob.id.DID() {
		t.Fatalf("alice's cache of bob after a greeting without his view: %+v, %v", rec, err)
	}
	held, _ := bob.convs.peerViews.Get(pid)
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
	if _, ok := answerOf(t, bob, third.ConversationID).Body.Part(partCapabilities); !ok {
		t.Fatal("a changed view was not sent")
	}
	if !strings.Contains(capNames(third.View), "weather.today") || third.View.Seq <= first.View.Seq {
		t.Fatalf("third view %q seq %d", capNames(third.View), third.View.Seq)
	}

	// A greeter whose view the responder no longer holds (evicted, or a
	// restart) still gets an answer, and the view flows again after it.
	alice.convs.peerViews.Remove(bob.id.PeerID())
	if _, err := bob.QueryCapabilities(ctx, pid, negotiate.Proposal{}); err != nil {
		t.Fatalf("a greeting whose unchanged view the responder forgot: %v", err)
	}
	fifth, err := bob.QueryCapabilities(ctx, pid, negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := bob.Audit().Entries(fifth.ConversationID); len(e) != 2 {
		t.Fatal("no audit of the fifth query")
	} else if _, ok := e[0].Message.Body.Part(partCapabilities); !ok {
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
	held, ok := bob.convs.peerViews.Get(pid)
	if !ok {
		t.Fatal("bob holds no view of alice after a query")
	}
	claim := func(hash string) *gossip.Message {
		return &gossip.Message{Body: gossip.Body{Parts: []gossip.Part{{ContentType: "application/json", Name: partGreeting,
			Content: toJSONValue(negotiate.Proposal{ViewUnchanged: hash})}}}}
	}
	for name, tc := range map[string]struct {
		m    *gossip.Message
		held *heldView
	}{
		"another hash":          {claim(strings.Repeat("ab", 32)), &held},
		"not a hash":            {claim("x"), &held},
		"nothing named":         {claim(hex.EncodeToString(held.Sum[:])), nil},
		"no view and no claims": {claim(""), &held},
	} {
		if _, err := bob.convs.checkView(pid, tc.m, proposalOf(tc.m).ViewUnchanged, true, tc.held); !errors.Is(err, gossip.ErrInvalidMessage) {
			t.Errorf("%s: %v, want %v", name, err, gossip.ErrInvalidMessage)
		}
	}
	matching := claim(hex.EncodeToString(held.Sum[:]))
	if pv, err := bob.convs.checkView(pid, matching, proposalOf(matching).ViewUnchanged, true, &held); err != nil || pv.view.Doc != held.Doc {
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

// Requesters whose facts cut the same view share one signed view, signed
// once; a requester the owner's conditions name (an allow list) is shown
// its own.
func TestSignedViewsAreSharedByClass(t *testing.T) {
	listed := newPeerID(t)
	cfg := loopbackConfig()
	cfg.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "diary.read", "description": "Read the diary", "conditions": map[string]any{"peers": []any{listed.String()}}},
	}
	alice := startDaemon(t, cfg)
	facts := func(pid peer.ID) conditions.Facts {
		return conditions.Facts{Peer: pid.String(), AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}
	}
	first, err := alice.docs.view(facts(newPeerID(t)))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		v, err := alice.docs.view(facts(newPeerID(t)))
		if err != nil {
			t.Fatal(err)
		}
		if v != first {
			t.Fatal("two strangers with the same facts were shown two signed views")
		}
	}
	if n := alice.docs.views.Len(); n != 1 {
		t.Fatalf("%d signed views for 21 requesters of one class, want 1", n)
	}
	own, err := alice.docs.view(facts(listed))
	if err != nil {
		t.Fatal(err)
	}
	if own == first || !strings.Contains(capNames(own.Doc), "+diary.read") {
		t.Fatalf("the allow-listed peer's view: %s", capNames(own.Doc))
	}
	if strings.Contains(string(first.Content.Canonical()), listed.String()) {
		t.Fatal("the shared view names the allow-listed peer")
	}
	// The shared view verifies for anyone, as it did when signed per peer.
	if _, err := negotiate.VerifyView(alice.id.PublicKey(), first.Content.Canonical()); err != nil {
		t.Fatal(err)
	}
}

// Past its byte budget the signed-view cache evicts its least recently
// used views one by one: the views in use stay, nothing is dropped at once.
func TestSignedViewCacheIsBoundedByBytes(t *testing.T) {
	var allowed []any
	for range 40 {
		allowed = append(allowed, newPeerID(t).String())
	}
	cfg := loopbackConfig()
	cfg.Capabilities = []map[string]any{
		{"name": "diary.read", "description": "Read the diary", "conditions": map[string]any{"peers": allowed}},
	}
	alice := startDaemon(t, cfg)
	facts := func(p any) conditions.Facts {
		return conditions.Facts{Peer: p.(string), AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}
	}
	one, err := alice.docs.view(facts(allowed[0]))
	if err != nil {
		t.Fatal(err)
	}
	budget := 10 * signedViewCost(one)
	alice.docs.views = costlru.New[viewClass, *signedView](budget)
	alice.docs.classes.Purge()
	hot, err := alice.docs.view(facts(allowed[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range allowed[1:] {
		if _, err := alice.docs.view(facts(p)); err != nil {
			t.Fatal(err)
		}
		if again, _ := alice.docs.view(facts(allowed[0])); again != hot {
			t.Fatal("the view in use was evicted (or re-signed)")
		}
		if used := alice.docs.views.Used(); used > budget {
			t.Fatalf("signed views hold %d bytes, over the budget of %d", used, budget)
		}
	}
	if n := alice.docs.views.Len(); n < 9 {
		t.Fatalf("%d views held after filling past the budget, want the cache full (10), not emptied", n)
	}
}

// signedViewCost does not underestimate what a signed view of the
// 20-capability document holds, nor overestimate it more than twice.
func TestSignedViewCost(t *testing.T) {
	cfg := loopbackConfig()
	cfg.Capabilities = twentyCapabilities()
	alice := startDaemon(t, cfg)
	doc := alice.docs.current()
	const n = 50
	views := make([]*signedView, n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range views {
		v, err := alice.docs.sign(doc.View(conditions.Facts{AuthLevel: conditions.Signed, Disclosure: "public"}, alice.docs.order))
		if err != nil {
			t.Fatal(err)
		}
		views[i] = v
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := float64(after.HeapAlloc-before.HeapAlloc) / n
	cost := float64(signedViewCost(views[0]))
	t.Logf("a signed 20-capability view holds %.1f KB; counted as %.1f KB", held/1024, cost/1024)
	if cost < held || cost > 2*held {
		t.Errorf("counted as %.0f bytes, holds %.0f", cost, held)
	}
	runtime.KeepAlive(views)
}

// newPeerID is a fresh key's peer ID.
func newPeerID(t *testing.T) peer.ID {
	t.Helper()
	id, err := identity.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return id.PeerID()
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
	atAlice, ok := alice.convs.peerViews.Get(bob.id.PeerID())
	if !ok {
		t.Fatal("alice holds no view of bob")
	}
	if atAlice.Doc != nil || len(atAlice.Canon) == 0 || atAlice.AgentID != bob.id.DID() || atAlice.Seq == 0 || atAlice.DocHash == "" {
		t.Fatalf("alice's held view of bob: doc %v, %d bytes, agent %q, seq %d", atAlice.Doc != nil, len(atAlice.Canon), atAlice.AgentID, atAlice.Seq)
	}
	atBob, ok := bob.convs.peerViews.Get(alice.id.PeerID())
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

// A view ordered by requested tool categories is signed once per class
// and categories honoured, like any other view; a request that honours
// nothing is the view itself.
func TestOrderedViewsAreShared(t *testing.T) {
	cfg := loopbackConfig()
	cfg.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests", "categories": []any{"web"}},
		{"name": "files.read", "description": "Read a file", "categories": []any{"code_exec"}},
	}
	alice := startDaemon(t, cfg)
	facts := conditions.Facts{Peer: newPeerID(t).String(), AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}
	v, err := alice.docs.view(facts)
	if err != nil {
		t.Fatal(err)
	}
	first, honoured, err := alice.docs.ordered(v, []string{"code_exec", "unknown"})
	if err != nil || len(honoured) != 1 || first == v || first.Doc.Capabilities[0].Name != "files.read" {
		t.Fatalf("ordered view: %v, honoured %v", err, honoured)
	}
	again, _, err := alice.docs.ordered(v, []string{"unknown", "code_exec"})
	if err != nil || again != first {
		t.Fatal("the same class and categories honoured were signed again")
	}
	if same, honoured, _ := alice.docs.ordered(v, []string{"unknown"}); same != v || honoured != nil {
		t.Fatal("a request honouring nothing did not return the view itself")
	}
}

// A capability a requester does not reach for want of a pinned key tells
// it how to meet the condition without quoting its own peer ID, so
// requesters below the level still share one view.
func TestUnmetLevelDoesNotSplitTheClass(t *testing.T) {
	cfg := loopbackConfig()
	cfg.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "ledger.read", "description": "Read the ledger", "conditions": map[string]any{"min_auth_level": 2}},
	}
	alice := startDaemon(t, cfg)
	facts := func() conditions.Facts {
		return conditions.Facts{Peer: newPeerID(t).String(), AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}
	}
	a, err := alice.docs.view(facts())
	if err != nil {
		t.Fatal(err)
	}
	b, err := alice.docs.view(facts())
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two requesters below min_auth_level 2 were shown two signed views")
	}
	var how string
	for _, c := range a.Doc.Capabilities {
		if c.Name == "ledger.read" && len(c.Unmet) > 0 {
			how = c.Unmet[0].HowToMeet
		}
	}
	if !strings.Contains(how, "ifaced trust "+anyRequester+" --verify") {
		t.Fatalf("how_to_meet %q", how)
	}
}

// presignedView is the view documents holds once presign has run: the
// only one in its cache, read without signing (Peek).
func presignedView(t *testing.T, d *testDaemon) *signedView {
	t.Helper()
	var v *signedView
	// Signed views outlive document changes that leave them as they are
	// (marks.go), so the one signed ahead is the one of the document's
	// seq (every test here changes what strangers see).
	waitFor(t, "the view for strangers signed ahead of time", func() bool {
		for _, k := range d.docs.views.Keys() {
			if k.seq == d.Document().Seq {
				v, _ = d.docs.views.Peek(k)
				return v != nil
			}
		}
		return false
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
		c.Capabilities = twentyCapabilities()
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
		pre *signedView
	}{{alice, alicePre}, {bob, bobPre}} {
		if keys := d.who.docs.views.Keys(); len(keys) != 1 {
			t.Fatalf("%s holds %d signed views after greeting a new peer, want the one signed ahead", d.who.pid(), len(keys))
		}
		if v, _ := d.who.docs.views.Peek(d.who.docs.views.Keys()[0]); v != d.pre {
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

// Requesters of one class arriving together wait for one signature: while
// the first signs (held by the test), every other requester is found
// waiting for it in the singleflight group, and none signs again.
func TestOneSignaturePerClassUnderConcurrency(t *testing.T) {
	cfg := loopbackConfig()
	cfg.Capabilities = append(twentyCapabilities(), map[string]any{"name": "diary.read", "description": "Read the diary",
		"conditions": map[string]any{"min_auth_level": 2}})
	alice := startDaemon(t, cfg)
	pre := presignedView(t, alice)
	var signs atomic.Int32
	release := make(chan struct{})
	alice.docs.signer = func(v *negotiate.Document, id *identity.Identity, now time.Time) (*signedView, error) {
		signs.Add(1)
		<-release
		return negotiate.SignView(v, id, now)
	}
	// The facts of a pinned peer cut another view (diary.read eligible),
	// which nobody has signed yet.
	facts := conditions.Facts{Peer: anyRequester, AuthLevel: conditions.Verified, Disclosure: "public", Temperature: conditions.Cool}
	const n = 8
	got := make(chan *signedView, n)
	for range n {
		go func() {
			v, err := alice.docs.view(facts)
			if err != nil {
				t.Error(err)
			}
			got <- v
		}()
	}
	// Either all n wait in the group (one of them signing), or, were the
	// group bypassed, more than one reaches the signer.
	waitFor(t, "the requesters to wait for one signature or sign each", func() bool {
		return signs.Load() > 1 || goroutinesIn("singleflight.(*Group).Do", "(*documents).view") == n
	})
	close(release)
	first := <-got
	if first == nil || first.Sum == pre.Sum {
		t.Fatal("the pinned peer was shown the stranger's view")
	}
	for range n - 1 {
		if v := <-got; v != first {
			t.Fatal("requesters of one class arriving together were shown views signed separately")
		}
	}
	if s := signs.Load(); s != 1 {
		t.Fatalf("%d signatures for %d requesters of one class arriving together, want 1", s, n)
	}
}

// goroutinesIn counts the goroutines whose stacks hold every one of frames.
func goroutinesIn(frames ...string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			n++
		}
	}
	return n
}
