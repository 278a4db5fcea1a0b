package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
)

// TestFirstGreetingThroughAFreshCircuit: a peer that reached another
// through a circuit made moments after the other reserved its slot can
// greet it at once, the first time, as the network lab does through the
// control API (connect, then greet). The lab retried around this greeting
// being refused as "unknown peer": identify on the relayed connection
// replaced the circuit address that was dialled by the addresses the
// other side advertised, which did not yet list its circuits (its host
// added them at its next periodic address check, seconds later), and the
// control API's reachability check then saw no address and a connection
// it did not count (Limited, through a relay).
func TestFirstGreetingThroughAFreshCircuit(t *testing.T) {
	r := startDaemon(t, relayConfig())
	for i := range 3 {
		bob := startDaemon(t, natConfig(r))
		alice := startDaemon(t, tcpOnly(loopbackConfig()))
		testkit.WaitFor(t, "bob's slot on the relay", holdsSlots(bob, r))

		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if _, err := alice.Connect(ctx, circuitAddr(r, bob)); err != nil {
			t.Fatalf("%d: connecting through the relay: %v", i, err)
		}
		// What identify on the relayed connection says is in the peerstore
		// before the greeting: the lab's greeting comes later still.
		ids := alice.Host().(interface{ IDService() identify.IDService }).IDService()
		for _, c := range alice.Host().Network().ConnsToPeer(bob.pid()) {
			select {
			case <-ids.IdentifyWait(c):
			case <-ctx.Done():
				t.Fatalf("%d: identify on the relayed connection never finished", i)
			}
		}
		if !limitedVia(alice, bob.pid(), r) {
			t.Fatalf("%d: alice's connection to bob is not relayed by r", i)
		}
		circuits := 0
		for _, a := range alice.Host().Peerstore().Addrs(bob.pid()) {
			if strings.Contains(a.String(), "/p2p-circuit") {
				circuits++
			}
		}
		if circuits == 0 {
			t.Errorf("%d: after identify alice holds no circuit address of bob: %v", i, alice.Host().Peerstore().Addrs(bob.pid()))
		}
		if !alice.Reachable(bob.pid()) {
			t.Fatalf("%d: bob is not reachable for the control API though connected through the relay", i)
		}
		if _, err := alice.Greet(ctx, bob.pid(), negotiate.Proposal{}); err != nil {
			t.Fatalf("%d: the first greeting through the circuit: %v", i, err)
		}
		cancel()
		alice.Close()
		bob.Close()
	}
}
