package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/capdht"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/record"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/multiformats/go-multiaddr"
)

// A DHT of dhtNodes nodes for the latency section's lookup row: dhtNodes-2
// bare DHT servers (libp2p hosts running node/capdht as the daemon does,
// in server mode, offering nothing) and one daemon offering
// the capability looked up (a DHT server), each reached only through a
// delaying proxy of its own, and the daemon that looks it up (a DHT
// client, so no one needs to dial it).
//
// A daemon announces its own listen addresses (it has no setting for
// addresses to announce instead), and every node learns them by identify
// and passes them on in DHT answers; a lookup handed a direct address
// would bypass the proxies. So the bare nodes, which the bench builds,
// keep only proxy addresses: their peerstore puts a peer's proxy address
// in place of whatever address it is given (proxiedPeerstore), they
// announce only their own proxy's address, and they dial nothing else
// (proxyBook as a connection gater). Every address the searching daemon
// is handed is then a proxy's, and after each lookup every connection it
// holds is checked to run through one (checkPaths): a lookup that went
// around them fails its row.
const dhtNodes = 20

// proxyBook is the proxy address of each DHT node, and the set of proxy
// addresses, for the bare nodes' peerstores and dials.
type proxyBook struct {
	mu     sync.Mutex
	via    map[peer.ID][]multiaddr.Multiaddr
	listen map[string]bool
}

func newProxyBook() *proxyBook {
	return &proxyBook{via: map[peer.ID][]multiaddr.Multiaddr{}, listen: map[string]bool{}}
}

// add makes px the way to pid.
func (b *proxyBook) add(pid peer.ID, px *delayProxy) {
	a := px.multiaddr()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.via[pid] = append(b.via[pid], a)
	b.listen[a.String()] = true
}

func (b *proxyBook) addrsOf(pid peer.ID) []multiaddr.Multiaddr {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.via[pid])
}

func (b *proxyBook) isProxy(a multiaddr.Multiaddr) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.listen[a.String()]
}

// The connection gater of a bare node: it dials proxy addresses only.
func (b *proxyBook) InterceptPeerDial(peer.ID) bool                          { return true }
func (b *proxyBook) InterceptAddrDial(_ peer.ID, a multiaddr.Multiaddr) bool { return b.isProxy(a) }
func (b *proxyBook) InterceptAccept(network.ConnMultiaddrs) bool             { return true }
func (b *proxyBook) InterceptSecured(network.Direction, peer.ID, network.ConnMultiaddrs) bool {
	return true
}
func (b *proxyBook) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

// proxiedPeerstore is a bare node's peerstore: any address it is given
// for a peer (by identify, a DHT answer, a provider record, a dial, a
// signed peer record) is stored as that peer's proxy address instead; a
// peer without a proxy gets none.
type proxiedPeerstore struct {
	peerstore.Peerstore
	book *proxyBook
}

// The host requires a certified address book (for its own signed
// record); the peer records it is given are kept for their addresses,
// which become the proxy's.
func (ps *proxiedPeerstore) ConsumePeerRecord(s *record.Envelope, ttl time.Duration) (bool, error) {
	r, err := s.Record()
	if err != nil {
		return false, err
	}
	rec, ok := r.(*peer.PeerRecord)
	if !ok {
		return false, errors.New("not a peer record")
	}
	ps.AddAddrs(rec.PeerID, nil, ttl)
	return true, nil
}

func (ps *proxiedPeerstore) GetPeerRecord(peer.ID) *record.Envelope { return nil }

func (ps *proxiedPeerstore) AddAddr(p peer.ID, _ multiaddr.Multiaddr, ttl time.Duration) {
	ps.AddAddrs(p, nil, ttl)
}

func (ps *proxiedPeerstore) AddAddrs(p peer.ID, _ []multiaddr.Multiaddr, ttl time.Duration) {
	if via := ps.book.addrsOf(p); len(via) > 0 {
		ps.Peerstore.AddAddrs(p, via, ttl)
	}
}

func (ps *proxiedPeerstore) SetAddr(p peer.ID, _ multiaddr.Multiaddr, ttl time.Duration) {
	ps.SetAddrs(p, nil, ttl)
}

