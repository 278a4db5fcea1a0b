package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// latencyBlock is one path the latency section (6) measures over: a
// round-trip time, and a loss rate in percent.
type latencyBlock struct {
	rtt  time.Duration
	loss float64
}

func (b latencyBlock) model() pathModel { return pathModel{rtt: b.rtt, loss: b.loss / 100} }

// prefix starts the keys of the block's rows: latency.50ms, or
// latency.50ms.loss1 (latency.50ms.loss0_5 for half a percent).
func (b latencyBlock) prefix() string {
	p := fmt.Sprintf("latency.%dms", b.rtt.Milliseconds())
	if b.loss > 0 {
		p += ".loss" + strings.ReplaceAll(strconv.FormatFloat(b.loss, 'f', -1, 64), ".", "_")
	}
	return p
}

// The physical floors of DESIGN.md §8 and issue 26, in round trips: two
// strangers exchanging signed documents need one round trip to agree on
// keys and one for the exchange, over QUIC (TLS 1.3 inside QUIC); over
// TCP one more for the SYN; on an open connection one. HTTPS one way and
// mutual TLS are 3 each (SYN, TLS 1.3, the request), and A2A needs one
// fetch each way for both sides to know each other.
const (
	floorQUIC  = 2
	floorTCP   = 3
	floorWarm  = 1
	floorHTTPS = 3
	floorA2A   = 2 * floorHTTPS
)

