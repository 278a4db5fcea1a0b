package p2phost

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
)

// Hole punching. go-libp2p's DCUtR service does the punching: the peer
// that was dialled through a relay (the initiator) exchanges its public
// addresses with the dialler over the relayed connection, measures the
// round trip, and both connect to each other at once (a QUIC connection,
// or a TCP simultaneous open). Punch is the daemon's part around it:
//
//   - QUIC first: in the first round of each try the initiator offers
//     only its QUIC addresses when it knows the peer has QUIC, and either
//     side that listens on QUIC dials only the QUIC addresses the other
//     offered, whatever else it offered; later rounds offer and dial
//     everything, TCP included (addrFilter). A QUIC punch
//     survives routers that answer unsolicited packets (an ICMP port
//     unreachable does not end it); a TCP punch needs the retries of
//     punchTCP.
//   - Retries on relayed connections. go-libp2p tries once per relayed
//     connection, when it arrives, and only if hole punching already runs
//     then, which it does only once the host knows a public address of its
//     own (one a peer observed). A connection made before, or whose try
//     failed, stays relayed. Punch watches the host's event bus (its
//     addresses, reachability and protocols, each peer's protocols and
//     identification) and tries again on every relayed connection it was
//     dialled on that has no direct connection beside it, as soon as both
//     peers speak DCUtR, then after punchRetryMin, doubling up to
//     punchRetryMax, at most punchMaxTries times. Only a change of this
//     host's own (its addresses, its reachability) starts the count
//     again: events a peer causes (its protocols, which it changes at
//     will with an identify push) never do, or a peer could make the
//     daemon punch without end. And whatever starts them, the tries the
//     daemon begins toward one peer are at most punchPeerBudget per
//     punchBudgetWindow (10 tries of up to three DCUtR rounds, where the
//     first try connects in practice: the lab's endpoint-independent
//     cells connected in the first try every time), counted in a table of
//     at most punchBudgetPeers peers that outlives the peer's connections
//     (peerBudget). Each round's TCP connects are bounded again in
//     punchTCP.
//   - Rounds, whoever begins them: go-libp2p also punches on its own
//     (once per new relayed connection) and answers a peer's CONNECT
//     message whenever the peer sends one (where this daemon dialled it
//     through a relay), dialling the addresses the peer named. The
//     address filter go-libp2p consults in every round (FilterRemote)
//     counts a peer's rounds, at most punchRoundBudget per
//     punchBudgetWindow, past which the round dials nothing, and dials
//     at most punchRemoteAddrs of the addresses a peer named. The relay bounds it too: a relayed connection lasts at
//     most the relay's circuit duration (relay.circuit_duration on an
//     ifaced relay, 2 minutes by default), and each try costs a few
//     hundred bytes of its data limit.
//   - Addresses for both transports: peers observe a daemon's address
//     only on the transport they are connected over, so the two sides of
//     a punch may know each other on different ones (one observed over
//     QUIC through its relay, the other over TCP). Where the NAT kept the
//     port of an observed address, each side also offers the same IP
//     with its other transport's listen port (inferAddrs).
//   - A log line per punch at info level: its outcome, round, transport
//     and time.
type Punch struct {
	log *slog.Logger

	mu    sync.Mutex
	svc   *holepunch.Service
	h     host.Host
	peers map[peer.ID]*punchPeer
	kick  chan struct{}

	budget *peerBudget // tries begun per peer and window
	rounds *peerBudget // rounds dialled per peer and window, whoever began them
	// connect begins a try (the service's DirectConnect); tests count
	// the tries through it. handled, if set, is called after each event
	// has been noted and the connections scanned.
	connect func(svc *holepunch.Service, id peer.ID) error
	handled func(e any)
}

type punchPeer struct {
	rounds   int       // rounds this daemon began in the current try (addrFilter)
	last     time.Time // when the last round began
	quicOnly bool      // this round offers and dials QUIC only
	tries    int       // tries the retry loop started since the last reset
	next     time.Time // the retry loop's next try, not before
	running  bool      // a try of the retry loop runs
}

