package trust

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Key lifecycle: the succession and revocation statements of peers'
// keys (package identity has their form). The Book keeps, beside the
// trust records, the statements it followed (store.KeyEvent, one
// succession and one revocation per key at most) and decides from them:
//
//   - A succession is checked (CheckSuccession) before the message that
//     carries it is admitted, and followed (FollowSuccession) after it is
//     audited. What the trust records hold for the old key moves to the new
//     one: a pin of the old key becomes a pin of the new key (a level 2
//     stays level 2 only when the old key was pinned: a level the old key
//     had from an identity document or nothing is not carried, the document
//     is checked again for the new key), the admitted introduction tokens,
//     and the tokens this daemon minted that are bound to the old key.
//     The rest of what the owner granted (the disclosure map, temperature
//     caps, the peer cache, aliases) is the daemon's to move (node's
//     keyLifecycle). The old key still verifies until the statement's date
//     plus its transition period; after that KeyRevoked refuses it with
//     wire.ErrKeyRetired, naming the successor.
//   - A revocation is checked (CheckRevocation) and followed
//     (FollowRevocation): the key is refused at once (KeyRevoked,
//     wire.ErrKeyRevoked), its trust record says revoked (so LevelOf gives it
//     no level), and a succession from it that was followed and is dated
//     after the revocation is voided: its successor is revoked too, so that
//     nothing the owner granted stays with a key the owner did not
//     authorise (a thief who rotated a stolen key to one of his own).
//
// Statements about a key this daemon never met are refused: there is
// nothing to carry over and nothing to protect, and it keeps strangers from
// growing the store.

// ErrStatementRefused is wire.ErrKeyStatementRefused: a valid statement
// this daemon will not follow (the old key never met, a successor already
// known as someone else, a second successor, a revoked key).
var ErrStatementRefused = wire.ErrKeyStatementRefused

// MaxStatementSkew is how far ahead of this daemon's clock a statement's
// date may be.
const MaxStatementSkew = 5 * time.Minute

// lifecycle is what the Book holds of the key statements, by peer.
type lifecycle struct {
	succs map[peer.ID]store.KeyEvent // by old key
	revs  map[peer.ID]store.KeyEvent // by revoked key
}

// loadLifecycle reads the key statements of st into b (New).
func (b *Book) loadLifecycle() {
	b.keys = lifecycle{succs: map[peer.ID]store.KeyEvent{}, revs: map[peer.ID]store.KeyEvent{}}
	evs, err := b.store.KeyEvents()
	if err != nil {
		b.log.Warn("reading key lifecycle records", "err", err)
	}
	for _, e := range evs {
		pid, err := peer.Decode(e.Peer)
		if err != nil {
			continue
		}
		switch e.Kind {
		case store.KeySuccession:
			b.keys.succs[pid] = e
		case store.KeyRevocation:
			b.keys.revs[pid] = e
		}
	}
}

// lifecycleRefusal refuses a key a revocation statement revoked, or one a
// succession retired past its transition period (naming the successor).
func (b *Book) lifecycleRefusal(pid peer.ID) error {
	b.mu.RLock()
	rev, revoked := b.keys.revs[pid]
	succ, succeeded := b.keys.succs[pid]
	b.mu.RUnlock()
	if revoked {
		by := "its own key"
		if rev.Successor != "" {
			by = "its successor " + rev.Successor
		}
		return fmt.Errorf("%w: key %s was revoked by a revocation statement signed by %s, dated %s; nothing it signs is accepted",
			ErrKeyRevoked, pid, by, rev.Date.UTC().Format(time.RFC3339))
	}
	if succeeded && succ.Direction == store.KeyReceived && !b.now().Before(succ.Until) {
		return fmt.Errorf("%w: key %s was succeeded by %s on %s and its transition period ended %s; its successor is %s, sign with that key",
			wire.ErrKeyRetired, pid, succ.Successor, succ.Date.UTC().Format(time.RFC3339), succ.Until.UTC().Format(time.RFC3339), succ.Successor)
	}
	return nil
}

// Successor is the peer that succeeded pid (a succession this daemon
// followed), if any.
func (b *Book) Successor(pid peer.ID) (peer.ID, bool) {
	b.mu.RLock()
	e, ok := b.keys.succs[pid]
	b.mu.RUnlock()
	if !ok {
		return "", false
	}
	next, err := peer.Decode(e.Successor)
	return next, err == nil
}

