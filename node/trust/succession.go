package trust

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Key lifecycle: the succession, revocation and commitment statements of
// peers' keys (package identity has their form). The Book keeps, beside
// the trust records, the statements it followed (store.KeyEvent, one of
// each kind per key at most; keyrecords.go says which are kept) and
// decides from them, by one rule: what a statement does is decided by the
// order in which this daemon observed the statements, never by a date the
// signer chose. Dates bound freshness only (MaxStatementSkew ahead; a
// succession no older than the mailbox retention or replay window).
//
//   - A succession A→B is checked (CheckSuccession) before the message
//     that carries it is admitted, and followed (FollowSuccession) after
//     it is audited. It is refused when A already has a successor here
//     (a key has one), when A or B is revoked here — by a revocation
//     statement observed before it, whatever either is dated, or by the
//     owner (`ifaced trust A --revoke`) — when B was itself succeeded,
//     when A committed to another next key (pre-rotation, below), when A
//     was never met, or when B is a peer the owner already made known.
//     Following it moves what the trust records hold for A to B: a pin
//     of A becomes a pin of B (a level 2 stays level 2 only when A was
//     pinned: a level A had from an identity document is not carried, the
//     document is checked again for B), the admitted introduction tokens,
//     and the tokens this daemon minted that are bound to A. The rest of
//     what the owner granted (the disclosure map, temperature caps, the
//     peer cache, aliases) is the daemon's to move (node's keyLifecycle).
//     A still verifies until the statement's date plus its transition
//     period; after that KeyRevoked refuses it with wire.ErrKeyRetired,
//     naming B.
//   - Once A→B is followed, nothing A signs takes anything from B: A
//     cannot make another succession, and a revocation of A, whoever
//     signed it and however it is dated, revokes A only.
//   - A revocation of A (CheckRevocation, FollowRevocation) refuses A at
//     once (KeyRevoked, wire.ErrKeyRevoked) and LevelOf gives it no
//     level; observed before any succession from A, it blocks every later
//     one. It is kept as a key lifecycle record with who signed it and the
//     transport that brought it — never as an owner's revocation.
//   - The owner's revocation of a key (RevokeKey) passes nothing to any
//     successor: a succession from it is refused. The block follows the
//     identity: the keys linked to it by successions followed here (its
//     successors and the keys it succeeded) are revoked with it, and the
//     answer names them (Info.RevokedAlso).
//   - Pre-rotation: a commitment of A to the digest of its next key
//     (CheckCommitment, FollowCommitment; or the next_key_digest of the
//     succession that made A) binds: the first one observed from A is
//     kept, a later different one is refused, and a succession from A to
//     any key but the committed one is refused.
//
// Statements about a key this daemon never met are refused (a succession
// or a revocation): there is nothing to carry over and nothing to
// protect. A commitment is taken from the key itself only.

// ErrStatementRefused is wire.ErrKeyStatementRefused: a valid statement
// this daemon will not follow (the old key never met, a successor already
// known as someone else, a second successor, a key committed to another,
// a second commitment).
var ErrStatementRefused = wire.ErrKeyStatementRefused

// MaxStatementSkew is how far ahead of this daemon's clock a statement's
// date may be.
const MaxStatementSkew = 5 * time.Minute

// lifecycleRefusal refuses a key a revocation statement revoked, or one a
// succession retired past its transition period (naming the successor).
func (b *Book) lifecycleRefusal(pid peer.ID) error {
	b.mu.RLock()
	rev, revoked := b.keys.revs[pid]
	succ, succeeded := b.keys.succs[pid]
	b.mu.RUnlock()
	if revoked {
		return fmt.Errorf("%w: key %s was revoked by a revocation statement %s, received %s; nothing it signs is accepted",
			ErrKeyRevoked, pid, signedByText(rev), rev.At.UTC().Format(time.RFC3339))
	}
	if succeeded && succ.Direction == store.KeyReceived && !b.now().Before(succ.Until) {
		return fmt.Errorf("%w: key %s was succeeded by %s on %s and its transition period ended %s; its successor is %s, sign with that key",
			wire.ErrKeyRetired, pid, succ.Successor, succ.Date.UTC().Format(time.RFC3339), succ.Until.UTC().Format(time.RFC3339), succ.Successor)
	}
	return nil
}

