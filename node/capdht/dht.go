// Package capdht is ifaced's capability DHT: Kademlia (go-libp2p-kad-dht)
// under ifaced's own protocol prefix, holding provider records "this peer
// offers capability X" under a key derived from the capability name. It
// owns the kad-dht instance, the bounded store of other peers' provider
// records a DHT server keeps (providerRecords), and the loop that joins
// the DHT and sends this node's own records. Which names a node announces
// is the caller's: the daemon's discovery (node/discovery) passes the
// names of its public view; the network lab (interop/netlab/dhtnode) runs
// it alone, on hosts that are only DHT nodes. Asking a provider for its
// view is not here: that is a conversation (node/discovery's Find).
package capdht

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/internal/tasks"
	"github.com/ifaced/ifaced/node/p2phost"
	"github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	dsq "github.com/ipfs/go-datastore/query"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p-kad-dht/records"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/routing"
	"github.com/multiformats/go-multiaddr"
	"github.com/multiformats/go-multihash"
)

// The DHT is Kademlia (go-libp2p-kad-dht) under ifaced's own protocol,
// /ifaced/kad/1.0.0, so daemons form a network of their own and never join
// the public IPFS DHT. It holds one kind of record: provider records, "this
// peer offers capability X", under a key derived from the capability name.
// Value records are switched off, so nobody can park data in it.
//
// kad-dht dials only what it is given: without bootstrap peers it starts
// with the peers the host is already connected to (mDNS, `ifaced connect`,
// relays) and never the public bootstrap nodes (DefaultBootstrapPeers is
// used only when passed in, which this file never does).
//
// A record says no more than a stranger could learn by greeting: the daemon
// announces the names of its public view less any capability marked
// advertise = "when-eligible" (node/discovery decides the names; this
// package sends what it is given), so a hidden capability is never
// announced, whoever might be eligible for it. Finding a provider then means asking it
// for its view for us (QueryCapabilities), which its own daemon decides on
// facts it established itself; the record is only a pointer.

// dhtPrefix makes the protocol /ifaced/kad/1.0.0.
const dhtPrefix protocol.ID = "/ifaced"

// capabilityKeyDomain separates capability keys from every other hash of
// the same bytes; v1 leaves room to change the derivation.
const capabilityKeyDomain = "ifaced/capability/v1\n"

// Timings of provider records. kad-dht keeps a record 48 hours
// (amino.DefaultProvideValidity); discovery.reprovide (12 hours by
// default) renews it well before then.
const (
	provideTimeout  = time.Minute      // one name's lookup and puts
	provideParallel = 4                // names provided at once
	retryFirst      = time.Second      // after a round that reached no DHT peer
	retryMax        = 5 * time.Minute  // the retry backoff's ceiling
	retryNoPeers    = 5 * time.Second  // its ceiling while no DHT peer is known at all
	peerCheck       = time.Second      // how often the routing table is looked at: for its growth, and while records are owed, for new DHT peers
	settled         = 5 * time.Second  // a routing table unchanged this long has stopped growing (see provideLoop)
	joinTimeout     = 30 * time.Second // dialing one bootstrap peer
)

// Limits of a lookup of providers.
const (
	DefaultFindLimit  = 20               // providers looked up when the caller says 0
	MaxFindLimit      = 100              // the most one lookup returns
	findLookupTimeout = 30 * time.Second // the DHT lookup; asking the providers comes after (the caller's)
)

// Errors of a lookup (FindProviders) and of New.
var (
	ErrDHTOff     = errors.New("the DHT is off (discovery.dht = \"off\"); set it to auto, server or client")
	ErrNoDHTPeers = errors.New("no DHT server reachable")
)

// errNoDHTPeers: a provide round had nobody to send records to.
var errNoDHTPeers = errors.New("no DHT peers to send provider records to")

// renewals are the early full rounds after the first, before the
// discovery.reprovide period takes over (see provideLoop).
var renewals = []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute}

