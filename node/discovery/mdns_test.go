package discovery_test

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/nodetest"
	"go.uber.org/goleak"
)

// mdnsNamespaceEnv marks the test binary re-executed inside a network
// namespace of its own, where multicast reaches nothing but the test.
const mdnsNamespaceEnv = "IFACED_TEST_MDNS_NAMESPACE"

// TestMDNSFindsPeersOnTheLAN: two daemons with nothing configured but
// mDNS find each other and each caches the other's view. mDNS multicasts
// on every interface, so the test re-runs itself in a new user and
// network namespace (unshare -rn) whose only interface is its own
// loopback, with multicast switched on.
func TestMDNSFindsPeersOnTheLAN(t *testing.T) {
	if os.Getenv(mdnsNamespaceEnv) == "" {
		runInNetworkNamespace(t)
		return
	}
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"link", "set", "lo", "multicast", "on"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if lo.Flags&net.FlagMulticast == 0 || lo.Flags&net.FlagUp == 0 {
		t.Fatalf("lo is %v; mDNS needs it up with multicast", lo.Flags)
	}
	if ifs, _ := net.Interfaces(); len(ifs) != 1 {
		t.Fatalf("the namespace has %d interfaces; it must have only lo, so nothing leaves it", len(ifs))
	}

	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	lan := func() *config.Config {
		c := nodetest.LoopbackConfig()
		c.Discovery.MDNS = true
		return c
	}
	// a subscribes before b exists, so a's lan_peer event for b cannot
	// come before the subscription; b may find a while it is starting.
	a := startDaemon(t, lan())
	aEvents, stopA := a.Subscribe()
	defer stopA()
	start := time.Now()
	b := startDaemon(t, lan())
	nodetest.WaitEventFor(t, 45*time.Second, aEvents, func(e events.Event) bool { return e.Type == discovery.EventLANPeer && e.Peer == b.pid().String() })
	for _, tc := range []struct{ who, peer *testDaemon }{{a, b}, {b, a}} {
		testkit.WaitFor(t, "the LAN peer's view in the cache", func() bool { return cachedSeq(tc.who, tc.peer.pid()) == tc.peer.Document().Seq })
		// The side that answered may have kept the view before identify
		// said where the asker listens; the addresses follow it.
		testkit.WaitFor(t, "the LAN peer's addresses in the cache", func() bool {
			rec, err := tc.who.Store().Peer(tc.peer.pid().String())
			if err != nil {
				t.Fatal(err)
			}
			return len(rec.Addrs) > 0
		})

	}
	t.Logf("mDNS: both daemons hold each other's view after %d ms", time.Since(start).Milliseconds())
	// One query made both exchanges: only the lower peer ID asks.
	for _, d := range []*testDaemon{a, b} {
		convs, err := d.Audit().Conversations()
		if err != nil {
			t.Fatal(err)
		}
		if len(convs) != 1 {
			t.Errorf("%s audited %d exchanges, want the one query", d.pid(), len(convs))
		}
	}
	stopA()
	a.Close()
	b.Close()
}

// runInNetworkNamespace re-runs the calling test in a new user and network
// namespace, or skips it when this machine cannot make one.
func runInNetworkNamespace(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("mDNS must be tested in a network namespace of its own, and %s is not installed: %v", tool, err)
		}
	}
	if out, err := exec.Command("unshare", "-rn", "true").CombinedOutput(); err != nil {
		t.Skipf("mDNS must be tested in a network namespace of its own, and unshare -rn fails here: %v: %s", err, out)
	}
	cmd := exec.Command("unshare", "-rn", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), mdnsNamespaceEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace of its own:\n%s", out)
	switch {
	case err != nil:
		t.Fatalf("the test failed in its network namespace: %v", err)
	case strings.Contains(string(out), "--- SKIP: "+t.Name()):
		t.Skip("skipped in its network namespace")
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Fatal("the test did not run in its network namespace")
	}
}
