package tell

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/keys"
	"github.com/ifaced/ifaced/node/store"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Sender delivers one message to a peer, in a conversation or through its
// mailbox relays (the daemon's mail component); queued says it was left
// at a relay rather than handed to the peer.
type Sender interface {
	Tell(ctx context.Context, pid peer.ID, text string, parts ...gossip.Part) (queued bool, err error)
}

// KeyEvents is where the statements given here are kept (the trust
// book), and where the peers each was delivered to are recorded.
type KeyEvents interface {
	KeyEvents() []store.KeyEvent
	RecordGiven(e store.KeyEvent) error
}

// Peers lists the peers in the cache, each to be told.
type Peers interface {
	Peers() ([]store.PeerRecord, error)
}

// Deps is what New needs.
type Deps struct {
	Self    *identity.Identity
	Given   KeyEvents
	Peers   Peers
	Send    Sender
	Events  *events.Hub
	Log     *slog.Logger
	Now     func() time.Time
	Timeout time.Duration // one peer's delivery
	LiveFor time.Duration // how long after its date a revocation is announced again (trust.key_transition)

	// The key statement topic, nil without [discovery] gossip: the
	// announcer's GossipSub, the door its statements pass, the audit log
	// that records what is published, and the key lifecycle that says
	// which statements concern this daemon.
	PubSub *pubsub.PubSub
	Door   *admit.Door
	Audit  *gossip.AuditLog
	Keys   *keys.Lifecycle
}

// Notices delivers the key statements this daemon gave to the peers in
// its cache, and lists its retired key in its identity document.
type Notices struct {
	self    peer.ID
	trust   KeyEvents
	store   Peers
	send    Sender
	events  *events.Hub
	log     *slog.Logger
	now     func() time.Time
	timeout time.Duration
	liveFor time.Duration
	gossip  *keyGossip // nil without [discovery] gossip
}

// New builds the notices and, when d.PubSub is set, joins the key
// statement topic (Close leaves it). Run delivers.
func New(ctx context.Context, d Deps) (*Notices, error) {
	k := &Notices{self: d.Self.PeerID(), trust: d.Given, store: d.Peers, send: d.Send, events: d.Events, log: d.Log,
		now: d.Now, timeout: d.Timeout, liveFor: d.LiveFor}
	if d.PubSub != nil {
		g, err := startKeyGossip(ctx, d.PubSub, d.Self, d.Door, d.Audit, d.Keys, k.live, d.Log, d.Now)
		if err != nil {
			return nil, err
		}
		k.gossip = g
	}
	return k, nil
}

// Close leaves the key statement topic.
func (k *Notices) Close() error {
	if k.gossip != nil {
		return k.gossip.Close()
	}
	return nil
}

// Published counts the statements published on the key topic.
func (k *Notices) Published() uint64 {
	if k.gossip == nil {
		return 0
	}
	return k.gossip.published.Load()
}

// live are the statements given here that are still announced: a
// succession whose successor is this daemon's key until its transition
// period ends, a revocation for liveFor after its date; each as the parts
// of one message. A commitment is not announced (see the loop).
func (k *Notices) live() [][]gossip.Part {
	now := k.now()
	var out [][]gossip.Part
	for _, e := range k.trust.KeyEvents() {
		if e.Direction != store.KeyGiven {
			continue
		}
		switch {
		case e.Kind == store.KeySuccession && (e.Successor != k.self.String() || !now.Before(e.Until)):
			continue
		case e.Kind == store.KeyRevocation && !now.Before(e.Date.Add(k.liveFor)):
			continue
		case e.Kind == store.KeyCommitment:
			// Not announced: it rides on every greeting and on the
			// statements delivered at start, and a daemon that predates
			// commitments would take a commitment-only announcement for
			// an invalid one and penalise this daemon for it.
			continue
		}
		if parts, _, err := k.partsOf(e); err == nil {
			out = append(out, parts)
		}
	}
	return out
}

// succession is the statement whose successor is this daemon's key.
func (k *Notices) succession() *identity.Succession {
	for _, e := range k.trust.KeyEvents() {
		if e.Kind == store.KeySuccession && e.Direction == store.KeyGiven && e.Successor == k.self.String() {
			if s, err := identity.DecodeSuccession(e.Statement); err == nil {
				return s
			}
		}
	}
	return nil
}

// IdentityDocument lists the key this daemon's key succeeded as retired.
func (k *Notices) IdentityDocument(doc *identity.Document) *identity.Document {
	s := k.succession()
	if s == nil {
		return doc
	}
	d, err := identity.RetireFor(doc, s, s.DateTime())
	if err != nil {
		k.log.Warn("listing the retired key in the identity document", "err", err)
		return doc
	}
	return d
}

