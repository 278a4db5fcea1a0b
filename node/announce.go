package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Capability announcements. A daemon with [discovery] gossip on joins the
// GossipSub topic announceTopic and publishes its public view — the signed
// view it shows a stranger (publicView), nothing else of its document —
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

// gossipState is the announcement topic and what this daemon remembers of
// it.
type gossipState struct {
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

// startGossip joins the announcement topic when [discovery] gossip is on:
// GossipSub on the daemon's host, bounded by the node's context (pubsub
// has no Close; its goroutines end when that context does), the validator,
// the receive loop, and a first announcement.
func (n *Node) startGossip() error {
	if !n.cfg.Discovery.Gossip {
		return nil
	}
	g := &gossipState{highWater: map[peer.ID]uint64{}, requerying: map[peer.ID]bool{}}
	g.mesh.peers = map[peer.ID]struct{}{}
	ps, err := pubsub.NewGossipSub(n.ctx, n.host,
		// Strict signing is the default; an announcement's author must be
		// known and proven, so it is not left to a default.
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithMaxMessageSize(gossip.MaxMessageSize),
		pubsub.WithRawTracer(&g.mesh),
	)
	if err != nil {
		return fmt.Errorf("starting GossipSub: %w", err)
	}
	g.ps = ps
	validate := func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		return n.validateAnnouncement(g, m)
	}
	if err := ps.RegisterTopicValidator(announceTopic, validate); err != nil {
		return fmt.Errorf("registering the %s validator: %w", announceTopic, err)
	}
	if g.topic, err = ps.Join(announceTopic); err != nil {
		return fmt.Errorf("joining %s: %w", announceTopic, err)
	}
	if g.sub, err = g.topic.Subscribe(pubsub.WithBufferSize(announceBuffer)); err != nil {
		return fmt.Errorf("subscribing to %s: %w", announceTopic, err)
	}
	// Close cancels the node's context before closers run, which stops
	// pubsub; cancelling the subscription then only releases it.
	n.onClose(func() error { g.sub.Cancel(); return nil })
	n.gossip = g
	n.spawn(func() { n.receiveAnnouncements(g) })
	n.announce()
	return nil
}

// announce publishes the public view if its content changed since the
// last announcement. It returns at once: UpdateDocument calls it holding
// the document lock. Calls during a publication coalesce into one more
// run, which announces whatever is current then.
func (n *Node) announce() {
	g := n.gossip
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
	if !n.spawn(func() { n.publishLoop(g) }) {
		g.mu.Lock()
		g.publishing = false
		g.mu.Unlock()
	}
}

func (n *Node) publishLoop(g *gossipState) {
	for {
		g.mu.Lock()
		if !g.dirty || n.ctx.Err() != nil {
			g.publishing = false
			g.mu.Unlock()
			return
		}
		g.dirty = false
		g.mu.Unlock()
		if err := n.publishView(g); err != nil {
			n.log.Warn("announcing capabilities", "err", err)
		}
	}
}

// publishView publishes the public view unless its content is the one
// last announced: a change only to capabilities a stranger cannot see
// announces nothing, which would otherwise tell everyone that something
// hidden changed.
func (n *Node) publishView(g *gossipState) error {
	v, err := n.advertisedView()
	if err != nil {
		return err
	}
	g.mu.Lock()
	same := bytes.Equal(v.key, g.lastKey)
	g.mu.Unlock()
	if same {
		return nil
	}
	data, err := encodeAnnouncement(v.doc)
	if err != nil {
		return err
	}
	if err := g.topic.Publish(n.ctx, data); err != nil {
		return fmt.Errorf("publishing the seq %d announcement: %w", v.doc.Seq, err)
	}
	g.mu.Lock()
	g.lastKey = v.key
	g.mu.Unlock()
	g.published.Add(1)
	n.log.Debug("announced capabilities", "seq", v.doc.Seq, "capabilities", len(v.doc.Capabilities), "topic_peers", len(g.topic.ListPeers()))
	return nil
}

