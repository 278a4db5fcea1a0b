package discovery

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/capdht"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/owner"
	"github.com/ifaced/ifaced/node/policy"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Deps is what New builds discovery from.
type Deps struct {
	Ctx           context.Context // ends when the daemon closes; bounds the loops
	Host          host.Host
	Config        config.DiscoveryConfig
	StreamTimeout time.Duration // limits.stream_timeout: one query of a peer found on the LAN
	Store         *store.Store
	Convs         *converse.Conversations // asks a peer found for its view
	Docs          *owner.Document         // the views published, and their changes
	Policy        *policy.Book
	Trust         *trust.Book
	Events        *events.Hub
	Log           *slog.Logger
	Now           func() time.Time
	ImportTimeout time.Duration     // one fetch of an outside agent's document; 0: 15 s
	Spawn         func(func()) bool // runs a loop Close of the daemon waits for
}

// New starts the configured discovery mechanisms (the DHT first, so the
// others can use it as a router), the importer, and the follower of
// peers' addresses; it follows the owner's document (provider records and
// announcements follow what is advertised). Close stops them.
func New(d Deps) (*Discovery, error) {
	views := strangerViews{view: d.Docs.View, advertised: d.Docs.Advertised, policy: d.Policy.InForce}
	timeout := d.ImportTimeout
	if timeout == 0 {
		timeout = defaultImportTimeout
	}
	disc := &Discovery{ask: d.Convs, peers: d.Store, host: d.Host, views: views}
	ok := false
	defer func() {
		if !ok {
			disc.Close()
		}
	}()
	follower, err := newAddrFollower(d.Host, d.Store, d.Log)
	if err != nil {
		return nil, err
	}
	disc.closers = append(disc.closers, follower.Close)
	d.Spawn(func() { follower.run(d.Ctx) })
	if d.Config.DHT != config.DHTOff {
		if disc.dht, err = capdht.New(d.Ctx, d.Host, d.Config, views.advertisedNames, d.Now, d.Log); err != nil {
			return nil, err
		}
		disc.closers = append(disc.closers, disc.dht.Close)
	}
	if disc.gossip, err = startAnnouncer(d.Ctx, d.Host, d.Config, announcerDeps{views: views, peers: d.Store, ask: d.Convs,
		keyRevoked: d.Trust.KeyRevoked, trusted: func(p peer.ID) bool { return d.Trust.Peer(p).Level > conditions.Signed },
		events: d.Events}, d.Now, d.Log); err != nil {
		return nil, err
	}
	if disc.gossip != nil {
		disc.closers = append(disc.closers, disc.gossip.Close)
	}
	if disc.mdns = startLAN(d.Ctx, d.Host, d.Config, d.StreamTimeout, d.Store, d.Convs, d.Events, d.Now, d.Log); disc.mdns != nil {
		disc.closers = append(disc.closers, disc.mdns.Close)
	}
	disc.imports = newImporter(d.Store.Imports(), timeout, d.Events, d.Now, d.Log)
	d.Spawn(func() { disc.imports.refreshLoop(d.Ctx, d.Config.ImportRefresh.Duration) })
	d.Docs.OnChange(func(*negotiate.Document) {
		disc.dht.Changed()
		disc.gossip.announce()
	})
	ok = true
	return disc, nil
}

// PubSub is the GossipSub router the announcements travel on, for the
// key statement topic; nil without [discovery] gossip.
func (d *Discovery) PubSub() *pubsub.PubSub {
	if d.gossip == nil {
		return nil
	}
	return d.gossip.ps
}

// Close stops the mechanisms, the last started first.
func (d *Discovery) Close() error {
	var errs []error
	for i := len(d.closers) - 1; i >= 0; i-- {
		errs = append(errs, d.closers[i]())
	}
	d.closers = nil
	return errors.Join(errs...)
}
