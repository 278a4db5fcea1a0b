package node

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
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
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

// announceTopic is the GossipSub topic of capabilities.update announcements.
const announceTopic = "/ifaced/capabilities.update/1"

const (
	// maxAnnouncementSize bounds a payload, below the 1 MiB pubsub message
	// limit so that the payload and pubsub's envelope (author, key,
	// signature, topic) fit one 1 MiB message, the frame cap of DESIGN §6.
	maxAnnouncementSize = gossip.MaxMessageSize - 64<<10
	// maxHighWater bounds the per-author high-water marks kept in memory;
	// past it they are forgotten and the peer cache alone stops replays.
	maxHighWater = 8192
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
	tasks *tasks

	ps    *pubsub.PubSub
	topic *pubsub.Topic
	sub   *pubsub.Subscription
	mesh  meshTracer

	mu         sync.Mutex
	highWater  map[peer.ID]uint64 // highest seq accepted from each author
	requerying map[peer.ID]bool   // authors whose view for us is being fetched
	lastKey    []byte             // content key of the public view last announced
	dirty      bool               // the public view may have changed since the last announcement
	publishing bool               // the publish loop is running

	// Validation outcomes and announcements sent, for tests and status.
	accepted, rejected, ignored, published atomic.Uint64
}

// announcerDeps is what the announcer asks of the rest of the daemon.
type announcerDeps struct {
	views      viewSource          // the advertised view it announces
	peers      peerCache           // the peer cache announcements refresh
	ask        querier             // fetches an author's view for us when the announced one would downgrade the cached one
	keyRevoked func(peer.ID) error // trust: a key the owner revoked is not followed
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
func startAnnouncer(ctx context.Context, h host.Host, cfg DiscoveryConfig, deps announcerDeps, now func() time.Time, log *slog.Logger) (*announcer, error) {
	if !cfg.Gossip {
		return nil, nil
	}
	g := &announcer{host: h, deps: deps, now: now, log: log, tasks: newTasks(ctx),
		highWater: map[peer.ID]uint64{}, requerying: map[peer.ID]bool{}}
	g.mesh.peers = map[peer.ID]struct{}{}
	ok := false
	defer func() {
		if !ok {
			g.tasks.close()
		}
	}()
	ps, err := pubsub.NewGossipSub(g.tasks.ctx, h,
		// Strict signing is the default; an announcement's author must be
		// known and proven, so it is not left to a default.
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithMaxMessageSize(gossip.MaxMessageSize),
		pubsub.WithRawTracer(&g.mesh),
	)
	if err != nil {
		return nil, fmt.Errorf("starting GossipSub: %w", err)
	}
	g.ps = ps
	validate := func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		return g.validate(m)
	}
	if err := ps.RegisterTopicValidator(announceTopic, validate); err != nil {
		return nil, fmt.Errorf("registering the %s validator: %w", announceTopic, err)
	}
	if g.topic, err = ps.Join(announceTopic); err != nil {
		return nil, fmt.Errorf("joining %s: %w", announceTopic, err)
	}
	if g.sub, err = g.topic.Subscribe(pubsub.WithBufferSize(announceBuffer)); err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", announceTopic, err)
	}
	ok = true
	g.tasks.spawn(g.receiveLoop)
	g.announce()
	return g, nil
}

// Close stops pubsub (by ending its context) and every task of the
// announcer, waits for them, and releases the subscription.
func (g *announcer) Close() error {
	g.tasks.close()
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
	if !g.tasks.spawn(g.publishLoop) {
		g.mu.Lock()
		g.publishing = false
		g.mu.Unlock()
	}
}

func (g *announcer) publishLoop() {
	for {
		g.mu.Lock()
		if !g.dirty || g.tasks.ctx.Err() != nil {
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
	v, err := g.deps.views.advertised()
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
	if err := g.topic.Publish(g.tasks.ctx, data); err != nil {
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
	g.tasks.during(func() { res = g.judge(author, m) })
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

func (g *announcer) judge(author peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	a, err := verifyAnnouncement(author, m.Data)
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
	if rec, err := g.deps.peers.Peer(author.String()); err == nil && rec.Seq > seq {
		return pubsub.ValidationIgnore
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if seq <= g.highWater[author] {
		return pubsub.ValidationIgnore // a replay, or overtaken by a newer announcement
	}
	if len(g.highWater) >= maxHighWater {
		clear(g.highWater)
	}
	g.highWater[author] = seq
	m.ValidatorData = a
	return pubsub.ValidationAccept
}

// receiveLoop caches the views announced by others until the announcer
// closes.
func (g *announcer) receiveLoop() {
	for {
		m, err := g.sub.Next(g.tasks.ctx)
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
	started := g.tasks.spawn(func() {
		defer done()
		ctx, cancel := context.WithTimeout(g.tasks.ctx, requeryTimeout)
		defer cancel()
		r, err := g.deps.ask.QueryCapabilities(ctx, author, prop)
		if err == nil && r.View.Seq >= a.view.Seq {
			return
		}
		if err != nil {
			if g.tasks.ctx.Err() != nil {
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
	addrs := peerAddrs(g.host, author)
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
		g.deps.events.publish(Event{Type: EventPeerView, At: now, Peer: author.String(),
			Detail: fmt.Sprintf("seq %d, %d capabilities, announced", a.view.Seq, len(a.view.Capabilities))})
	}
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
