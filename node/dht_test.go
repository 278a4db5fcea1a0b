package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
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
	"github.com/libp2p/go-libp2p/core/routing"
	libp2ptest "github.com/libp2p/go-libp2p/core/test"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/multiformats/go-base32"
	"go.uber.org/goleak"
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

func TestFindVersions(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		ok         bool
	}{
		{"1", "1", true}, {"1.0", "1", true}, {"1", "1.0.0", true}, {"2", "1.9", true},
		{"1.10", "1.9", true}, {"1.2", "1.10", false}, {"1", "2", false}, {"0.9", "1", false},
		{"2.0-beta", "1", false}, {"v2", "1", false},
	} {
		want, err := negotiate.ParseVersion(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		if got := negotiate.VersionAtLeast(tc.have, want); got != tc.ok {
			t.Errorf("VersionAtLeast(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.ok)
		}
	}
	for _, bad := range []string{"", "v2", "1.", ".1", "1..2", "-1", "+1", "1.x", "99999999999999999999"} {
		if _, err := negotiate.ParseVersion(bad); !errors.Is(err, negotiate.ErrInvalidVersion) {
			t.Errorf("ParseVersion(%q) = %v, want ErrInvalidVersion", bad, err)
		}
	}
}

// dhtConfig is a loopback daemon in the DHT as a server, offering caps
// (the standard capabilities when nil) and bootstrapping from boot.
func dhtConfig(caps []map[string]any, boot ...string) *config.Config {
	c := loopbackConfig()
	if caps != nil {
		c.Capabilities = caps
	}
	return inDHT(c, boot...)
}

// inDHT puts the daemon of c in the DHT as a server, bootstrapping from boot.
func inDHT(c *config.Config, boot ...string) *config.Config {
	c.Discovery.DHT = config.DHTServer
	c.Discovery.Bootstrap = boot
	return c
}

// waitProvided waits until d has sent provider records for all of names.
func waitProvided(t testing.TB, d *testDaemon, names ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d.discovery.dht.mu.Lock()
		missing := slices.DeleteFunc(slices.Clone(names), func(n string) bool { _, ok := d.discovery.dht.provided[n]; return ok })
		d.discovery.dht.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no provider records for %v after 30 s", d.id.PeerID(), missing)
		}
		time.Sleep(20 * time.Millisecond) // polling observable state, not standing in for it
	}
}

// waitDHTPeers waits until d's routing table holds someone: its bootstrap
// dial and the peer's identification have completed.
func waitDHTPeers(t testing.TB, d *testDaemon) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for d.discovery.dht.dht.RoutingTable().Size() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no DHT peer after 30 s", d.id.PeerID())
		}
		time.Sleep(20 * time.Millisecond) // polling observable state
	}
}

// holders are the DHT peers whose provider store has a record for name.
func holders(t testing.TB, dhts []*dht.IpfsDHT, name string) map[peer.ID]bool {
	t.Helper()
	out := map[peer.ID]bool{}
	for _, d := range dhts {
		provs, err := d.ProviderStore().GetProviders(context.Background(), capabilityKey(name).Hash())
		if err != nil {
			t.Fatal(err)
		}
		if len(provs) > 0 {
			out[d.Host().ID()] = true
		}
	}
	return out
}

func findResult(t *testing.T, res []FindResult, pid peer.ID) FindResult {
	t.Helper()
	for _, r := range res {
		if r.PeerID == pid.String() {
			return r
		}
	}
	t.Fatalf("no result for %s in %+v", pid, res)
	return FindResult{}
}

