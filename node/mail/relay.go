package mail

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ifaced/ifaced/node/converse"

	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/p2phost"

	"github.com/ifaced/ifaced/node/internal/ratelimit"

	"github.com/ifaced/ifaced/node/events"

	"github.com/ifaced/ifaced/node/config"

	"github.com/ifaced/ifaced/node/internal/peerid"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/host"

	"github.com/ifaced/ifaced/identity"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/multiformats/go-multiaddr"
)

// Reachability. A daemon configured with [relay] use reserves a slot on
// each of those relays and keeps it: it reserves again before the
// reservation expires and as soon as the connection to the relay drops
// (with backoff while the relay is away). Each live reservation adds a
// /p2p-circuit address to the host's addresses, so identify tells peers
// how to reach it; the configured relays also go into the capability
// document's relay preferences (IFP-8 §2.3), whether or not a reservation
// is live at the moment, because they are where peers should look.
//
// go-libp2p's autorelay is not used: it advertises only relays with
// public addresses and picks relays itself, where ifaced's owner names
// them. Hole punching (DCUtR; node/p2phost's Punch) and AutoNAT are on,
// so a relayed connection is replaced by a direct one where the network
// allows; streams are opened with network.WithAllowLimitedConn, so
// conversations also work where it does not.
//
// A daemon with [relay] service = true serves circuit relay v2 with the
// configured resources at once, without waiting for AutoNAT to call it
// public (go-libp2p's EnableRelayService would wait), because its owner
// said it is a relay. With [relay] mailbox it also holds IFP-8 mailboxes
// (mailbox.go) for the peers that hold slots on it: the relay's own limits
// (relay.max_reservations at once, and go-libp2p's per-IP and per-ASN
// limits) govern who may have a mailbox.

// Mail owns reachability and store-and-forward: the relay service and the
// IFP-8 mailboxes it holds for others, this daemon's reservations on the
// relays it uses, the outbox of messages for peers that are away, and the
// mail it fetches for itself (which passes the door like any message).
type Mail struct {
	mailDeps

	kick    chan struct{}     // wakes the outbox worker
	retries []time.Duration   // IFP-6 §7 schedule
	rates   *ratelimit.Limits // mailbox requests per peer, at a relay
	slots   reservationBook   // who holds a slot on this relay now, at a relay
	// One fetch at a time per relay, so two fetches never deliver one
	// message twice; fetches from different relays run side by side (a
	// poll of one must not make the other's fetch, on reconnecting, skip
	// the mail waiting there).
	fetchMu  sync.Mutex
	fetching map[peer.ID]bool // relay → fetch again when the running one ends
	// At a relay: the recipients being told that mail waits, each → tell
	// again when the notice under way ends (tellWaiting).
	tellMu  sync.Mutex
	telling map[peer.ID]bool
	// The relays this daemon uses (relay.use), each → a notice from it that
	// mail waits (handleWaiting), for its keepReservation loop; set before
	// the handler, read only after.
	waiting map[peer.ID]chan struct{}
}

// mailDeps is what Mail is built from, and keeps.
type mailDeps struct {
	id         *identity.Identity
	cfg        *config.Config // listen, relay, mailbox and limits sections
	host       host.Host
	store      *store.Store
	door       *admit.Door
	mailReplay *identity.ReplayGuard   // mail is dated within mailbox.retention, not the replay window
	convs      *converse.Conversations // Send says text in a conversation when the peer is reachable
	events     *events.Hub
	log        *slog.Logger
	now        func() time.Time
	ctx        context.Context
	spawn      func(func()) bool
	onClose    func(func() error)
	commit     func() error // durable before a relay is told to let go of mail
	reach      *Reach
	retries    []time.Duration                                   // nil: the IFP-6 §7 schedule
	handler    func(network.StreamHandler) network.StreamHandler // counts a stream handler among what Close waits for
}

