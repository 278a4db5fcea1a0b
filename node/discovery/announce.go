package discovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/tasks"
	"github.com/ifaced/ifaced/node/p2phost"
	"github.com/ifaced/ifaced/node/store"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"golang.org/x/time/rate"
)

// Capability announcements. A daemon with [discovery] gossip on joins the
// GossipSub topic announceTopic and publishes its public view — the signed
// view it shows a stranger (strangerViews), nothing else of its document —
// once at start and whenever that view's content changes. Peers that
// cached a view of it learn that a newer one exists without a conversation.
//
// The payload is one deterministic CBOR map {seq, view}: view is the
// signed IFP-7 view as JSON (its signature has the document domain
// separation of package identity), seq repeats the view's seq so the
// order can be read without parsing the view. The pubsub message itself is
// signed by its author's libp2p key (strict signing, pubsub's default, set
// explicitly below), so every hop knows who published it.
//
// Each hop validates before it delivers or forwards: an announcement that
// does not decode, whose view is not signed by the message's author, or
// whose view is malformed is rejected (which also counts against the
// forwarding peer in GossipSub); one not newer than what this daemon holds
// from that author is ignored, so replayed or overtaken announcements die
// at the first hop that knows better.
//
// Strangers are budgeted before anything is decoded. Anyone can mint a
// key a second and announce a valid view under it, and each hop pays to
// verify it (a 900 KB view cost 42–105 ms of CPU and 17–34 MB allocated,
// BenchmarkStrangerAnnouncement). So an announcement whose author this
// daemon does not know — no cached view in the peer cache, no trust
// record above signed (the trusted dependency) — is verified only within
// announceBudget: discovery.gossip_strangers a minute for all unknown
// authors together, a fifth of that for those forwarded by any one peer,
// two per ten minutes for any one author. Past it the announcement is
// ignored (ValidationIgnore, neither delivered nor forwarded, and not held
// against the forwarder, which may be an honest hop relaying a flood it
// could not tell apart). Known authors are limited per author only, more
// generously. Full verifications run at most maxVerifying at once. The
// container bound of an announced view is negotiate.DecodeView's.
//
// Peer scoring (announceScore) does the rest of GossipSub's defence: a
// peer forwarding invalid announcements (rejected: forged, tampered,
// malformed) loses score quadratically and, past the thresholds, is no
// longer gossiped with, published to, or listened to at all.

// announceTopic is the GossipSub topic of capabilities.update announcements.
const announceTopic = "/ifaced/capabilities.update/1"

const (
	// maxAnnouncementSize bounds a payload. Public views are small: the
	// default daemon's announcement is about 1 KB, and 256 capabilities
	// with a 1 KB schema each still fit. 256 KiB keeps a hostile author's
	// announcement at a quarter of the 1 MiB frame cap of DESIGN §6, and
	// the cost of verifying it with it: a daemon whose public view is
	// larger announces nothing (it says so in its log) and peers learn
	// its view by greeting it.
	maxAnnouncementSize = 256 << 10
	// maxPubsubMessage is pubsub's limit on one RPC read: the payload and
	// pubsub's envelope (author, key, signature, topic, control).
	maxPubsubMessage = maxAnnouncementSize + 64<<10
	// maxHighWater bounds the per-author high-water marks kept in memory;
	// past it the least recently announcing author is forgotten, and the
	// peer cache alone stops its replays.
	maxHighWater = 8192
	// maxVerifying bounds the announcements verified at once (the rest wait
	// in pubsub's validation, itself bounded by validatorConcurrency).
	maxVerifying = 2
	// validatorConcurrency bounds the announcements pubsub holds for the
	// validator at once; past it pubsub drops them unjudged (throttled,
	// no penalty).
	validatorConcurrency = 64
	// requeryTimeout bounds the query that fetches a peer's view for this
	// daemon when an announcement would downgrade the cached one.
	requeryTimeout = 5 * time.Second
	// announceBuffer is how many delivered announcements may wait for the
	// receive loop before pubsub drops them.
	announceBuffer = 256
)