// Run delivers every statement given that some peer in the cache has not
// had yet (the daemon spawns it at start).
func (k *Notices) Run(ctx context.Context) {
	if k.gossip != nil {
		k.gossip.publish()
	}
	for _, e := range k.trust.KeyEvents() {
		if e.Direction != store.KeyGiven {
			continue
		}
		if e.Kind == store.KeySuccession && e.Successor != k.self.String() {
			continue // an earlier rotation's, delivered by the key it made
		}
		if e.Kind == store.KeyCommitment && e.Peer != k.self.String() {
			continue // an earlier key's commitment: that key was succeeded
		}
		if ctx.Err() != nil {
			return
		}
		k.deliver(ctx, e)
	}
}

// deliver sends one statement to every peer in the cache not reached yet.
func (k *Notices) deliver(ctx context.Context, e store.KeyEvent) {
	parts, text, err := k.partsOf(e)
	if err != nil {
		k.log.Error("a key statement given here does not decode", "kind", e.Kind, "peer", e.Peer, "err", err)
		return
	}
	recs, err := k.store.Peers()
	if err != nil {
		k.log.Warn("listing peers to tell of a key statement", "err", err)
		return
	}
	var reached, queued, failed []string
	for _, r := range recs {
		if r.PeerID == k.self.String() || (r.PeerID == e.Peer && e.Kind != store.KeyCommitment) || r.PeerID == e.Successor || slices.Contains(e.Delivered, r.PeerID) {
			continue
		}
		pid, err := peer.Decode(r.PeerID)
		if err != nil {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		c, cancel := context.WithTimeout(ctx, k.timeout)
		left, err := k.send.Tell(c, pid, text, parts...)
		cancel()
		if err != nil {
			k.log.Info("could not tell a peer of a key statement; trying again at the next start", "peer", pid, "kind", e.Kind, "err", err)
			failed = append(failed, r.PeerID)
			continue
		}
		e.Delivered = append(e.Delivered, r.PeerID)
		if left {
			queued = append(queued, r.PeerID)
		} else {
			reached = append(reached, r.PeerID)
		}
	}
	if len(reached)+len(queued) > 0 {
		if err := k.trust.RecordGiven(e); err != nil {
			k.log.Warn("recording the peers told of a key statement", "err", err)
		}
	}
	detail := fmt.Sprintf("the %s of key %s: told %d peers in a conversation, left it at the mailbox relays of %d, could not reach %d",
		e.Kind, e.Peer, len(reached), len(queued), len(failed))
	k.log.Info("delivered a key statement", "kind", e.Kind, "peer", e.Peer, "reached", len(reached), "queued", len(queued), "failed", len(failed))
	k.events.Publish(events.Event{Type: events.EventKey, At: k.now(), Peer: e.Peer, Detail: detail})
}

// partsOf builds the parts and text of the message carrying e.
func (k *Notices) partsOf(e store.KeyEvent) ([]gossip.Part, string, error) {
	switch e.Kind {
	case store.KeySuccession:
		s, err := identity.DecodeSuccession(e.Statement)
		if err != nil {
			return nil, "", err
		}
		text := fmt.Sprintf("My key changed: I am %s from %s on; my old key (%s) still verifies until %s. The signed key succession statement is attached.",
			e.Successor, s.Date, e.Peer, s.Until().UTC().Format(time.RFC3339))
		return []gossip.Part{keys.StatementPart(keys.PartKeySuccession, s)}, text, nil
	case store.KeyRevocation:
		r, err := identity.DecodeRevocation(e.Statement)
		if err != nil {
			return nil, "", err
		}
		parts := []gossip.Part{keys.StatementPart(keys.PartKeyRevocation, r)}
		if len(e.Succession) > 0 {
			s, err := identity.DecodeSuccession(e.Succession)
			if err != nil {
				return nil, "", err
			}
			parts = append(parts, keys.StatementPart(keys.PartKeySuccession, s))
		}
		text := fmt.Sprintf("Key %s is revoked: believe nothing it signs. The signed key revocation statement is attached.", e.Peer)
		return parts, text, nil
	case store.KeyCommitment:
		c, err := identity.DecodeCommitment(e.Statement)
		if err != nil {
			return nil, "", err
		}
		text := fmt.Sprintf("My key commits to its next key (next_key_digest %s): believe no rotation of it to any other. The signed key commitment statement is attached.", c.NextKeyDigest)
		return []gossip.Part{keys.StatementPart(keys.PartKeyCommitment, c)}, text, nil
	}
	return nil, "", fmt.Errorf("unknown kind %q", e.Kind)
}
