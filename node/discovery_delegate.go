package node

import (
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The Node's side of discovery: the one place that reaches into the Node
// to build the discovery components from its fields, and the few methods
// New and UpdateDocument call. The components themselves never hold the
// Node.

// WithImportTimeout shortens the fetch timeout of imports (tests).
func WithImportTimeout(d time.Duration) Option { return func(n *Node) { n.importTimeout = d } }

// Discovery is the daemon's discovery: Find, and the imports of outside
// agents.
func (n *Node) Discovery() *Discovery { return n.discovery }

// startDiscovery starts the configured discovery mechanisms, each closed
// by Close. The DHT comes first, so the others can use it as a router.
func (n *Node) startDiscovery() error {
	views := n.strangerViews()
	now := func() time.Time { return n.now() }
	d, err := startDHT(n.ctx, n.host, n.cfg.Discovery, views, now, n.log)
	if err != nil {
		return err
	}
	if d != nil {
		n.dht = d
		n.onClose(d.Close)
	}
	g, err := startAnnouncer(n.ctx, n.host, n.cfg.Discovery, announcerDeps{views: views, peers: n.store, ask: n.convs,
		keyRevoked: n.trust.KeyRevoked, trusted: func(p peer.ID) bool { return n.trust.Peer(p).Level > conditions.Signed },
		events: n.events}, now, n.log)
	if err != nil {
		return err
	}
	if g != nil {
		n.gossip = g
		n.onClose(g.Close)
	}
	if m := startLAN(n.ctx, n.host, n.cfg.Discovery, n.cfg.Limits.StreamTimeout.Duration, n.store, n.convs, n.events, now, n.log); m != nil {
		n.mdns = m
		n.onClose(m.Close)
	}
	n.imports = newImporter(n.store.Imports(), n.importTimeout, n.events, now, n.log)
	n.discovery = newDiscovery(n.dht, n.imports, n.convs, n.store, n.host)
	return nil
}

// documentChanged tells discovery that the owner's document changed:
// provider records follow the advertised names, and an announcement goes
// out when the advertised view changed.
func (n *Node) documentChanged() {
	n.dht.changed()
	n.gossip.announce()
}

// refreshImports refreshes every import each discovery.import_refresh,
// until the node closes.
func (n *Node) refreshImports() {
	n.imports.refreshLoop(n.ctx, n.cfg.Discovery.ImportRefresh.Duration)
}

// strangerViews are the owner's views for a stranger, which discovery
// publishes.
func (n *Node) strangerViews() strangerViews {
	return strangerViews{view: n.docs.View, sign: n.docs.Sign, policy: n.policy.InForce}
}
