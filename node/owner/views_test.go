package owner

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/costlru"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/policy"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// testOwner is the owner's document built as a daemon builds it, from a
// configuration, with the identity that signs it.
type testOwner struct {
	*Document
	id *identity.Identity
}

// newTestOwner builds the owner's document of cfg over a fresh store; its
// background signing ends with the test.
func newTestOwner(t *testing.T, cfg *config.Config) *testOwner {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "ifaced.db"))
	if err != nil {
		t.Fatal(err)
	}
	order, err := cfg.TierOrder()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(cfg, order, st)
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := cfg.Document(id.DID())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	spawn := func(f func()) bool {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
		return true
	}
	t.Cleanup(func() { wg.Wait(); st.Close() })
	d, err := New(context.Background(), Deps{ID: id, Store: st.Own(), Order: order, Policy: pol, Events: events.NewHub(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now, Spawn: spawn}, doc)
	if err != nil {
		t.Fatal(err)
	}
	return &testOwner{Document: d, id: id}
}

// presigned waits for the view signed ahead for strangers.
func presigned(t *testing.T, d *testOwner) *negotiate.SignedView {
	t.Helper()
	var v *negotiate.SignedView
	testkit.WaitFor(t, "the view for strangers signed ahead of time", func() bool {
		v = d.Presigned()
		return v != nil && v.Doc.Seq == d.Current().Seq
	})
	return v
}

