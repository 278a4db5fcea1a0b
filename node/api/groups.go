package api

import (
	"log/slog"
	"slices"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// routeGroups are the API's endpoints, grouped by what they need of the
// daemon. Each group declares, beside its handlers, the small interfaces
// it uses; groupsFor hands it the component that has them.
type routeGroups struct {
	status   *statusRoutes       // GET /v1/status (handlers.go)
	peers    *peerRoutes         // /v1/peers, /v1/peers/{peer}, /v1/connect, GET /v1/caps/{peer} (handlers.go)
	caps     *capRoutes          // the owner's capabilities and document (handlers.go)
	seen     *seenRoutes         // GET /v1/seen (seen.go)
	convs    *conversationRoutes // greet, say, invoke, the open conversations (handlers.go, invoke.go, conversations.go)
	mail     *mailRoutes         // /v1/send, /v1/outbox (mail.go)
	audit    *auditRoutes        // GET /v1/audit (handlers.go)
	refusals *refusalRoutes      // GET /v1/audit/refusals (refusals.go)
	why      *whyRoutes          // GET /v1/audit/why/{message_id} (why.go)
	proofs   *proofRoutes        // proofs, bundles and receipts (proofs.go)
	events   *eventRoutes        // /v1/events, /v1/invocations/{id} (handlers.go, invoke.go)
	find     *findRoutes         // GET /v1/find/{capability} (find.go)
	imports  *importRoutes       // /v1/imports (imports.go)
	policy   *policyRoutes       // /v1/policy (policy.go)
	trust    *trustRoutes        // /v1/trust (trust.go)
	intros   *introRoutes        // /v1/intros (trust.go)
	metrics  *metricsRoutes      // GET /metrics (metrics.go)
}

// groupsFor builds the route groups of a daemon's API: the one place in
// this package that holds the *node.Node. Most groups get a component
// (the trust book, the audit log, the conversation table); what only the
// node's façade does (greeting, which also marks the peer as one the owner
// asked for; the peer cache; the event stream) comes from n itself,
// through an interface the group declares.
func groupsFor(n *node.Node, home, addr string, log *slog.Logger, t timeouts, done <-chan struct{}) routeGroups {
	book, audit, convs := n.TrustBook(), n.Audit(), n.Conversations()
	names := peerNames{cache: n, trust: book}
	return routeGroups{
		status:   &statusRoutes{self: n, conns: n.Network(), convs: convs, relay: n.Mail(), home: home, addr: addr},
		peers:    &peerRoutes{cache: n, conns: n.Network(), dial: n, names: names, timeout: t.peer},
		caps:     &capRoutes{doc: n, own: n.Capabilities()},
		seen:     &seenRoutes{policy: n.Policy(), doc: n, trust: book, sent: n, convs: convs, names: names},
		convs:    &conversationRoutes{talk: n, table: convs, names: names, timeout: t.peer},
		mail:     &mailRoutes{mail: n.Mail(), names: names, timeout: t.peer},
		audit:    &auditRoutes{log: audit, names: names, warn: log},
		refusals: &refusalRoutes{log: audit, names: names},
		why:      &whyRoutes{log: audit},
		proofs:   &proofRoutes{log: audit},
		events:   &eventRoutes{hub: n, done: done, write: t.write, heartbeat: t.heartbeat, log: log},
		find:     &findRoutes{finder: n.Discovery(), timeout: t.peer},
		imports:  &importRoutes{agents: n.Discovery()},
		policy:   &policyRoutes{book: n.Policy(), standing: n},
		trust:    &trustRoutes{book: book, standing: n, names: names, peerTimeout: t.peer},
		intros:   &introRoutes{book: book, held: book.Held(), standing: n},
		metrics:  &metricsRoutes{exposition: n.Metrics().Handler()},
	}
}

// What several groups need.

// peerCache is the cache of the peers' views this daemon verified
// (node.Node).
type peerCache interface {
	CachedPeers() ([]store.PeerRecord, error)
	CachedPeer(pid peer.ID) (store.PeerRecord, error)
}

// trustLevels is what the trust book established of a peer (trust.Book).
type trustLevels interface {
	Peer(pid peer.ID) trust.Info
}

// reacher says whether the daemon has a way to reach a peer (node.Node).
type reacher interface {
	Reachable(pid peer.ID) bool
}

// documentSource is the owner's current signed document (node.Node).
type documentSource interface {
	Document() *negotiate.Document
}

// openConversations lists the open conversations
// (converse.Conversations).
type openConversations interface {
	Open() []converse.ConversationInfo
}

// connections are the host's open connections (network.Network).
type connections interface {
	Peers() []peer.ID
	Conns() []network.Conn
	ConnsToPeer(pid peer.ID) []network.Conn
}

// standingNotifier tells the event stream that the owner changed what
// this daemon holds of a peer (node.Node.StandingChanged).
type standingNotifier interface {
	StandingChanged(peer, detail string)
}

// isOpen reports whether the conversation convID is open.
func isOpen(convs openConversations, convID string) bool {
	return slices.ContainsFunc(convs.Open(), func(c converse.ConversationInfo) bool { return c.ID == convID })
}