// DHT is the Kademlia DHT and the provider records sent from
// it: it owns the kad-dht instance, the loop that joins the DHT and sends
// provider records (all names every discovery.reprovide, new names when the
// document changes, again with backoff while no DHT peer is known), and
// the record of which names went out. A nil *DHT is the DHT
// switched off.
//
// It is a component of its own (not part of node/discovery) because it is
// run alone too: the network lab starts hundreds of DHT-only processes
// with it, the daemon's own provide and find code rather than a copy, and
// a program that only serves ifaced's DHT (a bootstrap server, a crawler)
// would build on it the same way.
type DHT struct {
	dht       *dht.IpfsDHT
	host      host.Host
	names     func() ([]string, error) // the names to advertise now
	boot      []peer.AddrInfo
	reprovide time.Duration // discovery.reprovide
	now       func() time.Time
	log       *slog.Logger
	tasks     *tasks.Group
	kick      chan struct{} // a document change asks for a round; one pending is enough

	mu       sync.Mutex
	provided map[string]time.Time // names whose records went out since the last full round, and when
}

var dhtModes = map[string]dht.ModeOpt{config.DHTAuto: dht.ModeAuto, config.DHTServer: dht.ModeServer, config.DHTClient: dht.ModeClient}

// capabilityKey is the DHT key of a capability name: a CIDv1 (raw codec)
// of the SHA-256 of the domain-separated name.
func capabilityKey(name string) cid.Cid {
	mh, err := multihash.Sum([]byte(capabilityKeyDomain+name), multihash.SHA2_256, -1)
	if err != nil {
		panic(fmt.Sprintf("capdht: hashing a capability name: %v", err)) // SHA2_256 is always registered
	}
	return cid.NewCidV1(cid.Raw, mh)
}

// newCapabilityDHT starts kad-dht on h as ifaced runs it, its provider
// records (other peers', when it serves) held in provs. Tests build their
// bare networks with it too, so they exercise the daemon's configuration.
func newCapabilityDHT(h host.Host, mode dht.ModeOpt, bootstrap []peer.AddrInfo, provs *providerRecords, extra ...dht.Option) (*dht.IpfsDHT, error) {
	opts := []dht.Option{dht.ProtocolPrefix(dhtPrefix), dht.Mode(mode), dht.DisableValues(),
		dht.ProviderDatastore(provs), dht.ProviderManagerOpts(records.Cache(providerCacheOff{}))}
	if len(bootstrap) > 0 {
		// Used again whenever the routing table runs empty.
		opts = append(opts, dht.BootstrapPeers(bootstrap...))
	}
	return dht.New(h, append(opts, extra...)...)
}

// provideCapabilities announces this peer as a provider of each name and
// returns the names whose records went out.
func provideCapabilities(ctx context.Context, r routing.ContentRouting, names []string) ([]string, error) {
	var (
		mu   sync.Mutex
		done []string
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, provideParallel)
	)
	for _, name := range names {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, provideTimeout)
			err := r.Provide(pctx, capabilityKey(name), true)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("providing %q: %w", name, err))
				return
			}
			done = append(done, name)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	slices.Sort(done)
	return done, errors.Join(errs...)
}

// findCapabilityProviders looks up at most limit providers of name, other
// than self. It returns when it has limit of them or the lookup ends.
func findCapabilityProviders(ctx context.Context, r routing.ContentRouting, name string, self peer.ID, limit int) []peer.AddrInfo {
	// One more than wanted: self, when it provides the name, counts in
	// kad-dht's limit.
	var out []peer.AddrInfo
	seen := map[peer.ID]bool{self: true}
	for p := range r.FindProvidersAsync(ctx, capabilityKey(name), limit+1) {
		if seen[p.ID] || len(out) == limit {
			continue // keep draining: the lookup blocks on an unread channel
		}
		seen[p.ID] = true
		out = append(out, p)
	}
	return out
}