// announcer is the announcement topic and what this daemon remembers of
// it: it owns GossipSub on the daemon's host, the topic's validator, the
// loop that receives announcements into the peer cache, the publication of
// the daemon's own advertised view, and the requeries that keep a richer
// cached view from being downgraded.
type announcer struct {
	host  host.Host
	deps  announcerDeps
	now   func() time.Time
	log   *slog.Logger
	tasks *tasks.Group

	ps    *pubsub.PubSub
	topic *pubsub.Topic
	sub   *pubsub.Subscription
	mesh  meshTracer

	budget    *announceBudget
	verifying chan struct{} // one token per announcement being verified

	mu         sync.Mutex
	highWater  *simplelru.LRU[peer.ID, uint64] // highest seq accepted from each author
	requerying map[peer.ID]bool                // authors whose view for us is being fetched
	lastKey    []byte                          // content key of the public view last announced
	dirty      bool                            // the public view may have changed since the last announcement
	publishing bool                            // the publish loop is running

	// Validation outcomes and announcements sent, for tests and status;
	// throttled counts those of ignored refused by the budget unread.
	accepted, rejected, ignored, throttled, published atomic.Uint64
}

// announcerDeps is what the announcer asks of the rest of the daemon.
type announcerDeps struct {
	views      viewSource          // the advertised view it announces
	peers      peerCache           // the peer cache announcements refresh
	ask        querier             // fetches an author's view for us when the announced one would downgrade the cached one
	keyRevoked func(peer.ID) error // trust: a key the owner revoked is not followed
	trusted    func(peer.ID) bool  // trust: a record above signed (pinned, introduced, document-checked); nil is none
	events     eventSink
}

// peerCache is the part of the store announcements write to.
type peerCache interface {
	peerReader
	PutPeer(store.PeerRecord) (changed bool, err error)
	DeletePeer(peerID string) error
}

// announced is an announcement that passed validation: the verified view,
// the hash of its canonical bytes and its JSON as cached.
type announced struct {
	view *negotiate.Document
	hash string
	raw  json.RawMessage
}

// announcement is the CBOR payload.
type announcement struct {
	Seq  uint64 `cbor:"seq"`
	View []byte `cbor:"view"` // the signed public view, JSON
}

var (
	announceEnc cbor.EncMode
	announceDec cbor.DecMode
)

func init() {
	var err error
	if announceEnc, announceDec, err = gossip.StrictCBOR(gossip.CBORLimits{MaxNested: 4, MaxArray: 16, MaxMap: 16}); err != nil {
		panic(err)
	}
}

// encodeAnnouncement is the payload announcing view, which must be signed.
func encodeAnnouncement(view *negotiate.Document) ([]byte, error) {
	raw, err := json.Marshal(view)
	if err != nil {
		return nil, fmt.Errorf("encoding announcement: %w", err)
	}
	b, err := announceEnc.Marshal(announcement{Seq: view.Seq, View: raw})
	if err != nil {
		return nil, fmt.Errorf("encoding announcement: %w", err)
	}
	if len(b) > maxAnnouncementSize {
		return nil, fmt.Errorf("encoding announcement: %w: %d bytes, at most %d (the public view is too large to announce)",
			gossip.ErrTooLarge, len(b), maxAnnouncementSize)
	}
	return b, nil
}