// latencySection is section 6 for one path: each party behind a delaying
// proxy (delayproxy.go) with b's RTT and loss, the ifaced rows and their
// baselines measured through the proxies, each figure also as round
// trips (÷ the RTT measured through a proxy in the same run) beside its
// floor. A row whose connection did not run through its proxy fails.
func latencySection(ctx context.Context, root string, b latencyBlock, n int, trace bool) section {
	m := b.model()
	k := func(s string) string { return b.prefix() + "." + s }
	sec := section{title: fmt.Sprintf("6. Round trips: RTT %s (one-way %s), loss %s %%, every party behind a delaying proxy on loopback",
		fmtDur(b.rtt), fmtDur(m.oneWay()), strconv.FormatFloat(b.loss, 'f', -1, 64)),
		baseline: k("rtt"), ratioUnit: "RTT"}
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	fail := func(err error) section {
		sec.rows = append(sec.rows, failed(k("setup"), "setup", err))
		return sec
	}

	// The RTT as the proxies make it, measured: the divisor of the rows.
	tcpPing, err := newPinger("tcp", m)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, tcpPing.close)
	udpPing, err := newPinger("udp", m)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, udpPing.close)

	// Alice answers, behind her proxies (TCP and QUIC). Bob greets her on
	// a connection through her proxy, kept open (the warm row); Kim is a
	// peer she knows, reconnecting; each new peer is a new daemon.
	p, err := newWarmPair(ctx, root, config.SyncInterval)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, p.close)
	bobsView, err := p.alice.QueryCapabilities(ctx, p.bob.Host().ID(), negotiate.Proposal{})
	if err != nil {
		return fail(fmt.Errorf("Alice greeting Bob for his view: %w", err))
	}
	aliceTCP, err := proxyForDaemon(p.alice.Node, tcpTransport, m)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, aliceTCP.close)
	aliceQUIC, err := proxyForDaemon(p.alice.Node, quicTransport, m)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, aliceQUIC.close)
	viaTCP := aliceTCP.multiaddr().String() + "/p2p/" + p.alicePID.String()
	viaQUIC := aliceQUIC.multiaddr().String() + "/p2p/" + p.alicePID.String()
	if err := reconnectVia(ctx, p.bob, p.alicePID, viaTCP, tcpTransport); err != nil {
		return fail(fmt.Errorf("Bob reconnecting through Alice's proxy: %w", err))
	}
	if _, err := p.bob.QueryCapabilities(ctx, p.alicePID, negotiate.Proposal{}); err != nil {
		return fail(fmt.Errorf("Bob greeting Alice through her proxy: %w", err))
	}
	kim, err := startDaemon(root, benchConfig())
	if err != nil {
		return fail(err)
	}
	closers = append(closers, kim.close)
	if _, err := connectOver(ctx, kim.Node, viaTCP, tcpTransport); err != nil {
		return fail(err)
	}
	if _, err := kim.QueryCapabilities(ctx, p.alicePID, negotiate.Proposal{}); err != nil {
		return fail(fmt.Errorf("Kim greeting Alice a first time: %w", err))
	}
	bobDirect, err := addrFor(p.bob.Node, tcpTransport)
	if err != nil {
		return fail(err)
	}

	// The baselines: Alice's card server, Bob's, and the mutual TLS
	// exchange, each behind a proxy.
	cards, err := startCardServer(p.view, p.alice.id)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, cards.close)
	bobCards, err := startCardServer(bobsView.View, p.bob.id)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, bobCards.close)
	mtls, err := startMTLSExchange(p.view, p.alice.id, bobsView.View, p.bob.id)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, mtls.close)
	cardsPx, viaCards, err := proxiedCards(cards, m)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, cardsPx.close)
	bobCardsPx, viaBobCards, err := proxiedCards(bobCards, m)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, bobCardsPx.close)
	mtlsPx, err := newDelayProxy("tcp", strings.TrimPrefix(mtls.url, "https://"), m)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, mtlsPx.close)
	viaMTLS := *mtls
	viaMTLS.url = "https://" + mtlsPx.addr()
	newConn, bobNewConn := cards.client(false), bobCards.client(false)

	// The DHT of 20 nodes, each behind its proxy.
	progress("6: %s: the DHT of %d nodes, each behind a proxy", b.prefix(), dhtNodes)
	dnet, netErr := newDHTNet(ctx, root, m)
	if netErr == nil {
		closers = append(closers, dnet.close)
	}

	connectPart := map[string]*samples{}
	// newPeer: a new daemon (that has greeted Bob, untimed, directly)
	// connects to Alice through her proxy and greets her.
	newPeer := func(key, name, addr, transport string, px *delayProxy) *variant {
		part := &samples{}
		connectPart[key] = part
		return &variant{key: key, name: name, once: func() (time.Duration, error) {
			c, err := startDaemon(root, benchConfig())
			if err != nil {
				return 0, err
			}
			defer c.close()
			bobPID, err := connectOver(ctx, c.Node, bobDirect, tcpTransport)
			if err != nil {
				return 0, err
			}
			if _, err := c.QueryCapabilities(ctx, bobPID, negotiate.Proposal{}); err != nil {
				return 0, fmt.Errorf("the new daemon greeting Bob first: %w", err)
			}
			before := px.forwarded()
			start := time.Now()
			pid, err := connectOver(ctx, c.Node, addr, transport)
			if err != nil {
				return 0, err
			}
			connected := time.Since(start)
			if _, err := c.QueryCapabilities(ctx, pid, negotiate.Proposal{}); err != nil {
				return 0, err
			}
			d := time.Since(start)
			if err := passed(c.Node, pid, px, before); err != nil {
				return 0, err
			}
			*part = append(*part, connected)
			return d, nil
		}}
	}
	// knownPeer: Kim, whom Alice has greeted, drops his connection and the
	// addresses identify taught him, reconnects through her proxy, greets.
	knownPeer := func(key, name, addr, transport string, px *delayProxy) *variant {
		part := &samples{}
		connectPart[key] = part
		return &variant{key: key, name: name, once: func() (time.Duration, error) {
			if err := kim.Host().Network().ClosePeer(p.alicePID); err != nil {
				return 0, fmt.Errorf("closing the connection: %w", err)
			}
			kim.Host().Peerstore().ClearAddrs(p.alicePID)
			before := px.forwarded()
			start := time.Now()
			if _, err := connectOver(ctx, kim.Node, addr, transport); err != nil {
				return 0, err
			}
			connected := time.Since(start)
			if _, err := kim.QueryCapabilities(ctx, p.alicePID, negotiate.Proposal{}); err != nil {
				return 0, err
			}
			d := time.Since(start)
			if err := passed(kim.Node, p.alicePID, px, before); err != nil {
				return 0, err
			}
			*part = append(*part, connected)
			return d, nil
		}}
	}
	// fetchesVia times f, which must open one new connection through each
	// of proxies.
	fetchesVia := func(f func() error, proxies ...*delayProxy) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			before := make([]int64, len(proxies))
			for i, px := range proxies {
				before[i] = px.accepted.Load()
			}
			start := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			d := time.Since(start)
			for i, px := range proxies {
				if px.accepted.Load() == before[i] {
					return 0, fmt.Errorf("no connection went through the proxy at %s", px.addr())
				}
			}
			return d, nil
		}
	}
	fetchAlice := func() error { _, err := viaCards.fetchCard(ctx, newConn, cachedCardPath); return err }
	fetchBob := func() error { _, err := viaBobCards.fetchCard(ctx, bobNewConn, cachedCardPath); return err }

	var (
		rtt     = &variant{key: k("rtt"), name: "RTT through a proxy: 1 byte each way, open TCP connection", once: tcpPing.once}
		rttUDP  = &variant{key: k("rtt_udp"), name: "the same over UDP: 1 datagram each way", once: udpPing.once}
		newTCP  = newPeer(k("cold.new_peer.tcp"), "ifaced, new peer, TCP (Noise, yamux)", viaTCP, tcpTransport, aliceTCP)
		newQUIC = newPeer(k("cold.new_peer.quic"), "ifaced, new peer, QUIC", viaQUIC, quicTransport, aliceQUIC)
		knTCP   = knownPeer(k("cold.known_peer.tcp"), "ifaced, known peer reconnects, TCP", viaTCP, tcpTransport, aliceTCP)
		knQUIC  = knownPeer(k("cold.known_peer.quic"), "ifaced, known peer reconnects, QUIC", viaQUIC, quicTransport, aliceQUIC)
		warm    = &variant{key: k("warm.greeting"), name: "ifaced QueryCapabilities, warm (open TCP connection)", once: func() (time.Duration, error) {
			d, err := p.query(ctx)
			if err == nil {
				err = viaProxy(p.bob.Node, p.alicePID, aliceTCP)
			}
			return d, err
		}}
		mutual = &variant{key: k("cold.mtls_exchange"), name: "mutual TLS: both cards exchanged and verified", once: fetchesVia(func() error {
			_, err := viaMTLS.once(ctx)
			return err
		}, mtlsPx)}
		oneWay = &variant{key: k("cold.https"), name: "HTTPS new connection: one card fetch + verify", once: fetchesVia(fetchAlice, cardsPx)}
		a2a    = &variant{key: k("a2a.both_cards"), name: "A2A both ways: Alice's card, then Bob's, each on a new HTTPS connection", once: fetchesVia(func() error {
			if err := fetchAlice(); err != nil {
				return err
			}
			return fetchBob()
		}, cardsPx, bobCardsPx)}
		find = &variant{key: k("dht.find"), name: fmt.Sprintf("ifaced Find among %d DHT nodes: lookup + asking the provider", dhtNodes)}
	)
	if netErr != nil {
		find.err = netErr
	} else {
		find.once = func() (time.Duration, error) {
			before := dnet.forwarded()
			start := time.Now()
			if err := dnet.findOnce(ctx); err != nil {
				return 0, err
			}
			d := time.Since(start)
			if dnet.forwarded() == before {
				return 0, errors.New("the lookup sent nothing through the proxies")
			}
			return d, nil
		}
	}
	vs := []*variant{rtt, rttUDP, newTCP, newQUIC, knTCP, knQUIC, warm, find, mutual, oneWay, a2a}
	const warmup = 2
	interleave(vs, warmup, n, 5, func() bool { return ctx.Err() != nil })

	connectRow := func(v *variant) row {
		key, name := v.key+".connect", "  of which connect (incl. identify)"
		s := *connectPart[v.key]
		if v.err != nil || len(s) <= warmup {
			return notMeasured(key, name, "the greeting was not measured")
		}
		return latencyRow(key, name, s[warmup:], "")
	}
	dhtNote := fmt.Sprintf("%d bare DHT servers and the provider (a daemon), each behind a proxy, and the searching daemon (a client), its connections open", dhtNodes-2)
	sec.rows = append(sec.rows,
		rowOf(rtt, "the round trips below are figures ÷ this"),
		rowOf(rttUDP, ""),
		withFloor(rowOf(newTCP, "new key, nothing cached"), floorTCP), connectRow(newTCP),
		withFloor(rowOf(newQUIC, "new key, nothing cached"), floorQUIC), connectRow(newQUIC),
		withFloor(rowOf(knTCP, ""), floorTCP), connectRow(knTCP),
		withFloor(rowOf(knQUIC, ""), floorQUIC), connectRow(knQUIC),
		withFloor(rowOf(warm, "a new stream on the open connection"), floorWarm),
		rowOf(find, dhtNote),
		withFloor(rowOf(mutual, "TCP + TLS 1.3, a certificate each side + POST one card, answer the other"), floorHTTPS),
		withFloor(rowOf(oneWay, "TCP + TLS 1.3 + GET + verify"), floorHTTPS),
		withFloor(rowOf(a2a, "what A2A needs for both sides to know each other"), floorA2A),
	)
	for _, c := range []string{"cold.new_peer.tcp", "cold.new_peer.quic", "cold.known_peer.tcp", "cold.known_peer.quic"} {
		sec.ratios = append(sec.ratios, ratioSpec{k(c), k("cold.mtls_exchange")}, ratioSpec{k(c), k("a2a.both_cards")})
	}
	if trace && ctx.Err() == nil {
		for _, t := range []struct {
			v       *variant
			proxies []*delayProxy
		}{{newTCP, []*delayProxy{aliceTCP}}, {newQUIC, []*delayProxy{aliceQUIC}}, {knTCP, []*delayProxy{aliceTCP}},
			{knQUIC, []*delayProxy{aliceQUIC}}, {warm, []*delayProxy{aliceTCP}}, {mutual, []*delayProxy{mtlsPx}}, {oneWay, []*delayProxy{cardsPx}}} {
			if t.v.err != nil {
				continue
			}
			sec.notes = append(sec.notes, traceOnce(t.v, m.rtt, t.proxies...))
		}
		if find.err == nil {
			sec.notes = append(sec.notes, traceFind(find, m.rtt, dnet))
		}
	}
	return sec
}

