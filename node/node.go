package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/alias"
	"github.com/ifaced/ifaced/node/mcpagent"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/multiformats/go-multiaddr"
)

// Node is a running daemon: it assembles the components (New, Close) and
// is the façade the control API, the HTTP binding and the command line
// call. Each component owns one idea and is built here from what it needs;
// none of them holds the Node.
type Node struct {
	id     *identity.Identity
	cfg    *Config
	home   Home
	log    *slog.Logger
	host   host.Host
	store  *store.Store
	audit  *gossip.AuditLog
	events *hub
	order  *conditions.TierOrder
	now    func() time.Time

	started time.Time

	// The admission pipeline and what it checks against.
	door       *door                 // every inbound message passes here (door.go)
	replay     *identity.ReplayGuard // message IDs and dates (the replay window)
	mailReplay *identity.ReplayGuard // the same for fetched mail, dated within mailbox.retention
	seen       *store.BufferedSeen   // with durability.sync = "interval"; nil when every Add commits
	rates      *rateLimits           // per signer, by temperature

	// The components.
	docs        *documents     // the owner's document, its seq and signed views (documents.go)
	policy      *PolicyBook    // the disclosure map and temperature caps (policy.go)
	trust       *trust.Book    // trust records, pins, revocations, introductions (node/trust)
	peerGate    *peerGate      // which peers' views the peer cache persists (peergate.go)
	convs       *Conversations // the stream protocols and the conversation table (conversations.go)
	invoker     *invoker       // runs admitted capability requests (invoke.go)
	invocations *invocations   // workload per capability, answers awaited (invoke.go)
	bridge      *bridge        // the local agent (agent.go)
	inbox       *Inbox         // the HTTP binding's door-facing side (inbox.go)
	mail        *Mail          // relays, mailboxes held here, the outbox, fetched mail (relay.go, mailbox.go)
	reach       *reachState    // the relay service and this daemon's reservations (relay.go)
	dht         *capabilityDHT // Kademlia DHT and capability provider records (dht.go)
	gossip      *announcer     // GossipSub capabilities.update announcements (announce.go)
	mdns        *lanDiscovery  // LAN discovery (mdns.go)
	imports     *importer      // outside agents' documents (importer.go)
	discovery   *Discovery     // Find and imports, for the control API (discovery.go)
	keyNotices  *keyNotices    // the key statements this daemon gave, delivered (keyrotate.go)

	// An MCP server as the local agent (node/mcpagent); nil without agent.mcp.
	mcp *mcpagent.Agent

	// Where the owner's capabilities come from; their run-time changes (owncaps.go).
	caps *OwnCapabilities

	// Test settings (Options).
	mailRetries   []time.Duration      // WithMailRetries
	importTimeout time.Duration        // WithImportTimeout: one fetch of an outside agent's document
	auditOpts     []gossip.AuditOption // WithAuditOptions

	ctx     context.Context // ends at Close; bounds every background task
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	wgMu    sync.Mutex // guards closing against wg.Add racing wg.Wait
	closing bool
	closers []func() error // run by Close in reverse order, before the host closes
}

// Option adjusts a Node for tests.
type Option func(*Node)

// WithClock replaces the clock.
func WithClock(now func() time.Time) Option { return func(n *Node) { n.now = now } }

