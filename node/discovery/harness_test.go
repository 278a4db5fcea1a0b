package discovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The tests of this file's package run whole daemons (node/nodetest) and
// read discovery's state through export_test.go.

// testDaemon is a running daemon with its home, config and key, so that
// a test can restart it.
type testDaemon struct {
	*node.Node
	home config.Home
	cfg  *config.Config
	id   *identity.Identity
}

// startDaemon starts a daemon in a fresh home with cfg (loopback defaults
// when nil) and options.
func startDaemon(t testing.TB, cfg *config.Config, opts ...node.Option) *testDaemon {
	t.Helper()
	h, id := nodetest.Home(t)
	return restartDaemon(t, &testDaemon{home: h, cfg: cfg, id: id}, opts...)
}

// restartDaemon starts (again) a daemon in d's home.
func restartDaemon(t testing.TB, d *testDaemon, opts ...node.Option) *testDaemon {
	t.Helper()
	if d.cfg == nil {
		d.cfg = nodetest.LoopbackConfig()
	}
	n := nodetest.StartIn(t, d.cfg, d.home, d.id, opts...)
	return &testDaemon{Node: n, home: d.home, cfg: d.cfg, id: d.id}
}

// connect dials b from a.
func connect(t testing.TB, a, b *testDaemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.Connect(ctx, b.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
}

// aliceConfig is nodetest.AliceConfig granting bob (once known)
// professional.
func aliceConfig(bob peer.ID) *config.Config {
	c := nodetest.AliceConfig()
	if bob != "" {
		c.Disclosure.Personas = map[string]map[string]string{"default": {bob.String(): "professional"}}
	}
	return c
}

func (d *testDaemon) pid() peer.ID { return d.id.PeerID() }
