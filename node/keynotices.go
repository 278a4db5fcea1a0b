package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ifaced/ifaced/node/keys"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// keyNotices delivers the key statements this daemon gave to the peers in
// its cache, and lists its retired key in its identity document.
type keyNotices struct {
	self    peer.ID
	trust   *trust.Book
	store   *store.Store
	send    func(ctx context.Context, pid peer.ID, text string, parts ...gossip.Part) (*SendResult, error)
	events  *events.Hub
	log     *slog.Logger
	now     func() time.Time
	timeout time.Duration // one peer's delivery
	liveFor time.Duration // how long after its date a revocation is announced again (trust.key_transition)
	gossip  *keyGossip    // nil without [discovery] gossip
}

func newKeyNotices(self peer.ID, t *trust.Book, st *store.Store, mail *Mail, hub *events.Hub, log *slog.Logger,
	now func() time.Time, timeout, liveFor time.Duration) *keyNotices {
	return &keyNotices{self: self, trust: t, store: st, send: func(ctx context.Context, pid peer.ID, text string, parts ...gossip.Part) (*SendResult, error) {
		return mail.send(ctx, pid, "", text, parts...)
	}, events: hub, log: log, now: now, timeout: timeout, liveFor: liveFor}
}

// live are the statements given here that are still announced: a
// succession whose successor is this daemon's key until its transition
// period ends, a revocation for liveFor after its date; each as the parts
// of one message. A commitment is not announced (see the loop).
func (k *keyNotices) live() [][]gossip.Part {
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
func (k *keyNotices) succession() *identity.Succession {
	for _, e := range k.trust.KeyEvents() {
		if e.Kind == store.KeySuccession && e.Direction == store.KeyGiven && e.Successor == k.self.String() {
			if s, err := identity.DecodeSuccession(e.Statement); err == nil {
				return s
			}
		}
	}
	return nil
}

// identityDocument lists the key this daemon's key succeeded as retired.
func (k *keyNotices) identityDocument(doc *identity.Document) *identity.Document {
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

// run delivers every statement given that some peer in the cache has not
// had yet (the daemon spawns it at start).
func (k *keyNotices) run(ctx context.Context) {
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
func (k *keyNotices) deliver(ctx context.Context, e store.KeyEvent) {
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
		res, err := k.send(c, pid, text, parts...)
		cancel()
		if err != nil {
			k.log.Info("could not tell a peer of a key statement; trying again at the next start", "peer", pid, "kind", e.Kind, "err", err)
			failed = append(failed, r.PeerID)
			continue
		}
		e.Delivered = append(e.Delivered, r.PeerID)
		if res.Delivered == "queued" {
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
func (k *keyNotices) partsOf(e store.KeyEvent) ([]gossip.Part, string, error) {
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
