package keys

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ifaced/ifaced/node/policy"

	"github.com/ifaced/ifaced/node/events"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/alias"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Key lifecycle, the receiving side: a peer's key succession, revocation
// and commitment statements (package identity has their form, node/wire's
// "Key lifecycle" how they travel and what they do; package trust decides).
// They arrive as parts of ordinary IFP-4 messages ("key_succession",
// "key_revocation", "key_commitment") on any transport,
// so they pass the one door: keyLifecycle.verify is part of the door's
// verify step (after the message's own signature; a statement that does
// not verify, or that this daemon will not follow, refuses the message),
// and keyLifecycle.act runs after the audit entry is written, whichever
// transport brought the message, so that no transport can forget it.
//
// Following a succession moves what the owner granted the old peer ID to
// the new one: the trust records (trust.Book.FollowSuccession: the pin,
// admitted and minted introductions), the disclosure-map entries and
// temperature caps (as run-time policy entries for the new peer ID; the
// config file is never rewritten), the peer cache entry, and the owner's
// aliases. The owner is told: an event of type "key", a log line, and
// `ifaced trust` shows the new peer as "rotated from …".

// Part names of the key statements.
const (
	PartKeySuccession = "key_succession"
	PartKeyRevocation = "key_revocation"
	PartKeyCommitment = "key_commitment"
)

// Lifecycle checks and follows the key statements messages carry.
type Lifecycle struct {
	trust   *trust.Book
	policy  *policy.Book
	store   *store.Store
	aliases *alias.File
	events  *events.Hub
	log     *slog.Logger
	now     func() time.Time
	// maxAge is how old a statement's date may be: the mailbox retention
	// (a statement may wait that long at a relay) or the replay window,
	// whichever is longer.
	maxAge time.Duration
}

func New(t *trust.Book, p *policy.Book, st *store.Store, aliases *alias.File,
	hub *events.Hub, log *slog.Logger, now func() time.Time, maxAge time.Duration) *Lifecycle {
	return &Lifecycle{trust: t, policy: p, store: st, aliases: aliases, events: hub, log: log, now: now, maxAge: maxAge}
}

// Statements are the key statements one message carries.
type Statements struct {
	Succession *identity.Succession
	Revocation *identity.Revocation
	Commitment *identity.Commitment
}

// None says whether the message carries no key statement.
func (st Statements) None() bool {
	return st.Succession == nil && st.Revocation == nil && st.Commitment == nil
}

// StatementsOf decodes the key statement parts of m: at most one of each.
func StatementsOf(m *gossip.Message) (Statements, error) {
	var st Statements
	for i := range m.Body.Parts {
		p := &m.Body.Parts[i]
		switch p.Name {
		case PartKeySuccession:
			if st.Succession != nil {
				return st, fmt.Errorf("%w: a message carries at most one %q part", gossip.ErrInvalidMessage, PartKeySuccession)
			}
			raw, err := p.CanonicalContent()
			if err != nil {
				return st, fmt.Errorf("%w: part %q: %v", gossip.ErrInvalidMessage, p.Name, err)
			}
			if st.Succession, err = identity.DecodeSuccession(raw); err != nil {
				return st, fmt.Errorf("part %q: %w", p.Name, err)
			}
		case PartKeyRevocation:
			if st.Revocation != nil {
				return st, fmt.Errorf("%w: a message carries at most one %q part", gossip.ErrInvalidMessage, PartKeyRevocation)
			}
			raw, err := p.CanonicalContent()
			if err != nil {
				return st, fmt.Errorf("%w: part %q: %v", gossip.ErrInvalidMessage, p.Name, err)
			}
			if st.Revocation, err = identity.DecodeRevocation(raw); err != nil {
				return st, fmt.Errorf("part %q: %w", p.Name, err)
			}
		case PartKeyCommitment:
			if st.Commitment != nil {
				return st, fmt.Errorf("%w: a message carries at most one %q part", gossip.ErrInvalidMessage, PartKeyCommitment)
			}
			raw, err := p.CanonicalContent()
			if err != nil {
				return st, fmt.Errorf("%w: part %q: %v", gossip.ErrInvalidMessage, p.Name, err)
			}
			if st.Commitment, err = identity.DecodeCommitment(raw); err != nil {
				return st, fmt.Errorf("part %q: %w", p.Name, err)
			}
		}
	}
	return st, nil
}

// Met says whether this daemon met pid: the owner made it known, or the
// peer cache holds a view of it.
func (k *Lifecycle) Met(pid peer.ID) bool {
	if k.trust.Known(pid.String()) {
		return true
	}
	_, err := k.store.Peer(pid.String())
	return err == nil
}

// known says whether pid is someone the owner made known (a pin, a policy
// entry, an admitted introduction): a peer ID that is already someone's.
func (k *Lifecycle) known(pid peer.ID) bool { return k.trust.Known(pid.String()) }

// Verify is the door's check of the key statements m carries (signed by
// from, verified): each verifies, and this daemon will follow it.
func (k *Lifecycle) Verify(m *gossip.Message, from peer.ID) error {
	st, err := StatementsOf(m)
	if err != nil {
		return err
	}
	if st.Commitment != nil {
		if err := k.trust.CheckCommitment(st.Commitment, from); err != nil {
			return err
		}
	}
	if st.Succession != nil {
		if err := st.Succession.Verify(); err != nil {
			return err
		}
		// A succession that only names a revocation's signer need not be
		// followable (it may have been followed long ago); it verified.
		if st.Revocation == nil || st.Revocation.Signer != st.Succession.NewKeyID {
			if err := k.trust.CheckSuccession(st.Succession, from, k.Met, k.known, k.maxAge); err != nil {
				return err
			}
		}
	}
	if st.Revocation != nil {
		if err := k.trust.CheckRevocation(st.Revocation, st.Succession, k.Met); err != nil {
			return err
		}
	}
	return nil
}

