package converse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/invoke"

	"github.com/ifaced/ifaced/node/admit"

	"github.com/ifaced/ifaced/node/owner"

	"github.com/ifaced/ifaced/node/policy"

	"github.com/ifaced/ifaced/node/events"

	"github.com/ifaced/ifaced/node/internal/peerid"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/internal/costlru"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Conversations owns ifaced's stream protocols and the conversation table:
// greetings (/ifp/4/conversation and the /ifp/7/capabilities query, both
// ways), the messages of open conversations, capability requests and their
// answers, and the update push (/ifp/7/update) of a changed document to
// every peer in conversation. Every message it receives passes the door
// (node/admit) before anything acts on it; what a peer is granted comes from
// the policy with the requester the daemon established (trust), and what
// it is shown from the owner's documents.
//
// A greeting, from socket to audit file, reads: handleConversation →
// answerGreeting → wire.Stream.Read (bounded decode) → door.admit
// (validate with negotiate.ReadGreeting, establish, verify with checkView,
// replay, rate, fit with gossip.Conversation.Check, audit, commit) →
// keepView (peer cache) → grant → greeting (the view for this peer) → send
// (sign, audit, write) → open → serve.
type Conversations struct {
	conversationDeps

	mu     sync.Mutex
	convs  map[string]*conv // open conversations by ID
	claims map[string]*conv // IDs taken by conversations being opened (claim)
	opened uint64           // conversations opened so far: conv.order of the newest

	peerViews *costlru.Cache[peer.ID, HeldView] // the last view each peer sent, verified; bounded by bytes
	peersHold *lru.Cache[peer.ID, string]       // the hash of our view each peer last said it holds

	updates  *updatePush  // the capability-update push (update.go)
	requests *requestDesk // the serving side of capability requests (desk.go)
	awaited  *awaited     // the answers this daemon's own requests wait for (desk.go)
	inbox    *Inbox       // the HTTP binding's door-facing side (inbox.go)
	figures  figures      // greetings and requests counted (figures.go)

	kept   *keptQueries // query streams kept to ask peers again (keptquery.go)
	keptIn *keptSlots   // query streams peers keep open to this daemon
}

// conversationDeps is what Conversations is built from, and keeps.
type conversationDeps struct {
	id            *identity.Identity
	display       string        // identity.display, for the greeting's text
	streamTimeout time.Duration // limits.stream_timeout: each frame's read and write deadline
	host          host.Host
	door          *admit.Door
	docs          *owner.Document
	policy        *policy.Book
	trust         *trust.Book
	invoker       *invoke.Invoker
	store         *store.Store
	audit         *gossip.AuditLog
	events        *events.Hub
	order         *conditions.TierOrder
	log           *slog.Logger
	now           func() time.Time
	ctx           context.Context
	spawn         func(func()) bool                                 // runs a task Close waits for
	handler       func(network.StreamHandler) network.StreamHandler // counts a stream handler among what Close waits for
	commit        func() error                                      // makes what was recorded durable before an acknowledgement (acks.go); nil: nothing to do
}

// Deps is what New builds the conversations from.
type Deps struct {
	ID            *identity.Identity
	Display       string        // identity.display, for the greeting's text
	StreamTimeout time.Duration // limits.stream_timeout: each frame's read and write deadline
	Host          host.Host
	Door          *admit.Door
	Docs          *owner.Document
	Policy        *policy.Book
	Trust         *trust.Book
	Invoker       *invoke.Invoker
	Store         *store.Store
	Audit         *gossip.AuditLog
	Events        *events.Hub
	Order         *conditions.TierOrder
	Log           *slog.Logger
	Now           func() time.Time
	Ctx           context.Context
	Spawn         func(func()) bool                                 // runs a task Close waits for
	Handler       func(network.StreamHandler) network.StreamHandler // counts a stream handler among what Close waits for
	Commit        func() error                                      // makes what was recorded durable before the inbox answers or a message is acknowledged (durability.sync)
}

// New builds the conversations and the HTTP binding's inbox, registers
// the stream handlers on the host, and pushes each change of the owner's
// document to the peers in open conversations.
func New(d Deps) *Conversations {
	cs := newConversations(conversationDeps{id: d.ID, display: d.Display, streamTimeout: d.StreamTimeout, host: d.Host,
		door: d.Door, docs: d.Docs, policy: d.Policy, trust: d.Trust, invoker: d.Invoker, store: d.Store, audit: d.Audit,
		events: d.Events, order: d.Order, log: d.Log, now: d.Now, ctx: d.Ctx, spawn: d.Spawn, handler: d.Handler, commit: d.Commit})
	cs.inbox = newInbox(d.Door, cs, d.Docs, d.Policy, d.Invoker, d.Audit, d.Commit, d.Spawn, d.Now, d.Log)
	d.Docs.OnChange(func(*negotiate.Document) { cs.updates.pushAll() })
	return cs
}