// New starts the DHT on h as a daemon with cfg runs it (discovery.dht,
// bootstrap, reprovide, max_provider_records, max_providers_per_key; the
// other fields are not used) and the loop that sends provider records of
// the names names returns (asked at every provide round; Changed asks for
// a round now). It runs until ctx ends or Close. cfg.DHT "off" is
// ErrDHTOff: a caller with the DHT switched off does not build one.
func New(ctx context.Context, h host.Host, cfg config.DiscoveryConfig, names func() ([]string, error), now func() time.Time, log *slog.Logger) (*DHT, error) {
	fail := func(err error) (*DHT, error) {
		return nil, fmt.Errorf("starting the capability DHT: %w", err)
	}
	mode, on := dhtModes[cfg.DHT]
	switch {
	case cfg.DHT == config.DHTOff:
		return fail(ErrDHTOff)
	case !on:
		return fail(fmt.Errorf("discovery.dht: %q: want %q, %q or %q", cfg.DHT, config.DHTAuto, config.DHTServer, config.DHTClient))
	case cfg.Reprovide.Duration <= 0:
		return fail(fmt.Errorf("discovery.reprovide: %v: want a positive duration, e.g. 12h", cfg.Reprovide.Duration))
	case cfg.MaxProviderRecords <= 0 || cfg.MaxProvidersPerKey <= 0:
		return fail(fmt.Errorf("discovery.max_provider_records %d, max_providers_per_key %d: want both positive, e.g. %d and %d",
			cfg.MaxProviderRecords, cfg.MaxProvidersPerKey, config.DefaultMaxProviderRecords, config.DefaultMaxProvidersPerKey))
	}
	boot, err := bootstrapPeers(cfg.Bootstrap, h.ID())
	if err != nil {
		return fail(err)
	}
	kad, err := newCapabilityDHT(h, mode, boot, newProviderRecords(cfg.MaxProviderRecords, cfg.MaxProvidersPerKey))
	if err != nil {
		return fail(err)
	}
	d := &DHT{dht: kad, host: h, names: names, boot: boot, reprovide: cfg.Reprovide.Duration, now: now, log: log,
		tasks: tasks.New(ctx), kick: make(chan struct{}, 1), provided: map[string]time.Time{}}
	d.tasks.Go(d.provideLoop)
	return d, nil
}

// Close stops the provide loop, waits for it, and closes the DHT.
func (d *DHT) Close() error {
	d.tasks.Close()
	if err := d.dht.Close(); err != nil {
		return fmt.Errorf("closing the DHT: %w", err)
	}
	return nil
}

