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
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/transport/tcpreuse"
	ma "github.com/multiformats/go-multiaddr"
)

// A TCP dial of a hole punch that is refused (the peer's router answered
// the SYN before the peer's own SYN opened its mapping) is made again
// from the same port until the other side listens; any other dial fails
// at the first refusal, as before.
func TestPunchTCPRetriesRefusedPunch(t *testing.T) {
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
	a, err := punchHost(t, aKey, "/ip4/127.0.0.1/tcp/0")
	if err != nil {
		t.Fatal(err)
	}

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
		_, err := punchHost(t, bKey, "/ip4/127.0.0.1/tcp/"+addr[len("127.0.0.1:"):])
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

// punchHost is a libp2p host with key, listening on listen, over the
// daemon's TCP transport (punchTCP) alone, closed when the test ends. It
// returns the error rather than failing t: a test may start it beside.
func punchHost(t *testing.T, key crypto.PrivKey, listen ...string) (host.Host, error) {
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings(listen...),
		libp2p.Transport(newPunchTCP), libp2p.DisableRelay(), libp2p.DisableMetrics())
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { h.Close() })
	return h, nil
}

// punchTransport is a host's punchTCP, listening on loopback.
func punchTransport(t *testing.T) *punchTCP {
	t.Helper()
	var tr *punchTCP
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay(), libp2p.DisableMetrics(),
		libp2p.Transport(func(u transport.Upgrader, rc network.ResourceManager, s *tcpreuse.ConnMgr) (*punchTCP, error) {
			var err error
			tr, err = newPunchTCP(u, rc, s)
			return tr, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return tr
}

func randomPeer(t *testing.T) peer.ID {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// dialRefused makes n hole-punch dials at once, each to a port of its
// own that refuses, by the peers from, and fails the test unless each is
// refused.
func dialRefused(ctx context.Context, t *testing.T, tr *punchTCP, from func(i int) peer.ID, n int) {
	t.Helper()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		target, p := refusingTarget(t), from(i)
		go func() {
			_, err := tr.Dial(ctx, target, p)
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("hole-punch dial of a closed port: %v, want connection refused", err)
		}
	}
}

// A refused hole-punch dial connects again at most refusedRetryMax times,
// and one peer's dials together at most refusedRetryPeerBudget times in
// a window: a peer names the address, so it must not be able to aim a
// burst of SYNs from this daemon at anything. Counted against real ports
// that refuse (the kernel answers each SYN with a reset).
func TestPunchTCPRetriesBounded(t *testing.T) {
	tr := punchTransport(t)
	ctx := network.WithSimultaneousConnect(context.Background(), true, "hole-punching")
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p := randomPeer(t)
	one := func(int) peer.ID { return p }

	dialRefused(ctx, t, tr, one, 1)
	if n := tr.retried.Load(); n == 0 || n > refusedRetryMax {
		t.Errorf("one refused hole-punch dial connected again %d times, want 1 to %d", n, refusedRetryMax)
	}
	t.Logf("one refused dial: %d connects again", tr.retried.Load())
	dials := refusedRetryPeerBudget/refusedRetryMax + 1
	dialRefused(ctx, t, tr, one, dials)
	t.Logf("%d refused dials by one peer: %d connects again", dials+1, tr.retried.Load())
	if n := tr.retried.Load(); n > refusedRetryPeerBudget {
		t.Errorf("%d refused hole-punch dials toward one peer connected again %d times, want at most the peer's budget, %d", dials+1, n, refusedRetryPeerBudget)
	}
	if left := tr.perPeer.left(p, time.Now()); left != 0 {
		t.Errorf("after %d dials the peer has %d retries left, want its budget spent", dials+1, left)
	}
}

// Across peers (a stranger can be as many as it likes), the retried
// connects keep to the daemon-wide rate: at most refusedRetryBurst, and
// refusedRetryRate a second after it.
func TestPunchTCPRetryRateAcrossPeers(t *testing.T) {
	tr := punchTransport(t)
	ctx := network.WithSimultaneousConnect(context.Background(), true, "hole-punching")
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	peers := 2*refusedRetryBurst/refusedRetryMax + 2
	start := time.Now()
	dialRefused(ctx, t, tr, func(int) peer.ID { return randomPeer(t) }, peers)
	took := time.Since(start)
	allowed := refusedRetryBurst + int64(took.Seconds()*refusedRetryRate) + 1
	t.Logf("%d peers' refused dials: %d connects again in %v", peers, tr.retried.Load(), took)
	if n := tr.retried.Load(); n > allowed {
		t.Errorf("%d peers' refused hole-punch dials connected again %d times in %v, want at most %d (burst %d, %d a second)", peers, n, took, allowed, refusedRetryBurst, refusedRetryRate)
	}
}
