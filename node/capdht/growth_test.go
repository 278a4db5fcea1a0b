package capdht

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/config"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestProviderRecordsFollowTheGrowingNetwork: a daemon that provides while
// its network is one bootstrap server sends its record again as the
// network grows, so that the servers closest to the name hold it well
// before the first renewal (renewals[0], a minute), as the network lab
// needs (interop/netlab, TestDHTProcessesAtScale: lookups of the earliest
// nodes' names failed until that renewal). The rounds this takes stay
// within one per doubling of the routing table.
func TestProviderRecordsFollowTheGrowingNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("a 41-node DHT")
	}
	const name, servers = "lab.grow", 40
	ctx := context.Background()
	newServer := func() *dht.IpfsDHT {
		d, err := newCapabilityDHT(bareHost(t), dht.ModeServer, nil, newProviderRecords(config.DefaultMaxProviderRecords, config.DefaultMaxProvidersPerKey))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	boot := newServer()
	bootInfo := peer.AddrInfo{ID: boot.Host().ID(), Addrs: boot.Host().Addrs()}

	cfg := config.DefaultConfig().Discovery
	cfg.DHT = config.DHTServer
	cfg.Bootstrap = []string{bootInfo.Addrs[0].String() + "/p2p/" + bootInfo.ID.String()}
	rounds := &fullRounds{}
	p, err := New(ctx, bareHost(t), cfg, func() ([]string, error) { return []string{name}, nil }, time.Now, slog.New(rounds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	waitFor(t, 30*time.Second, "the first round", func() bool { return rounds.count.Load() > 0 })
	if h := Holders(t, []*dht.IpfsDHT{boot}, name); !h[boot.Host().ID()] {
		t.Fatal("the bootstrap server holds no record after the first round")
	}

	// The network grows to 41 servers, each joining through boot, eight
	// at a time.
	all := []*dht.IpfsDHT{boot}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for range servers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			d := newServer()
			if err := d.Host().Connect(ctx, bootInfo); err != nil {
				t.Errorf("joining through the bootstrap server: %v", err)
				return
			}
			<-d.RefreshRoutingTable()
			mu.Lock()
			all = append(all, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// The 20 servers closest to the name (kad-dht's k), by XOR distance
	// in kad-dht's key space (SHA-256 of the key, of the peer ID).
	key := sha256.Sum256(capabilityKey(name).Hash())
	dist := func(d *dht.IpfsDHT) []byte {
		id := sha256.Sum256([]byte(d.Host().ID()))
		for i := range id {
			id[i] ^= key[i]
		}
		return id[:]
	}
	slices.SortFunc(all, func(a, b *dht.IpfsDHT) int { return bytes.Compare(dist(a), dist(b)) })
	closest := all[:20]
	held := 0
	waitFor(t, renewals[0]/2, "half the 20 servers closest to the name to hold its record", func() bool {
		held = len(Holders(t, closest, name))
		return held >= len(closest)/2
	})
	size := p.dht.RoutingTable().Size()
	if n := int(rounds.count.Load()); n > 1+bits.Len(uint(size)) {
		t.Errorf("%d full rounds for a routing table of %d, want at most %d (the first, and one per doubling)", n, size, 1+bits.Len(uint(size)))
	}
	t.Logf("%d of the 20 closest servers hold the record; %d full rounds, routing table %d", held, rounds.count.Load(), size)
}

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond) // polling observable state
	}
}

// fullRounds is a log handler counting the provide loop's full rounds
// that went out ("provider records sent", full=true).
type fullRounds struct{ count atomic.Int32 }

func (*fullRounds) Enabled(context.Context, slog.Level) bool { return true }
func (f *fullRounds) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "provider records sent" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "full" && a.Value.Bool() {
			f.count.Add(1)
		}
		return true
	})
	return nil
}
func (f *fullRounds) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f *fullRounds) WithGroup(string) slog.Handler      { return f }
