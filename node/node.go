package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	lru "github.com/hashicorp/golang-lru/v2"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// Node is a running daemon.
type Node struct {
	id     *identity.Identity
	cfg    *Config
	home   Home
	log    *slog.Logger
	host   host.Host
	store  *store.Store
	audit  *gossip.AuditLog
	replay *identity.ReplayGuard
	seen   *store.BufferedSeen // with durability.sync = "interval"; nil when every Add commits
	// mailReplay checks mail fetched from a mailbox (mailbox.go).
	mailReplay *identity.ReplayGuard
	order      *conditions.TierOrder
	policy     *negotiate.Policy
	events     *hub
	now        func() time.Time

	started time.Time
	docMu   sync.Mutex // one document change at a time, so none is lost and no seq is reused

	mu    sync.Mutex
	doc   *negotiate.Document    // the owner's document, signed; replaced on change
	views map[string]*signedView // signed views by seq and facts
	convs map[string]*conv       // open conversations by ID

	peerViews *lru.Cache[peer.ID, verifiedView] // the last view each peer sent, verified (converse.go)
	peersHold *lru.Cache[peer.ID, string]       // the hash of our view each peer last said it holds (converse.go)

	bridge      *bridge
	rates       *rateLimits
	invocations *invocations
	schemas     *negotiate.Schemas // of doc, compiled once per seq (under mu)

	ctx     context.Context // ends at Close; bounds every background task
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	wgMu    sync.Mutex // guards closing against wg.Add racing wg.Wait
	closing bool

	trust *trustState // trust records and held introduction tokens (trust.go)

	reach  *reachState  // relay service and reservations on others' relays (relay.go)
	mail   *mailState   // IFP-8 mailboxes held here and messages queued for peers away (mailbox.go)
	dht    *dhtState    // Kademlia DHT and capability provider records (dht.go)
	gossip *gossipState // GossipSub capabilities.update announcements (announce.go)
	mdns   *mdnsState   // LAN discovery (mdns.go)
	inbox  inboxConvs   // conversations held through the HTTPS inbox (inbox.go)

	importTimeout time.Duration  // one fetch of an outside agent's document (importer.go)
	closers       []func() error // run by Close in reverse order, before the host closes
}

// signedView is a view as sent: signed, and as the generic JSON value a
// message part holds. Views change only when the document's seq or the
// requester's facts do, so they are signed once and reused.
type signedView struct {
	doc     *negotiate.Document
	content *gossip.SealedContent // encoded once: every message that carries the view signs and sends these bytes
	sum     string                // hex SHA-256 of the content's RFC 8785 form: what a peer holding it names in have_view
	key     []byte                // the view's content without seq and signature, to tell a changed view from a re-signed one
}

// part is the message part that carries the view.
func (v *signedView) part() gossip.Part { return v.content.Part("application/json", partCapabilities) }

// maxCachedViews bounds the signed views kept between document changes.
// Each holds the view as a document, a JSON value, and its canonical and
// CBOR bytes (some 120 KB for 20 capabilities), so about 60 MB at most;
// past it the cache starts again and views are signed anew.
const maxCachedViews = 512

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
	n := &Node{id: id, cfg: cfg, home: home, log: log, order: order, events: newHub(), now: time.Now,
		views: map[string]*signedView{}, convs: map[string]*conv{}}
	n.peerViews, _ = lru.New[peer.ID, verifiedView](maxVerifiedViews)
	n.peersHold, _ = lru.New[peer.ID, string](maxVerifiedViews)
	n.mail = newMailState(cfg, func() time.Time { return n.now() })
	n.importTimeout = defaultImportTimeout
	for _, o := range opts {
		o(n)
	}
	n.started = n.now()
	n.bridge = newBridge(cfg.Agent, n.events, log)
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
	if n.audit, err = gossip.OpenAuditLog(filepath.Join(home.Dir, "audit"), auditOpts...); err != nil {
		return nil, err
	}
	if err := n.reloadPolicy(); err != nil {
		return nil, err
	}
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
	n.trust = newTrust(n)
	doc, err := cfg.Document(id.DID())
	if err != nil {
		return nil, fmt.Errorf("building capability document: %w", err)
	}
	doc.Relay = n.relayPreferences()
	if err := n.setDocument(doc); err != nil {
		return nil, err
	}
	if n.host, err = newHost(cfg, id, n.hostOptions()...); err != nil {
		return nil, err
	}
	n.host.SetStreamHandler(wire.Conversation, n.handleConversation)
	n.host.SetStreamHandler(wire.Capabilities, n.handleCapabilities)
	n.host.SetStreamHandler(wire.Update, n.handleUpdate)
	if err := n.startReach(); err != nil {
		return nil, err
	}
	if err := n.startDiscovery(); err != nil {
		return nil, err
	}
	n.spawn(n.pruneLoop)
	if n.seen != nil {
		n.spawn(n.flushLoop)
	}
	n.spawn(n.outboxLoop)
	n.spawn(n.refreshImports)
	ok = true
	log.Info("ifaced started", "peer", id.PeerID(), "did", id.DID(), "addrs", n.Addrs(),
		"capabilities", len(doc.Capabilities), "seq", n.Document().Seq)
	return n, nil
}

