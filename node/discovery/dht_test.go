package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/ifaced/ifaced/node/nodetest"
	"go.uber.org/goleak"
)

// TestDHTFindEndToEnd: real daemons provide what their public view
// advertises, and Find reports each provider with what its own daemon says
// of us.
func TestDHTFindEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alice := startDaemon(t, nodetest.InDHT(aliceConfig("")))
	boot := alice.Addrs()[0].String()
	carolCfg := nodetest.DHTConfig([]map[string]any{
		{"name": "calendar.availability", "version": "2.1", "description": "Share calendar availability windows"},
	}, boot)
	carolCfg.Identity.Display = "Carol's agent"
	carol := startDaemon(t, carolCfg)
	// Dave's hidden capability has no conditions, so a stranger is eligible
	// and it is in his public view: it must still not be announced.
	dave := startDaemon(t, nodetest.DHTConfig([]map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "diary.read", "description": "Read the diary", "advertise": "when-eligible"},
	}, boot))
	bob := startDaemon(t, nodetest.DHTConfig(nil, boot))
	nodetest.WaitProvided(t, alice.Node, "calendar.availability", "ping")
	nodetest.WaitProvided(t, carol.Node, "calendar.availability")
	nodetest.WaitProvided(t, dave.Node, "ping")
	nodetest.WaitDHTPeers(t, bob.Node)
	if v, _ := dave.Discovery().PublicView(); !slices.ContainsFunc(v.Doc.Capabilities, func(c negotiate.Capability) bool { return c.Name == "diary.read" }) {
		t.Fatal("dave's public view lacks diary.read; the test no longer covers a hidden capability a stranger may see")
	}

	res, err := bob.Discovery().Find(ctx, "calendar.availability", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].PeerID != carol.id.PeerID().String() {
		t.Fatalf("find: %+v, want carol then alice", res)
	}
	c := nodetest.FindResultOf(t, res, carol.id.PeerID())
	if c.Status != discovery.FindEligible || c.Capability.Version != "2.1" || c.AgentID != carol.id.DID() || c.Display != "Carol's agent" || len(c.Addrs) == 0 {
		t.Errorf("carol: %+v", c)
	}
	a := nodetest.FindResultOf(t, res, alice.id.PeerID())
	if a.Status != discovery.FindIneligible || a.Display != "Alice's agent" || a.GrantedToUs == nil || a.GrantedToUs.Disclosure != "public" ||
		!slices.Contains(a.Why, "needs min_disclosure professional, you have public") {
		t.Errorf("alice: %+v", a)
	}

	res, err = bob.Discovery().Find(ctx, "calendar.availability", "2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a := nodetest.FindResultOf(t, res, alice.id.PeerID()); a.Status != discovery.FindBelowMinVersion || !slices.Contains(a.Why, "offers version 1, below 2") {
		t.Errorf("alice at min version 2: %+v", a)
	}
	if c := nodetest.FindResultOf(t, res, carol.id.PeerID()); c.Status != discovery.FindEligible || res[0].PeerID != c.PeerID {
		t.Errorf("carol at min version 2: %+v", res)
	}

	// Hidden capabilities: found by nobody, held by nobody.
	for _, name := range []string{"diary.read"} {
		if res, err := bob.Discovery().Find(ctx, name, "", 0); err != nil || len(res) != 0 {
			t.Errorf("find %s: %+v %v, want nothing", name, res, err)
		}
		for _, d := range []*testDaemon{alice, carol, dave, bob} {
			if held, err := d.Discovery().DHT().Holds(ctx, name); err != nil || held {
				t.Errorf("provider record for hidden %s at %s (%v)", name, d.pid(), err)
			}
		}
	}

	// A capability removed after its record went out: the record outlives
	// it, the view does not.
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = slices.DeleteFunc(d.Capabilities, func(c negotiate.Capability) bool { return c.Name == "calendar.availability" })
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "weather.forecast", Description: "Forecast the weather"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	res, err = bob.Discovery().Find(ctx, "calendar.availability", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a := nodetest.FindResultOf(t, res, alice.id.PeerID()); a.Status != discovery.FindNotOffered || a.Capability != nil || a.Why != nil {
		t.Errorf("alice after removing it: %+v", a)
	}
	// A capability added is provided without waiting for the next period.
	nodetest.WaitProvided(t, alice.Node, "weather.forecast")
	res, err = bob.Discovery().Find(ctx, "weather.forecast", "", 0)
	if err != nil || len(res) != 1 || res[0].Status != discovery.FindEligible {
		t.Errorf("find weather.forecast after alice added it: %+v %v", res, err)
	}

	for _, tc := range []struct {
		name, version string
		limit         int
		want          error
	}{
		{"", "", 0, negotiate.ErrInvalidName},
		{"Bad Name", "", 0, negotiate.ErrInvalidName},
		{strings.Repeat("a", negotiate.MaxNameLen+1), "", 0, negotiate.ErrInvalidName},
		{"ping", "v2", 0, negotiate.ErrInvalidVersion},
	} {
		_, err := bob.Discovery().Find(ctx, tc.name, tc.version, tc.limit)
		if !errors.Is(err, tc.want) || !strings.HasPrefix(err.Error(), fmt.Sprintf("finding providers of %q: ", tc.name)) {
			t.Errorf("Find(%q, %q): %v, want %v", tc.name, tc.version, err, tc.want)
		}
	}
	if _, err := bob.Discovery().Find(ctx, "ping", "", discovery.MaxFindLimit+1); err == nil {
		t.Error("Find with a limit over discovery.MaxFindLimit succeeded")
	}
	off := startDaemon(t, nil)
	if _, err := off.Discovery().Find(ctx, "ping", "", 0); !errors.Is(err, discovery.ErrDHTOff) {
		t.Errorf("Find with the DHT off: %v", err)
	}
	lonely := startDaemon(t, nodetest.DHTConfig(nil))
	if _, err := lonely.Discovery().Find(ctx, "ping", "", 0); !errors.Is(err, discovery.ErrNoDHTPeers) {
		t.Errorf("Find without DHT peers: %v", err)
	}
}

