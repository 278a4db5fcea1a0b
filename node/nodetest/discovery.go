package nodetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
)

// InDHT puts the daemon of c in the DHT as a server, bootstrapping from
// boot (multiaddrs ending in /p2p/ID), and returns c.
func InDHT(c *config.Config, boot ...string) *config.Config {
	c.Discovery.DHT = config.DHTServer
	c.Discovery.Bootstrap = boot
	return c
}

// DHTConfig is LoopbackConfig in the DHT as a server, offering caps (the
// standard capabilities when nil) and bootstrapping from boot.
func DHTConfig(caps []map[string]any, boot ...string) *config.Config {
	c := LoopbackConfig()
	if caps != nil {
		c.Capabilities = caps
	}
	return InDHT(c, boot...)
}

// WaitProvided waits until n has sent provider records for all of names.
func WaitProvided(t testing.TB, n *node.Node, names ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		provided := n.Discovery().DHT().Provided()
		missing := slices.DeleteFunc(slices.Clone(names), func(name string) bool { _, ok := provided[name]; return ok })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no provider records for %v after 30 s", n.ID().PeerID(), missing)
		}
		time.Sleep(20 * time.Millisecond) // polling observable state, not standing in for it
	}
}

// WaitDHTPeers waits until n's routing table holds someone: its bootstrap
// dial and the peer's identification have completed.
func WaitDHTPeers(t testing.TB, n *node.Node) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n.Discovery().DHT().RoutingTableSize() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no DHT peer after 30 s", n.ID().PeerID())
		}
		time.Sleep(20 * time.Millisecond) // polling observable state
	}
}

// FindResultOf is pid's result among res; the test fails without one.
func FindResultOf(t testing.TB, res []discovery.FindResult, pid peer.ID) discovery.FindResult {
	t.Helper()
	for _, r := range res {
		if r.PeerID == pid.String() {
			return r
		}
	}
	t.Fatalf("no result for %s in %+v", pid, res)
	return discovery.FindResult{}
}
