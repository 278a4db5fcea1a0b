package node

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/identity"
)

// loopbackConfig is the default config listening on loopback, on ports the
// system picks.
func loopbackConfig() *Config {
	c := DefaultConfig()
	c.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	c.API.Listen = "127.0.0.1:0"
	return c
}

func TestNodeStartsOnLoopback(t *testing.T) {
	id, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(loopbackConfig(), id, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addrs := n.Addrs()
	var tcp, quic bool
	for _, a := range addrs {
		s := a.String()
		tcp = tcp || strings.Contains(s, "/tcp/")
		quic = quic || strings.Contains(s, "/quic-v1/")
		if !strings.HasSuffix(s, "/p2p/"+id.PeerID().String()) {
			t.Errorf("address %s does not end in the peer ID", s)
		}
	}
	if !tcp || !quic {
		t.Errorf("listening on %v, want TCP and QUIC", addrs)
	}
	if n.Host().ID() != id.PeerID() {
		t.Errorf("host peer ID %s, key's %s", n.Host().ID(), id.PeerID())
	}
	if err := n.Document().Verify(id.PublicKey()); err != nil {
		t.Errorf("the node's own document: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
