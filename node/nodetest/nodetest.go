// Package nodetest starts real daemons for the tests of the packages
// built on node (the control API, the HTTP binding, the console, the
// MCP server, the command line, the example agents): a fresh home with a
// new key, a configuration on loopback with the discovery mechanisms a
// test has not asked for switched off, and a logger that is quiet unless
// IFACED_TEST_LOG is set. Each daemon is closed when its test ends;
// Scrape reads a daemon's metrics as a scraper would. It is
// a test helper, like net/http/httptest; package node's own tests, which
// read the components' state, have theirs beside them.
package nodetest

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/testkit"
)

// EnvLog set to anything makes Logger write debug lines to stderr.
const EnvLog = "IFACED_TEST_LOG"

// Logger discards what it is given, unless EnvLog is set.
func Logger() *slog.Logger {
	if os.Getenv(EnvLog) != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// LoopbackConfig is the default configuration on loopback: libp2p on TCP
// and the control API on ports the system picks, and no mDNS (it would
// multicast on every interface), DHT or GossipSub (goroutines most tests
// do not need; tests of them switch them on again).
func LoopbackConfig() *config.Config {
	c := config.DefaultConfig()
	c.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"}
	c.API.Listen = "127.0.0.1:0"
	c.Discovery.MDNS, c.Discovery.DHT, c.Discovery.Gossip = false, config.DHTOff, false
	return c
}

// AliceConfig is LoopbackConfig for a daemon named "Alice's agent" that
// offers ping (answered by the daemon itself), a calendar for
// professionals whose keys are pinned (min_auth_level 1), and a diary
// hidden from anyone below close.
func AliceConfig() *config.Config {
	c := LoopbackConfig()
	c.Identity.Display = "Alice's agent"
	c.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "calendar.availability", "description": "Share calendar availability windows",
			"conditions": map[string]any{"min_disclosure": "professional", "min_auth_level": 1}},
		{"name": "diary.read", "description": "Read the diary", "advertise": "when-eligible",
			"conditions": map[string]any{"min_disclosure": "close"}},
	}
	return c
}

// Home makes a fresh data directory with a new key.
func Home(t testing.TB) (config.Home, *identity.Identity) {
	t.Helper()
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return h, id
}

// Start runs a daemon with cfg (LoopbackConfig when nil) in a fresh home
// until the test ends.
func Start(t testing.TB, cfg *config.Config, opts ...node.Option) (*node.Node, config.Home) {
	t.Helper()
	h, id := Home(t)
	return StartIn(t, cfg, h, id, opts...), h
}

// StartIn runs a daemon with cfg (LoopbackConfig when nil) in home h, as
// id, until the test ends.
func StartIn(t testing.TB, cfg *config.Config, h config.Home, id *identity.Identity, opts ...node.Option) *node.Node {
	t.Helper()
	if cfg == nil {
		cfg = LoopbackConfig()
	}
	n, err := node.New(cfg, id, h, Logger(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// WaitEvent reads ch until an event matches, for at most 10 s.
func WaitEvent(t testing.TB, ch <-chan events.Event, match func(events.Event) bool) events.Event {
	t.Helper()
	return WaitEventFor(t, 10*time.Second, ch, match)
}

// WaitEventFor reads ch until an event matches, for at most d.
func WaitEventFor(t testing.TB, d time.Duration, ch <-chan events.Event, match func(events.Event) bool) events.Event {
	t.Helper()
	return testkit.WaitFirst(t, d, ch, match)
}