const (
	punchRetryMin = 5 * time.Second
	punchRetryMax = time.Minute
	punchMaxTries = 5
	// punchDialTimeout bounds each round's connect (go-libp2p's default
	// is 10 s); a punch that works takes a round trip or two.
	punchDialTimeout = 5 * time.Second
	// punchTryGap: rounds further apart than this belong to different
	// tries (a try's rounds follow each other within a dial timeout).
	punchTryGap = 3 * punchDialTimeout
	// A peer's tries (each up to three DCUtR rounds) per window.
	punchPeerBudget   = 2 * punchMaxTries
	punchBudgetWindow = 10 * time.Minute
	punchBudgetPeers  = 1024
	// A peer's DCUtR rounds per window, on either side and whoever began
	// them: this daemon's tries (three rounds each) and as many again for
	// go-libp2p's own tries and the peer's.
	punchRoundBudget = 2 * 3 * punchPeerBudget
	// The addresses of the peer's dialled in one round: a daemon offers
	// a few (IPv4 and IPv6, TCP and QUIC, observed and inferred).
	punchRemoteAddrs = 16
)

// NewPunch prepares the daemon's hole punching: HostOptions go to the
// host, Start watches it.
func NewPunch(log *slog.Logger) *Punch {
	return &Punch{log: log, peers: map[peer.ID]*punchPeer{}, kick: make(chan struct{}, 1),
		budget:  newPeerBudget(punchPeerBudget, punchBudgetWindow, punchBudgetPeers),
		rounds:  newPeerBudget(punchRoundBudget, punchBudgetWindow, punchBudgetPeers),
		connect: (*holepunch.Service).DirectConnect,
	}
}

// HostOptions turn on go-libp2p's hole punching, configured as Punch says.
func (p *Punch) HostOptions() []libp2p.Option {
	return []libp2p.Option{libp2p.EnableHolePunching(
		func(s *holepunch.Service) error { p.mu.Lock(); p.svc = s; p.mu.Unlock(); return nil },
		holepunch.WithAddrFilter(addrFilter{p}),
		holepunch.WithTracer(tracer{p}),
		holepunch.DirectDialTimeout(punchDialTimeout),
	)}
}

// Start watches h and retries hole punching on relayed connections until
// ctx ends. spawn runs the loop (the node's, so that Close waits for it).
func (p *Punch) Start(ctx context.Context, h host.Host, spawn func(func()) bool) error {
	p.mu.Lock()
	p.h = h
	p.mu.Unlock()
	sub, err := h.EventBus().Subscribe([]any{
		new(event.EvtLocalAddressesUpdated), new(event.EvtLocalReachabilityChanged), new(event.EvtLocalProtocolsUpdated),
		new(event.EvtPeerProtocolsUpdated), new(event.EvtPeerIdentificationCompleted), new(event.EvtPeerConnectednessChanged),
	})
	if err != nil {
		return err
	}
	spawn(func() {
		defer sub.Close()
		p.run(ctx, sub.Out())
	})
	return nil
}

func (p *Punch) run(ctx context.Context, events <-chan any) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var e any
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			e = ev
			p.note(e)
		case <-p.kick:
		case <-timer.C:
		}
		next := p.scan(ctx)
		timer.Reset(time.Until(next))
		if e != nil && p.handled != nil {
			p.handled(e)
		}
	}
}

// note starts the retry count again when this host's addresses or
// reachability changed. Nothing a peer causes does: a peer's protocols
// change when it says so, and a peer that did not speak DCUtR yet was
// not tried (scan waits for it), so it needs no new count either.
func (p *Punch) note(e any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.(type) {
	case event.EvtLocalAddressesUpdated, event.EvtLocalReachabilityChanged:
		for _, pp := range p.peers {
			pp.tries, pp.next = 0, time.Time{}
		}
	}
}

