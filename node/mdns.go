package node

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/ifaced/ifaced/negotiate"
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

// mdnsState is LAN discovery: the mDNS service and the peers found.
type mdnsState struct {
	n *Node

	mu    sync.Mutex
	busy  map[peer.ID]bool      // peers being connected to and queried
	found map[peer.ID]time.Time // when each peer was last reported as an event
}

// startMDNS starts LAN discovery when [discovery] mdns is on. A host with
// no multicast interface (a container, say) cannot use it; that is logged
// and the daemon runs without it, since a daemon is reachable by every
// other means.
func (n *Node) startMDNS() error {
	if !n.cfg.Discovery.MDNS {
		return nil
	}
	m := &mdnsState{n: n, busy: map[peer.ID]bool{}, found: map[peer.ID]time.Time{}}
	svc := mdns.NewMdnsService(n.host, n.cfg.Discovery.MDNSService, m)
	if err := svc.Start(); err != nil {
		svc.Close()
		n.log.Warn("LAN discovery (mDNS) is off: starting it failed", "service", n.cfg.Discovery.MDNSService, "err", err)
		return nil
	}
	n.mdns = m
	n.onClose(svc.Close)
	return nil
}

// HandlePeerFound is called by the mDNS service, on a goroutine of its
// own, for every daemon found. It hands the peer to a task Close waits for.
func (m *mdnsState) HandlePeerFound(pi peer.AddrInfo) {
	n := m.n
	if pi.ID == n.host.ID() || pi.ID == "" || len(pi.Addrs) == 0 {
		return
	}
	m.mu.Lock()
	if m.busy[pi.ID] || len(m.busy) >= mdnsMaxPending {
		m.mu.Unlock()
		return
	}
	m.busy[pi.ID] = true
	m.mu.Unlock()
	if !n.spawn(func() { n.lanPeerFound(m, pi) }) {
		m.done(pi.ID)
	}
}

func (m *mdnsState) done(pid peer.ID) {
	m.mu.Lock()
	delete(m.busy, pid)
	m.mu.Unlock()
}

// newlyFound records that pid was found and reports whether it had not
// been within mdnsFresh.
func (m *mdnsState) newlyFound(pid peer.ID, now time.Time) bool {
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

// lanPeerFound connects to a daemon found on the LAN and, unless its view
// is fresh in the cache, exchanges views with it. Both daemons find each
// other at about the same moment, and two simultaneous dials can each
// fail the other's handshake; so only the lower peer ID dials at once,
// and the higher one waits up to mdnsGrace for that dial and query before
// it tries itself.
func (n *Node) lanPeerFound(m *mdnsState, pi peer.AddrInfo) {
	defer m.done(pi.ID)
	if n.host.ID() > pi.ID && n.awaitLANQuery(pi.ID) {
		n.lanPeerEvent(m, pi)
		return
	}
	var err error
	for attempt, wait := 0, 250*time.Millisecond; attempt < 3; attempt, wait = attempt+1, wait*2 {
		ctx, cancel := context.WithTimeout(n.ctx, mdnsConnectTimeout)
		err = n.host.Connect(ctx, pi)
		cancel()
		if err == nil || n.ctx.Err() != nil || !n.sleep(wait) {
			break
		}
	}
	if err != nil {
		n.log.Info("connecting to a LAN peer found by mDNS", "peer", pi.ID, "err", err)
		return
	}
	n.lanPeerEvent(m, pi)
	if n.viewFresh(pi.ID) {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Limits.StreamTimeout.Duration)
	defer cancel()
	r, err := n.QueryCapabilities(ctx, pi.ID, negotiate.Proposal{})
	if err != nil {
		if n.ctx.Err() == nil {
			n.log.Info("querying the capabilities of a LAN peer", "peer", pi.ID, "err", err)
		}
		return
	}
	n.log.Info("LAN peer found", "peer", pi.ID, "agent", r.View.AgentID, "seq", r.View.Seq, "capabilities", len(r.View.Capabilities))
}

// awaitLANQuery waits up to mdnsGrace for the lower peer ID's query to
// have cached its view here, and reports whether it did.
func (n *Node) awaitLANQuery(pid peer.ID) bool {
	deadline := time.NewTimer(mdnsGrace)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if n.viewFresh(pid) && n.host.Network().Connectedness(pid) == network.Connected {
			return true
		}
		select {
		case <-n.ctx.Done():
			return false
		case <-deadline.C:
			return n.viewFresh(pid)
		case <-tick.C:
		}
	}
}

// lanPeerEvent tells the local agent of a LAN peer, once per mdnsFresh.
func (n *Node) lanPeerEvent(m *mdnsState, pi peer.AddrInfo) {
	if now := n.now(); m.newlyFound(pi.ID, now) {
		addrs := make([]string, 0, len(pi.Addrs))
		for _, a := range pi.Addrs {
			addrs = append(addrs, a.String())
		}
		n.events.publish(Event{Type: EventLANPeer, At: now, Peer: pi.ID.String(), Detail: "found on the LAN at " + strings.Join(addrs, ", ")})
	}
}

// viewFresh reports whether the cache holds a view of pid fetched within
// mdnsFresh.
func (n *Node) viewFresh(pid peer.ID) bool {
	rec, err := n.store.Peer(pid.String())
	return err == nil && rec.Age(n.now()) < mdnsFresh
}
