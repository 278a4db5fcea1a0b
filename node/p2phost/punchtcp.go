package p2phost

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/libp2p/go-libp2p/p2p/transport/tcpreuse"
	ma "github.com/multiformats/go-multiaddr"
)

// TCP hole punching through routers that answer. DCUtR punches TCP by a
// simultaneous open: both peers connect to each other's public address
// from their listen port at the moment the relay exchange agreed on, so
// each one's SYN opens its own router's mapping for the other's. A router
// that answers an unsolicited packet (OpenWrt's `reject` on the wan zone,
// the kernel's own reset) answers the first SYN to arrive before the
// peer's own SYN left the peer's router with a reset: that connect fails
// at once with "connection refused", and go-libp2p's dial of that address
// is over. Where the two SYNs cross on the way (the one-way delay between
// the routers is longer than the error of the timing), the punch
// succeeds; where they do not (routers close together, or the timing off
// by more than the delay), every round fails the same way.
//
// punchTCP wraps go-libp2p's TCP transport and, for the dials of a hole
// punch only (network.GetSimultaneousConnect), connects again from the
// same port when the connect is refused, every refusedRetryPace, for at
// most refusedRetryFor (and never past the dial's deadline). Each refused
// connect costs one round trip to the far router, so the retries come at
// most once per round trip on a real path; each SYN reopens this side's
// mapping, and the first one whose moment overlaps the peer's (which
// retries the same way) makes the connection. In the lab (routers on one
// bridge, no added delay) a single connect is always refused and a retry
// every 250 µs connects within a second; a retry every 10 ms rarely did
// within 5 s. Dials that are not hole punches are never retried.
//
// Any other error, and a refusal after refusedRetryFor, ends the dial as
// before. QUIC needs none of this: an ICMP port unreachable does not end
// a QUIC dial (the socket is not connected, so the error is not reported
// to it) and go-libp2p's QUIC hole punch keeps sending.
type punchTCP struct {
	*tcp.TcpTransport
}

const (
	refusedRetryPace = 250 * time.Microsecond
	refusedRetryFor  = 3 * time.Second
)

// newPunchTCP builds go-libp2p's TCP transport, with the same parameters
// its constructor takes from the host's builder, and wraps it.
func newPunchTCP(u transport.Upgrader, rcmgr network.ResourceManager, shared *tcpreuse.ConnMgr) (*punchTCP, error) {
	t, err := tcp.NewTCPTransport(u, rcmgr, shared)
	if err != nil {
		return nil, err
	}
	return &punchTCP{t}, nil
}

var _ transport.Transport = (*punchTCP)(nil)
var _ transport.DialUpdater = (*punchTCP)(nil)

// Dial dials raddr, retrying a refused hole punch (see punchTCP).
func (t *punchTCP) Dial(ctx context.Context, raddr ma.Multiaddr, p peer.ID) (transport.CapableConn, error) {
	return t.DialWithUpdates(ctx, raddr, p, nil)
}

// DialWithUpdates is Dial with the swarm's progress updates.
func (t *punchTCP) DialWithUpdates(ctx context.Context, raddr ma.Multiaddr, p peer.ID, updates chan<- transport.DialUpdate) (transport.CapableConn, error) {
	c, err := t.TcpTransport.DialWithUpdates(ctx, raddr, p, updates)
	if err == nil || !refused(err) {
		return c, err
	}
	if punch, _, _ := network.GetSimultaneousConnect(ctx); !punch {
		return c, err
	}
	return retryRefused(ctx, time.Now().Add(refusedRetryFor), refusedRetryPace, err, func() (transport.CapableConn, error) {
		return t.TcpTransport.DialWithUpdates(ctx, raddr, p, updates)
	})
}

// retryRefused calls dial again every pace while it fails with a refusal,
// until it succeeds, fails otherwise, ctx ends or the deadline passes; it
// returns the last result (first is the refusal that started it).
func retryRefused(ctx context.Context, deadline time.Time, pace time.Duration, first error, dial func() (transport.CapableConn, error)) (transport.CapableConn, error) {
	err := first
	t := time.NewTimer(pace)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, err
		case <-t.C:
		}
		var c transport.CapableConn
		if c, err = dial(); err == nil || !refused(err) {
			return c, err
		}
		t.Reset(pace)
	}
	return nil, err
}

// refused reports whether a dial failed because the far end (here: the
// peer's router) answered the SYN with a reset.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