// SetAddrs with a TTL of zero removes addresses; a proxy address stays.
func (ps *proxiedPeerstore) SetAddrs(p peer.ID, _ []multiaddr.Multiaddr, ttl time.Duration) {
	if via := ps.book.addrsOf(p); len(via) > 0 && ttl > 0 {
		ps.Peerstore.SetAddrs(p, via, ttl)
	}
}

// newBareDHTNode is a bare DHT server on loopback TCP that knows its
// peers only by their proxies in book (its own included, once added): a
// libp2p host running node/capdht as a daemon runs it, in server mode,
// offering nothing.
func newBareDHTNode(book *proxyBook) (host.Host, io.Closer, error) {
	priv, _, err := crypto.GenerateEd25519Key(crand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a DHT node's key: %w", err)
	}
	self, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	mem, err := pstoremem.NewPeerstore()
	if err != nil {
		return nil, nil, fmt.Errorf("making a DHT node's peerstore: %w", err)
	}
	h, err := libp2p.New(
		libp2p.Identity(priv),
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.Peerstore(&proxiedPeerstore{Peerstore: mem, book: book}),
		libp2p.AddrsFactory(func([]multiaddr.Multiaddr) []multiaddr.Multiaddr { return book.addrsOf(self) }),
		libp2p.ConnectionGater(book),
		libp2p.DisableRelay(),
		libp2p.ResourceManager(&network.NullResourceManager{}),
		libp2p.DisableMetrics(),
	)
	if err != nil {
		mem.Close()
		return nil, nil, fmt.Errorf("starting a DHT node: %w", err)
	}
	cfg := config.DefaultConfig().Discovery
	cfg.DHT, cfg.Bootstrap = config.DHTServer, nil
	d, err := capdht.New(context.Background(), h, cfg, func() ([]string, error) { return nil, nil }, time.Now, quietLog)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	return h, d, nil
}

// dhtNet is the lookup row's network.
type dhtNet struct {
	book       *proxyBook
	proxies    []*delayProxy
	hosts      []host.Host
	dhts       []io.Closer
	provider   *daemon
	finder     *daemon
	capability string
}

// dhtCapability is what the providing daemon offers and the other one
// looks up.
const dhtCapability = "translate.text"