// KeyEvents lists the key statements given and followed, by date.
func (b *Book) KeyEvents() []store.KeyEvent {
	b.mu.RLock()
	out := make([]store.KeyEvent, 0, len(b.keys.succs)+len(b.keys.revs))
	for _, e := range b.keys.succs {
		out = append(out, e)
	}
	for _, e := range b.keys.revs {
		out = append(out, e)
	}
	b.mu.RUnlock()
	slices.SortFunc(out, func(x, y store.KeyEvent) int { return x.Date.Compare(y.Date) })
	return out
}

// Met says whether the daemon met a peer (the daemon's peer cache or its
// owner's policy knows it); Known whether the owner gave a peer anything
// of their own (a pin, a policy entry, an admitted introduction): such a
// peer ID is someone's, and cannot become another key's successor.
type Met func(peer.ID) bool

// CheckSuccession decides, without changing anything, whether s (a
// statement that verified) may be followed. carrier is the signer of the
// message that brought it, which must be the old or the new key; met says
// whether the daemon met a peer and known whether the owner made it
// known; maxAge is how old a statement's date may be (the mailbox
// retention: a statement travels as mail). The same statement again
// passes (following it again changes nothing).
func (b *Book) CheckSuccession(s *identity.Succession, carrier peer.ID, met, known Met, maxAge time.Duration) error {
	old, next, err := successionPeers(s)
	if err != nil {
		return err
	}
	if carrier != old && carrier != next {
		return fmt.Errorf("%w: a key succession travels in a message signed by its old key (%s) or its new one (%s), not by %s",
			gossip.ErrWrongKey, old, next, carrier)
	}
	now := b.now()
	date := s.DateTime()
	if date.After(now.Add(MaxStatementSkew)) {
		return fmt.Errorf("%w: the succession of %s is dated %s, more than %s ahead of this daemon's clock", identity.ErrFuture, old, s.Date, MaxStatementSkew)
	}
	if date.Before(now.Add(-maxAge)) {
		return fmt.Errorf("%w: the succession of %s is dated %s, more than %s ago (a replayed or back-dated statement); make a new one",
			identity.ErrStale, old, s.Date, maxAge)
	}
	b.mu.RLock()
	prev, had := b.keys.succs[old]
	_, nextRetired := b.keys.succs[next]
	rev, oldRevoked := b.keys.revs[old]
	_, nextRevoked := b.keys.revs[next]
	b.mu.RUnlock()
	switch {
	case had && prev.Successor == next.String():
		return nil // the same succession again
	case had:
		return fmt.Errorf("%w: key %s was already succeeded by %s on %s; a key has one successor", ErrStatementRefused,
			old, prev.Successor, prev.Date.UTC().Format(time.RFC3339))
	case oldRevoked && date.After(rev.Date):
		return fmt.Errorf("%w: key %s was revoked on %s, and a succession it made after that is void", ErrKeyRevoked, old, rev.Date.UTC().Format(time.RFC3339))
	case nextRevoked:
		return fmt.Errorf("%w: the successor %s named by the succession of %s is a revoked key", ErrKeyRevoked, next, old)
	case nextRetired:
		return fmt.Errorf("%w: the successor %s named by the succession of %s was itself succeeded; a key never comes back", ErrStatementRefused, next, old)
	case !met(old):
		return fmt.Errorf("%w: a succession of %s, a peer this daemon never met: there is nothing to carry over", ErrStatementRefused, old)
	case known(next):
		return fmt.Errorf("%w: the successor %s named by the succession of %s is already a peer of this daemon's owner; what was granted to %s is not merged into another peer's",
			ErrStatementRefused, next, old, old)
	}
	return nil
}

func successionPeers(s *identity.Succession) (old, next peer.ID, err error) {
	if old, err = s.OldPeer(); err != nil {
		return "", "", fmt.Errorf("%w: old_key_id: %v", identity.ErrMalformedStatement, err)
	}
	if next, err = s.NewPeer(); err != nil {
		return "", "", fmt.Errorf("%w: new_key_id: %v", identity.ErrMalformedStatement, err)
	}
	return old, next, nil
}

