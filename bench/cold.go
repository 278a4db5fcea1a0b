package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ifaced/ifaced/node/config"

	"github.com/ifaced/ifaced/negotiate"
)

// coldSection is section 2: a peer that has no connection yet connects
// and greets. A new peer (a new daemon with a new key, started and
// greeting Bob untimed) meets nothing cached on either side; a known peer reconnects after its
// connection was closed. The baselines are a one-way HTTPS card fetch on
// a new TLS 1.3 connection (no session resumption) and a mutual TLS
// exchange of signed cards, which authenticates both sides and carries
// both cards, as a cold greeting does.
func coldSection(ctx context.Context, root string, n int) section {
	sec := section{title: "2. Cold greeting: connect, then greet, on a new connection",
		baseline: "cold.mtls_exchange"}
	fail := func(err error) section {
		sec.rows = append(sec.rows, failed("cold.setup", "setup", err))
		return sec
	}
	// Bob stays: he is the known peer, and the greetings between him and
	// Alice give the views the cards are made of.
	p, err := newWarmPair(ctx, root, config.SyncInterval)
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
	bobsView, err := p.alice.QueryCapabilities(ctx, p.bob.Host().ID(), negotiate.Proposal{})
	if err != nil {
		return fail(fmt.Errorf("Alice greeting Bob for his view: %w", err))
	}
	cards, err := startCardServer(p.view, p.alice.id)
	if err != nil {
		return fail(err)
	}
	defer cards.close()
	newConn := cards.client(false)
	mtls, err := startMTLSExchange(p.view, p.alice.id, bobsView.View, p.bob.id)
	if err != nil {
		return fail(err)
	}
	defer mtls.close()

	// Each connect-and-greet also records how long the connect alone took.
	connectPart := map[string]*samples{}
	bobAddr, err := addrFor(p.bob.Node, tcpTransport)
	if err != nil {
		return fail(err)
	}
	newPeer := func(key, name, addr, transport string) *variant {
		part := &samples{}
		connectPart[key] = part
		return &variant{key: key, name: name, once: func() (time.Duration, error) {
			c, err := startDaemon(root, benchConfig())
			if err != nil {
				return 0, err
			}
			defer c.close()
			// Untimed: the new daemon first greets Bob, so that what is
			// timed is meeting a stranger, not the daemon's own first run
			// (its audit directory of the day, the view it signs ahead of
			// time), as an HTTPS client's process start is not timed.
			bobPID, err := connectOver(ctx, c.Node, bobAddr, tcpTransport)
			if err != nil {
				return 0, err
			}
			if _, err := c.QueryCapabilities(ctx, bobPID, negotiate.Proposal{}); err != nil {
				return 0, fmt.Errorf("the new daemon greeting Bob first: %w", err)
			}
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
	connectPart["cold.known_peer.tcp"] = knownPart
	known := &variant{key: "cold.known_peer.tcp", name: "ifaced, known peer reconnects, TCP", once: func() (time.Duration, error) {
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
	fetch := func(key, name, path string) *variant {
		return &variant{key: key, name: name, once: func() (time.Duration, error) {
			start := time.Now()
			if _, err := cards.fetchCard(ctx, newConn, path); err != nil {
				return 0, err
			}
			return time.Since(start), nil
		}}
	}
	tcp := newPeer("cold.new_peer.tcp", "ifaced, new peer, TCP (Noise, yamux)", tcpAddr, tcpTransport)
	quic := newPeer("cold.new_peer.quic", "ifaced, new peer, QUIC", quicAddr, quicTransport)
	oneWay := fetch("cold.https", "HTTPS new connection: card fetch + verify (signed once)", cachedCardPath)
	signed := fetch("cold.https_signed_per_request", "the same, the server signing per request", cardPath)
	mutual := &variant{key: "cold.mtls_exchange", name: "mutual TLS: both cards exchanged and verified", once: func() (time.Duration, error) { return mtls.once(ctx) }}
	vs := []*variant{tcp, quic, known, oneWay, signed, mutual}
	const warmup = 2
	interleave(vs, warmup, n, 5, func() bool { return ctx.Err() != nil })

	// connectRow is the connect part of v's iterations, warm-up left out.
	connectRow := func(v *variant) row {
		key, name := v.key+".connect", "  of which connect (incl. identify)"
		s := *connectPart[v.key]
		if v.err != nil || len(s) <= warmup {
			return notMeasured(key, name, "the greeting was not measured")
		}
		return latencyRow(key, name, s[warmup:], "")
	}
	sec.rows = append(sec.rows,
		rowOf(tcp, "new key, nothing cached"), connectRow(tcp),
		rowOf(quic, "new key, nothing cached"), connectRow(quic),
		rowOf(known, ""), connectRow(known),
		rowOf(mutual, fmt.Sprintf("TCP + TLS 1.3, a certificate each side (ECDSA P-256) + POST one card, verify it, answer the other, verify it; cards %.1f / %.1f KB", kb(mtls.card), kb(cards.card))),
		rowOf(oneWay, "TCP + TLS 1.3 (ECDSA P-256, server only) + GET + verify"),
		rowOf(signed, "as node/httpapi serves it"),
	)
	for _, sp := range []ratioSpec{{"cold.new_peer.tcp", "cold.https"}, {"cold.new_peer.quic", "cold.https"},
		{"cold.mtls_exchange", "cold.https"}} {
		sec.ratios = append(sec.ratios, sp)
	}
	return sec
}