// TestDHTFindEndToEnd: real daemons provide what their public view
// advertises, and Find reports each provider with what its own daemon says
// of us.
func TestDHTFindEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alice := startDaemon(t, inDHT(aliceConfig("")))
	boot := alice.Addrs()[0].String()
	carolCfg := dhtConfig([]map[string]any{
		{"name": "calendar.availability", "version": "2.1", "description": "Share calendar availability windows"},
	}, boot)
	carolCfg.Identity.Display = "Carol's agent"
	carol := startDaemon(t, carolCfg)
	// Dave's hidden capability has no conditions, so a stranger is eligible
	// and it is in his public view: it must still not be announced.
	dave := startDaemon(t, dhtConfig([]map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "diary.read", "description": "Read the diary", "advertise": "when-eligible"},
	}, boot))
	bob := startDaemon(t, dhtConfig(nil, boot))
	waitProvided(t, alice, "calendar.availability", "ping")
	waitProvided(t, carol, "calendar.availability")
	waitProvided(t, dave, "ping")
	waitDHTPeers(t, bob)
	if v, _ := dave.discovery.views.public(); !slices.ContainsFunc(v.Doc.Capabilities, func(c negotiate.Capability) bool { return c.Name == "diary.read" }) {
		t.Fatal("dave's public view lacks diary.read; the test no longer covers a hidden capability a stranger may see")
	}

	res, err := bob.Discovery().Find(ctx, "calendar.availability", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].PeerID != carol.id.PeerID().String() {
		t.Fatalf("find: %+v, want carol then alice", res)
	}
	c := findResult(t, res, carol.id.PeerID())
	if c.Status != FindEligible || c.Capability.Version != "2.1" || c.AgentID != carol.id.DID() || c.Display != "Carol's agent" || len(c.Addrs) == 0 {
		t.Errorf("carol: %+v", c)
	}
	a := findResult(t, res, alice.id.PeerID())
	if a.Status != FindIneligible || a.Display != "Alice's agent" || a.GrantedToUs == nil || a.GrantedToUs.Disclosure != "public" ||
		!slices.Contains(a.Why, "needs min_disclosure professional, you have public") {
		t.Errorf("alice: %+v", a)
	}

	res, err = bob.Discovery().Find(ctx, "calendar.availability", "2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a := findResult(t, res, alice.id.PeerID()); a.Status != FindBelowMinVersion || !slices.Contains(a.Why, "offers version 1, below 2") {
		t.Errorf("alice at min version 2: %+v", a)
	}
	if c := findResult(t, res, carol.id.PeerID()); c.Status != FindEligible || res[0].PeerID != c.PeerID {
		t.Errorf("carol at min version 2: %+v", res)
	}

	// Hidden capabilities: found by nobody, held by nobody.
	dhts := []*dht.IpfsDHT{alice.discovery.dht.dht, carol.discovery.dht.dht, dave.discovery.dht.dht, bob.discovery.dht.dht}
	for _, name := range []string{"diary.read"} {
		if res, err := bob.Discovery().Find(ctx, name, "", 0); err != nil || len(res) != 0 {
			t.Errorf("find %s: %+v %v, want nothing", name, res, err)
		}
		if h := holders(t, dhts, name); len(h) != 0 {
			t.Errorf("provider records for hidden %s at %v", name, h)
		}
	}

	// A capability removed after its record went out: the record outlives
	// it, the view does not.
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = slices.DeleteFunc(d.Capabilities, func(c negotiate.Capability) bool { return c.Name == "calendar.availability" })
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "weather.forecast", Description: "Forecast the weather"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	res, err = bob.Discovery().Find(ctx, "calendar.availability", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a := findResult(t, res, alice.id.PeerID()); a.Status != FindNotOffered || a.Capability != nil || a.Why != nil {
		t.Errorf("alice after removing it: %+v", a)
	}
	// A capability added is provided without waiting for the next period.
	waitProvided(t, alice, "weather.forecast")
	res, err = bob.Discovery().Find(ctx, "weather.forecast", "", 0)
	if err != nil || len(res) != 1 || res[0].Status != FindEligible {
		t.Errorf("find weather.forecast after alice added it: %+v %v", res, err)
	}

	for _, tc := range []struct {
		name, version string
		limit         int
		want          error
	}{
		{"", "", 0, negotiate.ErrInvalidName},
		{"Bad Name", "", 0, negotiate.ErrInvalidName},
		{strings.Repeat("a", negotiate.MaxNameLen+1), "", 0, negotiate.ErrInvalidName},
		{"ping", "v2", 0, negotiate.ErrInvalidVersion},
	} {
		_, err := bob.Discovery().Find(ctx, tc.name, tc.version, tc.limit)
		if !errors.Is(err, tc.want) || !strings.HasPrefix(err.Error(), fmt.Sprintf("finding providers of %q: ", tc.name)) {
			t.Errorf("Find(%q, %q): %v, want %v", tc.name, tc.version, err, tc.want)
		}
	}
	if _, err := bob.Discovery().Find(ctx, "ping", "", MaxFindLimit+1); err == nil {
		t.Error("Find with a limit over MaxFindLimit succeeded")
	}
	off := startDaemon(t, nil)
	if _, err := off.Discovery().Find(ctx, "ping", "", 0); !errors.Is(err, ErrDHTOff) {
		t.Errorf("Find with the DHT off: %v", err)
	}
	lonely := startDaemon(t, dhtConfig(nil))
	if _, err := lonely.Discovery().Find(ctx, "ping", "", 0); !errors.Is(err, ErrNoDHTPeers) {
		t.Errorf("Find without DHT peers: %v", err)
	}
}