// signedByText says who signed a revocation statement, for people.
func signedByText(e store.KeyEvent) string {
	if e.Direction == store.KeyGiven {
		return "this daemon gave"
	}
	if e.SignedBy == store.KeySignedBySuccessor && e.Successor != "" {
		return "signed by its successor " + e.Successor
	}
	return "signed by the key itself"
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

// Met says whether the daemon met a peer (the daemon's peer cache or its
// owner's policy knows it); Known whether the owner gave a peer anything
// of their own (a pin, a policy entry, an admitted introduction): such a
// peer ID is someone's, and cannot become another key's successor.
type Met func(peer.ID) bool

// revokedHere says how pid is revoked here, if it is: by the owner (its
// trust record) or by a revocation statement observed here.
func (b *Book) revokedHere(pid peer.ID) (how string, revoked bool) {
	b.mu.RLock()
	rec, stored := b.recs[pid]
	rev, byStatement := b.keys.revs[pid]
	b.mu.RUnlock()
	switch {
	case stored && rec.RevokedKey != "":
		return "the owner revoked it on " + rec.RevokedAt.UTC().Format(time.RFC3339), true
	case byStatement:
		return fmt.Sprintf("a revocation statement %s was received %s", signedByText(rev), rev.At.UTC().Format(time.RFC3339)), true
	}
	return "", false
}

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
	b.mu.RUnlock()
	if had && prev.Successor == next.String() {
		return nil // the same succession again
	}
	if had {
		return fmt.Errorf("%w: key %s was already succeeded by %s (followed here %s); a key has one successor, and nothing the old key signs takes anything from it",
			ErrStatementRefused, old, prev.Successor, prev.At.UTC().Format(time.RFC3339))
	}
	if how, revoked := b.revokedHere(old); revoked {
		return fmt.Errorf("%w: key %s is revoked here (%s), and a revoked key passes nothing to a successor, whatever the succession is dated",
			ErrKeyRevoked, old, how)
	}
	if how, revoked := b.revokedHere(next); revoked {
		return fmt.Errorf("%w: the successor %s named by the succession of %s is a revoked key (%s)", ErrKeyRevoked, next, old, how)
	}
	if nextRetired {
		return fmt.Errorf("%w: the successor %s named by the succession of %s was itself succeeded; a key never comes back", ErrStatementRefused, next, old)
	}
	if c, ok := b.Commitment(old); ok && !identity.Commits(c.NextKeyDigest, s.NewKeyID) {
		return fmt.Errorf("%w: key %s committed to its next key (next_key_digest %s, observed here %s), and the successor %s is not that key (its digest is %s); a succession goes to the committed key",
			ErrStatementRefused, old, c.NextKeyDigest, c.At.UTC().Format(time.RFC3339), next, digestOf(s.NewKeyID))
	}
	if c, ok := b.Commitment(next); ok && s.NextKeyDigest != "" && c.NextKeyDigest != s.NextKeyDigest {
		return fmt.Errorf("%w: the successor %s already committed to another next key (next_key_digest %s, observed here %s); the commitment observed first binds",
			ErrStatementRefused, next, c.NextKeyDigest, c.At.UTC().Format(time.RFC3339))
	}
	if !met(old) {
		return fmt.Errorf("%w: a succession of %s, a peer this daemon never met: there is nothing to carry over", ErrStatementRefused, old)
	}
	if known(next) {
		return fmt.Errorf("%w: the successor %s named by the succession of %s is already a peer of this daemon's owner; what was granted to %s is not merged into another peer's",
			ErrStatementRefused, next, old, old)
	}
	return nil
}

// peerOf is the peer ID of a key_id, "" when it is none.
func peerOf(keyID string) string {
	pub, err := identity.PublicKeyFromKeyID(keyID)
	if err != nil {
		return ""
	}
	pid, err := identity.PeerIDFromPublicKey(pub)
	if err != nil {
		return ""
	}
	return pid.String()
}

