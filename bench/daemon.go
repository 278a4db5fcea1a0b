package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// twentyCapabilities is the 20-capability document of DESIGN.md §8, as
// node/bench_test.go builds it.
func twentyCapabilities() []map[string]any {
	var caps []map[string]any
	for i := 0; i < 20; i++ {
		caps = append(caps, map[string]any{
			"name":        fmt.Sprintf("tool%02d.run", i),
			"description": strings.Repeat("Does something useful with the input and explains the result. ", 4),
			"parameters": map[string]any{"type": "object", "required": []any{"text"}, "properties": map[string]any{
				"text":      map[string]any{"type": "string", "description": "The text to work on"},
				"max_words": map[string]any{"type": "integer", "minimum": 1, "default": 200},
				"language":  map[string]any{"type": "string", "enum": []any{"en", "es", "de", "fr"}},
			}},
			"output_schema": map[string]any{"type": "object", "properties": map[string]any{"result": map[string]any{"type": "string"}}},
			"conditions":    map[string]any{"min_auth_level": 1},
			"price":         map[string]any{"amount": "0.05", "currency": "USDC"},
			"categories":    []any{"web"},
		})
	}
	return caps
}

// benchConfig is a daemon on loopback (TCP and QUIC, ports the system
// picks) offering the 20 capabilities, with nothing running that the
// bench does not measure (mDNS, DHT, GossipSub) and rate limits out of
// the way (the bench greets as fast as it can).
func benchConfig() *node.Config {
	c := node.DefaultConfig()
	c.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	c.API.Listen = "127.0.0.1:0"
	c.Discovery.MDNS = false
	c.Discovery.DHT = node.DHTOff
	c.Discovery.Gossip = false
	c.Rates = node.RatesConfig{Cool: 1 << 30, Warm: 1 << 30, Hot: 1 << 30}
	c.Capabilities = twentyCapabilities()
	return c
}

// daemon is a running Node in a home of its own under the bench directory.
type daemon struct {
	*node.Node
	id   *identity.Identity
	home string
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// startDaemon starts a Node with cfg (and opts) in a new home under root.
func startDaemon(root string, cfg *node.Config, opts ...node.Option) (*daemon, error) {
	dir, err := os.MkdirTemp(root, "home-")
	if err != nil {
		return nil, fmt.Errorf("creating a daemon home: %w", err)
	}
	h := node.Home{Dir: dir}
	id, err := h.Init(time.Now())
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initializing a daemon home: %w", err)
	}
	n, err := node.New(cfg, id, h, quietLog, opts...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting a daemon: %w", err)
	}
	return &daemon{Node: n, id: id, home: dir}, nil
}

// close stops the daemon and removes its home.
func (d *daemon) close() {
	d.Node.Close()
	os.RemoveAll(d.home)
}

// Transports, as they appear in a multiaddr.
const (
	tcpTransport  = "/tcp/"
	quicTransport = "/quic-v1"
)

// addrFor is n's listen address for transport, ending in /p2p/<peer ID>.
func addrFor(n *node.Node, transport string) (string, error) {
	for _, a := range n.Addrs() {
		if strings.Contains(a.String(), transport) {
			return a.String(), nil
		}
	}
	return "", fmt.Errorf("the daemon has no %s address (it has %v)", strings.Trim(transport, "/"), n.Addrs())
}

// connectOver connects d to addr and checks that the connection uses the
// transport asked for: a known peer may otherwise be reached over
// whichever transport libp2p ranks first.
func connectOver(ctx context.Context, d *node.Node, addr, transport string) (peer.ID, error) {
	pid, err := d.Connect(ctx, addr)
	if err != nil {
		return "", err
	}
	if err := checkTransport(d, pid, transport); err != nil {
		return "", err
	}
	return pid, nil
}

// checkTransport reports an error unless every connection of d to pid
// runs over transport.
func checkTransport(d *node.Node, pid peer.ID, transport string) error {
	conns := d.Host().Network().ConnsToPeer(pid)
	if len(conns) == 0 {
		return fmt.Errorf("no connection to %s", pid)
	}
	for _, c := range conns {
		if !strings.Contains(c.RemoteMultiaddr().String(), transport) {
			return fmt.Errorf("connected over %s, not %s", c.RemoteMultiaddr(), strings.Trim(transport, "/"))
		}
	}
	return nil
}

// p2pInfo splits a multiaddr ending in /p2p/<peer ID>.
func p2pInfo(addr string) (peer.AddrInfo, error) {
	ma, err := multiaddr.NewMultiaddr(addr)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("%q is not a multiaddr: %w", addr, err)
	}
	info, err := peer.AddrInfoFromP2pAddr(ma)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("%q does not end in /p2p/<peer ID>: %w", addr, err)
	}
	return *info, nil
}