// bootstrapPeers reads discovery.bootstrap (validated with the config),
// merging addresses of the same peer and leaving this daemon out.
func bootstrapPeers(addrs []string, self peer.ID) ([]peer.AddrInfo, error) {
	var mas []multiaddr.Multiaddr
	for _, a := range addrs {
		ma, err := multiaddr.NewMultiaddr(a)
		if err != nil {
			return nil, fmt.Errorf("discovery.bootstrap: %q is not a multiaddr: %w", a, err)
		}
		mas = append(mas, ma)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil {
		return nil, fmt.Errorf("discovery.bootstrap: %w", err)
	}
	return slices.DeleteFunc(infos, func(ai peer.AddrInfo) bool { return ai.ID == self }), nil
}

// Changed asks the provide loop for a round because the document changed.
// It never blocks: a round already pending covers this change too. A nil
// *DHT (the DHT switched off) ignores it.
func (d *DHT) Changed() {
	if d == nil {
		return
	}
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// NoServer is ErrNoDHTPeers with what this daemon is connected to and
// what would help: only DHT servers enter the routing table, and a
// daemon on auto behind a NAT is a client, so daemons that all run auto
// behind NATs find nobody however connected they are.
func (d *DHT) NoServer() error {
	n := len(d.host.Network().Peers())
	if n == 0 {
		return fmt.Errorf("%w: this daemon is connected to no peer; list a DHT server in discovery.bootstrap, or connect to one", ErrNoDHTPeers)
	}
	return fmt.Errorf("%w: none of the %d peers this daemon is connected to is a DHT server; "+
		"set discovery.dht = \"server\" on a daemon the others can reach (a relay, say) and list it in discovery.bootstrap", ErrNoDHTPeers, n)
}

// HasPeers reports whether the routing table holds anyone to ask.
func (d *DHT) HasPeers() bool { return d.dht.RoutingTable().Size() > 0 }

// provideLoop joins the DHT, then sends provider records: all names at
// once, again early (renewals, below) and every discovery.reprovide, the
// names not yet sent whenever the document changes, and again with
// backoff while no DHT peer is known.
//
// Two things a newly formed network needs (found by the network lab,
// interop/netlab):
//   - While no DHT peer is known, every retry dials the bootstrap peers
//     again, and the backoff stays short (retryNoPeers): a daemon started
//     before its DHT server was reachable is findable seconds after the
//     server is, not minutes.
//   - Records sent while the DHT was still forming sit on the few servers
//     there were; once the network has grown, the servers closest to a
//     name are others, and lookups stop at those. So every record is sent
//     again after renewals[0], [1], [2] and then every discovery.reprovide,
//     and at once (within peerCheck) whenever the routing table has grown
//     to twice its size at the last full round. The routing table is what
//     this daemon can see of the network's growth: a daemon that joined a
//     forming network sends its records again as the network doubles,
//     while lookups are still going to the servers it first sent them to
//     (the lab measured records of the earliest nodes held by none of the
//     20 servers closest to their key until the next round, a minute
//     later, and lookups failing meanwhile). Doubling bounds these rounds
//     to one per doubling of the table since the last full round: a
//     handful while a network forms, none in a settled one.
//   - A round that went out while the table was still growing gets one
//     more once the table has been still for `settled`: a network that
//     formed from 16 servers to 30 never doubles again, yet the records
//     sent at 16 sit on servers of which only about half are still the
//     closest (TestProviderRecordsFollowTheGrowingNetwork failed 1 run in 4
//     on a loaded machine before this). At most one such round follows a
//     growth spurt, so a table grown from 1 to s peers costs at most
//     1 + bits.Len(s) full rounds: the first, one per doubling, and this.
func (d *DHT) provideLoop() {
	ctx := d.tasks.Context()
	d.join(joinTimeout)
	periodic := time.NewTimer(0) // the first round sends everything
	defer periodic.Stop()
	var retry <-chan time.Time // set while records could not go out
	backoff := retryFirst
	full := false
	renewal := 0                    // early renewals made so far
	lastSize := -1                  // routing table size at the last full round that went out
	seenSize, seenAt := -1, d.now() // the routing table's size when last looked at, and since when
	sentGrowing := false            // the last full round went out while the table was still growing
	peers := time.NewTicker(peerCheck)
	defer peers.Stop()
	var tried map[peer.ID]bool // the DHT peers a round that failed was sent to
	for {
		select {
		case <-ctx.Done():
			return
		case <-periodic.C:
			full = true
		case <-d.kick:
		case <-retry:
		case <-peers.C:
			size := d.dht.RoutingTable().Size()
			if size != seenSize {
				seenSize, seenAt = size, d.now()
			}
			switch {
			case retry == nil && lastSize >= 0 && size >= 2*max(lastSize, 1):
				full = true // the network has grown: the servers closest to each name may be others now
			case retry == nil && sentGrowing && size > lastSize && d.now().Sub(seenAt) >= settled:
				full = true // the growth the last round went out in has come to rest: send to the servers closest now
			case retry != nil && d.newPeer(tried):
				// While records are owed, a DHT peer not there at the last
				// attempt is worth one now, not at the end of the backoff.
			default:
				continue
			}
		}
		tried = d.routingPeers()
		err := d.provideRound(full)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if full {
				lastSize = d.dht.RoutingTable().Size()
				sentGrowing = seenSize >= 0 && (lastSize != seenSize || d.now().Sub(seenAt) < settled)
				next := d.reprovide
				if renewal < len(renewals) {
					next = min(renewals[renewal], d.reprovide)
					renewal++
				}
				periodic.Reset(next)
			}
			full, retry, backoff = false, nil, retryFirst
		default:
			// A full round that failed stays full, so the retry renews
			// every record and not only the new ones.
			lvl := slog.LevelWarn
			ceiling := retryMax
			if errors.Is(err, errNoDHTPeers) {
				lvl = slog.LevelDebug // expected until a peer turns up
				ceiling = retryNoPeers
				d.join(retryNoPeers) // the bootstrap peers may be reachable now
			}
			d.log.Log(ctx, lvl, "provider records not sent; retrying", "in", backoff, "err", err)
			retry = time.After(backoff)
			backoff = min(2*backoff, ceiling)
		}
	}
}

// routingPeers is the set of peers in the routing table now.
func (d *DHT) routingPeers() map[peer.ID]bool {
	out := map[peer.ID]bool{}
	for _, p := range d.dht.RoutingTable().ListPeers() {
		out[p] = true
	}
	return out
}

// newPeer reports whether the routing table holds a peer not in tried.
func (d *DHT) newPeer(tried map[peer.ID]bool) bool {
	for _, p := range d.dht.RoutingTable().ListPeers() {
		if !tried[p] {
			return true
		}
	}
	return false
}

// join dials the bootstrap peers and bootstraps the DHT. The dials are
// not held back by the swarm's dial backoff (forgetDialFailures): the
// provide loop paces the attempts itself.
func (d *DHT) join(timeout time.Duration) {
	var wg sync.WaitGroup
	for _, ai := range d.boot {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(d.tasks.Context(), timeout)
			defer cancel()
			p2phost.ForgetDialFailures(d.host, ai.ID)
			if err := d.host.Connect(ctx, ai); err != nil {
				d.log.Warn("DHT bootstrap peer unreachable", "peer", ai.ID, "err", err)
			}
		})
	}
	wg.Wait()
	if err := d.dht.Bootstrap(d.tasks.Context()); err != nil {
		d.log.Warn("bootstrapping the DHT", "err", err)
	}
}