// New starts a daemon in home: it opens the store and audit log, builds
// and signs the owner's capability document (its seq persisted and raised
// whenever the content changes), starts the libp2p host and registers the
// stream protocols.
func New(cfg *Config, id *identity.Identity, home Home, log *slog.Logger, opts ...Option) (*Node, error) {
	order, err := cfg.TierOrder()
	if err != nil {
		return nil, err
	}
	n := &Node{id: id, cfg: cfg, home: home, log: log, order: order, events: newHub(), now: time.Now}
	n.importTimeout = defaultImportTimeout
	for _, o := range opts {
		o(n)
	}
	n.started = n.now()
	var tools toolServer
	if cfg.Agent.MCP != nil {
		n.mcp = mcpagent.New(*cfg.Agent.MCP, order, cfg.Agent.Timeout.Duration, log.With("agent", "mcp"))
		tools = n.mcp
	}
	n.bridge = newBridge(cfg.Agent, tools, n.events, log)
	n.rates = newRateLimits(cfg.Rates, n.now)
	n.invocations = newInvocations()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			n.closeAll()
		}
	}()
	if n.store, err = store.Open(filepath.Join(home.Dir, "ifaced.db")); err != nil {
		return nil, err
	}
	var auditOpts []gossip.AuditOption
	if cfg.Durability.Sync == SyncInterval {
		auditOpts = append(auditOpts, gossip.SyncEvery(cfg.Durability.Interval.Duration))
	}
	auditOpts = append(auditOpts, gossip.WithLimits(cfg.Audit.Limits()), gossip.WithClock(func() time.Time { return n.now() }),
		// Strangers' files make room for new strangers, never the files
		// of peers the owner made known (peerGate, built below).
		gossip.WithKnown(func(p string) bool { return n.peerGate != nil && n.peerGate.known(p) }),
		gossip.WithPruned(func(p gossip.Pruned) {
			log.Warn("deleted the oldest strangers' audit files to make room for new strangers (audit.max_mb / 4 is their share)",
				"files", len(p.Files)+p.More, "mib", p.Bytes>>20, "listed_in", filepath.Join("audit", p.At.Format("2006-01-02"), "_pruned.jsonl"))
		}))
	// Tamper-evident: each record a leaf, checkpoints signed with the key
	// (docs/audit.md).
	auditOpts = append(auditOpts, gossip.WithSigner(id), gossip.WithFormerKeys(home.RetiredDIDs()...))
	if n.audit, err = gossip.OpenAuditLog(filepath.Join(home.Dir, "audit"), append(auditOpts, n.auditOpts...)...); err != nil {
		return nil, err
	}
	if n.policy, err = newPolicyBook(cfg, order, n.store); err != nil {
		return nil, err
	}
	n.docs = newDocuments(id, n.store.Own(), order, func() time.Time { return n.now() }, log)
	n.caps = newOwnCapabilities(n.docs, n.store.Own(), log)
	seen := n.store.Seen()
	if cfg.Durability.Sync == SyncInterval {
		n.seen = n.store.BufferedSeen()
		seen = n.seen
	}
	n.replay = identity.NewReplayGuard(seen, cfg.Replay.Window.Duration, cfg.Replay.ClockSkew.Duration)
	// Mail may wait at a relay for mailbox.retention, so it is dated within
	// that window rather than the replay window; the seen-set is the same.
	n.mailReplay = identity.NewReplayGuard(seen, max(cfg.Mailbox.Retention.Duration, cfg.Replay.Window.Duration), cfg.Replay.ClockSkew.Duration)
	if err := n.recoverSeen(); err != nil {
		return nil, err
	}
	if n.seen != nil {
		// From here on, a crash is recovered from this instant.
		if err := n.seen.Flush(); err != nil {
			return nil, err
		}
	} else if err := n.store.ClearSeenFlushedAt(); err != nil {
		return nil, err
	}
	n.trust = trust.New(n.ctx, n.store, trust.Config{KeyTransition: cfg.Trust.KeyTransition.Duration,
		IntroExpiry: cfg.Trust.IntroExpiry.Duration, CAFile: cfg.Trust.CAFile, FetchPrivate: cfg.Trust.FetchPrivate},
		order, id.DID(), n.now, log, n.spawn)
	n.peerGate = newPeerGate(n.trust, n.policy, order)
	n.store.SetPeerGate(n.peerGate.known)
	n.trust.SetKnown(func(p peer.ID) bool { return n.peerGate.known(p.String()) })
	n.door = newDoor(id.DID(), n.audit, n.replay, n.rates, n.trust.KeyRevoked, n.events, log, func() time.Time { return n.now() },
		func(p peer.ID) netip.Addr { return remoteAddrOf(n.host, p) })
	n.door.budget = NewBudget(cfg.Limits.MaxMemoryMB, func(p peer.ID) bool { return n.convs != nil && n.convs.isGreeted(p) })
	n.door.known = func(p peer.ID) bool { return n.peerGate.known(idString(p)) }
	n.door.keys = newKeyLifecycle(n.trust, n.policy, n.store, n.peerGate, alias.Open(home.Dir), n.events, log,
		func() time.Time { return n.now() }, max(cfg.Mailbox.Retention.Duration, cfg.Replay.Window.Duration))
	doc, err := cfg.Document(id.DID())
	if err != nil {
		return nil, fmt.Errorf("building capability document: %w", err)
	}
	doc.Relay = relayPreferences(cfg, id.PeerID())
	layered, err := n.caps.layer(doc)
	if err != nil {
		return nil, err
	}
	if n.mcp != nil {
		n.onClose(n.mcp.Close)
		if err := n.mcp.Start(n.ctx, doc); err != nil {
			return nil, fmt.Errorf("agent.mcp: %w", err)
		}
		n.caps.tools = n.mcp.Handles
	}
	if err := n.docs.set(doc, layered); err != nil {
		return nil, err
	}
	if n.host, err = newHost(cfg, id, n.hostOptions()...); err != nil {
		return nil, err
	}
	now := func() time.Time { return n.now() }
	n.invoker = newInvoker(n.docs, order, n.invocations, n.bridge, cfg.Agent.Timeout.Duration, n.ctx, now)
	n.convs = newConversations(conversationDeps{id: id, display: cfg.Identity.Display, streamTimeout: cfg.Limits.StreamTimeout.Duration,
		host: n.host, door: n.door, docs: n.docs, policy: n.policy, trust: n.trust, invoker: n.invoker, invocations: n.invocations,
		store: n.store, audit: n.audit, events: n.events, order: order, log: log, now: now, ctx: n.ctx, spawn: n.spawn,
		// what the cache knows of how to reach a peer, given to the
		// peerstore (Mail owns the reach records; it is built after)
		dialHints: func(pid peer.ID) { n.mail.dialHints(pid) },
		handler:   n.handler})
	// The view a stranger's first greeting is shown (a signed key, no
	// proposal) is signed ahead of time, at start and at each document
	// change, so that no stranger's cold greeting waits for it.
	presign := func() {
		f := n.policy.current().GrantTo(negotiate.Requester{Level: conditions.Signed}, negotiate.Proposal{}).Facts(anyRequester, 0)
		n.spawn(func() { n.docs.presign(f) })
	}
	presign()
	n.caps.changed = func(doc *negotiate.Document) {
		n.events.publish(Event{Type: EventDocument, At: n.now(), Detail: fmt.Sprintf("seq %d, %d capabilities", doc.Seq, len(doc.Capabilities))})
		presign()
		n.convs.updates.pushAll()
		n.documentChanged()
	}
	n.inbox = newInbox(n.door, n.convs, n.docs, n.policy, n.invoker, n.audit, n.commitRecords, n.spawn, now, log)
	n.mail = newMail(mailDeps{id: id, cfg: cfg, host: n.host, store: n.store, door: n.door, mailReplay: n.mailReplay,
		convs: n.convs, events: n.events, log: log, now: now, ctx: n.ctx, spawn: n.spawn, onClose: n.onClose,
		commit: n.commitRecords, reach: n.reach, retries: n.mailRetries, handler: n.handler})
	if err := n.mail.startReach(); err != nil {
		return nil, err
	}
	n.keyNotices = newKeyNotices(id.PeerID(), n.trust, n.store, n.mail, n.events, log, now, 2*cfg.Limits.StreamTimeout.Duration,
		cfg.Trust.KeyTransition.Duration)
	follower, err := newAddrFollower(n.host, n.store, log)
	if err != nil {
		return nil, err
	}
	n.onClose(follower.Close)
	n.spawn(func() { follower.run(n.ctx) })
	if err := n.startDiscovery(); err != nil {
		return nil, err
	}
	if n.gossip != nil {
		kg, err := startKeyGossip(n.ctx, n.gossip.ps, id, n.door, n.door.keys, n.keyNotices.live, log, now)
		if err != nil {
			return nil, err
		}
		n.onClose(kg.Close)
		n.keyNotices.gossip = kg
	}
	n.spawn(n.pruneLoop)
	if n.seen != nil {
		n.spawn(n.flushLoop)
	}
	n.spawn(n.mail.outboxLoop)
	n.spawn(n.refreshImports)
	n.spawn(func() { n.keyNotices.run(n.ctx) })
	if n.mcp != nil {
		n.mcp.Follow(n.UpdateDocument)
	}
	ok = true
	log.Info("ifaced started", "peer", id.PeerID(), "did", id.DID(), "addrs", n.Addrs(),
		"capabilities", len(doc.Capabilities), "seq", n.Document().Seq)
	return n, nil
}

