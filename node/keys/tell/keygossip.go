package tell

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ifaced/ifaced/node/keys"

	"github.com/ifaced/ifaced/node/internal/peerid"
	"github.com/ifaced/ifaced/node/internal/tasks"

	"github.com/ifaced/ifaced/node/admit"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// Key statements on GossipSub. Beside the announcement topic, a daemon
// with [discovery] gossip on joins keyTopic, where key succession,
// revocation and commitment statements travel to peers the sender's cache
// does not hold:
// a peer that met the old key may not be one the new key can name.
//
// A payload is one deterministic CBOR IFP-4 message, a one-message
// conversation (phase greeting, sequence 1) from the publisher, addressed
// to the key the statement is about, carrying the statement parts exactly
// as a conversation or mail would (see node/wire "Key lifecycle"). Each hop
// validates before it forwards: at most maxKeyGossip bytes, the message
// signed by the pubsub author (strict signing) and naming it in
// headers.from, at least one statement part, and every statement verifying
// (a revocation its successor signed travels with its succession). Past
// keyGossipRate validations a second, statements are ignored (neither
// forwarded nor held against the forwarder). A hop that met the key the
// statement is about then takes the message through the door like any
// other (transport "gossipsub", the author as the signer): audited, and
// followed (node/keys); any other hop only forwards it.
//
// The publisher sends each live statement when it starts (if the topic
// has peers), and again a second after a peer joins the topic (at most
// once a minute, a join in between served at the minute's end), so that a
// peer that comes later still hears it within one announcement: a succession until its
// transition period ends, a revocation for trust.key_transition after its
// date. A commitment is not announced (it rides on every greeting), but
// one announced is validated and taken like the others.

const (
	keyTopic      = "/ifaced/key-lifecycle/1"
	maxKeyGossip  = 16 << 10
	keyGossipRate = 50 // validations a second, burst as many
	// keyRepublishEvery bounds how often a peer joining the topic makes
	// this daemon publish its live statements again.
	keyRepublishEvery = time.Minute
	viaGossipSub      = "gossipsub"
)

// keyGossip is the key statement topic: its validator, the receive loop
// that takes statements about keys this daemon met through the door, and
// the publication of this daemon's own live statements.
type keyGossip struct {
	self   *identity.Identity
	door   *admit.Door
	audit  *gossip.AuditLog // records what is announced
	keys   *keys.Lifecycle
	live   func() [][]gossip.Part // the statements to publish, each one message's parts
	log    *slog.Logger
	now    func() time.Time
	tasks  *tasks.Group
	topic  *pubsub.Topic
	sub    *pubsub.Subscription
	limit  *rate.Limiter
	events *pubsub.TopicEventHandler

	published, accepted atomic.Uint64

	mu    sync.Mutex
	heard map[peer.ID]bool // the topic's peers at the last publication: they have the statements
}

// startKeyGossip joins keyTopic on ps (the announcer's GossipSub).
func startKeyGossip(ctx context.Context, ps *pubsub.PubSub, self *identity.Identity, d *admit.Door, audit *gossip.AuditLog, ks *keys.Lifecycle,
	live func() [][]gossip.Part, log *slog.Logger, now func() time.Time) (*keyGossip, error) {
	g := &keyGossip{self: self, door: d, audit: audit, keys: ks, live: live, log: log, now: now, tasks: tasks.New(ctx),
		limit: rate.NewLimiter(keyGossipRate, keyGossipRate)}
	ok := false
	defer func() {
		if !ok {
			g.tasks.Close()
		}
	}()
	validate := func(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
		res := pubsub.ValidationIgnore
		g.tasks.During(func() { res = g.validate(m) })
		return res
	}
	if err := ps.RegisterTopicValidator(keyTopic, validate); err != nil {
		return nil, fmt.Errorf("registering the %s validator: %w", keyTopic, err)
	}
	var err error
	if g.topic, err = ps.Join(keyTopic); err != nil {
		return nil, fmt.Errorf("joining %s: %w", keyTopic, err)
	}
	if g.sub, err = g.topic.Subscribe(); err != nil {
		return nil, fmt.Errorf("subscribing to %s: %w", keyTopic, err)
	}
	if g.events, err = g.topic.EventHandler(); err != nil {
		return nil, fmt.Errorf("watching %s: %w", keyTopic, err)
	}
	ok = true
	g.tasks.Go(g.receiveLoop)
	g.tasks.Go(g.joinLoop)
	return g, nil
}

// Close stops the loops and waits for them, and releases the
// subscription; the topic goes with pubsub, whose context the daemon's
// closing ends (as the announcer's does).
func (g *keyGossip) Close() error {
	g.tasks.Close()
	g.sub.Cancel()
	g.events.Cancel()
	return nil
}