// provideRound sends the provider records due: every advertised name when
// full, else those not sent since the last full round. Names that left the
// public view are simply not sent again: kad-dht cannot withdraw a record,
// so theirs expire within 48 hours, and until then a finder asking the
// peer is told it is not offered.
func (d *DHT) provideRound(full bool) error {
	names, err := d.names()
	if err != nil {
		return err
	}
	d.mu.Lock()
	for name := range d.provided {
		if !slices.Contains(names, name) {
			delete(d.provided, name)
		}
	}
	todo := names
	if !full {
		todo = slices.DeleteFunc(slices.Clone(names), func(name string) bool { _, ok := d.provided[name]; return ok })
	}
	d.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	if !d.HasPeers() {
		return errNoDHTPeers
	}
	done, err := provideCapabilities(d.tasks.Context(), d.dht, todo)
	now := d.now()
	d.mu.Lock()
	if full {
		clear(d.provided)
	}
	for _, name := range done {
		d.provided[name] = now
	}
	d.mu.Unlock()
	if len(done) > 0 {
		d.log.Info("provider records sent", "capabilities", done, "full", full, "routing_table", d.dht.RoutingTable().Size())
	}
	return err
}

// findProviders is the lookup of Find: at most limit providers of name
// other than this daemon, from a lookup of at most findLookupTimeout.
// The error is ctx's when it ended, or noServer's when the routing table
// is empty.
func (d *DHT) findProviders(ctx context.Context, name string, limit int) ([]peer.AddrInfo, error) {
	if !d.HasPeers() {
		return nil, d.NoServer()
	}
	lctx, cancel := context.WithTimeout(ctx, findLookupTimeout)
	provs := findCapabilityProviders(lctx, d.dht, name, d.host.ID(), limit)
	cancel()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return provs, nil
}