// Deps is what New builds the mail component from.
type Deps struct {
	ID         *identity.Identity
	Config     *config.Config // listen, relay, mailbox and limits sections
	Host       host.Host
	Store      *store.Store
	Door       *admit.Door
	MailReplay *identity.ReplayGuard   // mail is dated within mailbox.retention, not the replay window
	Convs      *converse.Conversations // Send says text in a conversation when the peer is reachable
	Events     *events.Hub
	Log        *slog.Logger
	Now        func() time.Time
	Ctx        context.Context
	Spawn      func(func()) bool
	OnClose    func(func() error)
	Commit     func() error                                      // durable before a relay is told to let go of mail
	Reach      *Reach                                            // built before the host (NewReach)
	Retries    []time.Duration                                   // nil: the IFP-6 §7 schedule
	Handler    func(network.StreamHandler) network.StreamHandler // counts a stream handler among what Close waits for
}

// New builds the mail component and starts reachability: the relay
// service when configured, and a reservation kept on each configured
// relay. RunOutbox delivers what waits for peers that are away.
func New(d Deps) (*Mail, error) {
	mb := newMail(mailDeps{id: d.ID, cfg: d.Config, host: d.Host, store: d.Store, door: d.Door, mailReplay: d.MailReplay,
		convs: d.Convs, events: d.Events, log: d.Log, now: d.Now, ctx: d.Ctx, spawn: d.Spawn, onClose: d.OnClose,
		commit: d.Commit, reach: d.Reach, retries: d.Retries, handler: d.Handler})
	if err := mb.startReach(); err != nil {
		return nil, err
	}
	return mb, nil
}

func newMail(d mailDeps) *Mail {
	retries := d.retries
	if len(retries) == 0 {
		retries = mailRetries
	}
	return &Mail{mailDeps: d, kick: make(chan struct{}, 1), retries: retries, fetching: map[peer.ID]bool{}, telling: map[peer.ID]bool{},
		rates: ratelimit.New(config.RatesConfig{Cool: 60, Warm: 60, Hot: 60}, d.now), slots: newReservationBook(d.host)}
}

// Reach is the relay service and this daemon's reservations, shared by
// the host (its addresses) and the mail component.
type Reach struct {
	service *relayv2.Relay // nil unless relay.service
	tracer  relayTracer    // the service's slots and circuits, counted (figures.go)

	mu       sync.Mutex
	circuits map[peer.ID][]multiaddr.Multiaddr // live reservations: relay → this daemon's circuit addresses through it
	// changed tells the host that the circuit addresses changed, so that
	// it advertises them at once (identify push) rather than at its next
	// periodic address check, seconds later; peers that dialled through a
	// relay meanwhile would otherwise be told of no address at all.
	changed func()
}

// relayRetry bounds the wait between attempts to reserve on a relay that
// is away; attempts start at relayRetryMin and double.
const (
	relayRetryMin = 500 * time.Millisecond
	relayRetryMax = time.Minute
)

// NewReach is the reachability state the host is built with: HostOptions
// are the libp2p options it adds, and the mail component (New) keeps the
// reservations in it.
func NewReach() *Reach { return &Reach{circuits: map[peer.ID][]multiaddr.Multiaddr{}} }

// HostOptions are the libp2p options reachability adds to the host.
func (r *Reach) HostOptions(cfg *config.Config) []libp2p.Option {
	opts := []libp2p.Option{
		libp2p.EnableRelay(), // the circuit transport: dial through relays, and be dialled through ours
		libp2p.EnableNATService(),
		libp2p.EnableAutoNATv2(),
		libp2p.AddrsFactory(func(addrs []multiaddr.Multiaddr) []multiaddr.Multiaddr {
			// The host may list the circuits already (when it thinks itself
			// private, from the relay address event): each once.
			for _, c := range r.circuitAddrs() {
				if !slices.ContainsFunc(addrs, c.Equal) {
					addrs = append(addrs, c)
				}
			}
			return addrs
		}),
	}
	if len(cfg.Listen.Addresses) == 0 {
		// Reachable only through relays (a daemon behind a NAT that
		// accepts nothing directly).
		opts = append(opts, libp2p.NoListenAddrs)
	}
	return opts
}

// circuitAddrs are this daemon's addresses through its live reservations.
func (r *Reach) circuitAddrs() []multiaddr.Multiaddr {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []multiaddr.Multiaddr
	for _, id := range slices.Sorted(maps.Keys(r.circuits)) {
		out = append(out, r.circuits[id]...)
	}
	return out
}