// decodeAnnouncement decodes a payload and checks its shape: one CBOR map
// of seq and view within the size limit, a well-formed signed view whose
// seq is the announced one. It does not check whose signature it is.
func decodeAnnouncement(b []byte) (*negotiate.Document, error) {
	if len(b) > maxAnnouncementSize {
		return nil, fmt.Errorf("decoding announcement: %w: %d bytes, at most %d", gossip.ErrTooLarge, len(b), maxAnnouncementSize)
	}
	var a announcement
	rest, err := announceDec.UnmarshalFirst(b, &a)
	if err != nil {
		return nil, fmt.Errorf("decoding announcement: %w: %v", gossip.ErrMalformed, err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decoding announcement: %w: %d bytes after the payload", gossip.ErrMalformed, len(rest))
	}
	if a.Seq == 0 || len(a.View) == 0 {
		return nil, fmt.Errorf("decoding announcement: %w: seq and view are required", gossip.ErrMalformed)
	}
	view, err := negotiate.DecodeView(json.RawMessage(a.View))
	if err != nil {
		return nil, fmt.Errorf("decoding announcement: %w", err)
	}
	if view.Seq != a.Seq {
		return nil, fmt.Errorf("decoding announcement: %w: announces seq %d, the view has seq %d", gossip.ErrMalformed, a.Seq, view.Seq)
	}
	if view.Signature == nil {
		return nil, fmt.Errorf("decoding announcement: %w: the view is not signed", gossip.ErrMalformed)
	}
	return view, nil
}

// verifyAnnouncement decodes a payload published by author and checks
// that its view is signed by author's key: a daemon announces only its
// own capabilities.
func verifyAnnouncement(author peer.ID, b []byte) (*announced, error) {
	view, err := decodeAnnouncement(b)
	if err != nil {
		return nil, err
	}
	pub, err := identity.PublicKeyFromPeerID(author)
	if err != nil {
		return nil, fmt.Errorf("verifying announcement: %w", err)
	}
	canon, err := view.VerifyCanonical(pub)
	if err != nil {
		return nil, fmt.Errorf("verifying announcement by %s: %w", author, err)
	}
	// Cache what was verified: members this daemon does not know are not
	// covered by the signature, so they are not kept.
	raw, err := json.Marshal(view)
	if err != nil {
		return nil, fmt.Errorf("verifying announcement: %w", err)
	}
	sum := sha256.Sum256(canon)
	return &announced{view: view, hash: hex.EncodeToString(sum[:]), raw: raw}, nil
}

// startAnnouncer joins the announcement topic when cfg.Gossip is on (else
// it returns nil, announcements off): GossipSub on h, bounded by the
// announcer's context (pubsub has no Close; its goroutines end when that
// context does), the validator, the receive loop, and a first
// announcement. Everything runs until ctx ends or Close.
func startAnnouncer(ctx context.Context, h host.Host, cfg config.DiscoveryConfig, deps announcerDeps, now func() time.Time, log *slog.Logger) (*announcer, error) {
	if !cfg.Gossip {
		return nil, nil
	}
	g := newAnnouncer(ctx, h, cfg, deps, now, log)
	ok := false
	defer func() {
		if !ok {
			g.tasks.Close()
		}
	}()
	params, thresholds := announceScore()
	ps, err := pubsub.NewGossipSub(g.tasks.Context(), h,
		// Strict signing is the default; an announcement's author must be
		// known and proven, so it is not left to a default.
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		// This daemon's own announcements and key statements go to every
		// peer on the topic (above the publish threshold), not only to its
		// mesh: the pubsub built here does not flood-publish by default,
		// and a mesh takes a heartbeat or a GRAFT to hold a peer that just
		// joined, so a revocation published a second after a join (node/
		// keys/tell) could reach nobody, and was then taken as heard.
		pubsub.WithFloodPublish(true),
		pubsub.WithMaxMessageSize(maxPubsubMessage),
		pubsub.WithPeerScore(params, thresholds),
		pubsub.WithRawTracer(&g.mesh),
	)
	if err != nil {
		return nil, fmt.Errorf("starting GossipSub: %w", err)
	}
	g.ps = ps
	validate := func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		return g.validate(m)
	}
	if err := ps.RegisterTopicValidator(announceTopic, validate, pubsub.WithValidatorConcurrency(validatorConcurrency)); err != nil {
		return nil, fmt.Errorf("registering the %s validator: %w", announceTopic, err)
	}
	if g.topic, err = ps.Join(announceTopic); err != nil {
		return nil, fmt.Errorf("joining %s: %w", announceTopic, err)
	}
	if g.sub, err = g.topic.Subscribe(pubsub.WithBufferSize(announceBuffer)); err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", announceTopic, err)
	}
	ok = true
	g.tasks.Go(g.receiveLoop)
	g.announce()
	return g, nil
}

