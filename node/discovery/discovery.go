package discovery

import (
	"context"
	"fmt"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/capdht"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Discovery is what the control API calls of discovery: Find, and the
// imports of outside agents. It owns the mechanisms it started
// (New) and is the façade over them.
type Discovery struct {
	dht     *capdht.DHT   // nil when discovery.dht is off
	gossip  *announcer    // nil when discovery.gossip is off
	mdns    *lanDiscovery // nil when discovery.mdns is off
	imports *importer
	ask     querier
	peers   peerReader
	host    host.Host // whose peerstore holds the providers' addresses

	views   strangerViews  // what the mechanisms publish
	closers []func() error // the mechanisms, in the order started
}

// querier asks a peer for its view for this daemon with one capabilities
// query (node/converse); the answer's view is verified and cached.
type querier interface {
	QueryCapabilities(ctx context.Context, pid peer.ID, prop negotiate.Proposal) (*converse.GreetResult, error)
}

// peerReader reads the peer cache.
type peerReader interface {
	Peer(peerID string) (store.PeerRecord, error)
}

// viewSource is the views discovery publishes (strangerViews).
type viewSource interface {
	public() (*negotiate.SignedView, error)
	announced() (*negotiate.SignedView, error)
}

// eventSink tells the local agent what happened (node/events).
type eventSink interface {
	Publish(events.Event)
}

// strangerViews are the views discovery publishes, cut by the owner's
// documents (node/owner): the view for a stranger, and that view less
// what is advertised only when eligible.
type strangerViews struct {
	view       func(conditions.Facts) (*negotiate.SignedView, error) // the owner's signed view for facts
	advertised func(conditions.Facts) (*negotiate.SignedView, error) // the same less what is advertised only when eligible
	policy     func() *negotiate.Policy                              // the policy in force
}

// facts are what this daemon knows of a stranger: a peer whose messages
// verify and nothing more, under the default persona, at the default tier,
// in a cool conversation. Everything discovery publishes is cut from the
// view for these facts.
func (s strangerViews) facts() conditions.Facts {
	return conditions.Facts{AuthLevel: conditions.Signed, Disclosure: s.policy().DefaultTier, Temperature: conditions.Cool}
}

// public is the owner's signed view for a stranger (see facts). It leaves
// out hidden capabilities and those of other personas, so provider records
// and announcements built from it reveal nothing a stranger could not see
// by greeting.
func (s strangerViews) public() (*negotiate.SignedView, error) { return s.view(s.facts()) }

// announced is the public view without the capabilities marked
// when-eligible, even those a stranger happens to be eligible for
// (owner.Document.Advertised says why).
func (s strangerViews) announced() (*negotiate.SignedView, error) { return s.advertised(s.facts()) }

// advertisedNames are the names that go into provider records: those in
// the public view, less any marked when-eligible (a stranger may happen to
// be eligible for one; it is still not announced).
func (s strangerViews) advertisedNames() ([]string, error) {
	view, err := s.public()
	if err != nil {
		return nil, fmt.Errorf("building the public view: %w", err)
	}
	return AdvertisedNames(view.Doc), nil
}

// AdvertisedNames are the names of a public view that may go into
// provider records: all but those marked when-eligible.
func AdvertisedNames(public *negotiate.Document) []string {
	var names []string
	for i := range public.Capabilities {
		if c := &public.Capabilities[i]; !c.Hidden() {
			names = append(names, c.Name)
		}
	}
	return names
}

// DHT is the capability DHT, for its status (the routing table, the
// names provided); nil when discovery.dht is off.
func (d *Discovery) DHT() *capdht.DHT { return d.dht }

// RoutingTableSize is the number of DHT servers in the capability DHT's
// routing table; false when discovery.dht is off.
func (d *Discovery) RoutingTableSize() (int, bool) {
	if d.dht == nil {
		return 0, false
	}
	return d.dht.RoutingTableSize(), true
}

// GossipPeers are the peers on the announcement topic: those known to
// subscribe to it, and those in this daemon's mesh (whom it forwards
// announcements to); false when discovery.gossip is off.
func (d *Discovery) GossipPeers() (subscribed, mesh int, on bool) {
	if d.gossip == nil {
		return 0, 0, false
	}
	return len(d.gossip.topic.ListPeers()), len(d.gossip.meshPeers()), true
}
