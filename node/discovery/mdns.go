package discovery

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/tasks"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
)

// LAN discovery. With [discovery] mdns on, the daemon advertises its
// addresses by multicast DNS under discovery.mdns_service and browses for
// other daemons doing the same. A daemon found is connected to and the two
// exchange views with one capabilities query — not a conversation — which
// caches each side's view at the other: the query's greeting carries the
// initiator's view, and the answer the responder's.
//
// Both sides find each other at about the same time, so only one queries:
// the one whose peer ID sorts lower. The other waits mdnsGrace for that
// query and queries itself only if none came (the lower one's query
// failed, or it does not browse).

// EventLANPeer: a daemon was found on the LAN by mDNS and connected to.
const EventLANPeer = "lan_peer"

const (
	// mdnsFresh: a view fetched this recently is not fetched again, and a
	// peer found again within it is not announced again as an event.
	mdnsFresh = 5 * time.Minute
	// mdnsGrace is how long the higher peer ID waits for the lower one's query.
	mdnsGrace = 5 * time.Second
	// mdnsConnectTimeout bounds the dial to a peer found.
	mdnsConnectTimeout = 10 * time.Second
	// mdnsMaxPending bounds the peers handled at once: anyone on the LAN can
	// multicast answers naming as many peers as it likes.
	mdnsMaxPending = 32
)

// lanDiscovery is LAN discovery: it owns the mDNS service, the peers
// being connected to and queried, and when each was last reported to the
// local agent. It is the service's notifee (HandlePeerFound).
type lanDiscovery struct {
	host         host.Host
	peers        peerReader
	ask          querier
	events       eventSink
	queryTimeout time.Duration // one capabilities query (limits.stream_timeout)
	now          func() time.Time
	log          *slog.Logger
	svc          mdns.Service
	tasks        *tasks.Group

	mu    sync.Mutex
	busy  map[peer.ID]bool      // peers being connected to and queried
	found map[peer.ID]time.Time // when each peer was last reported as an event
}

// startLAN starts LAN discovery on h when cfg.MDNS is on, advertising
// under cfg.MDNSService; peers found are queried through ask, within
// queryTimeout. A host with no multicast interface (a container, say)
// cannot use it; that is logged and startLAN returns nil, LAN discovery
// off, since a daemon is reachable by every other means.
func startLAN(ctx context.Context, h host.Host, cfg config.DiscoveryConfig, queryTimeout time.Duration, peers peerReader, ask querier,
	evs eventSink, now func() time.Time, log *slog.Logger) *lanDiscovery {
	if !cfg.MDNS {
		return nil
	}
	m := &lanDiscovery{host: h, peers: peers, ask: ask, events: evs, queryTimeout: queryTimeout, now: now, log: log,
		tasks: tasks.New(ctx), busy: map[peer.ID]bool{}, found: map[peer.ID]time.Time{}}
	m.svc = mdns.NewMdnsService(h, cfg.MDNSService, m)
	if err := m.svc.Start(); err != nil {
		m.svc.Close()
		m.tasks.Close()
		log.Warn("LAN discovery (mDNS) is off: starting it failed", "service", cfg.MDNSService, "err", err)
		return nil
	}
	return m
}

// Close stops the mDNS service and waits for the peers being handled.
func (m *lanDiscovery) Close() error {
	err := m.svc.Close()
	m.tasks.Close()
	return err
}

// HandlePeerFound is called by the mDNS service, on a goroutine of its
// own, for every daemon found. It hands the peer to a task Close waits for.
func (m *lanDiscovery) HandlePeerFound(pi peer.AddrInfo) {
	if pi.ID == m.host.ID() || pi.ID == "" || len(pi.Addrs) == 0 {
		return
	}
	m.mu.Lock()
	if m.busy[pi.ID] || len(m.busy) >= mdnsMaxPending {
		m.mu.Unlock()
		return
	}
	m.busy[pi.ID] = true
	m.mu.Unlock()
	if !m.tasks.Go(func() { m.peerFound(pi) }) {
		m.done(pi.ID)
	}
}