// providerRecords is where a DHT server keeps other peers' provider
// records, bounded. kad-dht's own provider manager (records.ProviderManager)
// still does all the provider logic: it takes ADD_PROVIDER, stamps each
// record with its arrival, buffers writes, answers GET_PROVIDERS, and drops
// records 48 hours (amino.DefaultProvideValidity, kad-dht's TTL, unchanged)
// after their last renewal. It keeps them in the datastore it is given,
// which by default is an unbounded in-memory map; this is that datastore
// with caps, and its read cache is turned off (providerCacheOff), since
// the cache holds each key's full set of providers outside the datastore.
// go-datastore has no bounded or LRU datastore, hence this type.
//
// At most max records are kept, and at most perKey for one key (one
// capability name). A new record past a cap evicts the record that would
// expire first: for the key's cap, the oldest write of that key; for the
// total, the oldest write of all; a record older than every one held is
// not taken. Renewal rewrites a record, so the records kept are always the
// most recently renewed. A flood larger than a cap pushes out what is
// older than it, genuine records included, until their providers renew
// them (discovery.reprovide); a per-key flood only touches that key. A
// record's write time is the value kad-dht stores (a varint of Unix
// nanoseconds); one that cannot be read counts as the oldest. kad-dht's
// own write buffer in front of this holds at most 320 records.
type providerRecords struct {
	max, perKey int

	mu     sync.Mutex
	recs   map[ds.Key]*providerRecord
	groups map[string]map[ds.Key]*providerRecord // a DHT key's datastore prefix → its records
	order  providerHeap                          // oldest write first
}

type providerRecord struct {
	key   ds.Key
	group string
	value []byte
	at    int64 // write time, Unix nanoseconds
	index int   // in the heap
}

func newProviderRecords(max, perKey int) *providerRecords {
	return &providerRecords{max: max, perKey: perKey, recs: map[ds.Key]*providerRecord{},
		groups: map[string]map[ds.Key]*providerRecord{}}
}

var _ ds.Batching = (*providerRecords)(nil)

// Len is the number of records held.
func (p *providerRecords) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.recs)
}

func (p *providerRecords) Put(_ context.Context, k ds.Key, value []byte) error {
	at, n := binary.Varint(value)
	if n <= 0 {
		at = math.MinInt64
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.recs[k]; r != nil {
		r.value, r.at = slices.Clone(value), at
		heap.Fix(&p.order, r.index)
		return nil
	}
	// Past a cap, a record older than all those held is the one to go:
	// it is not taken.
	group := k.Parent().String()
	if g := p.groups[group]; len(g) >= p.perKey {
		var oldest *providerRecord
		for _, r := range g {
			if oldest == nil || r.at < oldest.at {
				oldest = r
			}
		}
		if at < oldest.at {
			return nil
		}
		p.remove(oldest)
	}
	if len(p.recs) >= p.max {
		if at < p.order[0].at {
			return nil
		}
		p.remove(p.order[0])
	}
	r := &providerRecord{key: k, group: group, value: slices.Clone(value), at: at}
	p.recs[k] = r
	if p.groups[group] == nil {
		p.groups[group] = map[ds.Key]*providerRecord{}
	}
	p.groups[group][k] = r
	heap.Push(&p.order, r)
	return nil
}

// remove drops r; p.mu is held.
func (p *providerRecords) remove(r *providerRecord) {
	delete(p.recs, r.key)
	if g := p.groups[r.group]; g != nil {
		delete(g, r.key)
		if len(g) == 0 {
			delete(p.groups, r.group)
		}
	}
	heap.Remove(&p.order, r.index)
}

func (p *providerRecords) Delete(_ context.Context, k ds.Key) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.recs[k]; r != nil {
		p.remove(r)
	}
	return nil
}

func (p *providerRecords) Get(_ context.Context, k ds.Key) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.recs[k]; r != nil {
		return slices.Clone(r.value), nil
	}
	return nil, ds.ErrNotFound
}

func (p *providerRecords) Has(_ context.Context, k ds.Key) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recs[k] != nil, nil
}

func (p *providerRecords) GetSize(_ context.Context, k ds.Key) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.recs[k]; r != nil {
		return len(r.value), nil
	}
	return -1, ds.ErrNotFound
}

// Query answers from a snapshot, so the caller may delete while it reads
// (kad-dht does, dropping expired records).
func (p *providerRecords) Query(_ context.Context, q dsq.Query) (dsq.Results, error) {
	p.mu.Lock()
	var entries []dsq.Entry
	add := func(r *providerRecord) {
		e := dsq.Entry{Key: r.key.String(), Size: len(r.value)}
		if !q.KeysOnly {
			e.Value = slices.Clone(r.value)
		}
		entries = append(entries, e)
	}
	if g, ok := p.groups[ds.NewKey(q.Prefix).String()]; ok && q.Prefix != "" {
		for _, r := range g {
			add(r) // a key's records: what GET_PROVIDERS reads
		}
	} else {
		for _, r := range p.recs {
			add(r)
		}
	}
	p.mu.Unlock()
	return dsq.NaiveQueryApply(q, dsq.ResultsWithEntries(q, entries)), nil
}