// policyFrom turns the disclosure and temperature config, with the
// owner's run-time overrides on top, into a policy.
func policyFrom(cfg *Config, order *conditions.TierOrder, o store.PolicyOverrides) *negotiate.Policy {
	p := &negotiate.Policy{Order: order, DefaultTier: cfg.Disclosure.Default, Map: map[string]map[string]string{},
		DefaultMaxTemp: cfg.Temperature.DefaultMax, MaxTemp: map[string]string{}}
	for _, layer := range []map[string]map[string]string{cfg.Disclosure.Personas, o.Disclosure} {
		for persona, peers := range layer {
			if p.Map[persona] == nil {
				p.Map[persona] = map[string]string{}
			}
			for peer, tier := range peers {
				p.Map[persona][peer] = tier
			}
		}
	}
	for _, layer := range []map[string]string{cfg.Temperature.Peers, o.MaxTemperature} {
		for peer, t := range layer {
			p.MaxTemp[peer] = t
		}
	}
	return p
}

// reloadPolicy rebuilds the policy from the config and the stored
// overrides.
func (n *Node) reloadPolicy() error {
	o, err := n.store.PolicyOverrides()
	if err != nil {
		return err
	}
	p := policyFrom(n.cfg, n.order, o)
	n.mu.Lock()
	n.policy = p
	n.mu.Unlock()
	return nil
}

// currentPolicy is the policy in force.
func (n *Node) currentPolicy() *negotiate.Policy {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.policy
}

// ErrInvalidPolicy wraps a policy change that cannot be applied.
var ErrInvalidPolicy = errors.New("invalid policy change")

// SetDisclosure grants peer (a peer ID or agent ID) tier under persona
// ("default" for the owner's undifferentiated context), or removes the
// run-time grant when tier is empty so the config's applies again. It
// persists and applies from the peer's next greeting; grants already made
// in open conversations do not go down.
func (n *Node) SetDisclosure(persona, peer, tier string) error {
	if persona == "" {
		persona = negotiate.DefaultPersona
	}
	if peer == "" {
		return fmt.Errorf("%w: peer is required", ErrInvalidPolicy)
	}
	if tier != "" && !n.order.Known(tier) {
		return fmt.Errorf("%w: %q is not a known tier (known: %s)", ErrInvalidPolicy, tier, strings.Join(n.order.Tiers(), ", "))
	}
	if err := n.store.SetDisclosure(persona, peer, tier); err != nil {
		return err
	}
	return n.reloadPolicy()
}

// SetMaxTemperature caps the temperature peer may reach (cool, warm, hot),
// or removes the run-time cap when max is empty.
func (n *Node) SetMaxTemperature(peer, max string) error {
	if peer == "" {
		return fmt.Errorf("%w: peer is required", ErrInvalidPolicy)
	}
	if _, ok := conditions.TemperatureRank(max); max != "" && !ok {
		return fmt.Errorf("%w: temperature %q: want cool, warm or hot", ErrInvalidPolicy, max)
	}
	if err := n.store.SetMaxTemperature(peer, max); err != nil {
		return err
	}
	return n.reloadPolicy()
}

// Policy returns the policy in force: the config's disclosure map and
// temperature caps with the run-time changes applied.
func (n *Node) Policy() negotiate.Policy { return *n.currentPolicy() }

// contentKey is a document without what changes on every save, to tell
// whether its content changed.
func contentKey(d *negotiate.Document) ([]byte, error) {
	c := *d
	c.Seq, c.Updated, c.Signature = 0, "", nil
	return c.Canonical()
}

// setDocument makes doc the owner's document. Its seq continues from the
// stored one: unchanged content keeps the stored seq, changed content gets
// the next, so peers can tell a new document from an old one across
// restarts. The document is signed and stored before it is used.
func (n *Node) setDocument(doc *negotiate.Document) error {
	newKey, err := contentKey(doc)
	if err != nil {
		return err
	}
	seq, stored, err := n.store.OwnDocument()
	switch {
	case errors.Is(err, store.ErrNotFound):
		doc.Seq = 1
	case err != nil:
		return fmt.Errorf("reading own document: %w", err)
	default:
		var old negotiate.Document
		if err := json.Unmarshal(stored, &old); err != nil {
			return fmt.Errorf("reading own document: %w", err)
		}
		oldKey, err := contentKey(&old)
		if err != nil {
			return err
		}
		if bytes.Equal(oldKey, newKey) {
			doc.Seq, doc.Updated = seq, old.Updated
		} else {
			doc.Seq = seq + 1
		}
	}
	if doc.Updated == "" {
		doc.Updated = gossip.FormatDate(n.now())
	}
	if _, err := doc.Sign(n.id, n.now()); err != nil {
		return err
	}
	if doc.Seq != seq {
		raw, err := json.Marshal(doc)
		if err != nil {
			return fmt.Errorf("saving own document: %w", err)
		}
		if err := n.store.SaveOwnDocument(doc.Seq, raw); err != nil {
			return fmt.Errorf("saving own document: %w", err)
		}
	}
	n.mu.Lock()
	n.doc = doc
	n.views = map[string]*signedView{}
	n.mu.Unlock()
	return nil
}