// TestDHTLeavesNoGoroutine closes two daemons in the DHT and checks that
// nothing they started still runs.
func TestDHTLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	alice := startDaemon(t, nodetest.DHTConfig(nil))
	bob := startDaemon(t, nodetest.DHTConfig(nil, alice.Addrs()[0].String()))
	nodetest.WaitProvided(t, alice.Node, "ping")
	nodetest.WaitDHTPeers(t, bob.Node)
	if res, err := bob.Discovery().Find(context.Background(), "ping", "", 0); err != nil || len(res) != 1 {
		t.Fatalf("find ping: %+v %v", res, err)
	}
	bob.Discovery().DHT().Changed()
	bob.Close()
	alice.Close()
}

// TestHiddenChangeSendsNoProviderRecords: after a change only close
// friends can see, the names a stranger's view advertises (those the
// DHT's provide rounds send) are the ones already sent, and the records
// sent stay as they were. That a round with the names unchanged sends
// nothing is the DHT's own test (node/capdht,
// TestRoundWithSentNamesSendsNothing).
func TestHiddenChangeSendsNoProviderRecords(t *testing.T) {
	alice := startDaemon(t, nodetest.InDHT(aliceConfig("")))
	bob := startDaemon(t, nodetest.DHTConfig(nil, alice.Addrs()[0].String()))
	nodetest.WaitDHTPeers(t, bob.Node)
	nodetest.WaitProvided(t, alice.Node, "calendar.availability", "ping")
	before := alice.Discovery().DHT().Provided()
	names := func() []string {
		v, err := alice.Discovery().PublicView()
		if err != nil {
			t.Fatal(err)
		}
		return discovery.AdvertisedNames(v.Doc)
	}
	sent := names()
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "vault.open", Description: "Only for close",
			Advertise: negotiate.AdvertiseWhenEligible, Conditions: &conditions.Conditions{MinDisclosure: "close"}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if now := names(); !slices.Equal(now, sent) {
		t.Fatalf("a hidden change moved the advertised names: %v → %v", sent, now)
	}
	for name := range before {
		if !slices.Contains(sent, name) {
			t.Errorf("a record of %s went out, which the public view does not advertise", name)
		}
	}
}