func (r *Reach) setCircuits(relay peer.ID, addrs []multiaddr.Multiaddr) {
	r.mu.Lock()
	if addrs == nil {
		delete(r.circuits, relay)
	} else {
		r.circuits[relay] = addrs
	}
	changed := r.changed
	r.mu.Unlock()
	if changed != nil {
		changed()
	}
}

// RelayReservations lists the relays this daemon holds a live slot on.
func (mb *Mail) RelayReservations() []peer.ID {
	mb.reach.mu.Lock()
	defer mb.reach.mu.Unlock()
	return slices.Sorted(maps.Keys(mb.reach.circuits))
}

// RelayService reports whether this daemon serves circuit relay v2.
func (mb *Mail) RelayService() bool { return mb.reach.service != nil }

// configuredRelays parses relay.use (already validated by the config).
// Entries naming the same relay are one relay with several addresses (its
// QUIC and TCP ones, say): one reservation, dialled on any of them
// (go-libp2p tries QUIC first), so that the address peers observe for
// this daemon is a QUIC one where the relay is reachable over QUIC.
func configuredRelays(cfg *config.Config, self peer.ID) []peer.AddrInfo {
	var out []peer.AddrInfo
	for _, s := range cfg.Relay.Use {
		info, err := peer.AddrInfoFromString(s)
		if err != nil || info.ID == self {
			continue
		}
		if i := slices.IndexFunc(out, func(o peer.AddrInfo) bool { return o.ID == info.ID }); i >= 0 {
			out[i].Addrs = append(out[i].Addrs, info.Addrs...)
			continue
		}
		out = append(out, *info)
	}
	return out
}

// RelayPreferences are the IFP-8 §2.3 relay preferences for this daemon:
// its circuit address through each configured relay.
func RelayPreferences(cfg *config.Config, self peer.ID) *identity.Relay {
	var urls []string
	for _, info := range configuredRelays(cfg, self) {
		for _, a := range circuitThrough(info) {
			urls = append(urls, a.String()+"/p2p/"+self.String())
		}
	}
	if len(urls) == 0 {
		return nil
	}
	return &identity.Relay{URLs: urls, Preference: "any"}
}

// circuitThrough turns a relay's addresses into circuit addresses
// (relay address/p2p/<relay>/p2p-circuit), as the host advertises them.
func circuitThrough(info peer.AddrInfo) []multiaddr.Multiaddr {
	var out []multiaddr.Multiaddr
	suffix, err := multiaddr.NewMultiaddr("/p2p/" + info.ID.String() + "/p2p-circuit")
	if err != nil {
		return nil
	}
	for _, a := range info.Addrs {
		out = append(out, a.Encapsulate(suffix))
	}
	return out
}