// scan starts a try on each relayed connection that is due one, and
// returns when the next is due.
func (p *Punch) scan(ctx context.Context) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	next := now.Add(time.Hour)
	if p.svc == nil || p.h == nil || !slices.Contains(p.h.Mux().Protocols(), holepunch.Protocol) {
		return next // hole punching has not started (no public address yet)
	}
	for id, pp := range p.peers {
		if !pp.running && p.h.Network().Connectedness(id) == network.NotConnected {
			delete(p.peers, id)
		}
	}
	for _, c := range p.h.Network().Conns() {
		id := c.RemotePeer()
		if !relayedIn(c) || direct(p.h, id) != nil {
			continue
		}
		if ok, _ := p.h.Peerstore().SupportsProtocols(id, holepunch.Protocol); len(ok) == 0 {
			continue // the peer does not punch (yet: its protocols update brings scan back)
		}
		pp := p.peers[id]
		if pp == nil {
			pp = &punchPeer{}
			p.peers[id] = pp
		}
		if pp.running || pp.tries >= punchMaxTries {
			continue
		}
		if pp.next.After(now) {
			next = minTime(next, pp.next)
			continue
		}
		if !p.budget.take(id, now) {
			continue // this peer's tries for the window are spent
		}
		pp.running, pp.rounds = true, 0
		pp.tries++
		try := pp.tries
		svc, connect := p.svc, p.connect
		// Not spawned: DirectConnect returns when the host closes (its
		// dials end with the service), except in one window go-libp2p
		// leaves (the service closed between registering DCUtR and
		// starting its puncher), where it would wait for ever; the
		// process is ending then, and Close must not wait on it.
		go func() {
			err := connect(svc, id)
			p.mu.Lock()
			pp.running = false
			wait := punchRetryMin << min(try-1, 4)
			if errors.Is(err, holepunch.ErrHolePunchActive) {
				pp.tries-- // go-libp2p's own try runs; look again after it
				wait = punchRetryMin
			}
			pp.next = time.Now().Add(min(wait, punchRetryMax))
			p.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				p.log.Debug("hole punching: try failed", "peer", id, "try", try, "err", err)
			}
			select {
			case p.kick <- struct{}{}:
			default:
			}
		}()
	}
	return next
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// peer returns id's state, making it. The states are forgotten when scan
// finds their peer disconnected, which may be an hour away, and any peer
// that reaches this daemon through a relay can send DCUtR rounds
// (FilterRemote makes the answering side's state): so past
// punchBudgetPeers a new state takes the place of one that holds
// nothing live (forgetOne), and when every state does, the round gets a
// state of its own that is not kept (its QUIC-first choice is still made;
// what this daemon counts for the peer is p.rounds, kept apart). scan
// keeps every state it makes: those are of relayed connections, which
// the connection manager bounds. Called with p.mu held.
func (p *Punch) peer(id peer.ID, now time.Time) *punchPeer {
	pp := p.peers[id]
	if pp == nil {
		pp = &punchPeer{}
		if len(p.peers) >= punchBudgetPeers && !p.forgetOne(now) {
			return pp
		}
		p.peers[id] = pp
	}
	return pp
}

// forgetOne forgets the states that hold nothing live: of peers no longer
// connected, or else the one whose last round is oldest among those with
// no try running, no retry waiting (next) and no round within
// punchTryGap. It reports whether it forgot any.
func (p *Punch) forgetOne(now time.Time) bool {
	var oldest peer.ID
	var at time.Time
	forgot := false
	for id, pp := range p.peers {
		if pp.running {
			continue
		}
		if p.h != nil && p.h.Network().Connectedness(id) == network.NotConnected {
			delete(p.peers, id)
			forgot = true
			continue
		}
		if pp.next.After(now) || now.Sub(pp.last) <= punchTryGap {
			continue
		}
		if oldest == "" || pp.last.Before(at) {
			oldest, at = id, pp.last
		}
	}
	if !forgot && oldest != "" {
		delete(p.peers, oldest)
		forgot = true
	}
	return forgot
}

