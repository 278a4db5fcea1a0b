package p2phost

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// A TCP dial of a hole punch that is refused (the peer's router answered
// the SYN before the peer's own SYN opened its mapping) is made again
// from the same port until the other side listens; any other dial fails
// at the first refusal, as before.
func TestPunchTCPRetriesRefusedPunch(t *testing.T) {
	newHost := func(key crypto.PrivKey, listen ...string) interface {
		Connect(context.Context, peer.AddrInfo) error
		Close() error
		Network() network.Network
	} {
		t.Helper()
		h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings(listen...),
			libp2p.Transport(newPunchTCP), libp2p.DisableRelay(), libp2p.DisableMetrics())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	freePort := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	bKey, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	bID, _ := peer.IDFromPrivateKey(bKey)
	aKey, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	a := newHost(aKey, "/ip4/127.0.0.1/tcp/0")

	dial := func(ctx context.Context, addr string) error {
		m, err := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/" + addr[len("127.0.0.1:"):])
		if err != nil {
			t.Fatal(err)
		}
		return a.Connect(network.WithForceDirectDial(ctx, "test"), peer.AddrInfo{ID: bID, Addrs: []ma.Multiaddr{m}})
	}

	// Not a hole punch: refused, and not tried again.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := dial(ctx, freePort()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("plain dial of a closed port: %v, want connection refused", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a plain dial that was refused took %v: it was retried", took)
	}

	// A hole punch: b starts listening after the first refusals.
	addr := freePort()
	listening := make(chan error, 1)
	go func() {
		// The peer comes up 200 ms into the dial, so the dial meets
		// refusals first (the scenario, not a wait for anything).
		time.Sleep(200 * time.Millisecond)
		h, err := libp2p.New(libp2p.Identity(bKey), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/"+addr[len("127.0.0.1:"):]),
			libp2p.Transport(newPunchTCP), libp2p.DisableRelay(), libp2p.DisableMetrics())
		if err == nil {
			t.Cleanup(func() { h.Close() })
		}
		listening <- err
	}()
	pctx := network.WithSimultaneousConnect(ctx, true, "hole-punching")
	if err := dial(pctx, addr); err != nil {
		t.Fatalf("hole-punch dial refused before the peer listened: %v, want it retried until the peer listens", err)
	}
	if err := <-listening; err != nil {
		t.Fatal(err)
	}
	if a.Network().Connectedness(bID) != network.Connected {
		t.Errorf("not connected to b after the punch")
	}
}
