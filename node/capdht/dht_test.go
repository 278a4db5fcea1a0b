package capdht

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/internal/testkit"
	ds "github.com/ipfs/go-datastore"
	dsq "github.com/ipfs/go-datastore/query"
	dssync "github.com/ipfs/go-datastore/sync"
	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p-kad-dht/records"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2ptest "github.com/libp2p/go-libp2p/core/test"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/multiformats/go-base32"
)

// The key derivation is part of the protocol: daemons of different
// versions must agree on it, so it is pinned (the CID was also computed
// apart from Go: base32 of 01 55 12 20 || sha256("ifaced/capability/v1\n" + name)).
func TestDHTCapabilityKey(t *testing.T) {
	k := capabilityKey("calendar.availability")
	if k.Version() != 1 || k.Type() != 0x55 {
		t.Errorf("key %s: version %d codec %#x, want CIDv1 raw", k, k.Version(), k.Type())
	}
	const want = "bafkreif773mh55wjso3ao242cd6s476cmqnopthxqv32rql7n3unuqs5dm"
	if k.String() != want {
		t.Errorf("capabilityKey(calendar.availability) = %s, want %s", k, want)
	}
	if capabilityKey("calendar.availabilit").Equals(k) {
		t.Error("two names share a key")
	}
}

// bareHost is a libp2p host on loopback TCP with nothing but what the DHT
// needs: the 100-node network is made of these, since a full daemon (store,
// audit log) per node would make the test about disks.
func bareHost(t testing.TB) host.Host {
	t.Helper()
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ResourceManager(&network.NullResourceManager{}),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
		// Hundreds of handshakes at once on two loaded cores can take
		// longer than the default 15 s; what the DHT tests measure is
		// lookups, not how fast a starved machine handshakes.
		libp2p.WithDialTimeout(time.Minute),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func peerSet(infos []peer.AddrInfo) []peer.ID {
	var ids []peer.ID
	for _, ai := range infos {
		ids = append(ids, ai.ID)
	}
	slices.Sort(ids)
	return ids
}

// floodProviders gives pm keys × per fresh provider records, key by key,
// then the genuine records last, and returns how many it gave. check runs
// after each record.
func floodProviders(t *testing.T, pm records.ProviderStore, keys, per int, genuine []peer.ID, check func()) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	add := func(key []byte, pid peer.ID) {
		if err := pm.AddProvider(ctx, key, peer.AddrInfo{ID: pid}); err != nil {
			t.Fatal(err)
		}
		n++
		check()
	}
	for k := range keys {
		key := capabilityKey(fmt.Sprint("flood.", k)).Hash()
		for range per {
			add(key, libp2ptest.RandPeerIDFatal(t))
		}
	}
	// One name flooded well past the per-key cap.
	for range 4 * per {
		add(capabilityKey("flood.hot").Hash(), libp2ptest.RandPeerIDFatal(t))
	}
	for _, pid := range genuine {
		add(capabilityKey("genuine").Hash(), pid)
	}
	return n
}

// TestProviderStoreStaysWithinItsCaps: kad-dht's own provider manager over
// providerRecords, given many more records than the caps from many fresh
// keys, holds exactly the caps, and the most recent records (the genuine
// ones, renewed last) are still found. Over kad-dht's default datastore
// the same flood keeps every record.
func TestProviderStoreStaysWithinItsCaps(t *testing.T) {
	const limit, perKey = 100, 10
	genuine := []peer.ID{libp2ptest.RandPeerIDFatal(t), libp2ptest.RandPeerIDFatal(t), libp2ptest.RandPeerIDFatal(t)}
	self := libp2ptest.RandPeerIDFatal(t)

	// Before: kad-dht's default, an in-memory map.
	plain := dssync.MutexWrap(ds.NewMapDatastore())
	ps, err := pstoremem.NewPeerstore()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := records.NewProviderManager(self, ps, plain)
	if err != nil {
		t.Fatal(err)
	}
	given := floodProviders(t, pm, 60, perKey, genuine, func() {})
	pm.Close()
	res, err := plain.Query(context.Background(), dsq.Query{KeysOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := res.Rest()

	provs := newProviderRecords(limit, perKey)
	pm, err = records.NewProviderManager(self, ps, provs, records.Cache(providerCacheOff{}))
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	floodProviders(t, pm, 60, perKey, genuine, func() { most = max(most, provs.Len()) })
	if err := pm.Close(); err != nil { // flushes what kad-dht still buffers
		t.Fatal(err)
	}
	t.Logf("%d provider records given: kad-dht's default map kept %d; the bounded store at most %d, %d at the end",
		given, len(all), most, provs.Len())
	if most > limit || provs.Len() != limit {
		t.Fatalf("held at most %d and %d at the end, want the cap of %d", most, provs.Len(), limit)
	}
	hot, _ := provs.Query(context.Background(), dsq.Query{Prefix: "/providers/" + base32.RawStdEncoding.EncodeToString(capabilityKey("flood.hot").Hash()), KeysOnly: true})
	if got, _ := hot.Rest(); len(got) > perKey {
		t.Fatalf("%d records for one name, want at most %d", len(got), perKey)
	}
	// The genuine records, newest, are found by kad-dht's own read path.
	pm, err = records.NewProviderManager(self, ps, provs, records.Cache(providerCacheOff{}))
	if err != nil {
		t.Fatal(err)
	}
	defer pm.Close()
	found, err := pm.GetProviders(context.Background(), capabilityKey("genuine").Hash())
	if err != nil {
		t.Fatal(err)
	}
	if got := peerSet(found); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(genuine))) {
		t.Fatalf("genuine providers found %v, want %v", got, genuine)
	}
}

