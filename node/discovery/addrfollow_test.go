package discovery_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
)

// A peer whose view was cached before the daemon knew where it listens
// (as the side that answers a greeting can, when identify is not done
// yet) gets its listen addresses in the cache once it connects and
// identify completes; the cached view itself is left as it was.
func TestCachedPeerGetsItsAddressesFromIdentify(t *testing.T) {
	d := startDaemon(t, nodetest.LoopbackConfig())
	defer d.Close()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	now := time.Now()
	view := []byte(`{"seq":3}`)
	if _, err := d.Store().PutPeer(store.PeerRecord{PeerID: h.ID().String(), Seq: 3, DocHash: "ab", View: view, FetchedAt: now}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: d.pid(), Addrs: d.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	want := h.Addrs()[0].String()
	testkit.WaitFor(t, "the peer's listen address in the cache", func() bool {
		rec, err := d.Store().Peer(h.ID().String())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range rec.Addrs {
			if a == want {
				return true
			}
		}
		return false
	})

	rec, err := d.Store().Peer(h.ID().String())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Seq != 3 || string(rec.View) != string(view) {
		t.Fatalf("the cached view changed with its addresses: seq %d view %s", rec.Seq, rec.View)
	}
}

// The address handed to Connect outlives identify's clean-up when the
// last connection to a peer closes, which drops that peer's addresses of
// TempAddrTTL (the TTL the host's Connect gives the address it is handed):
// that clean-up runs asynchronously, and when it ran between a reconnect's
// adding its address and its dial, the dial found none ("no addresses"),
// as the bench's reconnecting peer once did. Here the clean-up is made to
// run right after Connect added the address (a dial that fails leaves it).
func TestConnectAddressOutlivesIdentifysCleanup(t *testing.T) {
	bob := startDaemon(t, nodetest.LoopbackConfig())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now: the dial is refused
	pid := testkit.NewPeerID(t)
	addr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", port, pid)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bob.Connect(ctx, addr); err == nil {
		t.Fatal("connecting to a closed port succeeded")
	}
	bob.Host().Peerstore().UpdateAddrs(pid, peerstore.TempAddrTTL, 0) // identify's clean-up
	if got := bob.Host().Peerstore().Addrs(pid); len(got) != 1 {
		t.Fatalf("after identify's clean-up the peerstore holds %v for the peer, want the address given to Connect", got)
	}
}
