package node

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/p2phost"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/multiformats/go-multiaddr"
)

// TestFindAfterTheRelayBecomesADHTServer: two daemons behind NATs (auto)
// meet at a relay that is no DHT server: find says no DHT server is
// reachable. The relay restarts as a DHT server while the daemons' swarms
// hold a long dial backoff for it (as after minutes of failed dials):
// they reserve again and provide their records at once, and each finds
// the other.
func TestFindAfterTheRelayBecomesADHTServer(t *testing.T) {
	rc := relayConfig()
	relay := startDaemon(t, rc)
	tcpAddr := boundListenAddr(t, relay)
	rc.Listen.Addresses = []string{tcpAddr.String()} // the same port after the restart
	mk := func(name string) *testDaemon {
		c := natConfig(relay)
		c.Discovery.DHT = config.DHTAuto
		c.Capabilities = []map[string]any{{"name": name, "description": "a lab capability"}}
		return startDaemon(t, c)
	}
	alice, bob := mk("lab.alice"), mk("lab.bob")
	testkit.WaitFor(t, "alice's slot", holdsSlots(alice, relay))
	testkit.WaitFor(t, "bob's slot", holdsSlots(bob, relay))
	ctx := context.Background()
	_, err := alice.Discovery().Find(ctx, "lab.bob", "", 3)
	if !errors.Is(err, discovery.ErrNoDHTPeers) || !strings.Contains(err.Error(), "no DHT server reachable") || !strings.Contains(err.Error(), "discovery.dht = \"server\"") {
		t.Fatalf("find connected to a relay that is no DHT server: %v", err)
	}

	relay.Close()
	for _, d := range []*testDaemon{alice, bob} {
		testkit.WaitFor(t, "the relay to be gone", func() bool { return len(d.Mail().RelayReservations()) == 0 })
		// Ten failed dials: the swarm would not dial the relay for 5 s + 10² s.
		bo := d.Host().Network().(*swarm.Swarm).Backoff()
		for range 10 {
			bo.AddBackoff(relay.id.PeerID(), tcpAddr)
		}
	}
	rc.Discovery.DHT = config.DHTServer
	relay = restartDaemon(t, relay)
	found := func(d *testDaemon, name string, want peer.ID) func() bool {
		return func() bool {
			res, err := d.Discovery().Find(ctx, name, "", 3)
			return err == nil && slices.ContainsFunc(res, func(r discovery.FindResult) bool {
				return r.PeerID == want.String() && r.Status == discovery.FindEligible
			})
		}
	}
	testkit.WaitFor(t, "alice to find bob", found(alice, "lab.bob", bob.id.PeerID()))
	testkit.WaitFor(t, "bob to find alice", found(bob, "lab.alice", alice.id.PeerID()))
}

// TestProvidedOnceTheBootstrapServerIsUp: a daemon whose only bootstrap
// peer, a DHT server, is down when it starts (its swarm holding a long
// dial backoff for it) sends its provider records once the server is up.
func TestProvidedOnceTheBootstrapServerIsUp(t *testing.T) {
	sc := tcpOnly(loopbackConfig())
	sc.Discovery.DHT = config.DHTServer
	server := startDaemon(t, sc)
	addr := boundListenAddr(t, server)
	sc.Listen.Addresses = []string{addr.String()}
	server.Close()
	c := loopbackConfig()
	c.Discovery.DHT = config.DHTAuto
	c.Discovery.Bootstrap = []string{addr.String() + "/p2p/" + server.id.PeerID().String()}
	c.Capabilities = []map[string]any{{"name": "lab.early", "description": "started before the server"}}
	early := startDaemon(t, c)
	bo := early.Host().Network().(*swarm.Swarm).Backoff()
	for range 10 {
		bo.AddBackoff(server.id.PeerID(), addr)
	}
	server = restartDaemon(t, server)
	testkit.WaitFor(t, "early's provider record of lab.early", func() bool {
		_, sent := early.Discovery().DHT().Provided()["lab.early"]
		return sent
	})
	if held, err := server.Discovery().DHT().Holds(context.Background(), "lab.early"); err != nil || !held {
		t.Fatalf("the server holds no record of lab.early (%v)", err)
	}
}

// boundListenAddr is d's TCP listen address (its port, not 0).
func boundListenAddr(t *testing.T, d *testDaemon) multiaddr.Multiaddr {
	t.Helper()
	for _, a := range d.Host().Network().ListenAddresses() {
		if network, _, ok := p2phost.BoundAddr(a.String()); ok && network == "tcp" {
			return a
		}
	}
	t.Fatalf("%s listens on no TCP port", d.id.PeerID())
	return nil
}