// FollowSuccession carries the trust records of s's old key over to its
// new key and records the succession (after CheckSuccession passed and
// the message was audited). It returns what it carried, for people;
// already reports the same succession followed before (nothing changes).
// The record of the succession is written last, so a failure part way is
// carried over again when the statement comes again.
func (b *Book) FollowSuccession(s *identity.Succession, via string) (carried []string, already bool, err error) {
	old, next, err := successionPeers(s)
	if err != nil {
		return nil, false, err
	}
	b.mu.RLock()
	prev, had := b.keys.succs[old]
	b.mu.RUnlock()
	if had && prev.Successor == next.String() {
		return nil, true, nil
	}
	oldRec, _ := b.record(old)
	now := b.now().UTC()
	oldPub, _ := identity.PublicKeyFromPeerID(old)
	nextPub, _ := identity.PublicKeyFromPeerID(next)
	if _, err := b.update(next, func(r *store.TrustRecord) bool {
		changed := false
		if oldRec.PinnedKey != "" && oldRec.PinnedKey == identity.Fingerprint(oldPub) && r.PinnedKey == "" {
			r.PinnedKey, r.PinnedAt = identity.Fingerprint(nextPub), now
			carried = append(carried, "pin (level 2)")
			changed = true
		}
		for _, in := range oldRec.Intros {
			if !slices.ContainsFunc(r.Intros, func(x store.TrustIntro) bool { return x.TokenID == in.TokenID }) {
				r.Intros = append(r.Intros, in)
				carried = append(carried, fmt.Sprintf("introduction %q", in.Label))
				changed = true
			}
		}
		return changed
	}); err != nil {
		return nil, false, fmt.Errorf("carrying the trust record of %s to %s: %w", old, next, err)
	}
	n, err := b.rebindIntros(old, next)
	if err != nil {
		return nil, false, err
	}
	if n > 0 {
		carried = append(carried, fmt.Sprintf("%d introduction token(s) minted here", n))
	}
	raw, _ := json.Marshal(s)
	e := store.KeyEvent{Kind: store.KeySuccession, Direction: store.KeyReceived, Peer: old.String(), Successor: next.String(),
		Date: s.DateTime(), Until: s.Until(), Statement: raw, At: now, Via: via, Note: carriedNote(carried)}
	if err := b.putKeyEvent(old, e); err != nil {
		return nil, false, err
	}
	b.log.Info("followed a peer's key rotation", "old", old, "new", next, "date", s.Date, "transition_until", s.Until(), "carried", e.Note)
	return carried, false, nil
}

func carriedNote(carried []string) string {
	if len(carried) == 0 {
		return "nothing the owner granted was held for the old key"
	}
	return "carried over: " + strings.Join(carried, ", ")
}

// rebindIntros moves the tokens this daemon minted that old bound to next.
func (b *Book) rebindIntros(old, next peer.ID) (int, error) {
	b.imu.Lock()
	defer b.imu.Unlock()
	issued, err := b.store.IssuedIntros()
	if err != nil {
		return 0, fmt.Errorf("reading issued introductions: %w", err)
	}
	n := 0
	for _, in := range issued {
		if in.BoundPeer != old.String() {
			continue
		}
		in.BoundPeer = next.String()
		if err := b.store.PutIssuedIntro(in); err != nil {
			return n, fmt.Errorf("binding introduction %s to %s: %w", in.ID, next, err)
		}
		n++
	}
	return n, nil
}

func (b *Book) putKeyEvent(pid peer.ID, e store.KeyEvent) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if err := b.store.PutKeyEvent(e); err != nil {
		return err
	}
	b.mu.Lock()
	if e.Kind == store.KeySuccession {
		b.keys.succs[pid] = e
	} else {
		b.keys.revs[pid] = e
	}
	b.mu.Unlock()
	return nil
}

// RecordGiven records a statement about this daemon's own key (`ifaced key
// rotate`, `ifaced key revoke`), so that `ifaced trust` shows it.
func (b *Book) RecordGiven(e store.KeyEvent) error {
	pid, err := peer.Decode(e.Peer)
	if err != nil {
		return fmt.Errorf("recording a key statement: peer %q: %w", e.Peer, err)
	}
	e.Direction = store.KeyGiven
	return b.putKeyEvent(pid, e)
}