// Requesters whose facts cut the same view share one signed view, signed
// once; a requester the owner's conditions name (an allow list) is shown
// its own.
func TestSignedViewsAreSharedByClass(t *testing.T) {
	listed := testkit.NewPeerID(t)
	cfg := config.DefaultConfig()
	cfg.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "diary.read", "description": "Read the diary", "conditions": map[string]any{"peers": []any{listed.String()}}},
	}
	alice := newTestOwner(t, cfg)
	facts := func(pid peer.ID) conditions.Facts {
		return conditions.Facts{Peer: pid.String(), AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}
	}
	first, err := alice.View(facts(testkit.NewPeerID(t)))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		v, err := alice.View(facts(testkit.NewPeerID(t)))
		if err != nil {
			t.Fatal(err)
		}
		if v != first {
			t.Fatal("two strangers with the same facts were shown two signed views")
		}
	}
	if n := alice.views.Len(); n != 1 {
		t.Fatalf("%d signed views for 21 requesters of one class, want 1", n)
	}
	own, err := alice.View(facts(listed))
	if err != nil {
		t.Fatal(err)
	}
	if own == first || !strings.Contains(testkit.CapNames(own.Doc), "+diary.read") {
		t.Fatalf("the allow-listed peer's view: %s", testkit.CapNames(own.Doc))
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
		allowed = append(allowed, testkit.NewPeerID(t).String())
	}
	cfg := config.DefaultConfig()
	cfg.Capabilities = []map[string]any{
		{"name": "diary.read", "description": "Read the diary", "conditions": map[string]any{"peers": allowed}},
	}
	alice := newTestOwner(t, cfg)
	facts := func(p any) conditions.Facts {
		return conditions.Facts{Peer: p.(string), AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}
	}
	one, err := alice.View(facts(allowed[0]))
	if err != nil {
		t.Fatal(err)
	}
	budget := 10 * signedViewCost(one)
	alice.views = costlru.New[viewClass, *negotiate.SignedView](budget)
	alice.classes.Purge()
	hot, err := alice.View(facts(allowed[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range allowed[1:] {
		if _, err := alice.View(facts(p)); err != nil {
			t.Fatal(err)
		}
		if again, _ := alice.View(facts(allowed[0])); again != hot {
			t.Fatal("the view in use was evicted (or re-signed)")
		}
		if used := alice.views.Used(); used > budget {
			t.Fatalf("signed views hold %d bytes, over the budget of %d", used, budget)
		}
	}
	if n := alice.views.Len(); n < 9 {
		t.Fatalf("%d views held after filling past the budget, want the cache full (10), not emptied", n)
	}
}

// signedViewCost does not underestimate what a signed view of the
// 20-capability document holds, nor overestimate it more than twice.
func TestSignedViewCost(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Capabilities = testkit.TwentyCapabilities()
	alice := newTestOwner(t, cfg)
	doc := alice.Current()
	const n = 50
	views := make([]*negotiate.SignedView, n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range views {
		v, err := alice.sign(doc.View(conditions.Facts{AuthLevel: conditions.Signed, Disclosure: "public"}, alice.order))
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

// A view ordered by requested tool categories is signed once per class
// and categories honoured, like any other view; a request that honours
// nothing is the view itself.
func TestOrderedViewsAreShared(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests", "categories": []any{"web"}},
		{"name": "files.read", "description": "Read a file", "categories": []any{"code_exec"}},
	}
	alice := newTestOwner(t, cfg)
	facts := conditions.Facts{Peer: testkit.NewPeerID(t).String(), AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}
	v, err := alice.View(facts)
	if err != nil {
		t.Fatal(err)
	}
	first, honoured, err := alice.Ordered(v, []string{"code_exec", "unknown"})
	if err != nil || len(honoured) != 1 || first == v || first.Doc.Capabilities[0].Name != "files.read" {
		t.Fatalf("ordered view: %v, honoured %v", err, honoured)
	}
	again, _, err := alice.Ordered(v, []string{"unknown", "code_exec"})
	if err != nil || again != first {
		t.Fatal("the same class and categories honoured were signed again")
	}
	if same, honoured, _ := alice.Ordered(v, []string{"unknown"}); same != v || honoured != nil {
		t.Fatal("a request honouring nothing did not return the view itself")
	}
}

// A capability a requester does not reach for want of a pinned key tells
// it how to meet the condition without quoting its own peer ID, so
// requesters below the level still share one view.
func TestUnmetLevelDoesNotSplitTheClass(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "ledger.read", "description": "Read the ledger", "conditions": map[string]any{"min_auth_level": 2}},
	}
	alice := newTestOwner(t, cfg)
	facts := func() conditions.Facts {
		return conditions.Facts{Peer: testkit.NewPeerID(t).String(), AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}
	}
	a, err := alice.View(facts())
	if err != nil {
		t.Fatal(err)
	}
	b, err := alice.View(facts())
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
	if !strings.Contains(how, "ifaced trust "+AnyRequester+" --verify") {
		t.Fatalf("how_to_meet %q", how)
	}
}

// Requesters of one class arriving together wait for one signature: while
// the first signs (held by the test), every other requester is found
// waiting for it in the singleflight group, and none signs again.
func TestOneSignaturePerClassUnderConcurrency(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Capabilities = append(testkit.TwentyCapabilities(), map[string]any{"name": "diary.read", "description": "Read the diary",
		"conditions": map[string]any{"min_auth_level": 2}})
	alice := newTestOwner(t, cfg)
	pre := presigned(t, alice)
	var signs atomic.Int32
	release := make(chan struct{})
	alice.signer = func(v *negotiate.Document, id *identity.Identity, now time.Time) (*negotiate.SignedView, error) {
		signs.Add(1)
		<-release
		return negotiate.SignView(v, id, now)
	}
	// The facts of a pinned peer cut another view (diary.read eligible),
	// which nobody has signed yet.
	facts := conditions.Facts{Peer: AnyRequester, AuthLevel: conditions.Verified, Disclosure: "public", Temperature: conditions.Cool}
	const n = 8
	got := make(chan *negotiate.SignedView, n)
	for range n {
		go func() {
			v, err := alice.View(facts)
			if err != nil {
				t.Error(err)
			}
			got <- v
		}()
	}
	// Either all n wait in the group (one of them signing), or, were the
	// group bypassed, more than one reaches the signer.
	testkit.WaitFor(t, "the requesters to wait for one signature or sign each", func() bool {
		return signs.Load() > 1 || goroutinesIn("singleflight.(*Group).Do", "(*Document).View") == n
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
