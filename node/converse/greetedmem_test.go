package converse

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/owner"
	"github.com/ifaced/ifaced/node/policy"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// maxGreetedPeerBytes is what the daemon may hold per greeted peer in the
// memory a greeting leaves behind (the view the peer sent, the view signed
// for it, its place in the peer cache): the part of the 64 KB budget per
// greeted idle peer (DESIGN.md §8) left after the connection itself
// (about 43 KB for TCP, bench row 4).
const maxGreetedPeerBytes = 16 << 10

// greetedPeers is how many fresh peers TestMemoryPerGreetedPeer greets;
// IFACED_GREETED_PEERS=5000 runs the figure of the design's bar.
func greetedPeers(t *testing.T) int {
	if s := os.Getenv("IFACED_GREETED_PEERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("IFACED_GREETED_PEERS=%q: want a positive count", s)
		}
		return n
	}
	return 2000
}

// components are the real components below the conversations that what a
// greeting keeps touches: the store (with the trust book's gate, so a
// stranger's view is not written), the policy, the trust book and the
// owner's documents, on a mocknet host.
type components struct {
	cs    *Conversations
	docs  *owner.Document
	store *store.Store
}

func newComponents(t *testing.T, caps []map[string]any) components {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.DiscardHandler)
	spawn := func(f func()) bool { go f(); return true }
	id, err := identity.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.DefaultConfig()
	cfg.Capabilities = caps
	order, err := cfg.TierOrder()
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "ifaced.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol, err := policy.New(cfg, order, st)
	if err != nil {
		t.Fatal(err)
	}
	tr := trust.New(ctx, st, trust.Config{KeyTransition: cfg.Trust.KeyTransition.Duration, IntroExpiry: cfg.Trust.IntroExpiry.Duration},
		order, pol, id.DID(), time.Now, log, spawn)
	st.SetPeerGate(tr.Known)
	doc, err := cfg.Document(id.DID())
	if err != nil {
		t.Fatal(err)
	}
	hub := events.NewHub()
	docs, err := owner.New(ctx, owner.Deps{ID: id, Store: st.Own(), Order: order, Policy: pol, Events: hub, Log: log, Now: time.Now, Spawn: spawn}, doc)
	if err != nil {
		t.Fatal(err)
	}
	net := mocknet.New()
	t.Cleanup(func() { net.Close() })
	h, err := net.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	cs := newConversations(conversationDeps{id: id, host: h, docs: docs, policy: pol, trust: tr, store: st, events: hub,
		order: order, log: log, now: time.Now, ctx: ctx, spawn: spawn, handler: func(f network.StreamHandler) network.StreamHandler { return f }})
	return components{cs: cs, docs: docs, store: st}
}

// Greetings from many fresh peers, each with its own 20-capability view,
// leave at most maxGreetedPeerBytes of heap per peer: what each greeting
// keeps (the verified view, the signed view for the peer, the peer cache)
// is bounded by bytes, and peers with the same facts share one signed view.
// Each view is checked and kept as an admitted greeting's is (checkView,
// keepView), without thousands of greetings on the wire.
func TestMemoryPerGreetedPeer(t *testing.T) {
	n := greetedPeers(t)
	c := newComponents(t, testkit.TwentyCapabilities())
	template := c.docs.Current()
	now := time.Now()

	// Each peer's signed view, as canonical JSON; the greeting that
	// carries it is made inside the loop, so that what the daemon keeps
	// is its own copy, as from the network.
	type greeter struct {
		pid   peer.ID
		canon []byte
	}
	greeters := make([]greeter, n)
	for i := range greeters {
		id, err := identity.Generate(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		v := *template
		v.AgentID, v.Signature = id.DID(), nil
		sv, err := negotiate.SignView(&v, id, now)
		if err != nil {
			t.Fatal(err)
		}
		greeters[i] = greeter{pid: id.PeerID(), canon: sv.Content.Canonical()}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	fileSize := func() int64 {
		fi, err := os.Stat(c.store.Path())
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	sizeBefore := fileSize()
	before := heap()
	for _, g := range greeters {
		var content any
		if err := json.Unmarshal(g.canon, &content); err != nil {
			t.Fatal(err)
		}
		m := &gossip.Message{Body: gossip.Body{Parts: []gossip.Part{{ContentType: "application/json", Name: negotiate.PartCapabilities, Content: content}}}}
		pv, err := c.cs.checkView(g.pid, m, "", false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.cs.keepView(g.pid, m, pv); err != nil {
			t.Fatal(err)
		}
		if _, err := c.docs.View(conditions.Facts{Peer: g.pid.String(), AuthLevel: conditions.Signed,
			Disclosure: "public", Temperature: conditions.Cool}); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	perPeer := (float64(after) - float64(before)) / float64(n)
	t.Logf("%d greeted peers: heap %.1f → %.1f MB, %.1f KB per peer (view %d bytes canonical)",
		n, float64(before)/(1<<20), float64(after)/(1<<20), perPeer/1024, len(greeters[0].canon))
	if perPeer > maxGreetedPeerBytes {
		t.Errorf("%.1f KB of heap per greeted peer, want at most %d KB", perPeer/1024, maxGreetedPeerBytes>>10)
	}
	if held := c.cs.peerViews.Len(); held == 0 {
		t.Error("no view was held: the measure is of nothing")
	}
	// Strangers' views are not written to the store.
	sizeAfter := fileSize()
	t.Logf("store file %.1f → %.1f MB", float64(sizeBefore)/(1<<20), float64(sizeAfter)/(1<<20))
	if sizeAfter != sizeBefore {
		t.Errorf("the store file grew from %d to %d bytes with greetings from strangers", sizeBefore, sizeAfter)
	}
	runtime.KeepAlive(greeters)
}
