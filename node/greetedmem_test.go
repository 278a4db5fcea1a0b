package node

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/libp2p/go-libp2p/core/peer"
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

// Greetings from many fresh peers, each with its own 20-capability view,
// leave at most maxGreetedPeerBytes of heap per peer: what each greeting
// keeps (the verified view, the signed view for the peer, the peer cache)
// is bounded by bytes, and peers with the same facts share one signed view.
func TestMemoryPerGreetedPeer(t *testing.T) {
	n := greetedPeers(t)
	cfg := loopbackConfig()
	cfg.Capabilities = testkit.TwentyCapabilities()
	alice := startDaemon(t, cfg)
	template := alice.docs.Current()
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
		fi, err := os.Stat(alice.Store().Path())
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
		if err := alice.convs.HoldView(g.pid, m); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.docs.View(conditions.Facts{Peer: g.pid.String(), AuthLevel: conditions.Signed,
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
	// Strangers' views are not written to the store.
	sizeAfter := fileSize()
	t.Logf("store file %.1f → %.1f MB", float64(sizeBefore)/(1<<20), float64(sizeAfter)/(1<<20))
	if sizeAfter != sizeBefore {
		t.Errorf("the store file grew from %d to %d bytes with greetings from strangers", sizeBefore, sizeAfter)
	}
	runtime.KeepAlive(greeters)
}