// TestProviderStoreEvictsOldestFirst: past a cap the record written
// longest ago goes (it would expire first), a renewal counts as a new
// write, and a record older than all those held is not taken.
func TestProviderStoreEvictsOldestFirst(t *testing.T) {
	ctx := context.Background()
	p := newProviderRecords(3, 2)
	at := func(sec int64) []byte { return binary.AppendVarint(nil, sec*int64(time.Second)) }
	put := func(key string, sec int64) {
		t.Helper()
		if err := p.Put(ctx, ds.NewKey(key), at(sec)); err != nil {
			t.Fatal(err)
		}
	}
	held := func() []string {
		res, _ := p.Query(ctx, dsq.Query{KeysOnly: true, Orders: []dsq.Order{dsq.OrderByKey{}}})
		es, _ := res.Rest()
		var out []string
		for _, e := range es {
			out = append(out, e.Key)
		}
		return out
	}
	put("/providers/a/1", 10)
	put("/providers/a/2", 20)
	put("/providers/b/1", 30)
	put("/providers/a/1", 40) // renewed: now a/2 is a's oldest
	put("/providers/a/3", 50) // a's cap of 2: a/2 goes
	if got, want := held(), []string{"/providers/a/1", "/providers/a/3", "/providers/b/1"}; !slices.Equal(got, want) {
		t.Fatalf("after a's cap: %v, want %v", got, want)
	}
	put("/providers/c/1", 60) // the total of 3: b/1 (30) goes
	if got, want := held(), []string{"/providers/a/1", "/providers/a/3", "/providers/c/1"}; !slices.Equal(got, want) {
		t.Fatalf("after the total cap: %v, want %v", got, want)
	}
	put("/providers/d/1", 5) // older than everything held: not taken
	if got, want := held(), []string{"/providers/a/1", "/providers/a/3", "/providers/c/1"}; !slices.Equal(got, want) {
		t.Fatalf("after a stale record: %v, want %v", got, want)
	}
	if err := p.Delete(ctx, ds.NewKey("/providers/a/1")); err != nil || p.Len() != 2 {
		t.Fatalf("delete: %v, %d held", err, p.Len())
	}
}