// withFloor sets a row's physical floor, in round trips.
func withFloor(r row, floor float64) row {
	r.floorRTT = floor
	return r
}

// reconnectVia closes d's connections to pid, forgets pid's addresses
// and connects to it again at addr only.
func reconnectVia(ctx context.Context, d *daemon, pid peer.ID, addr, transport string) error {
	if err := d.Host().Network().ClosePeer(pid); err != nil {
		return fmt.Errorf("closing the connection: %w", err)
	}
	d.Host().Peerstore().ClearAddrs(pid)
	_, err := connectOver(ctx, d.Node, addr, transport)
	return err
}

// passed fails unless every connection d holds to pid runs through px,
// and px forwarded bytes since its count was before (forwarded).
func passed(d *node.Node, pid peer.ID, px *delayProxy, before int64) error {
	if err := viaProxy(d, pid, px); err != nil {
		return err
	}
	if px.forwarded() == before {
		return fmt.Errorf("the proxy at %s forwarded nothing", px.addr())
	}
	return nil
}

// viaProxy fails unless d holds a connection to pid and every one runs
// through one of proxies (its remote address is a proxy's).
func viaProxy(d *node.Node, pid peer.ID, proxies ...*delayProxy) error {
	conns := d.Host().Network().ConnsToPeer(pid)
	if len(conns) == 0 {
		return fmt.Errorf("no connection to %s", pid)
	}
	for _, c := range conns {
		ok := false
		for _, px := range proxies {
			ok = ok || c.RemoteMultiaddr().Equal(px.multiaddr())
		}
		if !ok {
			return fmt.Errorf("the connection to %s runs over %s, not through its proxy", pid, c.RemoteMultiaddr())
		}
	}
	return nil
}