// validateAnnouncement decides, before delivery and before forwarding,
// whether an announcement goes on. pubsub runs it on its own goroutines,
// so it runs as a task Close waits for (during), and not at all once the
// node is closing.
func (n *Node) validateAnnouncement(g *gossipState, m *pubsub.Message) pubsub.ValidationResult {
	author := m.GetFrom()
	if author == n.host.ID() {
		return pubsub.ValidationAccept // our own, checked when it was built
	}
	res := pubsub.ValidationIgnore
	n.during(func() { res = n.judgeAnnouncement(g, author, m) })
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

func (n *Node) judgeAnnouncement(g *gossipState, author peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	a, err := verifyAnnouncement(author, m.Data)
	if err != nil {
		// Debug: anyone can send these, and the log must not be theirs to fill.
		n.log.Debug("rejected capabilities announcement", "author", author, "via", m.ReceivedFrom, "err", err)
		return pubsub.ValidationReject
	}
	if err := n.trust.KeyRevoked(author); err != nil {
		n.log.Debug("ignored capabilities announcement", "author", author, "err", err)
		return pubsub.ValidationIgnore
	}
	seq := a.view.Seq
	// A cached view at a higher seq makes this one stale. One at the same
	// seq does not stop it: this daemon may hold that document from a
	// greeting or a pushed update, while peers behind it in the mesh have
	// only this announcement to learn it from.
	if rec, err := n.store.Peer(author.String()); err == nil && rec.Seq > seq {
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

// receiveAnnouncements caches the views announced by others until the node
// closes.
func (n *Node) receiveAnnouncements(g *gossipState) {
	for {
		m, err := g.sub.Next(n.ctx)
		if err != nil {
			return // the node is closing
		}
		a, ok := m.ValidatorData.(*announced)
		if m.GetFrom() == n.host.ID() || !ok {
			continue
		}
		n.receiveAnnouncement(g, m.GetFrom(), a)
	}
}

// receiveAnnouncement refreshes the cache from an announced view.
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
func (n *Node) receiveAnnouncement(g *gossipState, author peer.ID, a *announced) {
	old, err := n.store.Peer(author.String())
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
			n.requery(g, author, prop, a, old)
			return
		}
	}
	n.storeAnnounced(author, a, old)
}

// requery fetches author's view for this daemon in the background, falling
// back to the announced view. One query per author is in flight at a time;
// it fetches the newest document whichever announcement started it.
func (n *Node) requery(g *gossipState, author peer.ID, prop negotiate.Proposal, a *announced, old store.PeerRecord) {
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
	started := n.spawn(func() {
		defer done()
		ctx, cancel := context.WithTimeout(n.ctx, requeryTimeout)
		defer cancel()
		r, err := n.QueryCapabilities(ctx, author, prop)
		if err == nil && r.View.Seq >= a.view.Seq {
			return
		}
		if err != nil {
			if n.ctx.Err() != nil {
				return
			}
			n.log.Info("could not fetch an announcing peer's view for us; caching its public view", "peer", author, "seq", a.view.Seq, "err", err)
		}
		n.storeAnnounced(author, a, old)
	})
	if !started {
		done()
	}
}

// storeAnnounced caches an announced view the way acceptView caches a
// greeted one, with no negotiated context (the store keeps the cached
// one) and, where this daemon has no fresher ones, the cached display
// name and addresses: an announcement may arrive over several hops.
func (n *Node) storeAnnounced(author peer.ID, a *announced, old store.PeerRecord) {
	addrs := n.peerAddrs(author)
	if len(addrs) == 0 {
		addrs = old.Addrs
	}
	now := n.now()
	rec := store.PeerRecord{PeerID: author.String(), AgentID: a.view.AgentID, Display: old.Display, Addrs: addrs,
		Seq: a.view.Seq, DocHash: a.hash, View: a.raw, FetchedAt: now, ChangedAt: now}
	changed, err := n.store.PutPeer(rec)
	if errors.Is(err, store.ErrCorrupt) {
		n.log.Warn("replacing unreadable peer cache entry", "peer", author, "err", err)
		if err = n.store.DeletePeer(author.String()); err == nil {
			changed, err = n.store.PutPeer(rec)
		}
	}
	switch {
	case errors.Is(err, store.ErrStaleSeq):
		return // a greeting brought a newer view meanwhile
	case err != nil:
		n.log.Warn("caching an announced view", "peer", author, "err", err)
		return
	}
	if changed {
		n.events.publish(Event{Type: EventPeerView, At: now, Peer: author.String(),
			Detail: fmt.Sprintf("seq %d, %d capabilities, announced", a.view.Seq, len(a.view.Capabilities))})
	}
}

// during runs f on the calling goroutine as a task Close waits for, like
// spawn for background tasks, or not at all once the node is closing. It
// is for work that libraries start on goroutines of their own (pubsub's
// validators), so that none of it reaches the store after Close.
func (n *Node) during(f func()) bool {
	n.wgMu.Lock()
	if n.closing {
		n.wgMu.Unlock()
		return false
	}
	n.wg.Add(1)
	n.wgMu.Unlock()
	defer n.wg.Done()
	f()
	return true
}

// gossipMesh is this daemon's GossipSub mesh on the announcement topic: the
// peers it forwards announcements to.
func (n *Node) gossipMesh() []peer.ID {
	if n.gossip == nil {
		return nil
	}
	return n.gossip.mesh.list()
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