// Policy is the owner's policy: the disclosure map and temperature caps.
func (n *Node) Policy() *PolicyBook { return n.policy }

// UpdateDocument replaces the owner's capability list: the document is
// validated, gets the next seq, is signed and stored, and every peer in an
// open conversation is sent its new view. It is the MCP agent's path; it
// does not keep what it changes across restarts — `caps add` and `caps
// remove` do (Capabilities).
func (n *Node) UpdateDocument(change func(d *negotiate.Document) error) (*negotiate.Document, error) {
	return n.caps.update(func(d *negotiate.Document) (*store.RuntimeCapabilities, error) { return nil, change(d) })
}

// Capabilities is where the owner's capabilities come from, and the
// owner's run-time changes to them, kept across restarts (caps add, caps
// remove).
func (n *Node) Capabilities() *OwnCapabilities { return n.caps }

// TrustBook is the daemon's trust component: trust records, pins and
// revocations, introduction tokens and identity document checks.
func (n *Node) TrustBook() *trust.Book { return n.trust }

// Conversations is the conversations component: the stream protocols and
// the open conversations.
func (n *Node) Conversations() *Conversations { return n.convs }

// Inbox is the HTTP binding's door-facing side (the IFP-6 inbox, signed
// and anonymous requests, the view an HTTP caller is shown).
func (n *Node) Inbox() *Inbox { return n.inbox }

