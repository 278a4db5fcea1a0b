package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/alias"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/costlru"
	"github.com/ifaced/ifaced/node/internal/groupsync"
	"github.com/ifaced/ifaced/node/internal/peerid"
	"github.com/ifaced/ifaced/node/internal/ratelimit"
	"github.com/ifaced/ifaced/node/invoke"
	"github.com/ifaced/ifaced/node/keys"
	"github.com/ifaced/ifaced/node/keys/tell"
	"github.com/ifaced/ifaced/node/mail"
	"github.com/ifaced/ifaced/node/mcpagent"
	"github.com/ifaced/ifaced/node/metrics"
	"github.com/ifaced/ifaced/node/owner"
	"github.com/ifaced/ifaced/node/p2phost"
	"github.com/ifaced/ifaced/node/policy"
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
	cfg    *config.Config
	home   config.Home
	log    *slog.Logger
	host   host.Host
	store  *store.Store
	audit  *gossip.AuditLog
	events *events.Hub
	order  *conditions.TierOrder
	now    func() time.Time

	started time.Time

	// The admission pipeline and what it checks against.
	door       *admit.Door           // every inbound message passes here (node/admit)
	keys       *keys.Lifecycle       // peers' key statements, checked at the door and followed (node/keys)
	beforeFit  func(*admit.Arrival)  // a test seam at the door's fit step (export_test.go)
	replay     *identity.ReplayGuard // message IDs and dates (the replay window)
	mailReplay *identity.ReplayGuard // the same for fetched mail, dated within mailbox.retention
	seen       *store.BufferedSeen   // with durability.sync = "interval"; nil when every Add commits
	rates      *ratelimit.Limits     // per signer, by temperature

	// The components.
	docs       *owner.Document         // the owner's document, its seq and signed views (node/owner)
	policy     *policy.Book            // the disclosure map and temperature caps (node/policy)
	trust      *trust.Book             // trust records, pins, revocations, introductions (node/trust)
	convs      *converse.Conversations // the stream protocols and the conversation table (node/converse)
	invoker    *invoke.Invoker         // runs admitted capability requests (node/invoke)
	inbox      *converse.Inbox         // the HTTP binding's door-facing side (node/converse)
	mail       *mail.Mail              // relays, mailboxes held here, the outbox, fetched mail (node/mail)
	reach      *mail.Reach             // the relay service and this daemon's reservations (node/mail)
	discovery  *discovery.Discovery    // the DHT, announcements, LAN discovery, imports (node/discovery)
	keyNotices *tell.Notices           // the key statements this daemon gave, delivered (node/keys/tell)
	metrics    *metrics.Metrics        // the Prometheus registry and its exposition (node/metrics)

	// An MCP server as the local agent (node/mcpagent); nil without agent.mcp.
	mcp *mcpagent.Agent

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

// WithMailRetries replaces the IFP-6 retry schedule (tests).
func WithMailRetries(d ...time.Duration) Option {
	return func(n *Node) { n.mailRetries = d }
}

// WithClock replaces the clock.
func WithClock(now func() time.Time) Option { return func(n *Node) { n.now = now } }

// WithImportTimeout shortens the fetch timeout of imports (tests).
func WithImportTimeout(d time.Duration) Option { return func(n *Node) { n.importTimeout = d } }

