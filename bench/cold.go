package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
)

// coldSection is row 2: a peer that has no connection yet connects and
// greets. A new peer (a new daemon with a new key, started untimed) meets
// nothing cached on either side; a known peer reconnects after its
// connection was closed. The baseline is an HTTPS card fetch on a new
// TLS 1.3 connection (no session resumption).
func coldSection(ctx context.Context, root string, n int) section {
	sec := section{title: "2. Cold greeting: connect, then greet, on a new connection",
		baseline: "(c) cold HTTPS card fetch, card signed once"}
	fail := func(err error) section {
		sec.rows = append(sec.rows, failed("setup", err))
		return sec
	}
	// Bob stays: he is the known peer, and his first greeting gives the
	// view the card is made of.
	p, err := newWarmPair(ctx, root, node.SyncInterval)
	if err != nil {
		return fail(err)
	}
	defer p.close()
	tcpAddr, err := addrFor(p.alice.Node, tcpTransport)
	if err != nil {
		return fail(err)
	}
	quicAddr, err := addrFor(p.alice.Node, quicTransport)
	if err != nil {
		return fail(err)
	}
	cards, err := startCardServer(p.view, p.alice.id)
	if err != nil {
		return fail(err)
	}
	defer cards.close()
	newConn := cards.client(false)

	// Each connect-and-greet also records how long the connect alone took.
	connectPart := map[string]*samples{}
	newPeer := func(name, addr, transport string) *variant {
		part := &samples{}
		connectPart[name] = part
		return &variant{name: name, once: func() (time.Duration, error) {
			c, err := startDaemon(root, benchConfig())
			if err != nil {
				return 0, err
			}
			defer c.close()
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
			*part = append(*part, connected)
			return d, nil
		}}
	}
	knownPart := &samples{}
	connectPart["known"] = knownPart
	known := &variant{name: "ifaced, known peer reconnects, TCP", once: func() (time.Duration, error) {
		// Forget the connection and the addresses identify taught, so the
		// dial goes to the TCP address given and nowhere else.
		if err := p.bob.Host().Network().ClosePeer(p.alicePID); err != nil {
			return 0, fmt.Errorf("closing the connection: %w", err)
		}
		p.bob.Host().Peerstore().ClearAddrs(p.alicePID)
		start := time.Now()
		if _, err := connectOver(ctx, p.bob.Node, tcpAddr, tcpTransport); err != nil {
			return 0, err
		}
		connected := time.Since(start)
		if _, err := p.bob.QueryCapabilities(ctx, p.alicePID, negotiate.Proposal{}); err != nil {
			return 0, err
		}
		d := time.Since(start)
		*knownPart = append(*knownPart, connected)
		return d, nil
	}}
	fetch := func(name, path string) *variant {
		return &variant{name: name, once: func() (time.Duration, error) {
			start := time.Now()
			if _, err := cards.fetchCard(ctx, newConn, path); err != nil {
				return 0, err
			}
			return time.Since(start), nil
		}}
	}
	tcp := newPeer("ifaced, new peer, TCP (Noise, yamux)", tcpAddr, tcpTransport)
	quic := newPeer("ifaced, new peer, QUIC", quicAddr, quicTransport)
	cached := fetch("(c) HTTPS new connection: card signed once", cachedCardPath)
	signed := fetch("(c) HTTPS new connection: card signed per request", cardPath)
	vs := []*variant{tcp, quic, known, cached, signed}
	const warmup = 2
	interleave(vs, warmup, n, 5, func() bool { return ctx.Err() != nil })

	base := baseOf(cached)
	part := func(v *variant, key string) string {
		s := *connectPart[key]
		if v.err != nil || len(s) <= warmup {
			return ""
		}
		return "connect alone " + fmtDur(s[warmup:].median()) + " (incl. identify)"
	}
	sec.rows = append(sec.rows,
		rowOf(tcp, base, part(tcp, tcp.name)+"; new key, nothing cached"),
		rowOf(quic, base, part(quic, quic.name)+"; new key, nothing cached"),
		rowOf(known, base, part(known, "known")),
		rowOf(cached, base, fmt.Sprintf("TCP + TLS 1.3 (ECDSA P-256) + GET + verify; card %.1f KB", float64(cards.size)/1024)),
		rowOf(signed, base, "as node/httpapi serves it"),
	)
	return sec
}