// newAnnouncer is the announcer's state, before GossipSub is started.
func newAnnouncer(ctx context.Context, h host.Host, cfg config.DiscoveryConfig, deps announcerDeps, now func() time.Time, log *slog.Logger) *announcer {
	highWater, _ := simplelru.NewLRU[peer.ID, uint64](maxHighWater, nil)
	g := &announcer{host: h, deps: deps, now: now, log: log, tasks: tasks.New(ctx),
		budget: newAnnounceBudget(cfg.GossipStrangers, now), verifying: make(chan struct{}, maxVerifying),
		highWater: highWater, requerying: map[peer.ID]bool{}}
	g.mesh.peers = map[peer.ID]struct{}{}
	return g
}

// Close stops pubsub (by ending its context) and every task of the
// announcer, waits for them, and releases the subscription.
func (g *announcer) Close() error {
	g.tasks.Close()
	g.sub.Cancel()
	return nil
}

// announce publishes the advertised view if its content changed since the
// last announcement. It returns at once: UpdateDocument calls it holding
// the document lock. Calls during a publication coalesce into one more
// run, which announces whatever is current then. A nil announcer
// (announcements off) does nothing.
func (g *announcer) announce() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.dirty = true
	if g.publishing {
		g.mu.Unlock()
		return
	}
	g.publishing = true
	g.mu.Unlock()
	if !g.tasks.Go(g.publishLoop) {
		g.mu.Lock()
		g.publishing = false
		g.mu.Unlock()
	}
}

func (g *announcer) publishLoop() {
	for {
		g.mu.Lock()
		if !g.dirty || g.tasks.Context().Err() != nil {
			g.publishing = false
			g.mu.Unlock()
			return
		}
		g.dirty = false
		g.mu.Unlock()
		if err := g.publish(); err != nil {
			g.log.Warn("announcing capabilities", "err", err)
		}
	}
}

// publish publishes the advertised view unless its content is the one
// last announced: a change only to capabilities a stranger cannot see
// announces nothing, which would otherwise tell everyone that something
// hidden changed.
func (g *announcer) publish() error {
	v, err := g.deps.views.announced()
	if err != nil {
		return err
	}
	g.mu.Lock()
	same := bytes.Equal(v.Key, g.lastKey)
	g.mu.Unlock()
	if same {
		return nil
	}
	data, err := encodeAnnouncement(v.Doc)
	if err != nil {
		return err
	}
	if err := g.topic.Publish(g.tasks.Context(), data); err != nil {
		return fmt.Errorf("publishing the seq %d announcement: %w", v.Doc.Seq, err)
	}
	g.mu.Lock()
	g.lastKey = v.Key
	g.mu.Unlock()
	g.published.Add(1)
	g.log.Debug("announced capabilities", "seq", v.Doc.Seq, "capabilities", len(v.Doc.Capabilities), "topic_peers", len(g.topic.ListPeers()))
	return nil
}

// validate decides, before delivery and before forwarding, whether an
// announcement goes on. pubsub runs it on its own goroutines, so it runs as
// a task Close waits for (during), and not at all once the announcer is
// closing.
func (g *announcer) validate(m *pubsub.Message) pubsub.ValidationResult {
	author := m.GetFrom()
	if author == g.host.ID() {
		return pubsub.ValidationAccept // our own, checked when it was built
	}
	res := pubsub.ValidationIgnore
	g.tasks.During(func() { res = g.judge(author, m) })
	switch res {
	case pubsub.ValidationAccept:
		g.accepted.Add(1)
	case pubsub.ValidationReject:
		g.rejected.Add(1)
	default:
		g.ignored.Add(1)
	}
	return res
}