// multiaddr is the proxy's listen address as libp2p dials it: TCP, or
// QUIC v1 over UDP.
func (p *delayProxy) multiaddr() multiaddr.Multiaddr {
	s := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", p.port())
	if p.network == "udp" {
		s = fmt.Sprintf("/ip4/127.0.0.1/udp/%d/quic-v1", p.port())
	}
	return multiaddr.StringCast(s)
}

// proxyForAddr is a proxy to a libp2p listen address (TCP, or QUIC over
// UDP).
func proxyForAddr(a multiaddr.Multiaddr, m pathModel) (*delayProxy, error) {
	ip, err := a.ValueForProtocol(multiaddr.P_IP4)
	if err != nil {
		return nil, fmt.Errorf("proxying %s: not an IPv4 address", a)
	}
	if port, err := a.ValueForProtocol(multiaddr.P_TCP); err == nil {
		return newDelayProxy("tcp", net.JoinHostPort(ip, port), m)
	}
	if port, err := a.ValueForProtocol(multiaddr.P_UDP); err == nil {
		return newDelayProxy("udp", net.JoinHostPort(ip, port), m)
	}
	return nil, fmt.Errorf("proxying %s: neither TCP nor UDP", a)
}

// proxyForDaemon is a proxy to d's listen address on transport.
func proxyForDaemon(d *node.Node, transport string, m pathModel) (*delayProxy, error) {
	addr, err := addrFor(d, transport)
	if err != nil {
		return nil, err
	}
	a, err := multiaddr.NewMultiaddr(addr)
	if err != nil {
		return nil, err
	}
	return proxyForAddr(a, m)
}