// TestDHTLeavesNoGoroutine closes two daemons in the DHT and checks that
// nothing they started still runs.
func TestDHTLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	alice := startDaemon(t, dhtConfig(nil))
	bob := startDaemon(t, dhtConfig(nil, alice.Addrs()[0].String()))
	waitProvided(t, alice, "ping")
	waitDHTPeers(t, bob)
	if res, err := bob.Discovery().Find(context.Background(), "ping", "", 0); err != nil || len(res) != 1 {
		t.Fatalf("find ping: %+v %v", res, err)
	}
	bob.discovery.dht.changed()
	bob.Close()
	alice.Close()
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

// strangerView is a bare node's public view of doc, cut as strangerViews
// cuts the daemon's.
func strangerView(doc *negotiate.Document) *negotiate.Document {
	f := conditions.Facts{AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}
	return doc.View(f, conditions.DefaultTierOrder())
}

// findTrace is one lookup: how long it took and in how many hops the first
// provider record was reached.
type findTrace struct {
	found   []peer.AddrInfo
	elapsed time.Duration
	hops    int // -1: no holder was asked
}

// tracedFind runs findCapabilityProviders (the daemon's lookup) with kad-dht
// query events on, and counts hops from them.
//
// Hops: kad-dht publishes SendingQuery(p) before asking p and
// PeerResponse(p, closer peers) with p's answer, in that order on one
// channel. The peers a lookup starts from (taken from the finder's own
// routing table) are at depth 1: one hop away. A peer first named in the
// answer of a peer at depth d is at depth d+1. Provider records travel in
// the same GET_PROVIDERS answers, so the first provider is learned at the
// depth of the first holder of the record (a peer whose provider store has
// it, read from every node in the test) that the lookup asks: that depth
// is the hop count. A finder that holds the record itself needs 0 hops.
func tracedFind(ctx context.Context, d *dht.IpfsDHT, name string, limit int, held map[peer.ID]bool) findTrace {
	ectx, cancel := context.WithCancel(ctx)
	qctx, events := routing.RegisterForQueryEvents(ectx)
	hops := make(chan int, 1)
	go func() {
		depth := map[peer.ID]int{}
		first := -1
		if held[d.Host().ID()] {
			first = 0
		}
		for ev := range events { // drained to the end: kad-dht blocks on an unread channel
			switch ev.Type {
			case routing.SendingQuery:
				if _, ok := depth[ev.ID]; !ok {
					depth[ev.ID] = 1
				}
				if first < 0 && held[ev.ID] {
					first = depth[ev.ID]
				}
			case routing.PeerResponse:
				for _, r := range ev.Responses {
					if _, ok := depth[r.ID]; !ok {
						depth[r.ID] = depth[ev.ID] + 1
					}
				}
			}
		}
		hops <- first
	}()
	start := time.Now()
	found := findCapabilityProviders(qctx, d, name, d.Host().ID(), limit)
	elapsed := time.Since(start)
	cancel()
	return findTrace{found: found, elapsed: elapsed, hops: <-hops}
}

func peerSet(infos []peer.AddrInfo) []peer.ID {
	var ids []peer.ID
	for _, ai := range infos {
		ids = append(ids, ai.ID)
	}
	slices.Sort(ids)
	return ids
}

func without(ids []peer.ID, self peer.ID) []peer.ID {
	return slices.DeleteFunc(slices.Clone(ids), func(p peer.ID) bool { return p == self })
}

func median[T int | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestDHTFindAt100Nodes builds a DHT of 100 bare nodes on loopback TCP in a
// sparse random topology, joins five daemons to it, and checks that a
// capability a few nodes offer is found by every node, that hidden ones
// are found by none and held by none, and that Find at a daemon reports
// what the providers' daemons decide. It logs the lookup time and hops:
//
//	go test ./node -run TestDHTFindAt100Nodes -count=1 -v
//
// It runs twice: with the bare nodes at kad-dht's bucket size (20, what
// daemons use), where every routing table holds most of the network and
// lookups take one hop, and at bucket size 4, where they must route.
// IFACED_DHT_NODES=N builds a network of N instead. At 500 the hosts'
// connections (both ends in this one process) need more than 20,000 file
// descriptors; a larger network needs a harness of several processes.
func TestDHTFindAt100Nodes(t *testing.T) {
	if testing.Short() {
		t.Skip("a 100-node DHT")
	}
	nodes := 100
	if v, err := strconv.Atoi(os.Getenv("IFACED_DHT_NODES")); err == nil && v >= 10 {
		nodes = v
	}
	for _, k := range []int{20, 4} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) { testDHTAt(t, k, nodes) })
	}
}