// judge decides an announcement by another author: the budget first,
// from what this daemon knows of the author, and only within it the
// decoding and verification.
func (g *announcer) judge(author peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	if len(m.Data) > maxAnnouncementSize {
		// No daemon publishes one: invalid, at no cost to the budget.
		g.log.Debug("rejected capabilities announcement", "author", author, "via", m.ReceivedFrom, "bytes", len(m.Data))
		return pubsub.ValidationReject
	}
	rec, err := g.deps.peers.Peer(author.String())
	cached := err == nil
	known := cached || (g.deps.trusted != nil && g.deps.trusted(author))
	if !g.budget.allow(author, m.ReceivedFrom, known) {
		g.throttled.Add(1)
		g.log.Debug("ignored capabilities announcement over budget", "author", author, "via", m.ReceivedFrom, "known", known)
		return pubsub.ValidationIgnore
	}
	select {
	case g.verifying <- struct{}{}:
	case <-g.tasks.Context().Done():
		return pubsub.ValidationIgnore
	}
	a, err := verifyAnnouncement(author, m.Data)
	<-g.verifying
	if err != nil {
		// Debug: anyone can send these, and the log must not be theirs to fill.
		g.log.Debug("rejected capabilities announcement", "author", author, "via", m.ReceivedFrom, "err", err)
		return pubsub.ValidationReject
	}
	if err := g.deps.keyRevoked(author); err != nil {
		g.log.Debug("ignored capabilities announcement", "author", author, "err", err)
		return pubsub.ValidationIgnore
	}
	seq := a.view.Seq
	// A cached view at a higher seq makes this one stale. One at the same
	// seq does not stop it: this daemon may hold that document from a
	// greeting or a pushed update, while peers behind it in the mesh have
	// only this announcement to learn it from.
	if cached && rec.Seq > seq {
		return pubsub.ValidationIgnore
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if high, _ := g.highWater.Get(author); seq <= high {
		return pubsub.ValidationIgnore // a replay, or overtaken by a newer announcement
	}
	g.highWater.Add(author, seq) // evicts the least recently announcing author when full
	m.ValidatorData = a
	return pubsub.ValidationAccept
}

// receiveLoop caches the views announced by others until the announcer
// closes.
func (g *announcer) receiveLoop() {
	for {
		m, err := g.sub.Next(g.tasks.Context())
		if err != nil {
			return // closing
		}
		a, ok := m.ValidatorData.(*announced)
		if m.GetFrom() == g.host.ID() || !ok {
			continue
		}
		g.receive(m.GetFrom(), a)
	}
}

// receive refreshes the cache from an announced view.
//
// The announced view is the one a stranger gets. A peer that greeted the
// author holds the view cut for its own context, which may show more: a
// higher tier, authentication level or temperature, a persona, or a peers
// allow list naming it. It cannot tell from the cached context alone
// whether the public view shows less — that depends on the author's
// default tier and conditions — so whenever a negotiated context is
// cached, it asks the author for its own view instead (one capabilities
// query, only when the author's public view changed) and caches the
// announced view only if that fails: a newer document seen through the
// public view beats an older one seen through a richer context.
func (g *announcer) receive(author peer.ID, a *announced) {
	old, err := g.deps.peers.Peer(author.String())
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Announcements refresh what this daemon already knows. A stranger's
		// is forwarded but not cached: anyone can mint a key a second, and
		// every view cached costs disk on every daemon of the mesh.
		return
	case err == nil && old.Seq >= a.view.Seq:
		return // this document, in a view at least as rich, or a newer one
	case err == nil && len(old.Context) > 0:
		var granted negotiate.Granted
		if json.Unmarshal(old.Context, &granted) == nil {
			prop := negotiate.Proposal{Disclosure: granted.Disclosure, Persona: granted.Persona, Temperature: granted.Temperature}
			g.requery(author, prop, a, old)
			return
		}
	}
	g.cache(author, a, old)
}