// relayedIn: c came in through a relay (this side initiates DCUtR on it).
func relayedIn(c network.Conn) bool {
	return c.Stat().Direction == network.DirInbound && isCircuit(c.RemoteMultiaddr())
}

func isCircuit(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

func isQUIC(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_QUIC_V1)
	return err == nil && !isCircuit(a)
}

// direct is a connection to id that does not go through a relay, or nil.
func direct(h host.Host, id peer.ID) network.Conn {
	for _, c := range h.Network().ConnsToPeer(id) {
		if !isCircuit(c.RemoteMultiaddr()) {
			return c
		}
	}
	return nil
}

// addrFilter makes the initiator's first round of a try QUIC only when
// both peers have QUIC: the initiator offers only its QUIC addresses (so
// the other side dials only those) and dials only the other side's.
type addrFilter struct{ p *Punch }

// FilterLocal: the addresses this daemon offers. The initiator calls it
// first in each round.
func (f addrFilter) FilterLocal(remote peer.ID, addrs []ma.Multiaddr) []ma.Multiaddr {
	p := f.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.h == nil {
		return addrs
	}
	addrs = inferAddrs(addrs, p.h.Network().ListenAddresses())
	if !initiator(p.h, remote) {
		return addrs
	}
	now := time.Now()
	pp := p.peer(remote, now)
	if now.Sub(pp.last) > punchTryGap {
		pp.rounds = 0
	}
	pp.rounds++
	pp.last = now
	localQUIC, remoteQUIC := slices.ContainsFunc(addrs, isQUIC), slices.ContainsFunc(p.h.Peerstore().Addrs(remote), isQUIC)
	pp.quicOnly = pp.rounds == 1 && localQUIC && remoteQUIC
	// Which transports a round offers decides which connection forms:
	// said for each round, with why the first is not QUIC only.
	p.log.Info("hole punching: round begins", "peer", remote, "round", pp.rounds, "quic_only", pp.quicOnly,
		"offered", len(addrs), "quic_here", localQUIC, "quic_there", remoteQUIC)
	if pp.quicOnly {
		return slices.DeleteFunc(slices.Clone(addrs), func(a ma.Multiaddr) bool { return !isQUIC(a) })
	}
	return addrs
}