func testDHTAt(t *testing.T, bucket, nodes int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(nodes)*2*time.Second)
	defer cancel()
	rng := rand.New(rand.NewPCG(7, 100))
	t0 := time.Now()

	hosts := make([]host.Host, nodes)
	dhts := make([]*dht.IpfsDHT, nodes)
	for i := range nodes {
		hosts[i] = bareHost(t)
		d, err := newCapabilityDHT(hosts[i], dht.ModeServer, nil, newProviderRecords(config.DefaultMaxProviderRecords, config.DefaultMaxProvidersPerKey), dht.BucketSize(bucket))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		dhts[i] = d
	}
	// Sparse and connected: each node dials three random earlier ones,
	// eight dials at a time, each given the minute a loaded two-core
	// machine may need for its handshake (bareHost's dial timeout). A dial
	// is not retried: a failed one leaves the swarm's backoff in place, so
	// a retry at once fails with "dial backoff" and hides why the first
	// did.
	var wg sync.WaitGroup
	errs := make(chan error, nodes*3)
	dialing := make(chan struct{}, 8)
	for i := 1; i < nodes; i++ {
		for _, j := range rng.Perm(i)[:min(i, 3)] {
			wg.Go(func() {
				dialing <- struct{}{}
				defer func() { <-dialing }()
				if err := hosts[i].Connect(ctx, peer.AddrInfo{ID: hosts[j].ID(), Addrs: hosts[j].Addrs()}); err != nil {
					errs <- fmt.Errorf("node %d dialing node %d: %w", i, j, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("connected in %s", time.Since(t0).Round(time.Millisecond))
	for i, d := range dhts {
		for d.RoutingTable().Size() == 0 {
			if ctx.Err() != nil {
				t.Fatalf("node %d: empty routing table", i)
			}
			time.Sleep(10 * time.Millisecond) // polling observable state
		}
	}
	// Every node refreshes its routing table, as a joining daemon does, a
	// few at a time so two cores are not swamped.
	sem := make(chan struct{}, 8)
	for _, d := range dhts {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			<-d.RefreshRoutingTable()
		})
	}
	wg.Wait()
	var rt []int
	for _, d := range dhts {
		rt = append(rt, d.RoutingTable().Size())
	}
	t.Logf("%d bare nodes up and refreshed in %s; routing table size median %d, min %d",
		nodes, time.Since(t0).Round(time.Millisecond), median(rt), slices.Min(rt))

	// Three bare nodes offer translate.text, plus two hidden capabilities:
	// notes.share, which a stranger is eligible for (so it is in the public
	// view), and diary.read, which it is not.
	doc := &negotiate.Document{IFP: negotiate.Version, AgentID: "did:key:bare", Capabilities: []negotiate.Capability{
		{Name: "translate.text", Description: "Translate text"},
		{Name: "notes.share", Description: "Share notes", Advertise: negotiate.AdvertiseWhenEligible},
		{Name: "diary.read", Description: "Read the diary", Advertise: negotiate.AdvertiseWhenEligible,
			Conditions: &conditions.Conditions{MinDisclosure: "close"}},
	}}
	names := advertisedNames(strangerView(doc))
	if !slices.Equal(names, []string{"translate.text"}) {
		t.Fatalf("advertised %v, want only translate.text", names)
	}
	var bareProviders []peer.ID
	for _, i := range rng.Perm(nodes)[:3] {
		if done, err := provideCapabilities(ctx, dhts[i], names); err != nil || len(done) != 1 {
			t.Fatalf("node %d providing %v: %v %v", i, names, done, err)
		}
		bareProviders = append(bareProviders, hosts[i].ID())
	}
	slices.Sort(bareProviders)

	// Five daemons join through random bare nodes: alice and carol offer
	// calendar.availability; alice and dave have hidden capabilities, one
	// of dave's a stranger is eligible for and one under the name alice and
	// carol advertise; bob and erin offer only the standard capabilities.
	bootOf := func() []string {
		var out []string
		for _, i := range rng.Perm(nodes)[:2] {
			out = append(out, fmt.Sprintf("%s/p2p/%s", hosts[i].Addrs()[0], hosts[i].ID()))
		}
		return out
	}
	alice := startDaemon(t, inDHT(aliceConfig(""), bootOf()...))
	carol := startDaemon(t, dhtConfig([]map[string]any{
		{"name": "calendar.availability", "version": "2", "description": "Share calendar availability windows"},
	}, bootOf()...))
	dave := startDaemon(t, dhtConfig([]map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "notes.share", "description": "Share notes", "advertise": "when-eligible"},
		{"name": "calendar.availability", "version": "1.5", "description": "Share calendar availability windows",
			"advertise": "when-eligible", "conditions": map[string]any{"min_disclosure": "close"}},
	}, bootOf()...))
	bob := startDaemon(t, dhtConfig(nil, bootOf()...))
	erin := startDaemon(t, dhtConfig(nil, bootOf()...))
	daemons := []*testDaemon{alice, carol, dave, bob, erin}
	waitProvided(t, alice, "calendar.availability")
	waitProvided(t, carol, "calendar.availability")
	waitProvided(t, dave, "ping") // the round that left out his hidden ones
	all := slices.Clone(dhts)
	for _, d := range daemons {
		all = append(all, d.discovery.dht.dht)
	}
	calProviders := []peer.ID{alice.id.PeerID(), carol.id.PeerID()}
	slices.Sort(calProviders)

	held := holders(t, all, "translate.text")
	for _, name := range []string{"diary.read", "notes.share"} {
		if h := holders(t, all, name); len(h) != 0 {
			t.Errorf("provider records for hidden %s at %d nodes", name, len(h))
		}
	}

	// Every node finds every provider but itself, and no hidden one.
	var times []time.Duration
	var hops []int
	for _, d := range all {
		self := d.Host().ID()
		tr := tracedFind(ctx, d, "translate.text", DefaultFindLimit, held)
		if got, want := peerSet(tr.found), without(bareProviders, self); !slices.Equal(got, want) {
			t.Errorf("%s found translate.text at %v, want %v", self, got, want)
		}
		times, hops = append(times, tr.elapsed), append(hops, tr.hops)
		if got, want := peerSet(findCapabilityProviders(ctx, d, "calendar.availability", self, DefaultFindLimit)), without(calProviders, self); !slices.Equal(got, want) {
			t.Errorf("%s found calendar.availability at %v, want %v", self, got, want)
		}
		for _, name := range []string{"diary.read", "notes.share"} {
			if got := findCapabilityProviders(ctx, d, name, self, DefaultFindLimit); len(got) != 0 {
				t.Errorf("%s found hidden %s at %v", self, name, peerSet(got))
			}
		}
	}
	perHops := make([]int, slices.Max(hops)+1)
	for _, h := range hops {
		perHops[max(h, 0)]++
	}
	t.Logf("DHT find at %d nodes: median %d ms, max %d ms, hops median %d (max %d); bucket size %d, %d lookups (the %d and %d daemons) by hops %v, record held by %d nodes",
		nodes, median(times).Milliseconds(), slices.Max(times).Milliseconds(), median(hops), slices.Max(hops),
		bucket, len(times), nodes, len(daemons), perHops, len(held))

	// End to end at a daemon: the providers' own daemons decide.
	res, err := bob.Discovery().Find(ctx, "calendar.availability", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("bob's find: %+v", res)
	}
	if c := findResult(t, res, carol.id.PeerID()); c.Status != FindEligible {
		t.Errorf("carol: %+v", c)
	}
	if a := findResult(t, res, alice.id.PeerID()); a.Status != FindIneligible || !slices.Contains(a.Why, "needs min_disclosure professional, you have public") {
		t.Errorf("alice: %+v", a)
	}
	res, err = erin.Discovery().Find(ctx, "calendar.availability", "2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a := findResult(t, res, alice.id.PeerID()); a.Status != FindBelowMinVersion || res[0].PeerID != carol.id.PeerID().String() {
		t.Errorf("erin at min version 2: %+v", res)
	}
	// Bare providers do not speak ifaced: asked, they are unreachable.
	res, err = bob.Discovery().Find(ctx, "translate.text", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(bareProviders) || slices.ContainsFunc(res, func(r FindResult) bool { return r.Status != FindUnreachable || r.Error == "" }) {
		t.Errorf("bob's find translate.text: %+v", res)
	}
	if res, err := bob.Discovery().Find(ctx, "notes.share", "", 0); err != nil || len(res) != 0 {
		t.Errorf("bob found hidden notes.share: %+v %v", res, err)
	}
	t.Logf("total %s", time.Since(t0).Round(time.Millisecond))
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