// TestDHTServerKeepsProviderRecordsWithinItsCaps: a DHT server as the
// daemon runs it, sent more provider records than its caps by clients with
// many names, keeps at most the caps, and a provider that announced last
// is still found through it.
func TestDHTServerKeepsProviderRecordsWithinItsCaps(t *testing.T) {
	const limit, perKey = 50, 5
	server := bareHost(t)
	provs := newProviderRecords(limit, perKey)
	sd, err := newCapabilityDHT(server, dht.ModeServer, nil, provs)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	boot := []peer.AddrInfo{{ID: server.ID(), Addrs: server.Addrs()}}
	client := func() *dht.IpfsDHT {
		h := bareHost(t)
		d, err := newCapabilityDHT(h, dht.ModeClient, boot, newProviderRecords(limit, perKey))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		if err := h.Connect(context.Background(), boot[0]); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, "a client's routing table to hold the server", func() bool { return d.RoutingTable().Size() > 0 })
		return d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// 4 clients × 80 names: 320 records, past kad-dht's write buffer of 256.
	for c := range 4 {
		d := client()
		for i := range 80 {
			if err := d.Provide(ctx, capabilityKey(fmt.Sprintf("flood.%d.%d", c, i)), true); err != nil {
				t.Fatal(err)
			}
			if n := provs.Len(); n > limit {
				t.Fatalf("the server holds %d provider records, past its cap of %d", n, limit)
			}
		}
	}
	if provs.Len() != limit {
		t.Fatalf("the server holds %d provider records after 320, want its cap of %d", provs.Len(), limit)
	}
	genuine := client()
	if err := genuine.Provide(ctx, capabilityKey("genuine"), true); err != nil {
		t.Fatal(err)
	}
	finder := client()
	got := findCapabilityProviders(ctx, finder, "genuine", finder.Host().ID(), 5)
	if len(got) != 1 || got[0].ID != genuine.Host().ID() {
		t.Fatalf("found %v, want the genuine provider %s", peerSet(got), genuine.Host().ID())
	}
}

// TestNewRefusesBadConfig: New on a real host refuses a configuration it
// cannot run, naming the field (the network lab's dhtnode passes its flags
// through it).
func TestNewRefusesBadConfig(t *testing.T) {
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		edit func(*config.DiscoveryConfig)
		want string
	}{
		{func(c *config.DiscoveryConfig) { c.MaxProviderRecords = 0 }, "discovery.max_provider_records 0, max_providers_per_key 500: want both positive"},
		{func(c *config.DiscoveryConfig) { c.MaxProvidersPerKey = -1 }, "max_providers_per_key -1: want both positive"},
	} {
		cfg := config.DefaultConfig().Discovery
		cfg.DHT = config.DHTServer
		tc.edit(&cfg)
		d, err := New(context.Background(), h, cfg, noNames, time.Now, log)
		if err == nil {
			d.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, want %q", err, tc.want)
		}
	}
	off := config.DefaultConfig().Discovery
	off.DHT = config.DHTOff
	if d, err := New(context.Background(), h, off, noNames, time.Now, log); !errors.Is(err, ErrDHTOff) {
		if err == nil {
			d.Close()
		}
		t.Errorf("New with discovery.dht off: %v, want ErrDHTOff", err)
	}
	cfg := config.DefaultConfig().Discovery
	cfg.DHT = config.DHTServer
	d, err := New(context.Background(), h, cfg, func() ([]string, error) { return []string{"lab.x"}, nil }, time.Now, log)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.FindProviders(context.Background(), "Not OK", 0); !errors.Is(err, negotiate.ErrInvalidName) {
		t.Errorf("FindProviders with an invalid name: %v, want negotiate.ErrInvalidName", err)
	}
	if _, err := d.FindProviders(context.Background(), "lab.x", 0); !errors.Is(err, ErrNoDHTPeers) {
		t.Errorf("FindProviders with an empty routing table: %v, want ErrNoDHTPeers", err)
	}
	if _, err := d.FindProviders(context.Background(), "lab.x", -1); err == nil || !strings.Contains(err.Error(), "limit -1: want 1 to 100") {
		t.Errorf("FindProviders with limit -1: %v", err)
	}
}

func noNames() ([]string, error) { return nil, nil }

// TestRoundWithSentNamesSendsNothing: a round that is not full sends
// records only of names not yet sent, so a document change that leaves
// the names as they were (a hidden capability added, say) sends none.
func TestRoundWithSentNamesSendsNothing(t *testing.T) {
	server, err := newCapabilityDHT(bareHost(t), dht.ModeServer, nil, newProviderRecords(config.DefaultMaxProviderRecords, config.DefaultMaxProvidersPerKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	cfg := config.DefaultConfig().Discovery
	cfg.DHT = config.DHTServer
	cfg.Bootstrap = []string{server.Host().Addrs()[0].String() + "/p2p/" + server.Host().ID().String()}
	d, err := New(context.Background(), bareHost(t), cfg, func() ([]string, error) { return []string{"calendar.availability", "ping"}, nil },
		time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	testkit.WaitFor(t, "the first round", func() bool { return len(d.Provided()) == 2 })
	before := d.Provided()
	if err := d.provideRound(false); err != nil {
		t.Fatal(err)
	}
	if after := d.Provided(); !maps.Equal(before, after) {
		t.Fatalf("a round with the names already sent sent records: %v → %v", before, after)
	}
}
