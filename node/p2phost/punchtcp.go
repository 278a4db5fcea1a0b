package p2phost

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	"github.com/libp2p/go-reuseport"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/transport"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/libp2p/go-libp2p/p2p/transport/tcpreuse"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
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
// listen port when the connect is refused: soon after each refusal (a
// random wait below refusedRetryJitter, so about one SYN per round trip
// to the far router where that is longer), at most refusedRetryFast
// times, then refusedRetrySlow more from 1 ms apart doubling (a peer that
// comes late), never past refusedRetryFor or the dial's deadline. Each
// SYN reopens this side's mapping, and the first one whose moment
// overlaps the peer's (which retries the same way) makes the connection.
// On a real path retries a round trip apart leave the peer's SYN no gap
// to pass through unseen, so a few cover a timing error of as many round
// trips, and 3 s allows at most 3 s / RTT of them. In the lab (routers on
// one bridge, no added delay) two SYNs meet only within a microsecond or
// so of each other, so it takes many, and the random wait matters: two
// loops of the same pace keep their phase, and retried back to back the
// two sides of 10 attempts met after up to 780 retries in one trial and
// did not meet within 1,035 in 5 of 16 rounds in another; with the
// random wait they met in the first round of all 10, after 30 to 862.
// Connects paced 1 ms apart had needed 100 to 1,600 each, and 32 a dial
// connected 0 of 2 attempts in their first try. refusedRetryFast is what
// the lab needs; the wait costs at most 1,024 × 200 µs of CPU a dial.
// Dials that are not hole punches are never retried.
//
// The address retried is the one go-libp2p's dial was given (one the
// peer named in its DCUtR message), never another; but the peer chose
// it, so the retries are bounded three ways against a peer aiming them
// elsewhere: per dial (refusedRetryMax), per peer (refusedRetryPeerBudget
// retried connects per refusedRetryWindow, counted in a table of at most
// refusedRetryPeers peers, peerBudget), and across all peers, a token
// bucket of refusedRetryRate a second with a burst of refusedRetryBurst
// (a stranger can make as many peer identities as it likes). A retry the
// budget or the bucket refuses ends the dial with the refusal.
//
// The retries are plain connects from the listen port (SO_REUSEPORT, as
// go-libp2p's own dial): go-libp2p's dial asks the resource manager for a
// connection each time, and its rate limit (a burst of 16, then one in 5
// s per IPv4 address) would end the retries after 16 with "rate limit
// exceeded". Only the connect that succeeds is handed to the resource
// manager and upgraded (security, muxer), as go-libp2p's dial does.
//
// Any other error, and a refusal after the bounds, ends the dial as
// before. QUIC needs none of this: an ICMP port unreachable does not end
// a QUIC dial (the socket is not connected, so the error is not reported
// to it) and go-libp2p's QUIC hole punch keeps sending.
type punchTCP struct {
	*tcp.TcpTransport
	upgrader transport.Upgrader
	rcmgr    network.ResourceManager

	mu     sync.Mutex
	listen []*net.TCPAddr // the addresses listened on, whose port the retries dial from

	perPeer *peerBudget   // retried connects per peer and window
	global  *rate.Limiter // retried connects across all peers
	retried atomic.Int64  // retried connects made (tests count them)
}

const (
	// Per dial: refusedRetryFast connects at once after each refusal,
	// then refusedRetrySlow more, 1 ms after the last and doubling (for
	// a peer that comes late), never past refusedRetryFor.
	refusedRetryFast = 1024
	refusedRetrySlow = 12
	refusedRetryMax  = refusedRetryFast + refusedRetrySlow
	refusedRetryFor  = 3 * time.Second
	// Before each fast retry, a random wait below this (see punchTCP).
	refusedRetryJitter = 200 * time.Microsecond
	// Per peer: three dials' worth (the three rounds of a try) in a
	// window, in a table of at most refusedRetryPeers peers.
	refusedRetryPeerBudget = 3 * refusedRetryMax
	refusedRetryWindow     = 10 * time.Minute
	refusedRetryPeers      = 1024
	// Across all peers: two peers' worth at once, then 16 a second.
	refusedRetryRate  = 16
	refusedRetryBurst = 2 * refusedRetryPeerBudget
)

// newPunchTCP builds go-libp2p's TCP transport, with the same parameters
// its constructor takes from the host's builder, and wraps it.
func newPunchTCP(u transport.Upgrader, rcmgr network.ResourceManager, shared *tcpreuse.ConnMgr) (*punchTCP, error) {
	t, err := tcp.NewTCPTransport(u, rcmgr, shared)
	if err != nil {
		return nil, err
	}
	return &punchTCP{TcpTransport: t, upgrader: u, rcmgr: rcmgr,
		perPeer: newPeerBudget(refusedRetryPeerBudget, refusedRetryWindow, refusedRetryPeers),
		global:  rate.NewLimiter(refusedRetryRate, refusedRetryBurst),
	}, nil
}

var _ transport.Transport = (*punchTCP)(nil)
var _ transport.DialUpdater = (*punchTCP)(nil)

// Listen listens as go-libp2p's transport does, and notes the address.
func (t *punchTCP) Listen(laddr ma.Multiaddr) (transport.Listener, error) {
	l, err := t.TcpTransport.Listen(laddr)
	if err != nil {
		return nil, err
	}
	if na, err := manet.ToNetAddr(l.Multiaddr()); err == nil {
		if ta, ok := na.(*net.TCPAddr); ok {
			t.mu.Lock()
			t.listen = append(t.listen, ta)
			t.mu.Unlock()
		}
	}
	return l, nil
}