// requery fetches author's view for this daemon in the background, falling
// back to the announced view. One query per author is in flight at a time;
// it fetches the newest document whichever announcement started it.
func (g *announcer) requery(author peer.ID, prop negotiate.Proposal, a *announced, old store.PeerRecord) {
	g.mu.Lock()
	if g.requerying[author] {
		g.mu.Unlock()
		return
	}
	g.requerying[author] = true
	g.mu.Unlock()
	done := func() {
		g.mu.Lock()
		delete(g.requerying, author)
		g.mu.Unlock()
	}
	started := g.tasks.Go(func() {
		defer done()
		ctx, cancel := context.WithTimeout(g.tasks.Context(), requeryTimeout)
		defer cancel()
		r, err := g.deps.ask.QueryCapabilities(ctx, author, prop)
		if err == nil && r.View.Seq >= a.view.Seq {
			return
		}
		if err != nil {
			if g.tasks.Context().Err() != nil {
				return
			}
			g.log.Info("could not fetch an announcing peer's view for us; caching its public view", "peer", author, "seq", a.view.Seq, "err", err)
		}
		g.cache(author, a, old)
	})
	if !started {
		done()
	}
}

// cache caches an announced view the way keepView caches a
// greeted one, with no negotiated context (the store keeps the cached
// one) and, where this daemon has no fresher ones, the cached display
// name and addresses: an announcement may arrive over several hops.
func (g *announcer) cache(author peer.ID, a *announced, old store.PeerRecord) {
	addrs := p2phost.PeerAddrs(g.host, author)
	if len(addrs) == 0 {
		addrs = old.Addrs
	}
	now := g.now()
	rec := store.PeerRecord{PeerID: author.String(), AgentID: a.view.AgentID, Display: old.Display, Addrs: addrs,
		Seq: a.view.Seq, DocHash: a.hash, View: a.raw, FetchedAt: now, ChangedAt: now}
	changed, err := g.deps.peers.PutPeer(rec)
	if errors.Is(err, store.ErrCorrupt) {
		g.log.Warn("replacing unreadable peer cache entry", "peer", author, "err", err)
		if err = g.deps.peers.DeletePeer(author.String()); err == nil {
			changed, err = g.deps.peers.PutPeer(rec)
		}
	}
	switch {
	case errors.Is(err, store.ErrStaleSeq):
		return // a greeting brought a newer view meanwhile
	case err != nil:
		g.log.Warn("caching an announced view", "peer", author, "err", err)
		return
	}
	if changed {
		g.deps.events.Publish(events.Event{Type: events.EventPeerView, At: now, Peer: author.String(),
			Detail: fmt.Sprintf("seq %d, %d capabilities, announced", a.view.Seq, len(a.view.Capabilities))})
	}
}

// announceBudget is how many announcements this daemon verifies, decided
// before any is decoded: it owns the token buckets of unknown authors
// together, of each forwarding peer (for unknown authors' announcements)
// and of each author, the last two in bounded least-recently-used tables
// (a forgotten one comes back with a full bucket, which the shared bucket
// still bounds).
//
// The buckets, for an author this daemon does not know:
//   - all of them together: strangers a minute, as a burst too;
//   - those forwarded by one peer: a fifth of that (at least one), so one
//     flooding neighbour cannot spend what honest neighbours relay;
//   - one author: strangerAuthorBurst, then one per strangerAuthorEvery (a
//     daemon announces at start and when its public view changes).
//
// For a known author, only its own bucket: knownAuthorBurst, then one per
// knownAuthorEvery. Buckets are charged specific to shared (forwarder,
// everyone, author for strangers) and a refusal gives back what it took,
// so a refused flood does not drain the shared bucket, and the tables of
// authors churn no faster than the shared bucket allows.
type announceBudget struct {
	now func() time.Time

	mu         sync.Mutex
	strangers  *rate.Limiter
	perFwd     rate.Limit
	fwdBurst   int
	authors    *simplelru.LRU[peer.ID, *rate.Limiter]
	forwarders *simplelru.LRU[peer.ID, *rate.Limiter]
}

