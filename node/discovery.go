package node

import (
	"slices"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
)

// Discovery is three independent mechanisms, each in its own file and each
// switched by [discovery] in the config:
//
//   - mdns.go: daemons on one LAN find each other by multicast DNS and
//     exchange views with no configuration;
//   - dht.go: the Kademlia DHT under ifaced's own protocol prefix, with a
//     provider record per advertised capability name, so peers are found by
//     what they can do (`ifaced find`);
//   - announce.go: signed capabilities.update announcements on GossipSub,
//     so peers that cached a view learn when a newer one exists.
//
// None of them carries anything a stranger could not already see in the
// daemon's public view: provider records and announcements are built from
// the view for an unknown peer, so a capability with advertise =
// "when-eligible" never appears in them.

// startDiscovery starts the configured discovery mechanisms. The DHT
// comes first, so the others can use it as a router.
func (n *Node) startDiscovery() error {
	if err := n.startDHT(); err != nil {
		return err
	}
	if err := n.startGossip(); err != nil {
		return err
	}
	return n.startMDNS()
}

// documentChanged tells discovery that the owner's document changed:
// provider records follow the advertised names, and an announcement goes
// out when the public view changed.
func (n *Node) documentChanged() {
	n.reprovide()
	n.announce()
}

// publicFacts are what this daemon knows of a stranger: a peer whose
// messages verify and nothing more, under the default persona, at the
// default tier, in a cool conversation. Everything discovery publishes is
// cut from the view for these facts.
func (n *Node) publicFacts() conditions.Facts {
	return conditions.Facts{AuthLevel: conditions.Signed, Disclosure: n.currentPolicy().DefaultTier, Temperature: conditions.Cool}
}

// publicView is the owner's signed view for a stranger (see publicFacts).
// It leaves out hidden capabilities and those of other personas, so
// provider records and announcements built from it reveal nothing a
// stranger could not see by greeting.
func (n *Node) publicView() (*signedView, error) { return n.view(n.publicFacts()) }

// advertisedView is the public view without the capabilities marked
// when-eligible, even those a stranger happens to be eligible for: an
// announcement reaches peers this daemon grants less than a stranger (a
// lower tier in the disclosure map, a revoked key), and a hidden
// capability must never reach anyone not eligible for it.
func (n *Node) advertisedView() (*signedView, error) {
	v, err := n.publicView()
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(v.doc.Capabilities, func(c negotiate.Capability) bool { return c.Hidden() }) {
		return v, nil
	}
	doc := *v.doc
	doc.Signature = nil
	doc.Capabilities = slices.DeleteFunc(slices.Clone(v.doc.Capabilities), func(c negotiate.Capability) bool { return c.Hidden() })
	doc.SupportedCategories = doc.SupportedToolCategories()
	return n.signView(&doc)
}