// Mail is the reachability and store-and-forward component: the relay
// service and mailboxes, reservations, the outbox.
func (n *Node) Mail() *Mail { return n.mail }

// Send says text to pid, in a conversation or through its mailbox
// (Mail.Send).
func (n *Node) Send(ctx context.Context, pid peer.ID, text string) (*SendResult, error) {
	return n.mail.Send(ctx, pid, text)
}

// Greet opens a conversation with pid (Conversations.Greet).
func (n *Node) Greet(ctx context.Context, pid peer.ID, prop negotiate.Proposal) (*GreetResult, error) {
	n.peerGate.ownerAsked(pid)
	return n.convs.Greet(ctx, pid, prop)
}

// QueryCapabilities asks pid for its view (Conversations.QueryCapabilities).
func (n *Node) QueryCapabilities(ctx context.Context, pid peer.ID, prop negotiate.Proposal) (*GreetResult, error) {
	n.peerGate.ownerAsked(pid)
	return n.convs.QueryCapabilities(ctx, pid, prop)
}

// Say sends a message in an open conversation (Conversations.Say).
func (n *Node) Say(convID string, phase gossip.Phase, text string, parts ...gossip.Part) (*gossip.Message, error) {
	return n.convs.Say(convID, phase, text, parts...)
}

// Invoke asks pid to run a capability (Conversations.Invoke).
func (n *Node) Invoke(ctx context.Context, pid peer.ID, capability string, params any) (*InvokeResult, error) {
	return n.convs.Invoke(ctx, pid, capability, params)
}

// Addrs returns the host's listen addresses with the peer ID appended, as
// another daemon would dial them.
func (n *Node) Addrs() []multiaddr.Multiaddr {
	suffix, _ := multiaddr.NewMultiaddr("/p2p/" + n.id.PeerID().String())
	addrs := n.host.Addrs()
	out := make([]multiaddr.Multiaddr, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.Encapsulate(suffix))
	}
	return out
}

// Started is when the daemon started.
func (n *Node) Started() time.Time { return n.started }

// ID returns the daemon's identity.
func (n *Node) ID() *identity.Identity { return n.id }

// Host exposes the libp2p host.
func (n *Node) Host() host.Host { return n.host }

// Document returns the owner's current signed capability document.
func (n *Node) Document() *negotiate.Document { return n.docs.current() }

// Audit returns the audit log.
func (n *Node) Audit() *gossip.AuditLog { return n.audit }

// Store returns the store.
func (n *Node) Store() *store.Store { return n.store }