const (
	strangerAuthorBurst = 2
	strangerAuthorEvery = 5 * time.Minute
	knownAuthorBurst    = 16
	knownAuthorEvery    = 10 * time.Second
	// maxBudgetAuthors and maxBudgetForwarders bound the two tables. A
	// forwarder is a connected peer (limits.connections_high bounds them
	// too).
	maxBudgetAuthors    = 4096
	maxBudgetForwarders = 1024
)

// newAnnounceBudget verifies perMinute announcements of unknown authors a
// minute (0: none).
func newAnnounceBudget(perMinute int, now func() time.Time) *announceBudget {
	authors, _ := simplelru.NewLRU[peer.ID, *rate.Limiter](maxBudgetAuthors, nil)
	forwarders, _ := simplelru.NewLRU[peer.ID, *rate.Limiter](maxBudgetForwarders, nil)
	fwdPerMinute := max(1, perMinute/5)
	return &announceBudget{now: now,
		strangers: rate.NewLimiter(rate.Limit(float64(perMinute)/60), perMinute),
		perFwd:    rate.Limit(float64(fwdPerMinute) / 60), fwdBurst: fwdPerMinute,
		authors: authors, forwarders: forwarders}
}

// allow charges one announcement by author, received from forwarder, and
// reports whether it may be verified.
func (b *announceBudget) allow(author, forwarder peer.ID, known bool) bool {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if known {
		r := bucket(b.authors, author, rate.Every(knownAuthorEvery), knownAuthorBurst).ReserveN(now, 1)
		return take(r, now)
	}
	fwd := bucket(b.forwarders, forwarder, b.perFwd, b.fwdBurst).ReserveN(now, 1)
	if !take(fwd, now) {
		return false
	}
	all := b.strangers.ReserveN(now, 1)
	if !take(all, now) {
		fwd.CancelAt(now)
		return false
	}
	if !take(bucket(b.authors, author, rate.Every(strangerAuthorEvery), strangerAuthorBurst).ReserveN(now, 1), now) {
		all.CancelAt(now)
		fwd.CancelAt(now)
		return false
	}
	return true
}

// bucket is key's bucket in table, made at limit and burst if it has
// none. An author who became known (or unknown) keeps its bucket until
// that fills: it is given the new rate.
func bucket(table *simplelru.LRU[peer.ID, *rate.Limiter], key peer.ID, limit rate.Limit, burst int) *rate.Limiter {
	l, ok := table.Get(key)
	if !ok {
		l = rate.NewLimiter(limit, burst)
		table.Add(key, l)
	} else if l.Limit() != limit {
		l.SetLimit(limit)
		l.SetBurst(burst)
	}
	return l
}

// take reports whether reservation r holds a token now, giving it back if
// not.
func take(r *rate.Reservation, now time.Time) bool {
	if r.OK() && r.DelayFrom(now) == 0 {
		return true
	}
	r.CancelAt(now)
	return false
}