// Dial dials raddr, retrying a refused hole punch (see punchTCP).
func (t *punchTCP) Dial(ctx context.Context, raddr ma.Multiaddr, p peer.ID) (transport.CapableConn, error) {
	return t.DialWithUpdates(ctx, raddr, p, nil)
}

// DialWithUpdates is Dial with the swarm's progress updates.
func (t *punchTCP) DialWithUpdates(ctx context.Context, raddr ma.Multiaddr, p peer.ID, updates chan<- transport.DialUpdate) (transport.CapableConn, error) {
	punch, isClient, _ := network.GetSimultaneousConnect(ctx)
	remote, rerr := manet.ToNetAddr(raddr)
	ra, isTCP := remote.(*net.TCPAddr)
	if !punch || rerr != nil || !isTCP {
		return t.TcpTransport.DialWithUpdates(ctx, raddr, p, updates)
	}
	var conn net.Conn
	var err error
	if isClient {
		c, derr := t.TcpTransport.DialWithUpdates(ctx, raddr, p, updates)
		if !refused(derr) {
			return c, derr
		}
		err = derr
	} else {
		// The side that answers the hole punch connects itself: which
		// side of the security handshake it takes depends on what its
		// connect reached (serverRole), which go-libp2p's dial cannot
		// tell.
		conn, err = t.connectFromListenPort(ctx, ra)
	}
	if refused(err) {
		conn, err = retryRefused(ctx, time.Now().Add(refusedRetryFor), refusedRetryFast, refusedRetryMax, err, func(ctx context.Context) (net.Conn, error) {
			now := time.Now()
			if !t.perPeer.take(p, now) || !t.global.AllowN(now, 1) {
				return nil, errRetryBudget
			}
			t.retried.Add(1)
			return t.connectFromListenPort(ctx, ra)
		})
	}
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // reset, not FIN: the 4-tuple is reusable at once (go-libp2p's choice)
		_ = tc.SetKeepAlive(true)
	}
	dir := network.DirOutbound
	if !isClient {
		conn, dir = serverRole(conn, punchRoleWait)
	}
	return t.upgrade(ctx, conn, raddr, p, dir)
}

// connectFromListenPort connects to ra from the port this transport
// listens on (for ra's address family), sharing it with the listener.
func (t *punchTCP) connectFromListenPort(ctx context.Context, ra *net.TCPAddr) (net.Conn, error) {
	d := net.Dialer{Control: reuseport.Control}
	t.mu.Lock()
	for _, l := range t.listen {
		if (l.IP.To4() != nil) == (ra.IP.To4() != nil) {
			d.LocalAddr = l
			break
		}
	}
	t.mu.Unlock()
	return d.DialContext(ctx, "tcp", ra.String())
}

// upgrade hands a connection the retries made to the resource manager and
// upgrades it, as go-libp2p's TCP dial does with its own, taking the side
// dir of the security handshake (DirInbound: the responder's).
func (t *punchTCP) upgrade(ctx context.Context, conn net.Conn, raddr ma.Multiaddr, p peer.ID, dir network.Direction) (transport.CapableConn, error) {
	scope, err := t.rcmgr.OpenConnection(network.DirOutbound, true, raddr)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := scope.SetPeer(p); err != nil {
		conn.Close()
		scope.Done()
		return nil, err
	}
	mc, err := manet.WrapNetConn(conn)
	if err != nil {
		conn.Close()
		scope.Done()
		return nil, err
	}
	c, err := t.upgrader.Upgrade(ctx, t, mc, dir, p, scope)
	if err != nil {
		scope.Done()
		return nil, err
	}
	return c, nil
}

// retryRefused calls dial again while it fails with a refusal: fast
// times at once after each refusal, then after 1 ms, doubling each time,
// at most max times in all, until it succeeds, fails otherwise, ctx ends
// or the deadline passes; it returns the last result (first is the
// refusal that started it). A dial the budget refused (errRetryBudget)
// ends it with the last refusal.
func retryRefused(ctx context.Context, deadline time.Time, fast, max int, first error, dial func(context.Context) (net.Conn, error)) (net.Conn, error) {
	err := first
	for i := 0; i < max && ctx.Err() == nil; i++ {
		if i >= fast {
			gap := time.Millisecond << min(i-fast, 20)
			if time.Now().Add(gap).After(deadline) {
				break
			}
			t := time.NewTimer(gap)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, err
			case <-t.C:
			}
		} else if !time.Now().Before(deadline) {
			break
		} else {
			jitter(refusedRetryJitter)
		}
		c, derr := dial(ctx)
		if errors.Is(derr, errRetryBudget) {
			return nil, err
		}
		if err = derr; err == nil || !refused(err) {
			return c, err
		}
	}
	return nil, err
}

// jitter waits a random time below max, on the CPU: the wait is shorter
// than a timer's granularity (and a refusal's round trip in the lab), and
// at most refusedRetryFast of them are made a dial, under the budgets.
func jitter(max time.Duration) {
	until := time.Now().Add(time.Duration(mrand.Int64N(int64(max))))
	for time.Now().Before(until) {
		// spin: a timer would wait far longer than asked
	}
}

// errRetryBudget: the per-peer budget or the daemon-wide rate of retried
// connects is spent.
var errRetryBudget = errors.New("hole punching: retried connects over budget")

// refused reports whether a dial failed because the far end (here: the
// peer's router) answered the SYN with a reset.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