// Subscribe returns the event stream: for the local agent, unless
// AsObserver says the subscriber only follows events.
func (n *Node) Subscribe(opts ...SubscribeOption) (<-chan Event, func()) {
	var sub subscription
	for _, o := range opts {
		o(&sub)
	}
	return n.events.subscribe(!sub.observer)
}

// Connect dials a peer by multiaddr (which must end in /p2p/<peer ID>).
func (n *Node) Connect(ctx context.Context, addr string) (peer.ID, error) {
	ma, err := multiaddr.NewMultiaddr(addr)
	if err != nil {
		return "", fmt.Errorf("connecting: %q is not a multiaddr: %w", addr, err)
	}
	info, err := peer.AddrInfoFromP2pAddr(ma)
	if err != nil {
		return "", fmt.Errorf("connecting: %q must end in /p2p/<peer ID>: %w", addr, err)
	}
	// The address is kept longer than the host's Connect keeps it
	// (TempAddrTTL): identify, when the last connection to a peer closes,
	// drops that peer's TempAddrTTL addresses, and a connect made just
	// after a disconnect could see its own address dropped before the dial
	// read it ("no addresses").
	n.host.Peerstore().AddAddrs(info.ID, info.Addrs, peerstore.RecentlyConnectedAddrTTL)
	if err := n.host.Connect(ctx, *info); err != nil {
		return "", fmt.Errorf("connecting to %s: %w", info.ID, err)
	}
	return info.ID, nil
}

// spawn runs f in the background unless the node is closing; Close waits
// for everything spawned. It reports whether f was started.
func (n *Node) spawn(f func()) bool {
	n.wgMu.Lock()
	defer n.wgMu.Unlock()
	if n.closing {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// handler wraps a stream handler so that Close waits for it, like for
// anything spawned: a stream that arrives while the node closes is reset
// without being read, and one being served ends when Close resets it.
func (n *Node) handler(h network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) {
		n.wgMu.Lock()
		if n.closing {
			n.wgMu.Unlock()
			s.Reset()
			return
		}
		n.wg.Add(1)
		n.wgMu.Unlock()
		defer n.wg.Done()
		h(s)
	}
}

// onClose registers f to run when the node closes, before the host does.
// Only New's start functions call it, so it needs no lock.
func (n *Node) onClose(f func() error) { n.closers = append(n.closers, f) }

// pruneLoop forgets message IDs the replay window no longer needs, and the
// rate limiters of peers that have been quiet.
func (n *Node) pruneLoop() {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			if err := n.replay.Prune(n.now()); err != nil {
				n.log.Warn("pruning seen message IDs", "err", err)
			}
			n.rates.prune()
			n.mail.rates.prune()
			n.door.reportLeftOut()
			n.door.keepLeftOut()
			if n.cfg.Relay.Service && n.cfg.Relay.Mailbox {
				n.mail.pruneMail()
			}
		}
	}
}

// Run serves until ctx ends, then shuts down.
func (n *Node) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-n.ctx.Done():
	}
	return n.Close()
}

// Close stops the host, ends every conversation, and closes the store and
// audit log.
func (n *Node) Close() error {
	err := n.closeAll()
	n.log.Info("ifaced stopped", "peer", n.id.PeerID())
	return err
}

func (n *Node) closeAll() error {
	n.wgMu.Lock()
	n.closing = true
	n.wgMu.Unlock()
	n.cancel()
	var errs []error
	for i := len(n.closers) - 1; i >= 0; i-- {
		errs = append(errs, n.closers[i]())
	}
	if n.host != nil {
		errs = append(errs, n.host.Close())
	}
	if n.convs != nil {
		n.convs.resetAll()
	}
	n.wg.Wait()
	if n.seen != nil {
		errs = append(errs, n.seen.Flush())
	}
	if n.audit != nil {
		if n.door != nil {
			// The count of refusals left out goes into the record when it
			// has room, and is kept for the next run when not.
			n.door.reportLeftOut()
			n.door.keepLeftOut()
		}
		errs = append(errs, n.audit.Close())
	}
	if n.docs != nil && n.store != nil {
		errs = append(errs, n.docs.saveMarks()) // the floors raised since the last change (marks.go)
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}