// validate judges one payload before it is delivered or forwarded.
func (g *keyGossip) validate(m *pubsub.Message) pubsub.ValidationResult {
	if len(m.Data) > maxKeyGossip {
		return pubsub.ValidationReject
	}
	if !g.limit.Allow() {
		return pubsub.ValidationIgnore
	}
	author := m.GetFrom()
	msg, err := gossip.DecodeCBOR(m.Data)
	if err != nil {
		g.log.Debug("rejected a key statement announcement", "author", author, "err", err)
		return pubsub.ValidationReject
	}
	pub, err := identity.PublicKeyFromPeerID(author)
	if err == nil && msg.Headers.From.Agent != identity.DIDKey(pub) {
		err = fmt.Errorf("%w: headers.from is not the author", gossip.ErrWrongKey)
	}
	if err == nil {
		err = msg.Verify(pub)
	}
	if err != nil {
		g.log.Debug("rejected a key statement announcement", "author", author, "err", err)
		return pubsub.ValidationReject
	}
	st, err := keys.StatementsOf(msg)
	if err != nil || st.None() {
		g.log.Debug("rejected a key statement announcement", "author", author, "err", err)
		return pubsub.ValidationReject
	}
	if st.Succession != nil && st.Succession.Verify() != nil {
		return pubsub.ValidationReject
	}
	if st.Commitment != nil && st.Commitment.Verify() != nil {
		return pubsub.ValidationReject
	}
	if st.Revocation != nil && st.Revocation.Verify(st.Succession) != nil {
		return pubsub.ValidationReject
	}
	m.ValidatorData = msg
	return pubsub.ValidationAccept
}

// receiveLoop takes the statements about keys this daemon met through the
// door.
func (g *keyGossip) receiveLoop() {
	for {
		m, err := g.sub.Next(g.tasks.Context())
		if err != nil {
			return // closing
		}
		msg, ok := m.ValidatorData.(*gossip.Message)
		if m.GetFrom() == g.self.PeerID() || !ok || !g.keys.Concerns(msg) {
			continue
		}
		g.accepted.Add(1)
		if _, err := g.door.Admit(&admit.Arrival{Via: viaGossipSub, Msg: msg, Stream: m.GetFrom(), Uncharged: true,
			Note: "key statement announced on GossipSub"}); err != nil {
			g.log.Info("refused a key statement announced on GossipSub", "author", m.GetFrom(), "err", err)
		}
	}
}

// joinLoop publishes the live statements again when peers join the
// topic: joinSettle after a join (pubsub reports a join before the new
// peer takes messages on the topic), and then at most once every
// keyRepublishEvery, however many join meanwhile; a join in that minute
// is served at its end.
func (g *keyGossip) joinLoop() {
	kick := make(chan struct{}, 1)
	g.tasks.Go(func() {
		for {
			select {
			case <-g.tasks.Context().Done():
				return
			case <-kick:
			}
			if !g.tasks.Sleep(joinSettle) {
				return
			}
			if !g.someoneNew() {
				continue // the publication at start reached them all
			}
			g.publish()
			if !g.tasks.Sleep(keyRepublishEvery) {
				return
			}
		}
	})
	for {
		ev, err := g.events.NextPeerEvent(g.tasks.Context())
		if err != nil {
			return
		}
		switch ev.Type {
		case pubsub.PeerJoin:
			select {
			case kick <- struct{}{}:
			default:
			}
		case pubsub.PeerLeave:
			// Back later, it is new again: it may have lost what it heard.
			g.mu.Lock()
			delete(g.heard, ev.Peer)
			g.mu.Unlock()
		}
	}
}

// joinSettle is how long after a join this daemon publishes to the peer
// that joined.
const joinSettle = time.Second

// publish sends each live statement, when the topic has peers.
func (g *keyGossip) publish() {
	peers := g.topic.ListPeers()
	if len(peers) == 0 {
		return // nobody to hear it yet: the first peer to join will
	}
	g.mu.Lock()
	g.heard = map[peer.ID]bool{}
	for _, p := range peers {
		g.heard[p] = true
	}
	g.mu.Unlock()
	for _, parts := range g.live() {
		if err := g.publishOne(parts); err != nil {
			g.log.Warn("announcing a key statement on GossipSub", "err", err)
		}
	}
}

// someoneNew reports whether a peer on the topic now was not there at
// the last publication.
func (g *keyGossip) someoneNew() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.topic.ListPeers() {
		if !g.heard[p] {
			return true
		}
	}
	return false
}

func (g *keyGossip) publishOne(parts []gossip.Part) error {
	about := g.self.PeerID()
	if st, err := keys.StatementsOf(&gossip.Message{Body: gossip.Body{Parts: parts}}); err == nil {
		switch {
		case st.Revocation != nil:
			about, _ = st.Revocation.RevokedPeer()
		case st.Succession != nil:
			about, _ = st.Succession.OldPeer()
		case st.Commitment != nil:
			about, _ = st.Commitment.Peer()
		}
	}
	to, err := peerid.Agent(about)
	if err != nil {
		return err
	}
	now := g.now()
	c := gossip.NewConversation(gossip.NewID("conv", now), gossip.Agent{Agent: g.self.DID()}, to)
	m, err := c.Next(gossip.PhaseGreeting, now)
	if err != nil {
		return err
	}
	m.Body = gossip.Body{Text: "A key statement: the signed statement is attached.", Parts: parts}
	if err := m.Sign(g.self, now); err != nil {
		return err
	}
	raw, err := gossip.EncodeCBOR(m)
	if err != nil {
		return err
	}
	if err := g.audit.Record(gossip.AuditEntry{At: now.UTC(), Direction: gossip.Sent, Peer: about.String(), Transport: viaGossipSub,
		Note: "key statement announced on GossipSub", Message: m}); err != nil {
		return err
	}
	if err := g.topic.Publish(g.tasks.Context(), raw); err != nil {
		return err
	}
	g.published.Add(1)
	g.log.Info("announced a key statement on GossipSub", "about", about)
	return nil
}
