package console

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/internal/testkit"
)

// countingAPI counts the console's readings of the peer cache.
type countingAPI struct {
	API
	peers, lookups, queries atomic.Int64
}

func (c *countingAPI) Peers(ctx context.Context) ([]api.Peer, error) {
	c.peers.Add(1)
	return c.API.Peers(ctx)
}

func (c *countingAPI) Peer(ctx context.Context, peer string) (*api.Peer, error) {
	c.lookups.Add(1)
	return c.API.Peer(ctx, peer)
}

// The console's namer must not ask peers: GET /v1/caps/{peer} would.
func (c *countingAPI) PeerCapabilities(ctx context.Context, peer string, refresh bool) (*api.PeerCaps, error) {
	c.queries.Add(1)
	return c.API.PeerCapabilities(ctx, peer, refresh)
}

// The live events name a peer by what its view says, as the owner sees
// it, and do it without reading the whole peer cache: each peer is looked
// up alone, once while its name is fresh, however many events name it or
// how many strangers the events name.
func TestEventNamesLookEachPeerUpAlone(t *testing.T) {
	p := greet(t)
	counting := &countingAPI{API: p.alice.c}
	// One instant for every event: each name stays fresh (namesFresh)
	// however slowly the machine runs.
	at := time.Now()
	con, err := New(Config{API: counting, Addr: p.alice.srv.Addr(), Home: p.alice.home.Dir, Log: p.alice.con.log,
		Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	name := con.eventNamer()
	bob := p.bob.peerID()
	for range 50 {
		if got := name(bob); !strings.Contains(got, bobDisplay) {
			t.Fatalf("bob's events are named %q, want his display name %q", got, bobDisplay)
		}
	}
	for range 200 {
		if got := name(testkit.NewPeerID(t).String()); got != "" {
			t.Fatalf("a peer nothing is known of is named %q, want none", got)
		}
	}
	if n := counting.peers.Load(); n != 0 {
		t.Errorf("naming 201 peers in 250 events read the whole peer cache %d times, want 0", n)
	}
	if n := counting.queries.Load(); n != 0 {
		t.Errorf("naming 201 peers asked for %d peers' views (GET /v1/caps, which queries an uncached peer), want 0", n)
	}
	if n := counting.lookups.Load(); n != 201 {
		t.Errorf("naming 201 peers in 250 events looked %d up, want each once (201)", n)
	}
}
