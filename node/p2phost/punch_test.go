package p2phost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
)

// A daemon observed over one transport offers, for hole punching, the
// same public IP with its other transports' listen ports too, where the
// NAT kept the observed transport's port; not where it changed it.
func TestInferAddrs(t *testing.T) {
	m := func(ss ...string) []ma.Multiaddr {
		var out []ma.Multiaddr
		for _, s := range ss {
			out = append(out, ma.StringCast(s))
		}
		return out
	}
	listen := m("/ip4/0.0.0.0/tcp/5003", "/ip4/0.0.0.0/udp/5003/quic-v1", "/ip6/::/tcp/5004")
	for _, tc := range []struct {
		name           string
		observed, want []ma.Multiaddr
	}{
		{"quic observed, port kept", m("/ip4/192.0.0.142/udp/5003/quic-v1"),
			m("/ip4/192.0.0.142/udp/5003/quic-v1", "/ip4/192.0.0.142/tcp/5003")},
		{"tcp observed, port kept", m("/ip4/192.0.0.141/tcp/5003"),
			m("/ip4/192.0.0.141/tcp/5003", "/ip4/192.0.0.141/udp/5003/quic-v1")},
		{"both observed", m("/ip4/192.0.0.141/tcp/5003", "/ip4/192.0.0.141/udp/5003/quic-v1"),
			m("/ip4/192.0.0.141/tcp/5003", "/ip4/192.0.0.141/udp/5003/quic-v1")},
		{"port changed by the NAT", m("/ip4/192.0.0.141/tcp/40001"), m("/ip4/192.0.0.141/tcp/40001")},
		{"circuit", m("/ip4/192.0.0.131/tcp/4817/p2p/12D3KooWPAczceRXww1Zg5bvkqQTpLk6kS8gE5yJpgqvb1LPNLyb/p2p-circuit"),
			m("/ip4/192.0.0.131/tcp/4817/p2p/12D3KooWPAczceRXww1Zg5bvkqQTpLk6kS8gE5yJpgqvb1LPNLyb/p2p-circuit")},
	} {
		got := inferAddrs(tc.observed, listen)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if !got[i].Equal(tc.want[i]) {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}

// The tries the daemon begins on a relayed connection: a peer that keeps
// changing its protocols (identify pushes taking DCUtR away and giving it
// back) starts none, and this host's own address changes start new ones
// only within the peer's budget for the window. Real hosts on loopback
// with a real relay; the tries are counted where they would call
// go-libp2p's DirectConnect (which would dial the addresses the peer
// names: none may leave loopback here).
func TestPunchTriesBoundedPerPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newHost := func(opts ...libp2p.Option) host.Host {
		t.Helper()
		h, err := libp2p.New(append([]libp2p.Option{libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableMetrics()}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	r := newHost(libp2p.DisableRelay())
	if _, err := relayv2.New(r, relayv2.WithInfiniteLimits()); err != nil {
		t.Fatal(err)
	}

	var tries atomic.Int64
	tried := make(chan struct{}, 1)
	p := NewPunch(slog.New(slog.DiscardHandler))
	p.connect = func(_ *holepunch.Service, _ peer.ID) error {
		tries.Add(1)
		select {
		case tried <- struct{}{}:
		default:
		}
		return errors.New("test: no dial")
	}
	handled := make(chan any, 64)
	p.handled = func(e any) {
		select {
		case handled <- e:
		case <-ctx.Done():
		}
	}
	// a's hole punching starts once it has a public address; this one is
	// never dialled (the tries are counted instead, and b only dials a
	// through the relay).
	a := newHost(append(p.HostOptions(), libp2p.AddrsFactory(func(as []ma.Multiaddr) []ma.Multiaddr {
		return append(as, ma.StringCast("/ip4/1.2.3.4/tcp/4001"))
	}))...)
	if err := p.Start(ctx, a, func(f func()) bool { go f(); return true }); err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(ctx, peer.AddrInfo{ID: r.ID(), Addrs: r.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Reserve(ctx, a, peer.AddrInfo{ID: r.ID(), Addrs: r.Addrs()}); err != nil {
		t.Fatal(err)
	}
	b := newHost()
	refuse := func(s network.Stream) { s.Reset() }
	b.SetStreamHandler(holepunch.Protocol, refuse)
	circuit := ma.StringCast(r.Addrs()[0].String() + "/p2p/" + r.ID().String() + "/p2p-circuit")
	if err := b.Connect(network.WithAllowLimitedConn(ctx, "test"), peer.AddrInfo{ID: a.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatal(err)
	}

	// waitIdle waits until a's Punch has no try toward b running.
	waitIdle := func(what string) {
		t.Helper()
		for {
			p.mu.Lock()
			pp := p.peers[b.ID()]
			running := pp != nil && pp.running
			p.mu.Unlock()
			if !running {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for the try after %s: %v", what, ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
	}
	// waitFor waits until a's Punch has handled an event cond accepts
	// and its try (if it began one) has ended.
	waitFor := func(what string, cond func(any) bool) {
		t.Helper()
		for {
			select {
			case e := <-handled:
				if !cond(e) {
					continue
				}
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v (tries %d)", what, ctx.Err(), tries.Load())
			}
			break
		}
		waitIdle(what)
	}
	protocols := func(added bool) func(any) bool {
		return func(e any) bool {
			ev, ok := e.(event.EvtPeerProtocolsUpdated)
			list := ev.Removed
			if added {
				list = ev.Added
			}
			return ok && ev.Peer == b.ID() && slices.Contains(list, holepunch.Protocol)
		}
	}
	// The first try, once a knows b speaks DCUtR.
	select {
	case <-tried:
	case <-ctx.Done():
		t.Fatalf("no try on the relayed connection: %v", ctx.Err())
	}
	waitIdle("the first try")
	first := tries.Load()

	// b changes its protocols, again and again: no new try but those the
	// backoff schedule starts (after punchRetryMin, doubling; the pushes
	// take milliseconds, so normally none).
	start := time.Now()
	for i := 0; i < punchPeerBudget+2; i++ {
		b.RemoveStreamHandler(holepunch.Protocol)
		waitFor("b's protocols without DCUtR", protocols(false))
		b.SetStreamHandler(holepunch.Protocol, refuse)
		waitFor("b's protocols with DCUtR", protocols(true))
	}
	scheduled := int64(0)
	for wait, at := punchRetryMin, punchRetryMin; at <= time.Since(start); wait, at = min(2*wait, punchRetryMax), at+min(2*wait, punchRetryMax) {
		scheduled++
	}
	if n := tries.Load(); n > first+scheduled {
		t.Errorf("b changed its protocols %d times in %v and a began %d tries, %d after the first, the backoff schedule %d: a peer's events must start none", punchPeerBudget+2, time.Since(start), n, n-first, scheduled)
	}

	// a's own addresses change, more often than the budget: a new try
	// each time, until the budget for b is spent.
	em, err := a.EventBus().Emitter(new(event.EvtLocalAddressesUpdated))
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()
	for i := 0; i < 2*punchPeerBudget; i++ {
		if err := em.Emit(event.EvtLocalAddressesUpdated{Diffs: true}); err != nil {
			t.Fatal(err)
		}
		waitFor("a's address change", func(e any) bool { _, ok := e.(event.EvtLocalAddressesUpdated); return ok })
	}
	if n := tries.Load(); n != punchPeerBudget {
		t.Errorf("after %d address changes of a's own, a began %d tries toward b, want the budget, %d", 2*punchPeerBudget, n, punchPeerBudget)
	}
}

// The per-peer budget's table holds at most its cap: a new peer past it
// takes the place of the one whose window began first; a peer's window
// ends after the window's length, and its count with it.
func TestPeerBudgetBounded(t *testing.T) {
	b := newPeerBudget(2, time.Minute, 3)
	now := time.Now()
	ids := make([]peer.ID, 5)
	for i := range ids {
		ids[i] = peer.ID(fmt.Sprint("peer", i))
	}
	for i, id := range ids {
		if !b.take(id, now.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("peer %d refused its first take", i)
		}
		if b.size() > 3 {
			t.Fatalf("table holds %d peers, cap 3", b.size())
		}
	}
	if !b.take(ids[4], now.Add(5*time.Second)) || b.take(ids[4], now.Add(5*time.Second)) {
		t.Errorf("peer 4: want its second take allowed and its third refused")
	}
	if left := b.left(ids[4], now.Add(5*time.Second+time.Minute)); left != 2 {
		t.Errorf("after its window, peer 4 may spend %d, want 2", left)
	}
	if !b.take(ids[4], now.Add(5*time.Second+time.Minute)) {
		t.Errorf("after its window, peer 4 refused")
	}
}

// The addresses a peer names are dialled at most punchRemoteAddrs at a
// time, and at most punchRoundBudget rounds per peer in a window,
// whoever began them (a peer this daemon dialled through a relay may
// send CONNECT messages at will); past that a round dials nothing.
func TestPunchRoundsBoundedPerPeer(t *testing.T) {
	p := NewPunch(slog.New(slog.DiscardHandler))
	f := addrFilter{p}
	var named []ma.Multiaddr
	for i := 0; i < 3*punchRemoteAddrs; i++ {
		named = append(named, ma.StringCast(fmt.Sprintf("/ip4/192.0.2.%d/tcp/4001", i+1)))
	}
	stranger, other := peer.ID("stranger"), peer.ID("other")
	for i := 0; i < punchRoundBudget; i++ {
		got := f.FilterRemote(stranger, named)
		if len(got) == 0 || len(got) > punchRemoteAddrs {
			t.Fatalf("round %d: %d addresses dialled of %d named, want 1 to %d", i+1, len(got), len(named), punchRemoteAddrs)
		}
		if !got[0].Equal(named[0]) {
			t.Fatalf("round %d: dialled %v first, want the first named, %v", i+1, got[0], named[0])
		}
	}
	if got := f.FilterRemote(stranger, named); len(got) != 0 {
		t.Errorf("round %d, past the peer's budget of %d: %d addresses dialled, want none", punchRoundBudget+1, punchRoundBudget, len(got))
	}
	if got := f.FilterRemote(other, named); len(got) == 0 {
		t.Errorf("another peer's first round dialled nothing: one peer's budget must not spend another's")
	}
}

// QUIC first on the answering side too: in a try's first round, a daemon
// that listens on QUIC dials only the QUIC addresses a peer offered, even
// when the peer's offer holds TCP ones (the initiator offers TCP too
// when it did not know the answering side's QUIC address yet, as when
// two daemons greet as soon as they start: each then dialled both, and
// TCP won as often as not); the next round of the try dials everything.
// A daemon without QUIC dials what it can.
func TestPunchFirstRoundDialsQUICOnly(t *testing.T) {
	offered := []ma.Multiaddr{ma.StringCast("/ip4/192.0.2.7/tcp/4001"), ma.StringCast("/ip4/192.0.2.7/udp/4001/quic-v1")}
	for _, tc := range []struct {
		name   string
		listen []string
		first  int // addresses dialled in the first round
	}{
		{"with QUIC", []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}, 1},
		{"TCP only", []string{"/ip4/127.0.0.1/tcp/0"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := libp2p.New(libp2p.ListenAddrStrings(tc.listen...), libp2p.DisableMetrics())
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			p := NewPunch(slog.New(slog.DiscardHandler))
			p.h = h
			f := addrFilter{p}
			remote := peer.ID("answered")
			got := f.FilterRemote(remote, offered)
			if len(got) != tc.first {
				t.Fatalf("first round dialled %v, want %d of %v", got, tc.first, offered)
			}
			if tc.first == 1 && !isQUIC(got[0]) {
				t.Fatalf("first round dialled %v, want the QUIC address", got[0])
			}
			if got := f.FilterRemote(remote, offered); len(got) != 2 {
				t.Errorf("second round dialled %v, want both of %v", got, offered)
			}
		})
	}
}

// TestPunchPeersBounded: the rounds any number of peers send (each
// answering round makes the answering side's state in FilterRemote)
// leave at most punchBudgetPeers peers' states, the disconnected
// forgotten first; a peer whose try runs keeps its state. Before, the
// states of peers that came and went stayed until the next scan, which
// may be an hour away.
func TestPunchPeersBounded(t *testing.T) {
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p := NewPunch(slog.New(slog.DiscardHandler))
	p.h = h
	f := addrFilter{p}
	offered := []ma.Multiaddr{ma.StringCast("/ip4/192.0.2.7/tcp/4001")}
	p.mu.Lock()
	p.peer("trying", time.Now()).running = true
	p.mu.Unlock()
	for i := range 3 * punchBudgetPeers {
		f.FilterRemote(peer.ID(fmt.Sprintf("stranger-%d", i)), offered)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.peers); n > punchBudgetPeers {
		t.Errorf("%d peers' punch states after %d strangers' rounds, want at most %d", n, 3*punchBudgetPeers, punchBudgetPeers)
	}
	if p.peers["trying"] == nil {
		t.Error("the state of a peer whose try runs was forgotten")
	}
	if p.peers[peer.ID(fmt.Sprintf("stranger-%d", 3*punchBudgetPeers-1))] == nil {
		t.Error("the last stranger's round left no state")
	}
	// Every state live (a try running): a new peer's round gets a state
	// that is not kept, and still dials.
	for _, pp := range p.peers {
		pp.running = true
	}
	for len(p.peers) < punchBudgetPeers {
		p.peers[peer.ID(fmt.Sprintf("live-%d", len(p.peers)))] = &punchPeer{running: true}
	}
	p.mu.Unlock()
	got := f.FilterRemote("one-more", offered)
	p.mu.Lock()
	if len(got) != 1 {
		t.Errorf("a round with every state live dialled %v, want %v", got, offered)
	}
	if n := len(p.peers); n != punchBudgetPeers || p.peers["one-more"] != nil {
		t.Errorf("%d states after a round with every state live (kept: %v), want %d and the new one not kept", n, p.peers["one-more"] != nil, punchBudgetPeers)
	}
}