// CheckRevocation decides whether r (with succ, the succession that came
// with it, if any) may be followed: it must verify (a revocation signed by
// a successor needs the succession from the revoked key to its signer,
// carried with it or followed here before), and its key must be one this
// daemon met.
func (b *Book) CheckRevocation(r *identity.Revocation, succ *identity.Succession, met Met) error {
	pid, err := r.RevokedPeer()
	if err != nil {
		return fmt.Errorf("%w: key_id: %v", identity.ErrMalformedStatement, err)
	}
	if succ == nil && r.Signer != r.KeyID {
		b.mu.RLock()
		e, ok := b.keys.succs[pid]
		b.mu.RUnlock()
		if ok {
			if s, err := identity.DecodeSuccession(e.Statement); err == nil {
				succ = s
			}
		}
	}
	if err := r.Verify(succ); err != nil {
		return err
	}
	now := b.now()
	if r.DateTime().After(now.Add(MaxStatementSkew)) {
		return fmt.Errorf("%w: the revocation of %s is dated %s, more than %s ahead of this daemon's clock", identity.ErrFuture, pid, r.Date, MaxStatementSkew)
	}
	if !met(pid) {
		return fmt.Errorf("%w: a revocation of %s, a key this daemon never met: nothing of it is kept here", ErrStatementRefused, pid)
	}
	return nil
}

// FollowRevocation records r: from now on the key is refused, its trust
// record says revoked, and a succession from it followed here and dated
// after the revocation is void, its successor revoked too. It returns
// what it did, for people; already reports the key revoked before.
func (b *Book) FollowRevocation(r *identity.Revocation, succ *identity.Succession, via string) (note string, already bool, err error) {
	pid, err := r.RevokedPeer()
	if err != nil {
		return "", false, err
	}
	b.mu.RLock()
	_, had := b.keys.revs[pid]
	followed, succeeded := b.keys.succs[pid]
	b.mu.RUnlock()
	if had {
		return "", true, nil
	}
	if _, err := b.RevokeKey(pid); err != nil {
		return "", false, err
	}
	notes := []string{"key refused from now on"}
	date := r.DateTime()
	if succeeded && followed.Direction == store.KeyReceived && followed.Date.After(date) {
		next, err := peer.Decode(followed.Successor)
		if err == nil {
			if _, err := b.RevokeKey(next); err != nil {
				return "", false, err
			}
			notes = append(notes, fmt.Sprintf("the succession to %s, dated %s after the revocation, is void: %s is revoked too",
				next, followed.Date.UTC().Format(time.RFC3339), next))
		}
	}
	raw, _ := json.Marshal(r)
	var sraw json.RawMessage
	e := store.KeyEvent{Kind: store.KeyRevocation, Direction: store.KeyReceived, Peer: pid.String(), Date: date, Statement: raw,
		Reason: r.Reason, At: b.now().UTC(), Via: via, Note: strings.Join(notes, "; ")}
	if r.Signer != r.KeyID {
		if signer, err := identity.PublicKeyFromKeyID(r.Signer); err == nil {
			if sp, err := identity.PeerIDFromPublicKey(signer); err == nil {
				e.Successor = sp.String()
			}
		}
		if succ != nil {
			sraw, _ = json.Marshal(succ)
			e.Succession = sraw
		}
	}
	if err := b.putKeyEvent(pid, e); err != nil {
		return "", false, err
	}
	b.log.Warn("a peer's key was revoked by a revocation statement", "peer", pid, "date", r.Date, "reason", r.Reason, "done", e.Note)
	return e.Note, false, nil
}

// lifecycleInfo adds to info what the key statements say of pid.
func (b *Book) lifecycleInfo(pid peer.ID, info *Info) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if e, ok := b.keys.succs[pid]; ok {
		info.SucceededBy = e.Successor
		info.Keys = append(info.Keys, e)
		if e.Direction == store.KeyReceived {
			info.How = append(info.How, fmt.Sprintf("rotated to %s on %s (old key verifies until %s)",
				e.Successor, e.Date.UTC().Format(time.RFC3339), e.Until.UTC().Format(time.RFC3339)))
		}
	}
	if e, ok := b.keys.revs[pid]; ok {
		info.Keys = append(info.Keys, e)
		info.How = append(info.How, "revoked by a revocation statement dated "+e.Date.UTC().Format(time.RFC3339))
	}
	for old, e := range b.keys.succs {
		if e.Successor == pid.String() {
			info.RotatedFrom = old.String()
			info.Keys = append(info.Keys, e)
			info.How = append(info.How, fmt.Sprintf("rotated from %s on %s", old, e.Date.UTC().Format(time.RFC3339)))
		}
	}
}

// lifecyclePeers are the peers the key statements name.
func (b *Book) lifecyclePeers() []peer.ID {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []peer.ID
	for old, e := range b.keys.succs {
		out = append(out, old)
		if next, err := peer.Decode(e.Successor); err == nil {
			out = append(out, next)
		}
	}
	for pid := range b.keys.revs {
		out = append(out, pid)
	}
	return out
}