// Inbox is the HTTP binding's door-facing side.
func (cs *Conversations) Inbox() *Inbox { return cs.inbox }

// newConversations builds the component and registers its stream
// handlers on the host.
func newConversations(d conversationDeps) *Conversations {
	cs := &Conversations{conversationDeps: d, convs: map[string]*conv{}, claims: map[string]*conv{}, figures: newFigures()}
	cs.updates, cs.requests, cs.awaited = newUpdatePush(cs), newRequestDesk(cs), newAwaited()
	cs.kept, cs.keptIn = newKeptQueries(d.streamTimeout/2, maxKeptQueries), &keptSlots{max: maxKeptQueries}
	context.AfterFunc(d.ctx, cs.kept.closeAll)
	cs.peerViews = costlru.New[peer.ID, HeldView](maxHeldViewBytes)
	cs.peersHold, _ = lru.New[peer.ID, string](maxPeersHold)
	cs.host.SetStreamHandler(wire.Conversation, d.handler(cs.handleConversation))
	cs.host.SetStreamHandler(wire.Capabilities, d.handler(cs.handleCapabilities))
	cs.host.SetStreamHandler(wire.Update, d.handler(cs.updates.handle))
	return cs
}

// ResetAll resets every open conversation's stream (at Close).
func (cs *Conversations) ResetAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.convs {
		c.stream.Reset()
	}
}

// claim takes c's conversation ID for c while c is being opened, or
// refuses with out_of_sequence when an open conversation or another
// being opened holds it: one claim wins, whichever greetings race for an
// ID, so the table can never name one ID for two conversations. open
// turns the claim into the table's entry; unclaim gives it up when the
// conversation does not open (refused, failed, or a capabilities query,
// done).
func (cs *Conversations) claim(c *conv) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	_, open := cs.convs[c.ID]
	_, claimed := cs.claims[c.ID]
	if open || claimed {
		return fmt.Errorf("%w: conversation %s is already open or being opened; start a new conversation with a new conversation_id",
			gossip.ErrOutOfSequence, c.ID)
	}
	cs.claims[c.ID] = c
	return nil
}

// unclaim gives up c's claim on its conversation ID, if it holds one.
func (cs *Conversations) unclaim(c *conv) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.claims[c.ID] == c {
		delete(cs.claims, c.ID)
	}
}

// ErrNoConversation: the conversation a request named is not open (it
// closed, it never existed, or it is with another peer).
var ErrNoConversation = errors.New("no such open conversation")

// conversationWith returns the newest open conversation with pid, or nil.
// Newest, because a peer greets again to take up what the owner changed
// (a raised tier, a pinned key): an older conversation keeps the grant it
// was opened under (nothing changes inside a conversation but the level).
func (cs *Conversations) conversationWith(pid peer.ID) *conv {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var newest *conv
	for _, c := range cs.convs {
		if c.peer == pid && !c.Closed() && (newest == nil || c.order > newest.order) {
			newest = c
		}
	}
	return newest
}

// pick returns the conversation a request to pid should travel in: the
// open conversation convID when one is named (it must be with pid), else
// the newest open one with pid, else nil (the caller greets).
func (cs *Conversations) pick(pid peer.ID, convID string) (*conv, error) {
	if convID == "" {
		return cs.conversationWith(pid), nil
	}
	c := cs.conversation(convID)
	switch {
	case c == nil || c.Closed():
		return nil, fmt.Errorf("%w: %s is not open (greet the peer for a new one; leave out the conversation to use the newest)", ErrNoConversation, convID)
	case c.peer != pid:
		return nil, fmt.Errorf("%w: %s is a conversation with %s, not %s", ErrNoConversation, convID, c.peer, pid)
	}
	return c, nil
}

// Newest returns the ID of the newest open conversation with pid, or "".
func (cs *Conversations) Newest(pid peer.ID) string {
	if c := cs.conversationWith(pid); c != nil {
		return c.ID
	}
	return ""
}

// named is pid as log lines name it (peerid.Named).
func (cs *Conversations) named(pid peer.ID) slog.LogValuer { return peerid.Named(pid, cs.store) }
