// Package discovery is how a daemon finds peers and is found: three
// independent mechanisms, each switched by [discovery] in the config, and
// the owner's imports of outside agents.
//
//   - mdns.go, lanDiscovery: daemons on one LAN find each other by
//     multicast DNS and exchange views with no configuration;
//   - the capability DHT (node/capdht): Kademlia under ifaced's own
//     protocol prefix, with a provider record per advertised capability
//     name, so peers are found by what they can do (Find, `ifaced find`);
//   - announce.go, announcer: signed capabilities.update announcements on
//     GossipSub, so peers that cached a view learn when a newer one exists.
//
// importer.go is not a network mechanism: it keeps the documents of
// outside agents the owner imported, which Find reports beside the
// providers the DHT knows. addrfollow.go keeps the peer cache's addresses
// in step with identify.
//
// None of them carries anything a stranger could not already see in the
// daemon's public view: provider records and announcements are built from
// the view for an unknown peer (strangerViews), so a capability with
// advertise = "when-eligible" never appears in them.
//
// The package owns the mechanisms it started and never holds the daemon.
// New takes what it needs: the host, the store (the peer cache and the
// imports), the conversations (to ask a peer found for its view), the
// owner's documents (the views published, and their changes, followed with
// OnChange), the trust book, the event hub, a logger, a clock and the
// config values. Close stops the mechanisms, the last started first.
package discovery