// proxiedCards is a proxy in front of s, and s as a client sees it
// through the proxy (the certificate names 127.0.0.1, as the proxy's
// address is).
func proxiedCards(s *cardServer, m pathModel) (*delayProxy, *cardServer, error) {
	px, err := newDelayProxy("tcp", strings.TrimPrefix(s.url, "https://"), m)
	if err != nil {
		return nil, nil, err
	}
	via := *s
	via.url = "https://" + px.addr()
	return px, &via, nil
}

// pinger measures the RTT a proxy makes: an echo server behind it, and
// one byte (TCP, on a connection kept open) or one datagram (UDP) each
// way.
type pinger struct {
	network string
	px      *delayProxy
	echo    io.Closer
	conn    net.Conn
	rtt     time.Duration
	seq     uint64
}

func newPinger(network string, m pathModel) (*pinger, error) {
	pg := &pinger{network: network, rtt: m.rtt}
	var target string
	switch network {
	case "tcp":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listening for the TCP echo: %w", err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(c, c); c.Close() }()
			}
		}()
		pg.echo, target = ln, ln.Addr().String()
	case "udp":
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, fmt.Errorf("listening for the UDP echo: %w", err)
		}
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := pc.ReadFromUDP(buf)
				if err != nil {
					return
				}
				pc.WriteToUDP(buf[:n], from)
			}
		}()
		pg.echo, target = pc, pc.LocalAddr().String()
	}
	px, err := newDelayProxy(network, target, m)
	if err != nil {
		pg.echo.Close()
		return nil, err
	}
	pg.px = px
	if pg.conn, err = net.Dial(network, px.addr()); err != nil {
		pg.close()
		return nil, fmt.Errorf("dialing the %s echo through its proxy: %w", network, err)
	}
	return pg, nil
}

// once is one round trip. A datagram lost (under loss) is sent again
// after a timeout, and only the exchange that came back is timed.
func (pg *pinger) once() (time.Duration, error) {
	if pg.network == "tcp" {
		pg.conn.SetDeadline(time.Now().Add(time.Minute))
		start := time.Now()
		if _, err := pg.conn.Write([]byte{1}); err != nil {
			return 0, fmt.Errorf("ping: %w", err)
		}
		if _, err := io.ReadFull(pg.conn, make([]byte, 1)); err != nil {
			return 0, fmt.Errorf("ping: %w", err)
		}
		return time.Since(start), nil
	}
	buf := make([]byte, 64)
	for range 20 {
		pg.seq++
		msg := binary.BigEndian.AppendUint64(nil, pg.seq)
		start := time.Now()
		pg.conn.SetDeadline(start.Add(4*pg.rtt + time.Second))
		if _, err := pg.conn.Write(msg); err != nil {
			return 0, fmt.Errorf("ping: %w", err)
		}
		for {
			n, err := pg.conn.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break // lost: send again
				}
				return 0, fmt.Errorf("ping: %w", err)
			}
			if n == 8 && binary.BigEndian.Uint64(buf) == pg.seq {
				return time.Since(start), nil
			}
		}
	}
	return 0, errors.New("ping: 20 datagrams in a row lost")
}

func (pg *pinger) close() {
	if pg.conn != nil {
		pg.conn.Close()
	}
	if pg.px != nil {
		pg.px.close()
	}
	pg.echo.Close()
}