// Act follows the statements of an admitted message; the audit log holds
// the message already. A failure is logged and told to the owner: the
// message stays admitted, and the same statement sent again is followed
// again (every step is idempotent, the record of it written last).
func (k *Lifecycle) Act(from peer.ID, via string, m *gossip.Message) {
	st, err := StatementsOf(m)
	if err != nil || st.None() {
		return
	}
	// A commitment first: a succession beside it is judged by it.
	if st.Commitment != nil {
		if _, err := k.trust.FollowCommitment(st.Commitment, via); err != nil {
			k.log.Error("recording a key commitment", "from", from, "err", err)
		}
	}
	// A succession passed the verify step, unless it came only to name a
	// revocation's signer: that one is followed only when it may be.
	if st.Succession != nil && k.trust.CheckSuccession(st.Succession, from, k.Met, k.known, k.maxAge) == nil {
		if err := k.followSuccession(st.Succession, via); err != nil {
			k.tell("", fmt.Sprintf("following the key succession %s → %s failed: %v", st.Succession.OldKeyID, st.Succession.NewKeyID, err))
			k.log.Error("following a key succession", "from", from, "err", err)
		}
	}
	if st.Revocation != nil {
		note, already, err := k.trust.FollowRevocation(st.Revocation, st.Succession, via)
		pid, _ := st.Revocation.RevokedPeer()
		switch {
		case err != nil:
			k.tell(pid.String(), fmt.Sprintf("following the revocation of %s failed: %v", pid, err))
			k.log.Error("following a key revocation", "from", from, "err", err)
		case !already:
			k.tell(pid.String(), fmt.Sprintf("peer %s's key was revoked by a revocation statement %s, received via %s (dated %s%s): %s",
				pid, signedBy(st.Revocation), via, st.Revocation.Date, reasonSuffix(st.Revocation.Reason), note))
		}
	}
}

// signedBy says who signed a revocation, for people.
func signedBy(r *identity.Revocation) string {
	if r.Signer == r.KeyID {
		return "signed by the key itself"
	}
	return "signed by its successor " + r.Signer
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return ", reason: " + gossip.Clip(r, 128)
}

// followSuccession moves what the owner granted s's old peer ID to its new
// one; the trust component's part, which records the succession, last.
func (k *Lifecycle) followSuccession(s *identity.Succession, via string) error {
	old, err := s.OldPeer()
	if err != nil {
		return err
	}
	next, err := s.NewPeer()
	if err != nil {
		return err
	}
	if prev, ok := k.trust.Successor(old); ok && prev == next {
		return nil // followed before
	}
	pb, err := k.policy.CarryOver(old.String(), next.String())
	if err != nil {
		return fmt.Errorf("carrying the policy of %s: %w", old, err)
	}
	var carried []string
	carried = append(carried, pb...)
	if k.carryCache(old, next) {
		carried = append(carried, "peer cache entry")
	}
	names, err := k.carryAliases(old, next)
	if err != nil {
		return err
	}
	carried = append(carried, names...)
	trusted, already, err := k.trust.FollowSuccession(s, via)
	if err != nil || already {
		return err
	}
	carried = append(trusted, carried...)
	what := "nothing the owner granted was held for the old key"
	if len(carried) > 0 {
		what = "carried over: " + strings.Join(carried, ", ")
	}
	k.tell(next.String(), fmt.Sprintf("peer %s rotated its key: it is %s from %s on; its old key verifies until %s; %s",
		old, next, s.Date, s.Until().UTC().Format(time.RFC3339), what))
	return nil
}

// tell publishes a key event to the local agent.
func (k *Lifecycle) tell(peerID, detail string) {
	k.events.Publish(events.Event{Type: events.EventKey, At: k.now(), Peer: peerID, Detail: detail})
}

// carryCache copies the peer cache entry of old to next, when next has
// none yet: the addresses, agent ID and the last view old showed (the
// next greeting replaces it).
func (k *Lifecycle) carryCache(old, next peer.ID) bool {
	rec, err := k.store.Peer(old.String())
	if err != nil {
		return false
	}
	if _, err := k.store.Peer(next.String()); err == nil {
		return false
	}
	rec.PeerID = next.String()
	if _, err := k.store.PutPeer(rec); err != nil {
		k.log.Warn("carrying a peer cache entry over a key rotation", "old", old, "new", next, "err", err)
		return false
	}
	return true
}

// carryAliases points the owner's aliases of old at next.
func (k *Lifecycle) carryAliases(old, next peer.ID) ([]string, error) {
	if k.aliases == nil {
		return nil, nil
	}
	all, err := k.aliases.All()
	if err != nil {
		return nil, fmt.Errorf("reading aliases: %w", err)
	}
	var out []string
	for name, pid := range all {
		if pid != old {
			continue
		}
		if _, err := k.aliases.Set(name, next); err != nil {
			return out, fmt.Errorf("moving alias %s to %s: %w", name, next, err)
		}
		out = append(out, "alias "+name)
	}
	return out, nil
}

// Concerns says whether m carries a statement about a key this daemon met
// (or whose succession it followed): only those pass the door here.
func (k *Lifecycle) Concerns(m *gossip.Message) bool {
	st, err := StatementsOf(m)
	if err != nil {
		return false
	}
	var pid peer.ID
	switch {
	case st.Revocation != nil:
		pid, err = st.Revocation.RevokedPeer()
	case st.Succession != nil:
		pid, err = st.Succession.OldPeer()
	case st.Commitment != nil:
		pid, err = st.Commitment.Peer()
	default:
		return false
	}
	return err == nil && k.Met(pid)
}