func (m *lanDiscovery) done(pid peer.ID) {
	m.mu.Lock()
	delete(m.busy, pid)
	m.mu.Unlock()
}

// newlyFound records that pid was found and reports whether it had not
// been within mdnsFresh.
func (m *lanDiscovery) newlyFound(pid peer.ID, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if last, ok := m.found[pid]; ok && now.Sub(last) < mdnsFresh {
		return false
	}
	for p, last := range m.found {
		if now.Sub(last) >= mdnsFresh {
			delete(m.found, p)
		}
	}
	m.found[pid] = now
	return true
}

// peerFound connects to a daemon found on the LAN and, unless its view
// is fresh in the cache, exchanges views with it. Both daemons find each
// other at about the same moment, and two simultaneous dials can each
// fail the other's handshake; so only the lower peer ID dials at once,
// and the higher one waits up to mdnsGrace for that dial and query before
// it tries itself.
func (m *lanDiscovery) peerFound(pi peer.AddrInfo) {
	defer m.done(pi.ID)
	ctx := m.tasks.Context()
	if m.host.ID() > pi.ID && m.awaitQuery(pi.ID) {
		m.peerEvent(pi)
		return
	}
	var err error
	for attempt, wait := 0, 250*time.Millisecond; attempt < 3; attempt, wait = attempt+1, wait*2 {
		cctx, cancel := context.WithTimeout(ctx, mdnsConnectTimeout)
		err = m.host.Connect(cctx, pi)
		cancel()
		if err == nil || ctx.Err() != nil || !m.tasks.Sleep(wait) {
			break
		}
	}
	if err != nil {
		m.log.Info("connecting to a LAN peer found by mDNS", "peer", pi.ID, "err", err)
		return
	}
	m.peerEvent(pi)
	if m.viewFresh(pi.ID) {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, m.queryTimeout)
	defer cancel()
	r, err := m.ask.QueryCapabilities(qctx, pi.ID, negotiate.Proposal{})
	if err != nil {
		if ctx.Err() == nil {
			m.log.Info("querying the capabilities of a LAN peer", "peer", pi.ID, "err", err)
		}
		return
	}
	m.log.Info("LAN peer found", "peer", pi.ID, "agent", r.View.AgentID, "seq", r.View.Seq, "capabilities", len(r.View.Capabilities))
}

// awaitQuery waits up to mdnsGrace for the lower peer ID's query to have
// cached its view here, and reports whether it did.
func (m *lanDiscovery) awaitQuery(pid peer.ID) bool {
	deadline := time.NewTimer(mdnsGrace)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if m.viewFresh(pid) && m.host.Network().Connectedness(pid) == network.Connected {
			return true
		}
		select {
		case <-m.tasks.Context().Done():
			return false
		case <-deadline.C:
			return m.viewFresh(pid)
		case <-tick.C:
		}
	}
}

// peerEvent tells the local agent of a LAN peer, once per mdnsFresh.
func (m *lanDiscovery) peerEvent(pi peer.AddrInfo) {
	if now := m.now(); m.newlyFound(pi.ID, now) {
		addrs := make([]string, 0, len(pi.Addrs))
		for _, a := range pi.Addrs {
			addrs = append(addrs, a.String())
		}
		m.events.Publish(events.Event{Type: EventLANPeer, At: now, Peer: pi.ID.String(), Detail: "found on the LAN at " + strings.Join(addrs, ", ")})
	}
}

// viewFresh reports whether the cache holds a view of pid fetched within
// mdnsFresh.
func (m *lanDiscovery) viewFresh(pid peer.ID) bool {
	rec, err := m.peers.Peer(pid.String())
	return err == nil && rec.Age(m.now()) < mdnsFresh
}