func digestOf(keyID string) string {
	pub, err := identity.PublicKeyFromKeyID(keyID)
	if err != nil {
		return "-"
	}
	return identity.NextKeyDigest(pub)
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
// the message was audited), and the new key's commitment to its own next
// key when s carries one. It returns what it carried, for people;
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
	if s.NextKeyDigest != "" {
		if _, ok := b.Commitment(next); !ok {
			c := store.KeyEvent{Kind: store.KeyCommitment, Direction: store.KeyReceived, Peer: next.String(), Date: s.DateTime(),
				Statement: raw, NextKeyDigest: s.NextKeyDigest, SignedBy: store.KeySignedByBoth, At: now, Via: via,
				Note: "carried by the succession from " + old.String()}
			if err := b.putKeyEvent(next, c); err != nil {
				return nil, false, err
			}
		}
	}
	e := store.KeyEvent{Kind: store.KeySuccession, Direction: store.KeyReceived, Peer: old.String(), Successor: next.String(),
		Date: s.DateTime(), Until: s.Until(), Statement: raw, NextKeyDigest: s.NextKeyDigest, SignedBy: store.KeySignedByBoth,
		At: now, Via: via, Note: carriedNote(carried)}
	if err := b.putKeyEvent(old, e); err != nil {
		return nil, false, err
	}
	b.keepRecords(next) // its commitment, observed before the succession made it known
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

// CheckRevocation decides whether r (with succ, the succession that came
// with it, if any) may be followed: it must verify (a revocation signed by
// a successor needs the succession from the revoked key to its signer,
// carried with it or followed here before), be dated at most
// MaxStatementSkew ahead, and its key must be one this daemon met. Its
// date has no lower bound: a revocation statement may have been prepared
// long ago and kept offline, and it takes nothing but the key itself from
// the moment it is observed.
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

// FollowRevocation records r (after CheckRevocation passed and the
// message was audited): from now on the key is refused. It revokes that
// key only: a succession from it followed here before keeps its
// successor, which the note says. It returns what it did, for people;
// already reports the key revoked by a statement before. One exception:
// a key revoked by a statement it signed itself, then by the successor
// followed here (its owner's `ifaced key revoke`), is recorded as revoked
// by the successor: the same effect, the owner's word.
func (b *Book) FollowRevocation(r *identity.Revocation, succ *identity.Succession, via string) (note string, already bool, err error) {
	pid, err := r.RevokedPeer()
	if err != nil {
		return "", false, err
	}
	b.mu.RLock()
	prev, had := b.keys.revs[pid]
	followed, succeeded := b.keys.succs[pid]
	b.mu.RUnlock()
	bySuccessor := r.Signer != r.KeyID && succeeded && followed.Direction == store.KeyReceived && peerOf(r.Signer) == followed.Successor
	if had && !(prev.SignedBy == store.KeySignedBySelf && bySuccessor) {
		b.promote(pid, store.KeyRevocation)
		return "", true, nil
	}
	notes := []string{"key refused from now on"}
	if had {
		notes = []string{fmt.Sprintf("the key, revoked by a statement it signed itself (received %s), is now also revoked by its successor %s",
			prev.At.UTC().Format(time.RFC3339), followed.Successor)}
	}
	if succeeded && followed.Direction == store.KeyReceived {
		notes = append(notes, fmt.Sprintf("its successor %s, followed here %s before this revocation arrived, keeps what it was given (nothing the old key signs takes anything from it); if %s is not the peer's own, revoke it: `ifaced trust %s --revoke`",
			followed.Successor, followed.At.UTC().Format(time.RFC3339), followed.Successor, followed.Successor))
	}
	raw, _ := json.Marshal(r)
	e := store.KeyEvent{Kind: store.KeyRevocation, Direction: store.KeyReceived, Peer: pid.String(), Date: r.DateTime(), Statement: raw,
		Reason: r.Reason, SignedBy: store.KeySignedBySelf, At: b.now().UTC(), Via: via, Note: strings.Join(notes, "; ")}
	if r.Signer != r.KeyID {
		e.SignedBy, e.Successor = store.KeySignedBySuccessor, peerOf(r.Signer)
		if succ != nil {
			e.Succession, _ = json.Marshal(succ)
		}
	}
	if err := b.putKeyEvent(pid, e); err != nil {
		return "", false, err
	}
	b.log.Warn("a peer's key was revoked by a revocation statement", "peer", pid, "date", r.Date, "signed_by", e.SignedBy, "via", via,
		"reason", gossip.Clip(r.Reason, 128), "done", e.Note)
	return e.Note, false, nil
}

// CheckCommitment decides whether c (a commitment to the next key) may be
// followed: it verifies, it is dated at most MaxStatementSkew ahead (it
// has no maximum age: it stands until its key is succeeded), it travels
// in a message its own key signed (carrier), and no other commitment of
// that key was observed here first. The same commitment again passes.
func (b *Book) CheckCommitment(c *identity.Commitment, carrier peer.ID) error {
	if err := c.Verify(); err != nil {
		return err
	}
	pid, err := c.Peer()
	if err != nil {
		return fmt.Errorf("%w: key_id: %v", identity.ErrMalformedStatement, err)
	}
	if carrier != pid {
		return fmt.Errorf("%w: a commitment to a next key travels in a message signed by its own key (%s), not by %s", gossip.ErrWrongKey, pid, carrier)
	}
	if c.DateTime().After(b.now().Add(MaxStatementSkew)) {
		return fmt.Errorf("%w: the commitment of %s is dated %s, more than %s ahead of this daemon's clock", identity.ErrFuture, pid, c.Date, MaxStatementSkew)
	}
	if prev, ok := b.Commitment(pid); ok && prev.NextKeyDigest != c.NextKeyDigest {
		return fmt.Errorf("%w: key %s committed to another next key first (next_key_digest %s, observed here %s); the commitment observed first binds: rotate to that key, or ask this daemon's owner to forget the record (`ifaced trust %s --forget`)",
			ErrStatementRefused, pid, prev.NextKeyDigest, prev.At.UTC().Format(time.RFC3339), pid)
	}
	return nil
}

// FollowCommitment records c, the first commitment observed from its key
// (after CheckCommitment passed and the message was audited): written
// when the owner made the key known, else held in memory with the
// strangers' records (keyrecords.go). A commitment of a key already
// succeeded or revoked here binds nothing and is not kept. already
// reports one kept before.
func (b *Book) FollowCommitment(c *identity.Commitment, via string) (already bool, err error) {
	pid, err := c.Peer()
	if err != nil {
		return false, err
	}
	b.mu.RLock()
	_, succeeded := b.keys.succs[pid]
	_, had := b.keys.commits[pid]
	b.mu.RUnlock()
	if had {
		b.promote(pid, store.KeyCommitment) // its key may have been made known since
		return true, nil
	}
	if _, revoked := b.revokedHere(pid); revoked || succeeded {
		return true, nil
	}
	raw, _ := json.Marshal(c)
	e := store.KeyEvent{Kind: store.KeyCommitment, Direction: store.KeyReceived, Peer: pid.String(), Date: c.DateTime(),
		Statement: raw, NextKeyDigest: c.NextKeyDigest, SignedBy: store.KeySignedBySelf, At: b.now().UTC(), Via: via}
	if err := b.putKeyEvent(pid, e); err != nil {
		return false, err
	}
	b.log.Info("a peer committed to its next key", "peer", pid, "next_key_digest", c.NextKeyDigest, "via", via)
	return false, nil
}

// lifecycleInfo adds to info what the key statements say of pid.
func (b *Book) lifecycleInfo(pid peer.ID, info *Info) {
	info.Keys = b.records(pid)
	for _, r := range info.Keys {
		e := r.KeyEvent
		switch {
		case e.Kind == store.KeySuccession && e.Peer == pid.String():
			info.SucceededBy = e.Successor
			if e.Direction == store.KeyReceived {
				info.How = append(info.How, fmt.Sprintf("rotated to %s on %s (old key verifies until %s)",
					e.Successor, e.Date.UTC().Format(time.RFC3339), e.Until.UTC().Format(time.RFC3339)))
			}
		case e.Kind == store.KeySuccession:
			info.RotatedFrom = e.Peer
			info.How = append(info.How, fmt.Sprintf("rotated from %s on %s", e.Peer, e.Date.UTC().Format(time.RFC3339)))
		case e.Kind == store.KeyRevocation && e.Direction == store.KeyReceived:
			info.Level = conditions.NoLevel
			if info.RevokedBy == "" {
				info.RevokedBy, info.RevokedVia = e.SignedBy, e.Via
				info.RevokedAt = e.At
			}
			info.How = append(info.How, fmt.Sprintf("key revoked by a revocation statement %s, dated %s, received %s via %s",
				signedByText(e), e.Date.UTC().Format(time.RFC3339), e.At.UTC().Format(time.RFC3339), orDash(e.Via)))
		case e.Kind == store.KeyCommitment && e.Direction == store.KeyReceived:
			info.NextKeyDigest = e.NextKeyDigest
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