// announceScore is GossipSub's peer scoring for the announcement topic,
// the only topic this daemon joins. Scores, per peer:
//
//   - invalid announcements it delivered (rejected by the validator:
//     forged, tampered, malformed; ignored ones do not count): -1 × n²,
//     n decaying to 1% in an hour, so 4 cost -16, 9 cost -81;
//   - announcements it was first to deliver: +1 each, at most +10,
//     decaying to 1% in an hour: a neighbour that relays genuine news
//     earns a little patience, never enough to hide a flood of invalid
//     ones;
//   - GossipSub misbehaviour (IWANT promises broken, GRAFT during
//     backoff) beyond 6: -1 × excess², decaying to 1% in ten minutes.
//
// Mesh delivery rates are not scored (the topic is quiet: a daemon
// announces at start and on change, so an honest mesh peer may deliver
// nothing for hours), nor time in mesh, nor IP colocation (daemons of one
// household or office share a NAT; the stranger budget bounds what many
// keys behind one address cost). Thresholds:
//
//   - below -10 (4 invalid) a peer is not gossiped with (IHAVE/IWANT);
//   - below -20 (5 invalid) this daemon's announcements are not sent to it;
//   - below -80 (9 invalid) everything it sends is ignored (graylisted);
//   - peer exchange is taken only from peers scoring 5 or more.
//
// Scores are kept 30 minutes after a peer disconnects, so reconnecting
// does not wipe its record.
func announceScore() (*pubsub.PeerScoreParams, *pubsub.PeerScoreThresholds) {
	topic := &pubsub.TopicScoreParams{
		TopicWeight:                    1,
		TimeInMeshQuantum:              time.Second, // required, though time in mesh is not scored
		FirstMessageDeliveriesWeight:   1,
		FirstMessageDeliveriesDecay:    pubsub.ScoreParameterDecay(time.Hour),
		FirstMessageDeliveriesCap:      10,
		InvalidMessageDeliveriesWeight: -1,
		InvalidMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(time.Hour),
	}
	params := &pubsub.PeerScoreParams{
		Topics:                    map[string]*pubsub.TopicScoreParams{announceTopic: topic},
		TopicScoreCap:             10,
		AppSpecificScore:          func(peer.ID) float64 { return 0 },
		BehaviourPenaltyWeight:    -1,
		BehaviourPenaltyThreshold: 6,
		BehaviourPenaltyDecay:     pubsub.ScoreParameterDecay(10 * time.Minute),
		DecayInterval:             pubsub.DefaultDecayInterval,
		DecayToZero:               pubsub.DefaultDecayToZero,
		RetainScore:               30 * time.Minute,
	}
	thresholds := &pubsub.PeerScoreThresholds{
		GossipThreshold:   -10,
		PublishThreshold:  -20,
		GraylistThreshold: -80,
		AcceptPXThreshold: 5,
	}
	return params, thresholds
}

// meshPeers is this daemon's GossipSub mesh on the announcement topic: the
// peers it forwards announcements to.
func (g *announcer) meshPeers() []peer.ID {
	if g == nil {
		return nil
	}
	return g.mesh.list()
}

// meshTracer follows the mesh of the announcement topic, which pubsub does
// not expose, from the grafts and prunes it traces.
type meshTracer struct {
	mu    sync.Mutex
	peers map[peer.ID]struct{}
}

func (t *meshTracer) list() []peer.ID {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]peer.ID, 0, len(t.peers))
	for p := range t.peers {
		out = append(out, p)
	}
	return out
}

func (t *meshTracer) Graft(p peer.ID, topic string) {
	if topic == announceTopic {
		t.mu.Lock()
		t.peers[p] = struct{}{}
		t.mu.Unlock()
	}
}

func (t *meshTracer) Prune(p peer.ID, topic string) {
	if topic == announceTopic {
		t.mu.Lock()
		delete(t.peers, p)
		t.mu.Unlock()
	}
}

func (t *meshTracer) OnClosedOutboundStream(p peer.ID) {
	t.mu.Lock()
	delete(t.peers, p)
	t.mu.Unlock()
}

func (t *meshTracer) Leave(topic string) {
	if topic == announceTopic {
		t.mu.Lock()
		clear(t.peers)
		t.mu.Unlock()
	}
}

func (t *meshTracer) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (t *meshTracer) Join(string)                              {}
func (t *meshTracer) ValidateMessage(*pubsub.Message)          {}
func (t *meshTracer) DeliverMessage(*pubsub.Message)           {}
func (t *meshTracer) RejectMessage(*pubsub.Message, string)    {}
func (t *meshTracer) DuplicateMessage(*pubsub.Message)         {}
func (t *meshTracer) ThrottlePeer(peer.ID)                     {}
func (t *meshTracer) RecvRPC(*pubsub.RPC)                      {}
func (t *meshTracer) SendRPC(*pubsub.RPC, peer.ID)             {}
func (t *meshTracer) DropRPC(*pubsub.RPC, peer.ID)             {}
func (t *meshTracer) UndeliverableMessage(*pubsub.Message)     {}