// New starts a daemon in home: it opens the store and audit log, builds
// and signs the owner's capability document (its seq persisted and raised
// whenever the content changes), starts the libp2p host and registers the
// stream protocols.
func New(cfg *config.Config, id *identity.Identity, home config.Home, log *slog.Logger, opts ...Option) (*Node, error) {
	order, err := cfg.TierOrder()
	if err != nil {
		return nil, err
	}
	n := &Node{id: id, cfg: cfg, home: home, log: log, order: order, events: events.NewHub(), now: time.Now}
	for _, o := range opts {
		o(n)
	}
	n.started = n.now()
	if cfg.Agent.MCP != nil {
		n.mcp = mcpagent.New(*cfg.Agent.MCP, order, cfg.Agent.Timeout.Duration, log.With("agent", "mcp"))
	}
	n.rates = ratelimit.New(cfg.Rates, n.now)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			n.closeAll()
		}
	}()
	if n.store, err = store.Open(filepath.Join(home.Dir, "ifaced.db"), store.WithLog(log.With("component", "store"))); err != nil {
		return nil, err
	}
	if n.policy, err = policy.New(cfg, order, n.store); err != nil {
		return nil, err
	}
	n.trust = trust.New(n.ctx, n.store, trust.Config{KeyTransition: cfg.Trust.KeyTransition.Duration,
		IntroExpiry: cfg.Trust.IntroExpiry.Duration, CAFile: cfg.Trust.CAFile, FetchPrivate: cfg.Trust.FetchPrivate},
		order, n.policy, id.DID(), n.now, log.With("component", "trust"), n.spawn)
	n.store.SetPeerGate(n.trust.Known)
	var auditOpts []gossip.AuditOption
	if cfg.Durability.Sync == config.SyncInterval {
		auditOpts = append(auditOpts, gossip.SyncEvery(cfg.Durability.Interval.Duration))
	}
	auditOpts = append(auditOpts, gossip.WithLimits(cfg.Audit.Limits()), gossip.WithClock(func() time.Time { return n.now() }),
		// Strangers' files make room for new strangers, never the files
		// of peers the owner made known.
		gossip.WithKnown(n.trust.Known),
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
	seen := n.store.Seen()
	if cfg.Durability.Sync == config.SyncInterval {
		n.seen = n.store.BufferedSeen(func() time.Time { return n.now() })
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
	// Pruned at start too, not only every hour (pruneLoop): a daemon
	// restarted more often than that (a laptop) would never prune.
	if err := n.replay.Prune(n.now()); err != nil {
		log.Warn("pruning seen message IDs", "err", err)
	}
	doc, err := cfg.Document(id.DID())
	if err != nil {
		return nil, fmt.Errorf("building capability document: %w", err)
	}
	doc.Relay = mail.RelayPreferences(cfg, id.PeerID())
	var mcpTools owner.ToolServer
	if n.mcp != nil {
		n.onClose(n.mcp.Close)
		mcpTools = n.mcp
	}
	now := func() time.Time { return n.now() }
	if n.docs, err = owner.New(n.ctx, owner.Deps{ID: id, Store: n.store.Own(), Order: order, Policy: n.policy, Tools: mcpTools,
		Events: n.events, Log: log.With("component", "owner"), Now: now, Spawn: n.spawn}, doc); err != nil {
		return nil, err
	}
	// The host listens from here on; no stream protocol is handled until
	// the conversations register theirs.
	n.reach = mail.NewReach()
	punch := p2phost.NewPunch(log.With("component", "punch"))
	if n.host, err = p2phost.New(cfg, id, append(n.reach.HostOptions(cfg), punch.HostOptions()...)...); err != nil {
		return nil, err
	}
	if err := punch.Start(n.ctx, n.host, n.spawn); err != nil {
		return nil, fmt.Errorf("watching the host for hole punching: %w", err)
	}
	n.keys = keys.New(n.trust, n.policy, n.store, alias.Open(home.Dir), n.events, log.With("component", "keys"),
		func() time.Time { return n.now() }, max(cfg.Mailbox.Retention.Duration, cfg.Replay.Window.Duration))
	n.door = admit.New(admit.Deps{Self: id.DID(), Host: n.host, Audit: n.audit, Replay: n.replay, Rates: n.rates, Trust: n.trust,
		Keys: n.keys, Events: n.events, MaxMemoryMB: cfg.Limits.MaxMemoryMB, Log: log.With("component", "admit"), Now: func() time.Time { return n.now() },
		BeforeFit: n.beforeFit})
	var tools invoke.ToolServer
	if n.mcp != nil {
		tools = n.mcp
	}
	n.invoker = invoke.New(invoke.Deps{Docs: n.docs, Order: order, Agent: cfg.Agent, Tools: tools, Events: n.events, Log: log.With("component", "invoke"), Ctx: n.ctx, Now: now})
	// One commit serves every caller that asked before it began: a burst
	// of acknowledgements costs a few flushes, not one each.
	committer := groupsync.New(n.commitRecords)
	n.convs = converse.New(converse.Deps{ID: id, Display: cfg.Identity.Display, StreamTimeout: cfg.Limits.StreamTimeout.Duration,
		Host: n.host, Door: n.door, Docs: n.docs, Policy: n.policy, Trust: n.trust, Invoker: n.invoker,
		Store: n.store, Audit: n.audit, Events: n.events, Order: order, Log: log.With("component", "converse"), Now: now, Ctx: n.ctx,
		Spawn: n.spawn, Handler: n.handler, Commit: committer.Sync})
	n.inbox = n.convs.Inbox()
	if n.mail, err = mail.New(mail.Deps{ID: id, Config: cfg, Host: n.host, Store: n.store, Door: n.door, MailReplay: n.mailReplay,
		Convs: n.convs, Events: n.events, Log: log.With("component", "mail"), Now: now, Ctx: n.ctx, Spawn: n.spawn, OnClose: n.onClose,
		Commit: committer.Sync, Reach: n.reach, Retries: n.mailRetries, Handler: n.handler}); err != nil {
		return nil, err
	}
	if n.discovery, err = discovery.New(discovery.Deps{Ctx: n.ctx, Host: n.host, Config: cfg.Discovery,
		StreamTimeout: cfg.Limits.StreamTimeout.Duration, Store: n.store, Convs: n.convs, Docs: n.docs, Policy: n.policy,
		Trust: n.trust, Events: n.events, Log: log.With("component", "discovery"), Now: now, ImportTimeout: n.importTimeout,
		Spawn: n.spawn}); err != nil {
		return nil, err
	}
	n.onClose(n.discovery.Close)
	notices := tell.Deps{Self: id, Given: n.trust, Peers: n.store, Send: n.mail, Events: n.events, Log: log.With("component", "keys/tell"),
		Now: now, Timeout: 2 * cfg.Limits.StreamTimeout.Duration, LiveFor: cfg.Trust.KeyTransition.Duration}
	if ps := n.discovery.PubSub(); ps != nil {
		notices.PubSub, notices.Door, notices.Audit, notices.Keys = ps, n.door, n.audit, n.keys
	}
	if n.keyNotices, err = tell.New(n.ctx, notices); err != nil {
		return nil, err
	}
	n.onClose(n.keyNotices.Close)
	// The figures, read from the components at each scrape; with
	// metrics.listen, served on a listener of their own too.
	if n.metrics, err = metrics.New(metrics.Deps{Door: n.door, Budget: n.door.Budget(), Conversations: n.convs, Invocations: n.invoker,
		Audit: n.audit, AuditQuota: cfg.Audit.Limits().MaxBytes, StrangerShare: cfg.Audit.Limits().MaxBytes / gossip.StrangerShare,
		Store: n.store, Mail: n.mail, Discovery: n.discovery, Peers: n.host.Network(), Memories: n.memories(), Config: cfg.Metrics,
		Log: log.With("component", "metrics")}); err != nil {
		return nil, err
	}
	n.onClose(n.metrics.Close)
	n.spawn(n.pruneLoop)
	n.spawn(n.watchClock)
	if n.seen != nil {
		n.spawn(n.flushLoop)
	}
	n.spawn(n.mail.RunOutbox)
	n.spawn(func() { n.keyNotices.Run(n.ctx) })
	if n.mcp != nil {
		n.mcp.Follow(n.UpdateDocument)
	}
	ok = true
	log.Info("ifaced started", "peer", id.PeerID(), "did", id.DID(), "addrs", n.Addrs(),
		"capabilities", len(doc.Capabilities), "seq", n.Document().Seq)
	return n, nil
}

// Metrics is the daemon's Prometheus registry: its exposition (the
// control API serves it at GET /metrics) and the scraper's listener's
// address (metrics.listen).
func (n *Node) Metrics() *metrics.Metrics { return n.metrics }

// Policy is the owner's policy: the disclosure map and temperature caps.
func (n *Node) Policy() *policy.Book { return n.policy }

// UpdateDocument replaces the owner's capability list: the document is
// validated, gets the next seq, is signed and stored, and every peer in an
// open conversation is sent its new view. It is the MCP agent's path; it
// does not keep what it changes across restarts — `caps add` and `caps
// remove` do (Capabilities).
func (n *Node) UpdateDocument(change func(d *negotiate.Document) error) (*negotiate.Document, error) {
	return n.docs.Update(change)
}

// Capabilities is where the owner's capabilities come from, and the
// owner's run-time changes to them, kept across restarts (caps add, caps
// remove).
func (n *Node) Capabilities() *owner.Capabilities { return n.docs.Capabilities() }

// TrustBook is the daemon's trust component: trust records, pins and
// revocations, introduction tokens and identity document checks.
func (n *Node) TrustBook() *trust.Book { return n.trust }

// Conversations is the conversations component: the stream protocols and
// the open conversations.
func (n *Node) Conversations() *converse.Conversations { return n.convs }

// Inbox is the HTTP binding's door-facing side (the IFP-6 inbox, signed
// and anonymous requests, the view an HTTP caller is shown).
func (n *Node) Inbox() *converse.Inbox { return n.inbox }

// Mail is the reachability and store-and-forward component: the relay
// service and mailboxes, reservations, the outbox.
func (n *Node) Mail() *mail.Mail { return n.mail }

// Send says text to pid, in a conversation or through its mailbox
// (Mail.Send).
func (n *Node) Send(ctx context.Context, pid peer.ID, text string) (*mail.SendResult, error) {
	return n.mail.Send(ctx, pid, text)
}

// Greet opens a conversation with pid (Conversations.Greet).
func (n *Node) Greet(ctx context.Context, pid peer.ID, prop negotiate.Proposal) (*converse.GreetResult, error) {
	n.trust.OwnerAsked(pid)
	return n.convs.Greet(ctx, pid, prop)
}

// QueryCapabilities asks pid for its view (Conversations.QueryCapabilities).
func (n *Node) QueryCapabilities(ctx context.Context, pid peer.ID, prop negotiate.Proposal) (*converse.GreetResult, error) {
	n.trust.OwnerAsked(pid)
	return n.convs.QueryCapabilities(ctx, pid, prop)
}

// Say sends a message in an open conversation (Conversations.Say).
func (n *Node) Say(convID string, phase gossip.Phase, text string, parts ...gossip.Part) (*gossip.Message, error) {
	return n.convs.Say(convID, phase, text, parts...)
}

// Invoke asks pid to run a capability (Conversations.Invoke).
func (n *Node) Invoke(ctx context.Context, pid peer.ID, capability string, params any) (*converse.InvokeResult, error) {
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

// Host exposes the libp2p host (tests; the packages that serve the
// daemon use Network, Reachable and the peer cache's methods).
func (n *Node) Host() host.Host { return n.host }

// Network is the host's connections.
func (n *Node) Network() network.Network { return n.host.Network() }

// CachedPeers lists the peer cache: every peer whose view this daemon
// verified, with the addresses it was reached at.
func (n *Node) CachedPeers() ([]store.PeerRecord, error) { return n.store.Peers() }

// CachedPeer is pid's record in the peer cache (store.ErrNotFound when it
// has none).
func (n *Node) CachedPeer(pid peer.ID) (store.PeerRecord, error) { return n.store.Peer(pid.String()) }

// Reachable says whether the daemon has a way to reach pid: a connection
// (direct or through a relay), addresses in the peerstore, or addresses
// in the peer cache, which it hands the peerstore so that a peer greeted
// before a restart can be reached by its ID alone.
func (n *Node) Reachable(pid peer.ID) bool {
	h := n.host
	if c := h.Network().Connectedness(pid); c == network.Connected || c == network.Limited || len(h.Peerstore().Addrs(pid)) > 0 {
		return true
	}
	rec, err := n.store.Peer(pid.String())
	if err != nil {
		return false
	}
	var addrs []multiaddr.Multiaddr
	for _, a := range rec.Addrs {
		if ma, err := multiaddr.NewMultiaddr(a); err == nil {
			addrs = append(addrs, ma)
		}
	}
	if len(addrs) == 0 {
		return false
	}
	h.Peerstore().AddAddrs(pid, addrs, peerstore.TempAddrTTL)
	return true
}

// Document returns the owner's current signed capability document.
func (n *Node) Document() *negotiate.Document { return n.docs.Current() }

// Audit returns the audit log.
func (n *Node) Audit() *gossip.AuditLog { return n.audit }

// Discovery is the daemon's discovery: Find, and the imports of outside
// agents.
func (n *Node) Discovery() *discovery.Discovery { return n.discovery }

// Store returns the store (tests and the demo's checks; the packages
// that serve the daemon use the façade's methods).
func (n *Node) Store() *store.Store { return n.store }

// Subscribe returns the event stream: for the local agent, unless
// AsObserver says the subscriber only follows events.
func (n *Node) Subscribe(opts ...events.SubscribeOption) (<-chan events.Event, func()) {
	return n.events.Subscribe(opts...)
}

// StandingChanged tells the event stream that the owner changed what this
// daemon holds of peer (a peer ID, an agent ID, or "" when the change
// names no one peer): the control API calls it after pinning or revoking
// a key, changing a disclosure tier or temperature cap, or revoking an
// introduction, so that followers (the MCP server's per-peer tools)
// recompute at once.
func (n *Node) StandingChanged(peer, detail string) {
	n.events.Publish(events.Event{Type: events.EventTrust, At: n.now(), Peer: peer, Detail: detail})
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
	// Returns once the connection is secured, not after identify: a
	// greeting that follows need not wait a round trip for it.
	if err := p2phost.Dial(ctx, n.host, info.ID); err != nil {
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
			n.rates.Prune()
			n.mail.PruneRates()
			n.door.ReportLeftOut()
			n.door.KeepLeftOut()
			if n.cfg.Relay.Service && n.cfg.Relay.Mailbox {
				n.mail.Prune()
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
		n.convs.ResetAll()
	}
	n.wg.Wait()
	if n.seen != nil {
		errs = append(errs, n.seen.Flush())
	}
	if n.audit != nil {
		if n.door != nil {
			// The count of refusals left out goes into the record when it
			// has room, and is kept for the next run when not.
			n.door.ReportLeftOut()
			n.door.KeepLeftOut()
		}
		errs = append(errs, n.audit.Close())
	}
	if n.docs != nil && n.store != nil {
		errs = append(errs, n.docs.SaveMarks()) // the floors raised since the last change (node/owner)
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

// WithAuditOptions passes options to the audit log (tests: a free-space
// source, a clock).
func WithAuditOptions(opts ...gossip.AuditOption) Option {
	return func(n *Node) { n.auditOpts = append(n.auditOpts, opts...) }
}

// Budget is the daemon's decoding budget, for the HTTP binding.
func (n *Node) Budget() *admit.Budget { return n.door.Budget() }

// AnswerInvocation delivers the local agent's answer to an invocation it
// received as an event.
func (n *Node) AnswerInvocation(id string, ans events.InvocationAnswer) error {
	return n.invoker.Answer(id, ans)
}

// SentView is the record of the last view this daemon sent pid; false
// when it holds none (nothing was sent since it started, for a stranger,
// or ever, for a known peer; or a stranger's record was evicted).
func (n *Node) SentView(pid peer.ID) (store.SentView, bool, error) {
	v, err := n.store.SentView(peerid.String(pid))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.SentView{}, false, nil
	case err != nil:
		return store.SentView{}, false, fmt.Errorf("reading the view sent to %s: %w", pid, err)
	}
	return v, true, nil
}

// IdentityDocument is this daemon's IFP-5 identity document: its key,
// agent ID, display name and relay preferences, and the key its key
// succeeded listed as retired (node/keys/tell).
func (n *Node) IdentityDocument() *identity.Document {
	doc := identity.NewDocument(n.id, n.Document().AgentID, n.cfg.Identity.Display, n.started)
	doc.Relay = mail.RelayPreferences(n.cfg, n.id.PeerID())
	return n.keyNotices.IdentityDocument(doc)
}

// memories are the bounded memories of what peers make the daemon
// remember, each by the component that owns it, for the metrics.
func (n *Node) memories() []metrics.Memory {
	ms := []metrics.Memory{
		{Name: "peer_records", Fill: n.store.StrangersFill},
		{Name: "held_views", Fill: n.convs.HeldViewsFill},
		{Name: "sent_views", Fill: n.store.SentStrangersFill},
		{Name: "trust_records", Fill: n.trust.StrangersFill},
		{Name: "signed_views", Fill: n.docs.SignedViewsFill},
	}
	for _, m := range gossip.Memos() {
		ms = append(ms, metrics.Memory{Name: m.Name, Fill: func() costlru.Fill {
			entries, used, budget := m.Fill()
			return costlru.Fill{Entries: entries, Used: used, Budget: budget}
		}})
	}
	return ms
}
