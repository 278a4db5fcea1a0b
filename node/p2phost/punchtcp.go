package p2phost

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

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
// listen port when the connect is refused, every refusedRetryPace, for at
// most refusedRetryFor (and never past the dial's deadline). Each refused
// connect costs one round trip to the far router, so the retries come at
// most once per round trip on a real path; each SYN reopens this side's
// mapping, and the first one whose moment overlaps the peer's (which
// retries the same way) makes the connection. In the lab (routers on one
// bridge, no added delay) a single connect is always refused, and
// connects retried every millisecond from both sides met within 0.1 to
// 1.6 s in a trial; retried every 10 ms, they met once in three tries of
// 5 s. Dials that are not hole punches are never retried.
//
// The retries are plain connects from the listen port (SO_REUSEPORT, as
// go-libp2p's own dial): go-libp2p's dial asks the resource manager for a
// connection each time, and its rate limit (a burst of 16, then one in 5
// s per IPv4 address) would end the retries after 16 with "rate limit
// exceeded". Only the connect that succeeds is handed to the resource
// manager and upgraded (security, muxer), as go-libp2p's dial does.
//
// Any other error, and a refusal after refusedRetryFor, ends the dial as
// before. QUIC needs none of this: an ICMP port unreachable does not end
// a QUIC dial (the socket is not connected, so the error is not reported
// to it) and go-libp2p's QUIC hole punch keeps sending.
type punchTCP struct {
	*tcp.TcpTransport
	upgrader transport.Upgrader
	rcmgr    network.ResourceManager

	mu     sync.Mutex
	listen []*net.TCPAddr // the addresses listened on, whose port the retries dial from
}

const (
	refusedRetryPace = time.Millisecond
	refusedRetryFor  = 3 * time.Second
)

// newPunchTCP builds go-libp2p's TCP transport, with the same parameters
// its constructor takes from the host's builder, and wraps it.
func newPunchTCP(u transport.Upgrader, rcmgr network.ResourceManager, shared *tcpreuse.ConnMgr) (*punchTCP, error) {
	t, err := tcp.NewTCPTransport(u, rcmgr, shared)
	if err != nil {
		return nil, err
	}
	return &punchTCP{TcpTransport: t, upgrader: u, rcmgr: rcmgr}, nil
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
	c, err := t.TcpTransport.DialWithUpdates(ctx, raddr, p, updates)
	if err == nil || !refused(err) {
		return c, err
	}
	punch, isClient, _ := network.GetSimultaneousConnect(ctx)
	if !punch {
		return c, err
	}
	remote, rerr := manet.ToNetAddr(raddr)
	ra, ok := remote.(*net.TCPAddr)
	if rerr != nil || !ok {
		return nil, err
	}
	conn, err := retryRefused(ctx, time.Now().Add(refusedRetryFor), refusedRetryPace, err, func(ctx context.Context) (net.Conn, error) {
		return t.connectFromListenPort(ctx, ra)
	})
	if err != nil {
		return nil, err
	}
	return t.upgrade(ctx, conn, raddr, p, isClient)
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
// upgrades it, as go-libp2p's TCP dial does with its own (the side that
// is not the client of the simultaneous open takes the inbound role).
func (t *punchTCP) upgrade(ctx context.Context, conn net.Conn, raddr ma.Multiaddr, p peer.ID, isClient bool) (transport.CapableConn, error) {
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
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // reset, not FIN: the 4-tuple is reusable at once (go-libp2p's choice)
		_ = tc.SetKeepAlive(true)
	}
	mc, err := manet.WrapNetConn(conn)
	if err != nil {
		conn.Close()
		scope.Done()
		return nil, err
	}
	dir := network.DirOutbound
	if !isClient {
		dir = network.DirInbound
	}
	c, err := t.upgrader.Upgrade(ctx, t, mc, dir, p, scope)
	if err != nil {
		scope.Done()
		return nil, err
	}
	return c, nil
}

// retryRefused calls dial again every pace while it fails with a refusal,
// until it succeeds, fails otherwise, ctx ends or the deadline passes; it
// returns the last result (first is the refusal that started it).
func retryRefused(ctx context.Context, deadline time.Time, pace time.Duration, first error, dial func(context.Context) (net.Conn, error)) (net.Conn, error) {
	err := first
	t := time.NewTimer(pace)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, err
		case <-t.C:
		}
		var c net.Conn
		if c, err = dial(ctx); err == nil || !refused(err) {
			return c, err
		}
		t.Reset(pace)
	}
	return nil, err
}

// refused reports whether a dial failed because the far end (here: the
// peer's router) answered the SYN with a reset.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