// traceOnce runs v once more, untimed, recording what its proxies see,
// and describes it as flights: runs of chunks one way, their times from
// the first in round trips, with their sizes (and the first bytes where
// they are text, as multistream's protocol names are).
func traceOnce(v *variant, rtt time.Duration, proxies ...*delayProxy) string {
	for _, px := range proxies {
		px.startTrace()
	}
	d, err := v.once()
	var evs []chunkEvent
	for _, px := range proxies {
		evs = append(evs, px.takeTrace()...)
	}
	if err != nil {
		return fmt.Sprintf("trace of %s: failed: %v", v.key, err)
	}
	return fmt.Sprintf("trace of one %s (%s = %.2f RTT; ▶ toward the answering side, ◀ back; +t in RTT from the first chunk): %s",
		v.key, fmtDur(d), float64(d)/float64(rtt), describeFlights(evs, rtt, true))
}

// traceFind is traceOnce for the lookup row: the chunks of the searching
// daemon's connections through all the network's proxies, as flights
// each way across connections (▶ from it, ◀ to it), with the number of
// nodes each went to or came from.
func traceFind(v *variant, rtt time.Duration, n *dhtNet) string {
	for _, px := range n.proxies {
		px.startTrace()
	}
	d, err := v.once()
	var evs []chunkEvent
	for _, px := range n.proxies {
		evs = append(evs, px.takeTrace()...)
	}
	if err != nil {
		return fmt.Sprintf("trace of %s: failed: %v", v.key, err)
	}
	mine := map[string]bool{}
	for _, c := range n.finder.Host().Network().Conns() {
		if port, err := c.LocalMultiaddr().ValueForProtocol(multiaddr.P_TCP); err == nil {
			mine["127.0.0.1:"+port] = true
		}
	}
	evs = slices.DeleteFunc(evs, func(e chunkEvent) bool { return !mine[e.from] })
	slices.SortStableFunc(evs, func(a, b chunkEvent) int { return a.at.Compare(b.at) })
	return fmt.Sprintf("trace of one %s (%s = %.2f RTT; ▶ from the searching daemon, ◀ to it, across its connections; +t in RTT): %s",
		v.key, fmtDur(d), float64(d)/float64(rtt), describeFlights(evs, rtt, false))
}

// describeFlights writes a trace as its flights: runs of chunks one way,
// on one connection (perConn), or across connections (then with the
// number of connections each flight went over).
func describeFlights(evs []chunkEvent, rtt time.Duration, perConn bool) string {
	if len(evs) == 0 {
		return "nothing went through the proxy"
	}
	t0 := evs[0].at
	var parts []string
	for i := 0; i < len(evs); {
		j, bytes := i, 0
		var texts []string
		conns := map[string]bool{}
		for ; j < len(evs) && evs[j].dir == evs[i].dir && (!perConn || evs[j].conn == evs[i].conn); j++ {
			bytes += evs[j].n
			conns[fmt.Sprint(evs[j].via, evs[j].conn)] = true
			if t := printable(evs[j].head); t != "" && perConn {
				texts = append(texts, t)
			}
		}
		arrow := "▶"
		if evs[i].dir == '<' {
			arrow = "◀"
		}
		part := fmt.Sprintf("%s+%.2f %d B", arrow, float64(evs[i].at.Sub(t0))/float64(rtt), bytes)
		if j-i > 1 {
			part += fmt.Sprintf(" in %d", j-i)
		}
		if !perConn {
			part += fmt.Sprintf(" over %d", len(conns))
		}
		if len(texts) > 0 {
			part += " " + strings.Join(texts, " ")
		}
		parts = append(parts, part)
		i = j
	}
	return strings.Join(parts, " · ")
}

// printable is the text multistream-select writes in the clear (a varint
// length, then "/protocol/name\n"), or "".
func printable(head []byte) string {
	var names []string
	for len(head) > 1 {
		n := int(head[0])
		if n < 2 || n > len(head)-1 || head[1] != '/' {
			break
		}
		names = append(names, strings.TrimSpace(string(head[1:1+n])))
		head = head[1+n:]
	}
	if len(names) == 0 {
		return ""
	}
	return "“" + strings.Join(names, " ") + "”"
}
