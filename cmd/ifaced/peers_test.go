package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/nodetest"
)

// A peer reached only through a relay: `peers` shows it connected, via
// relay, at its circuit address, and `peers --json` has the API's shape;
// `status` lists the live connections.
func TestPeersThroughARelay(t *testing.T) {
	rc := nodetest.LoopbackConfig()
	rc.Relay.Service = true
	_, relay := startDaemon(t, rc)
	bc := nodetest.LoopbackConfig()
	bc.Listen.Addresses = nil // behind its NAT: only the relay reaches it
	bc.Relay.Use = []string{relay.Addrs()[0].String()}
	_, bob := startDaemon(t, bc)
	for deadline := time.Now().Add(15 * time.Second); len(bob.Mail().RelayReservations()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("bob holds no slot on the relay")
		}
		time.Sleep(20 * time.Millisecond) // polling observable state
	}
	aliceHome, alice := startDaemon(t, nodetest.AliceConfig())
	circuit := fmt.Sprintf("%s/p2p-circuit/p2p/%s", relay.Addrs()[0], bob.ID().PeerID())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := alice.Connect(ctx, circuit); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Greet(ctx, bob.ID().PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	bobID := bob.ID().PeerID().String()

	r := ifaced(t, aliceHome.Dir, "peers", "--json")
	var list api.PeerList
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil {
		t.Fatalf("peers --json: %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	var found bool
	for _, p := range list.Peers {
		if p.PeerID != bobID {
			continue
		}
		found = true
		if !p.Connected || p.Via != "relay" || len(p.LiveAddrs) == 0 || !strings.Contains(p.LiveAddrs[0], "/p2p-circuit") {
			t.Fatalf("bob through the relay: %+v, want connected via relay at a circuit address", p)
		}
	}
	if !found {
		t.Fatalf("bob missing from peers --json: %s", r.stdout)
	}
	r = ifaced(t, aliceHome.Dir, "peers")
	if line := lineWith(r.stdout, bobID); !strings.Contains(line, "via relay") || !strings.Contains(line, "/p2p-circuit") {
		t.Fatalf("peers: bob's line %q, want connected via relay at its circuit address\n%s", line, r.stdout)
	}
	r = ifaced(t, aliceHome.Dir, "status", "--json")
	var st api.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); r.code != 0 || err != nil {
		t.Fatalf("status --json: %d %v\n%s", r.code, err, r.stdout)
	}
	var relayed bool
	for _, c := range st.Connections {
		relayed = relayed || c.Peer == bobID && c.Via == "relay" && strings.Contains(c.Addr, "/p2p-circuit")
	}
	if !relayed || st.ConnectedPeers != 2 {
		t.Fatalf("status: %d peers, connections %+v; want bob via relay among 2", st.ConnectedPeers, st.Connections)
	}
	r = ifaced(t, aliceHome.Dir, "status")
	if line := lineWith(r.stdout, bobID); !strings.Contains(line, "relay") || !strings.Contains(line, "/p2p-circuit") {
		t.Fatalf("status: bob's line %q\n%s", line, r.stdout)
	}
}

func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