// newDHTNet builds the network on m's paths and waits until the finder's
// lookup finds the provider (every dial through the proxies, so this
// takes a few seconds at 100 ms).
func newDHTNet(ctx context.Context, root string, m pathModel) (*dhtNet, error) {
	n := &dhtNet{book: newProxyBook(), capability: dhtCapability}
	ok := false
	defer func() {
		if !ok {
			n.close()
		}
	}()
	proxyTo := func(pid peer.ID, target multiaddr.Multiaddr) (multiaddr.Multiaddr, error) {
		px, err := proxyForAddr(target, m)
		if err != nil {
			return nil, err
		}
		n.proxies = append(n.proxies, px)
		n.book.add(pid, px)
		return px.multiaddr(), nil
	}
	for range dhtNodes - 2 {
		h, d, err := newBareDHTNode(n.book)
		if err != nil {
			return nil, err
		}
		n.hosts, n.dhts = append(n.hosts, h), append(n.dhts, d)
		if _, err := proxyTo(h.ID(), h.Network().ListenAddresses()[0]); err != nil {
			return nil, err
		}
	}
	// Sparse and connected, as node's DHT test builds its network: each
	// node dials up to four earlier ones.
	rng := rand.New(rand.NewPCG(26, 20))
	var wg sync.WaitGroup
	errs := make(chan error, len(n.hosts)*4)
	sem := make(chan struct{}, 8)
	for i := 1; i < len(n.hosts); i++ {
		for _, j := range rng.Perm(i)[:min(i, 4)] {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				if err := n.hosts[i].Connect(cctx, peer.AddrInfo{ID: n.hosts[j].ID(), Addrs: n.book.addrsOf(n.hosts[j].ID())}); err != nil {
					errs <- fmt.Errorf("DHT node %d dialing node %d: %w", i, j, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	boot := func(first int) []string {
		var out []string
		for i := first; i < first+3; i++ {
			h := n.hosts[i%len(n.hosts)]
			out = append(out, n.book.addrsOf(h.ID())[0].String()+"/p2p/"+h.ID().String())
		}
		return out
	}
	pc := benchConfig()
	pc.Discovery.DHT, pc.Discovery.Bootstrap = config.DHTServer, boot(0)
	pc.Capabilities = []map[string]any{{"name": dhtCapability, "description": "Translate text between languages"}}
	var err error
	if n.provider, err = startDaemon(root, pc); err != nil {
		return nil, fmt.Errorf("the providing daemon: %w", err)
	}
	if _, err := proxyTo(n.provider.Host().ID(), mustTCP(n.provider.Node)); err != nil {
		return nil, err
	}
	// The searching daemon offers nothing, so that it sends no provider
	// records of its own while it is timed (its renewal a minute after
	// its start would be 20 lookups on the connections the Find uses).
	fc := benchConfig()
	fc.Discovery.DHT, fc.Discovery.Bootstrap = config.DHTClient, boot(len(n.hosts)/2)
	fc.Capabilities = nil
	if n.finder, err = startDaemon(root, fc); err != nil {
		return nil, fmt.Errorf("the searching daemon: %w", err)
	}
	// The provider sends its record once it has joined; the finder's
	// lookups find it from then on.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := n.findOnce(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, errNotFound) && !errors.Is(err, discovery.ErrNoDHTPeers) {
			return nil, err // a path around the proxies, say: waiting mends nothing
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("the searching daemon did not find the provider within 2 minutes: %w", err)
		}
		time.Sleep(max(m.rtt, 100*time.Millisecond)) // polling observable state: the record is sent in the background
	}
	ok = true
	return n, nil
}

// mustTCP is d's TCP listen address, without its peer ID.
func mustTCP(d *node.Node) multiaddr.Multiaddr {
	for _, a := range d.Host().Network().ListenAddresses() {
		if _, err := a.ValueForProtocol(multiaddr.P_TCP); err == nil {
			return a
		}
	}
	return nil
}

// errNotFound: the lookup ended without the provider.
var errNotFound = errors.New("the lookup did not find the provider")

// findOnce is one Find by the searching daemon, as `ifaced find` makes it
// (the default limit): the DHT lookup, then asking each provider found
// for its view. It fails unless the provider, and only it, was found and
// answered, and unless every connection the finder holds runs through a
// proxy.
func (n *dhtNet) findOnce(ctx context.Context) error {
	res, err := n.finder.Discovery().Find(ctx, n.capability, "", 0)
	if err != nil {
		return err
	}
	want := n.provider.Host().ID().String()
	if len(res) != 1 || res[0].PeerID != want {
		var got []string
		for _, r := range res {
			got = append(got, r.PeerID+" ("+r.Status+")")
		}
		return fmt.Errorf("%w: found %v, want %s", errNotFound, got, want)
	}
	if res[0].Status != discovery.FindEligible {
		return fmt.Errorf("the provider found was %s: %s %v", res[0].Status, res[0].Error, res[0].Why)
	}
	return n.checkPaths()
}

// checkPaths fails unless every connection the searching daemon holds
// runs through a proxy of the network.
func (n *dhtNet) checkPaths() error {
	conns := n.finder.Host().Network().Conns()
	if len(conns) == 0 {
		return errors.New("the searching daemon holds no connection")
	}
	for _, c := range conns {
		if !n.book.isProxy(c.RemoteMultiaddr()) {
			return fmt.Errorf("the searching daemon's connection to %s runs over %s, not through its proxy", c.RemotePeer(), c.RemoteMultiaddr())
		}
	}
	return nil
}

// forwarded is the bytes all the network's proxies have forwarded.
func (n *dhtNet) forwarded() int64 {
	var sum int64
	for _, px := range n.proxies {
		sum += px.up.Load() + px.down.Load()
	}
	return sum
}

func (n *dhtNet) close() {
	if n.finder != nil {
		n.finder.close()
	}
	if n.provider != nil {
		n.provider.close()
	}
	for _, d := range n.dhts {
		d.Close()
	}
	for _, h := range n.hosts {
		h.Close()
	}
	for _, px := range n.proxies {
		px.close()
	}
}