// startReach starts the relay service when configured, and keeps a
// reservation on each configured relay.
func (mb *Mail) startReach() error {
	if mb.cfg.Relay.Service {
		rc := relayv2.DefaultResources()
		rc.MaxReservations = mb.cfg.Relay.MaxReservations
		rc.MaxCircuits = mb.cfg.Relay.MaxCircuits
		rc.Limit = &relayv2.RelayLimit{Duration: mb.cfg.Relay.CircuitDuration.Duration, Data: int64(mb.cfg.Relay.CircuitDataKB) << 10}
		// No ACL: anyone may reserve and connect, within the resources.
		// (Mailboxes are not registered from an ACL: go-libp2p asks it
		// before applying the limits, so a peer it is asked about may yet
		// be refused its slot; see reservationBook.)
		svc, err := relayv2.New(mb.host, relayv2.WithResources(rc), relayv2.WithMetricsTracer(&mb.reach.tracer))
		if err != nil {
			return fmt.Errorf("starting relay service: %w", err)
		}
		mb.reach.service = svc
		mb.onClose(svc.Close)
	}
	if mb.cfg.Relay.Service && mb.cfg.Relay.Mailbox {
		mb.host.SetStreamHandler(mailboxProtocol, mb.handler(mb.handleMailbox))
	}
	relays := configuredRelays(mb.cfg, mb.id.PeerID())
	if len(relays) == 0 {
		return nil
	}
	// The host's address manager takes relay addresses from this event
	// (go-libp2p's autorelay emits it; ifaced keeps its own reservations).
	em, err := mb.host.EventBus().Emitter(new(event.EvtAutoRelayAddrsUpdated), eventbus.Stateful)
	if err != nil {
		return fmt.Errorf("announcing relay addresses: %w", err)
	}
	mb.onClose(em.Close)
	mb.reach.mu.Lock()
	mb.reach.changed = func() {
		if err := em.Emit(event.EvtAutoRelayAddrsUpdated{RelayAddrs: mb.reach.circuitAddrs()}); err != nil {
			mb.log.Debug("announcing relay addresses", "err", err)
		}
	}
	mb.reach.mu.Unlock()
	sub, err := mb.host.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged))
	if err != nil {
		return fmt.Errorf("watching relay connections: %w", err)
	}
	mb.onClose(sub.Close)
	lost := map[peer.ID]chan struct{}{}
	mb.waiting = map[peer.ID]chan struct{}{}
	for _, info := range relays {
		lost[info.ID] = make(chan struct{}, 1)
		mb.waiting[info.ID] = make(chan struct{}, 1)
	}
	mb.host.SetStreamHandler(wire.MailWaiting, mb.handler(mb.handleWaiting))
	mb.spawn(func() {
		for {
			select {
			case <-mb.ctx.Done():
				return
			case e, ok := <-sub.Out():
				if !ok {
					return
				}
				ev := e.(event.EvtPeerConnectednessChanged)
				if ch, ok := lost[ev.Peer]; ok && ev.Connectedness != network.Connected {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}
		}
	})
	for _, info := range relays {
		mb.spawn(func() { mb.keepReservation(info, lost[info.ID], mb.waiting[info.ID]) })
	}
	return nil
}

// handleWaiting takes a relay's notice that mail waits for this daemon
// there (wire.MailWaiting, a stream without bytes). Only the relays this
// daemon uses are heard, and keepReservation paces the fetches they
// prompt; anyone else's stream is reset, unread.
func (mb *Mail) handleWaiting(s network.Stream) {
	ch, ok := mb.waiting[s.Conn().RemotePeer()]
	if !ok {
		mb.log.Debug("ignored a notice that mail waits: the peer is not a relay this daemon uses", "peer", mb.named(s.Conn().RemotePeer()))
		s.Reset()
		return
	}
	if err := s.Scope().SetService(wire.ServiceName); err != nil {
		s.Reset()
		return
	}
	s.Close()
	select {
	case ch <- struct{}{}:
	default: // one is pending already
	}
}

// waitingGap is the least time between two fetches from one relay that
// its notices prompt (handleWaiting): a relay that sends notices in a loop
// makes this daemon fetch there once a second, no more.
const waitingGap = time.Second