func (p *providerRecords) Batch(context.Context) (ds.Batch, error) { return ds.NewBasicBatch(p), nil }

func (p *providerRecords) Sync(context.Context, ds.Key) error { return nil }

func (p *providerRecords) Close() error { return nil }

// providerHeap orders records oldest write first.
type providerHeap []*providerRecord

func (h providerHeap) Len() int           { return len(h) }
func (h providerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h providerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *providerHeap) Push(x any) {
	r := x.(*providerRecord)
	r.index = len(*h)
	*h = append(*h, r)
}
func (h *providerHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return r
}

// providerCacheOff is kad-dht's provider read cache (records.Cache),
// holding nothing: a cached key's provider set grows with every
// ADD_PROVIDER for it, outside providerRecords' caps, so every read goes
// to providerRecords instead (a map lookup of the key's records). It
// implements golang-lru's simplelru.LRUCache.
type providerCacheOff struct{}

func (providerCacheOff) Add(key, value any) bool        { return false }
func (providerCacheOff) Get(key any) (any, bool)        { return nil, false }
func (providerCacheOff) Contains(key any) bool          { return false }
func (providerCacheOff) Peek(key any) (any, bool)       { return nil, false }
func (providerCacheOff) Remove(key any) bool            { return false }
func (providerCacheOff) RemoveOldest() (any, any, bool) { return nil, nil, false }
func (providerCacheOff) GetOldest() (any, any, bool)    { return nil, nil, false }
func (providerCacheOff) Keys() []any                    { return nil }
func (providerCacheOff) Len() int                       { return 0 }
func (providerCacheOff) Purge()                         {}
func (providerCacheOff) Resize(int) int                 { return 0 }

// FindProviders looks up at most limit providers of name other than this
// node (0 means DefaultFindLimit): the lookup ends when it has limit of
// them, when the DHT lookup ends, or after 30 s. With an empty routing
// table it is ErrNoDHTPeers (NoServer's explanation); a name that is not a
// capability name is negotiate.ErrInvalidName.
func (d *DHT) FindProviders(ctx context.Context, name string, limit int) ([]peer.AddrInfo, error) {
	fail := func(err error) ([]peer.AddrInfo, error) {
		return nil, fmt.Errorf("finding providers of %q: %w", name, err)
	}
	if err := negotiate.CheckName(name); err != nil {
		return fail(err)
	}
	switch {
	case limit == 0:
		limit = DefaultFindLimit
	case limit < 0 || limit > MaxFindLimit:
		return fail(fmt.Errorf("limit %d: want 1 to %d", limit, MaxFindLimit))
	}
	provs, err := d.findProviders(ctx, name, limit)
	if err != nil {
		return fail(err)
	}
	return provs, nil
}

// Provided are the names whose provider records went out since the last
// full round, each with when.
func (d *DHT) Provided() map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.provided)
}

// RoutingTableSize is the number of DHT servers in the routing table.
func (d *DHT) RoutingTableSize() int { return d.dht.RoutingTable().Size() }

// Holds reports whether this node, as a DHT server, holds a provider
// record of name (from anyone): what a test or an operator asks to see
// where records went.
func (d *DHT) Holds(ctx context.Context, name string) (bool, error) {
	provs, err := d.dht.ProviderStore().GetProviders(ctx, capabilityKey(name).Hash())
	if err != nil {
		return false, fmt.Errorf("reading the provider records of %q: %w", name, err)
	}
	return len(provs) > 0, nil
}

// Refresh refreshes the routing table now, as kad-dht does on its own
// schedule; the channel reports when it is done. A node that joined a
// network still forming uses it to learn the peers that came after it.
func (d *DHT) Refresh() <-chan error { return d.dht.ForceRefresh() }
