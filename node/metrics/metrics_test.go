package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/nodetest"
)

// TestScraperListener: the scraper's listener is off by default; with
// metrics.listen on loopback it serves GET /metrics without the token,
// and nothing else; an address beyond loopback is refused without
// metrics.allow_remote, with an error naming the keys.
func TestScraperListener(t *testing.T) {
	if l := config.DefaultConfig().Metrics.Listen; l != "" {
		t.Fatalf("metrics.listen defaults to %q, want off", l)
	}
	off, _ := nodetest.Start(t, nil)
	if addr := off.Metrics().Addr(); addr != "" {
		t.Errorf("a daemon with the default config serves metrics on %s", addr)
	}

	cfg := nodetest.LoopbackConfig()
	cfg.Metrics.Listen = "127.0.0.1:0"
	var logs syncBuffer
	h, id := nodetest.Home(t)
	n, err := node.New(cfg, id, h, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	addr := n.Metrics().Addr()
	if addr == "" || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("metrics.listen 127.0.0.1:0 bound %q", addr)
	}
	status, fams, body := nodetest.Scrape(t, "http://"+addr+"/metrics", "")
	if status != http.StatusOK || fams["ifaced_peers_connected"] == nil || fams["go_goroutines"] == nil || fams["process_open_fds"] == nil {
		t.Fatalf("GET /metrics on the scraper's listener, without the token: %d\n%.500s", status, body)
	}
	// The metrics logger says where, and carries its component.
	if line := lineWith(logs.String(), "serving metrics without the token"); !strings.Contains(line, "component=metrics") || !strings.Contains(line, addr) {
		t.Errorf("the listener's log line: %q", line)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{{http.MethodGet, "/", http.StatusNotFound}, {http.MethodGet, "/v1/status", http.StatusNotFound}, {http.MethodPost, "/metrics", http.StatusMethodNotAllowed}} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s on the scraper's listener: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("the scraper's listener still answers after Close")
	}

	// Beyond loopback, without the opt-in: the daemon does not start, and
	// says which keys.
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:9464"} {
		cfg := nodetest.LoopbackConfig()
		cfg.Metrics.Listen = listen
		h, id := nodetest.Home(t)
		n, err := node.New(cfg, id, h, nodetest.Logger())
		if err == nil {
			n.Close()
			t.Errorf("metrics.listen %s without metrics.allow_remote: started", listen)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "metrics.listen") || !strings.Contains(msg, "metrics.allow_remote = true") || !strings.Contains(msg, "not a loopback address") {
			t.Errorf("metrics.listen %s: %v", listen, err)
		}
	}
}

// TestRelayFigures: a relay counts the slot a peer holds on it and the
// circuit open through it; the peer counts its slot.
func TestRelayFigures(t *testing.T) {
	relayCfg := nodetest.LoopbackConfig()
	relayCfg.Relay.Service = true
	relay, _ := nodetest.Start(t, relayCfg)
	bobCfg := nodetest.LoopbackConfig()
	bobCfg.Listen.Addresses = nil // reachable through the relay only
	bobCfg.Relay.Use = []string{relay.Addrs()[0].String()}
	bob, _ := nodetest.Start(t, bobCfg)
	alice, _ := nodetest.Start(t, nil)
	testkit.WaitFor(t, "bob's slot on the relay", func() bool { return len(bob.Mail().RelayReservations()) == 1 })

	figures := func(n *node.Node) nodetest.Families { return gather(t, n) }
	if got := figures(relay).Value("ifaced_relay_service_reservations"); got != 1 {
		t.Errorf("the relay counts %v slots, want 1", got)
	}
	if got := figures(bob).Value("ifaced_relay_reservations_held"); got != 1 {
		t.Errorf("bob holds %v slots, want 1", got)
	}
	if _, ok := figures(alice)["ifaced_relay_service_reservations"]; ok {
		t.Error("a daemon without relay.service reports its relay service's slots")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	circuit := fmt.Sprintf("%s/p2p-circuit/p2p/%s", relay.Addrs()[0], bob.ID().PeerID())
	if _, err := alice.Connect(ctx, circuit); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Greet(ctx, bob.ID().PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	if got := figures(relay).Value("ifaced_relay_service_circuits"); got != 1 {
		t.Errorf("the relay counts %v circuits with alice greeting bob through it, want 1", got)
	}
}

// TestDiscoveryFigures: the DHT's routing table and the peers on the
// announcement topic, present only when the mechanism is on.
func TestDiscoveryFigures(t *testing.T) {
	on := func(c *config.Config) *config.Config { c.Discovery.Gossip = true; return c }
	a, _ := nodetest.Start(t, on(nodetest.DHTConfig(nil)))
	b, _ := nodetest.Start(t, on(nodetest.DHTConfig(nil, a.Addrs()[0].String())))
	off, _ := nodetest.Start(t, nil)
	nodetest.WaitDHTPeers(t, b)
	testkit.WaitFor(t, "a on b's announcement topic", func() bool {
		return gather(t, b).Value("ifaced_gossip_peers", "set", "subscribed") >= 1
	})
	if got := gather(t, b).Value("ifaced_dht_routing_table_peers"); got < 1 {
		t.Errorf("b's routing table: %v peers, want a", got)
	}
	for _, family := range []string{"ifaced_dht_routing_table_peers", "ifaced_gossip_peers"} {
		if _, ok := gather(t, off)[family]; ok {
			t.Errorf("a daemon with discovery.dht and discovery.gossip off reports %s", family)
		}
	}
}

// gather reads n's figures as the exposition would show them.
func gather(t *testing.T, n *node.Node) nodetest.Families {
	t.Helper()
	got, err := n.Metrics().Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := nodetest.Families{}
	for _, f := range got {
		fams[f.GetName()] = f
	}
	return fams
}

func lineWith(logs, s string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// syncBuffer is a log destination several goroutines write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
