package node

// The trust component (package node/trust) seen from the daemon: its
// construction from the daemon's parts, the one accessor the control API
// uses, and thin delegators kept only so that the admission pipeline
// (converse.go, inbox.go, invoke.go, node.go) compiles unchanged while it
// is rewritten; they go once it calls n.trust itself.

import (
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// newTrust builds the trust component from the daemon's store, trust.*
// configuration, tier order, DID, clock, logger and lifetime. This is the
// only place the component meets *Node.
func newTrust(n *Node) *trust.Book {
	cfg := trust.Config{
		KeyTransition: n.cfg.Trust.KeyTransition.Duration,
		IntroExpiry:   n.cfg.Trust.IntroExpiry.Duration,
		CAFile:        n.cfg.Trust.CAFile,
		FetchPrivate:  n.cfg.Trust.FetchPrivate,
	}
	return trust.New(n.ctx, n.store, cfg, n.order, n.id.DID(), n.now, n.log, n.spawn)
}

// TrustBook is the daemon's trust component: trust records, pins and
// revocations, introduction tokens and identity document checks.
func (n *Node) TrustBook() *trust.Book { return n.trust }

// trustOf is the level and established agent ID of pid (trust.Book.LevelOf),
// given the greeting it sent (nil for none) and the agent ID its verified
// view presents ("" for none).
func (cs *Conversations) trustOf(pid peer.ID, greeting *gossip.Message, presented string) (conditions.Level, string) {
	return cs.trust.LevelOf(pid, greeting, presented)
}

// requester is what the daemon established about pid for its policy:
// its peer ID, the agent ID and level trust established, and the
// introductions admitted for it.
func (cs *Conversations) requester(pid peer.ID, level conditions.Level, agentID string) negotiate.Requester {
	return negotiate.Requester{PeerID: pid.String(), AgentID: agentID, Level: level, Introductions: cs.trust.Introductions(pid)}
}