// FilterRemote: the addresses this daemon dials. go-libp2p calls it once
// per round, on either side, whoever began the round (this daemon's
// tries, go-libp2p's own try on each new relayed connection, or a peer
// that sends a CONNECT, which it may do at will when this daemon dialled
// it through a relay): so a peer's rounds are counted here, at most
// punchRoundBudget per punchBudgetWindow, and past that nothing is
// dialled (the round fails). At most punchRemoteAddrs of the addresses
// the peer named are dialled in a round.
func (f addrFilter) FilterRemote(remote peer.ID, addrs []ma.Multiaddr) []ma.Multiaddr {
	p := f.p
	if !p.rounds.take(remote, time.Now()) {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.h == nil {
		return addrs[:min(len(addrs), punchRemoteAddrs)]
	}
	now := time.Now()
	pp := p.peer(remote, now)
	init := initiator(p.h, remote)
	if !init {
		// The answering side counts its rounds here (the initiator did in
		// FilterLocal).
		if now.Sub(pp.last) > punchTryGap {
			pp.rounds = 0
		}
		pp.rounds++
		pp.last = now
	}
	// QUIC first, on both sides: in a try's first round, when the peer
	// offered QUIC addresses and this daemon listens on QUIC, only those
	// are dialled. The initiator's own offer leaves out TCP only when it
	// already knew the peer's QUIC address (FilterLocal); when it did not
	// (the peer's public QUIC address is often not yet observed when two
	// daemons greet as soon as they start), the round offered both, and
	// without this each side dialled both and whichever handshake ended
	// first won: TCP as often as not.
	quicHere := slices.ContainsFunc(p.h.Network().ListenAddresses(), isQUIC)
	if (init && pp.quicOnly || pp.rounds == 1 && quicHere) && slices.ContainsFunc(addrs, isQUIC) {
		addrs = slices.DeleteFunc(slices.Clone(addrs), func(a ma.Multiaddr) bool { return !isQUIC(a) })
	}
	return addrs[:min(len(addrs), punchRemoteAddrs)]
}

// initiator: this daemon was dialled through a relay by remote, so it
// starts DCUtR (go-libp2p's rule).
func initiator(h host.Host, remote peer.ID) bool {
	return slices.ContainsFunc(h.Network().ConnsToPeer(remote), relayedIn)
}

// tracer logs go-libp2p's hole punching events.
type tracer struct{ p *Punch }

func (t tracer) Trace(e *holepunch.Event) {
	p := t.p
	switch ev := e.Evt.(type) {
	case *holepunch.EndHolePunchEvt:
		p.mu.Lock()
		round, try := 0, 0
		if pp := p.peers[e.Remote]; pp != nil {
			round, try = pp.rounds, pp.tries
		}
		h := p.h
		p.mu.Unlock()
		if !ev.Success {
			p.log.Info("hole punching: round failed", "peer", e.Remote, "round", round, "retry", try, "took", ev.EllapsedTime, "err", ev.Error)
			return
		}
		tr := "unknown"
		if h != nil {
			if c := direct(h, e.Remote); c != nil {
				tr = "tcp"
				if isQUIC(c.RemoteMultiaddr()) {
					tr = "quic"
				}
			}
		}
		p.log.Info("hole punching: direct connection", "peer", e.Remote, "round", round, "retry", try, "transport", tr, "took", ev.EllapsedTime)
	case *holepunch.DirectDialEvt:
		if ev.Success {
			p.log.Info("hole punching: direct connection without a punch (the peer is reachable)", "peer", e.Remote)
		}
	case *holepunch.ProtocolErrorEvt:
		p.log.Debug("hole punching: protocol error", "peer", e.Remote, "err", ev.Error)
	}
}

// inferAddrs adds to the public addresses peers observed for this daemon
// the ones its other transports most likely have: where an observed
// address kept the port this daemon listens on with that transport (the
// NAT preserves ports, as endpoint-independent ones mostly do), the same
// public IP with the port of each other transport it listens on. Peers
// observe only the transport they are connected over, and the two sides
// of a punch may each have been observed over a different one (one over
// QUIC through its relay, the other over TCP); with the inferred
// addresses both offer both, and the round can use the one they share.
// A wrong guess costs one failed dial of a punch.
func inferAddrs(observed, listen []ma.Multiaddr) []ma.Multiaddr {
	out := slices.Clone(observed)
	for _, o := range observed {
		if isCircuit(o) || len(o) < 2 {
			continue
		}
		kind, port := transportOf(o)
		if kind == "" {
			continue
		}
		preserved := false
		for _, l := range listen {
			if k, lp := transportOf(l); k == kind && lp == port && l[0].Code() == o[0].Code() {
				preserved = true
			}
		}
		if !preserved {
			continue
		}
		for _, l := range listen {
			if k, _ := transportOf(l); k == "" || k == kind || l[0].Code() != o[0].Code() {
				continue
			}
			guess := append(ma.Multiaddr{o[0]}, l[1:]...)
			if !slices.ContainsFunc(out, guess.Equal) {
				out = append(out, guess)
			}
		}
	}
	return out
}

// transportOf is "tcp" or "quic" for a plain TCP or QUIC v1 address, with
// its port, or "" for anything else.
func transportOf(a ma.Multiaddr) (kind, port string) {
	if len(a) < 2 || (a[0].Code() != ma.P_IP4 && a[0].Code() != ma.P_IP6) {
		return "", ""
	}
	switch {
	case len(a) == 2 && a[1].Code() == ma.P_TCP:
		return "tcp", a[1].Value()
	case len(a) == 3 && a[1].Code() == ma.P_UDP && a[2].Code() == ma.P_QUIC_V1:
		return "quic", a[1].Value()
	}
	return "", ""
}
