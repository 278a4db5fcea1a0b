package node

import (
	"context"
	"slices"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Discovery is three independent mechanisms, each a component in its own
// file and each switched by [discovery] in the config:
//
//   - mdns.go, lanDiscovery: daemons on one LAN find each other by
//     multicast DNS and exchange views with no configuration;
//   - dht.go, capabilityDHT: the Kademlia DHT under ifaced's own protocol
//     prefix, with a provider record per advertised capability name, so
//     peers are found by what they can do (`ifaced find`);
//   - announce.go, announcer: signed capabilities.update announcements on
//     GossipSub, so peers that cached a view learn when a newer one exists.
//
// A fourth, importer.go, is not a network mechanism: it keeps the documents
// of outside agents the owner imported, which Find reports beside the
// providers the DHT knows.
//
// None of them carries anything a stranger could not already see in the
// daemon's public view: provider records and announcements are built from
// the view for an unknown peer (strangerViews), so a capability with
// advertise = "when-eligible" never appears in them.
//
// The components never hold the Node. Each takes what it needs in its
// constructor: the host, a narrow part of the store, a logger, a clock,
// its config values and the few things it asks of the rest of the daemon
// (strangerViews, querier, eventSink). newDiscovery (discovery_new.go)
// builds them from what the assembly gives it, owns them and closes them.

// Discovery is what the control API calls of discovery: Find, and the
// imports of outside agents. It owns the mechanisms it started
// (newDiscovery) and is the façade over them.
type Discovery struct {
	dht     *capabilityDHT // nil when discovery.dht is off
	gossip  *announcer     // nil when discovery.gossip is off
	mdns    *lanDiscovery  // nil when discovery.mdns is off
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
	advertised() (*negotiate.SignedView, error)
}

// eventSink tells the local agent what happened (node/events).
type eventSink interface {
	Publish(events.Event)
}

// strangerViews cuts the views discovery publishes from the owner's
// signed views: the view for a stranger, and that view less what is
// advertised only when eligible.
type strangerViews struct {
	view   func(conditions.Facts) (*negotiate.SignedView, error)    // the owner's signed view for facts
	sign   func(*negotiate.Document) (*negotiate.SignedView, error) // signs a view cut here
	policy func() *negotiate.Policy                                 // the policy in force
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

// advertised is the public view without the capabilities marked
// when-eligible, even those a stranger happens to be eligible for: an
// announcement reaches peers this daemon grants less than a stranger (a
// lower tier in the disclosure map, a revoked key), and a hidden
// capability must never reach anyone not eligible for it.
func (s strangerViews) advertised() (*negotiate.SignedView, error) {
	v, err := s.public()
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(v.Doc.Capabilities, func(c negotiate.Capability) bool { return c.Hidden() }) {
		return v, nil
	}
	doc := *v.Doc
	doc.Signature = nil
	doc.Capabilities = slices.DeleteFunc(slices.Clone(v.Doc.Capabilities), func(c negotiate.Capability) bool { return c.Hidden() })
	doc.SupportedCategories = doc.SupportedToolCategories()
	return s.sign(&doc)
}