// keepReservation holds a slot on one relay until the node closes, and
// fetches the mail waiting there: on each reservation, every mailbox.poll,
// and when the relay says mail waits (waiting), at most once a waitingGap.
func (mb *Mail) keepReservation(info peer.AddrInfo, lost, waiting <-chan struct{}) {
	var lastTold time.Time    // when a notice last prompted a fetch
	var told <-chan time.Time // a notice's fetch held back until the gap is up
	var toldTimer *time.Timer
	wait := relayRetryMin
	for {
		// Not held back by the swarm's dial backoff: this loop paces its
		// own attempts, and a relay that restarted is to be used again at
		// the next one.
		p2phost.ForgetDialFailures(mb.host, info.ID)
		ctx, cancel := context.WithTimeout(mb.ctx, mb.cfg.Limits.StreamTimeout.Duration)
		res, err := client.Reserve(ctx, mb.host, info)
		cancel()
		if mb.ctx.Err() != nil {
			return
		}
		if err != nil {
			mb.reach.setCircuits(info.ID, nil)
			mb.log.Info("reserving a relay slot failed; retrying", "relay", info.ID, "in", wait, "err", err)
			if !mb.sleep(wait) {
				return
			}
			wait = min(2*wait, relayRetryMax)
			continue
		}
		wait = relayRetryMin
		mb.reach.setCircuits(info.ID, circuitThrough(info))
		mb.log.Info("holding a relay slot", "relay", info.ID, "until", res.Expiration.Format(time.RFC3339),
			"limit_duration", res.LimitDuration, "limit_kb", res.LimitData>>10)
		mb.events.Publish(events.Event{Type: events.EventRelay, At: mb.now(), Peer: info.ID.String(),
			Detail: "reserved a slot until " + res.Expiration.UTC().Format(time.RFC3339)})
		// The mail waiting at a relay is fetched each time this daemon is
		// back on it, and then every mailbox.poll.
		mb.spawn(func() { mb.Fetch(info.ID) })
		// Renew when three quarters of the reservation are gone, or at
		// once when the relay goes away.
		renew := time.NewTimer(max(time.Until(res.Expiration)*3/4, time.Second))
		poll := time.NewTicker(mb.cfg.Mailbox.Poll.Duration)
		drop := false
	held:
		for {
			select {
			case <-mb.ctx.Done():
				renew.Stop()
				poll.Stop()
				if toldTimer != nil {
					toldTimer.Stop()
				}
				return
			case <-renew.C:
				break held
			case <-poll.C:
				mb.spawn(func() { mb.Fetch(info.ID) })
			case <-waiting:
				if told != nil {
					break // a fetch is due at the gap's end already
				}
				if gap := waitingGap - time.Since(lastTold); gap > 0 {
					toldTimer = time.NewTimer(gap)
					told = toldTimer.C
					break
				}
				lastTold = time.Now()
				mb.spawn(func() { mb.Fetch(info.ID) })
			case <-told:
				told, toldTimer = nil, nil
				lastTold = time.Now()
				mb.spawn(func() { mb.Fetch(info.ID) })
			case <-lost:
				if mb.host.Network().Connectedness(info.ID) != network.Connected {
					drop = true
					break held
				}
			}
		}
		renew.Stop()
		poll.Stop()
		if drop {
			mb.reach.setCircuits(info.ID, nil)
			mb.log.Info("lost the connection to a relay; reserving again", "relay", info.ID)
			mb.events.Publish(events.Event{Type: events.EventRelay, At: mb.now(), Peer: info.ID.String(), Detail: "lost the relay; reserving again"})
			if !mb.sleep(wait) {
				return
			}
		}
	}
}

// sleep waits d, or until the node closes (then it returns false).
func (mb *Mail) sleep(d time.Duration) bool { return sleepCtx(mb.ctx, d) }

// sleepCtx waits d, or until ctx ends (then it returns false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// reservationBook answers whether a peer holds a circuit relay v2 slot on
// this daemon's relay service right now, for the mailboxes: only such a
// peer may register one.
//
// go-libp2p v0.51 has no call for it: the relay's table is unexported, the
// resource manager sees only the service's memory, the ACL is asked before
// the per-IP, per-ASN and total limits are applied, and the metrics
// tracer is told of reservations without the peer. What the relay does
// expose is the connection manager tag it sets on a peer, under its lock,
// in the same step that grants the slot ("relay-reservation", weight
// relayv2.ReservationTagWeight), and removes when the slot expires; the
// basic connection manager forgets a peer's tags with its last
// connection, which is when the relay drops the slot too. A peer holds a
// slot exactly while it is connected and carries that tag.
// TestReservationBookFollowsTheRelay pins this to the go-libp2p in use.
type reservationBook struct{ host host.Host }

// relayReservationTag is the tag go-libp2p's relay service sets on a peer
// that holds a slot (circuitv2/relay, handleReserve and gc).
const relayReservationTag = "relay-reservation"

func newReservationBook(h host.Host) reservationBook { return reservationBook{host: h} }

// Holds reports whether p holds a slot now.
func (b reservationBook) Holds(p peer.ID) bool {
	if b.host.Network().Connectedness(p) != network.Connected {
		return false
	}
	info := b.host.ConnManager().GetTagInfo(p)
	return info != nil && info.Tags[relayReservationTag] > 0
}

// named is pid as log lines name it (peerid.Named).
func (mb *Mail) named(pid peer.ID) slog.LogValuer { return peerid.Named(pid, mb.store) }