// view returns the signed view of the owner's document for facts.
func (n *Node) view(f conditions.Facts) (*signedView, error) {
	n.mu.Lock()
	doc := n.doc
	key := fmt.Sprintf("%d|%s|%d|%s|%s|%s", doc.Seq, f.Peer, f.AuthLevel, f.Disclosure, f.Temperature, f.Persona)
	v, ok := n.views[key]
	n.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := n.signView(doc.View(f, n.order))
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	if n.doc.Seq == doc.Seq {
		if len(n.views) >= maxCachedViews {
			n.views = map[string]*signedView{} // cheap to rebuild; bounded memory matters more
		}
		n.views[key] = v
	}
	n.mu.Unlock()
	return v, nil
}

// signView signs view and keeps it with its JSON value and content key.
func (n *Node) signView(view *negotiate.Document) (*signedView, error) {
	if _, err := view.Sign(n.id, n.now()); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(view)
	if err != nil {
		return nil, fmt.Errorf("encoding view: %w", err)
	}
	var content any
	if err := json.Unmarshal(raw, &content); err != nil {
		return nil, fmt.Errorf("encoding view: %w", err)
	}
	sealed, err := gossip.SealContent(content)
	if err != nil {
		return nil, fmt.Errorf("encoding view: %w", err)
	}
	ck, err := contentKey(view)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(ck)
	held := sha256.Sum256(sealed.Canonical())
	return &signedView{doc: view, content: sealed, sum: hex.EncodeToString(held[:]), key: sum[:]}, nil
}

// orderedView is v with the capabilities of the requested ACP tool
// categories first, signed, and the requested categories it supports. A
// request that changes nothing returns v. It keeps v's content key: the
// order is the peer's request, not a change of what it may see.
func (n *Node) orderedView(v *signedView, requested []string) (*signedView, []string, error) {
	doc, honoured := negotiate.OrderByCategories(v.doc, requested)
	if len(honoured) == 0 {
		return v, nil, nil
	}
	doc.Signature = nil
	ordered, err := n.signView(doc)
	if err != nil {
		return nil, nil, err
	}
	ordered.key = v.key
	return ordered, honoured, nil
}

// UpdateDocument replaces the owner's capability list (as `caps add` and
// `caps remove` do): the document is validated, gets the next seq, is
// signed and stored, and every peer in an open conversation is sent its
// new view.
func (n *Node) UpdateDocument(change func(d *negotiate.Document) error) (*negotiate.Document, error) {
	n.docMu.Lock()
	defer n.docMu.Unlock()
	cur := n.Document()
	next := *cur
	next.Capabilities = slices.Clone(cur.Capabilities)
	next.Signature, next.Updated = nil, gossip.FormatDate(n.now())
	if err := change(&next); err != nil {
		return nil, err
	}
	if err := next.Validate(n.order); err != nil {
		return nil, err
	}
	if err := n.setDocument(&next); err != nil {
		return nil, err
	}
	doc := n.Document()
	n.events.publish(Event{Type: EventDocument, At: n.now(), Detail: fmt.Sprintf("seq %d, %d capabilities", doc.Seq, len(doc.Capabilities))})
	n.pushUpdates()
	n.documentChanged()
	return doc, nil
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
func (n *Node) Document() *negotiate.Document {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.doc
}

// Audit returns the audit log.
func (n *Node) Audit() *gossip.AuditLog { return n.audit }

// Store returns the store.
func (n *Node) Store() *store.Store { return n.store }

// Subscribe returns the event stream for the local agent.
func (n *Node) Subscribe() (<-chan Event, func()) { return n.events.subscribe() }

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
			if n.cfg.Relay.Service && n.cfg.Relay.Mailbox {
				n.pruneMail()
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
	n.mu.Lock()
	for _, c := range n.convs {
		c.stream.Reset()
	}
	n.mu.Unlock()
	n.wg.Wait()
	if n.seen != nil {
		errs = append(errs, n.seen.Flush())
	}
	if n.audit != nil {
		errs = append(errs, n.audit.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}
