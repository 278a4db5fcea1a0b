package trust

import (
	"container/list"
	"fmt"
	"slices"
	"strings"

	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Key lifecycle records, and who may spend the room they take.
//
// Every record is in one of three classes (KeyRecord.Class):
//
//   - owner: a statement this daemon gave about its own key (`ifaced key
//     rotate`, `key revoke`, `key commit-next`). Written to the store,
//     never counted, never evicted: the owner's rotation and revocation
//     never fail for lack of room.
//   - established: a statement received about a key, or naming a
//     successor, the owner made known (pinned, revoked or introduced
//     here, a policy entry, a request to greet it: Known). Written, never counted, never evicted; they grow only with
//     the peers the owner chose.
//   - stranger: every other received statement. Like a stranger's view
//     and trust record, it is held in memory only, at most
//     MaxStrangerKeyRecords of them, and past that the one observed first
//     goes — unless its peer was made known meanwhile, and then it is
//     written instead. A fresh key costs nothing to make, so no stranger's
//     statement costs the store a write, and a flood of them neither grows
//     the store nor crowds out anyone's records. The owner's pin or an
//     admitted introduction writes the held records about that peer at
//     once; a restart forgets the others (a stranger was granted nothing
//     they could protect).
//
// Records a stranger caused that an earlier version wrote to the store
// are taken out of it, into the held class, when the daemon installs its
// test of who is known (New).

// MaxStrangerKeyRecords bounds the key lifecycle records held for
// strangers (in memory, about 1 KiB each).
const MaxStrangerKeyRecords = 4096

// Classes of key lifecycle records, trust records and peers (Info.Class).
const (
	ClassOwner       = "owner"       // the owner's own statement, or a record the owner made
	ClassEstablished = "established" // about a peer the owner made known
	ClassStranger    = "stranger"    // about anyone else: held in memory, evicted oldest first
)

// KeyRecord is a key lifecycle record and its class.
type KeyRecord struct {
	store.KeyEvent
	Class string `json:"class"`
}

// lifecycle is what the Book holds of the key statements, by peer.
type lifecycle struct {
	succs   map[peer.ID]store.KeyEvent // by old key
	revs    map[peer.ID]store.KeyEvent // by revoked key
	commits map[peer.ID]store.KeyEvent // by committing key
	// held are the strangers' records, in memory only, the one observed
	// first in front; index finds each.
	held  *list.List // of store.KeyEventRef
	index map[store.KeyEventRef]*list.Element
}

func (l *lifecycle) byKind(kind string) map[peer.ID]store.KeyEvent {
	switch kind {
	case store.KeySuccession:
		return l.succs
	case store.KeyRevocation:
		return l.revs
	}
	return l.commits
}

// loadLifecycle reads the key statements of st into b (New).
func (b *Book) loadLifecycle() {
	b.keys = lifecycle{succs: map[peer.ID]store.KeyEvent{}, revs: map[peer.ID]store.KeyEvent{}, commits: map[peer.ID]store.KeyEvent{},
		held: list.New(), index: map[store.KeyEventRef]*list.Element{}}
	evs, err := b.store.KeyEvents()
	if err != nil {
		b.log.Warn("reading key lifecycle records", "err", err)
	}
	for _, e := range evs {
		if pid, err := peer.Decode(e.Peer); err == nil {
			b.keys.byKind(e.Kind)[pid] = e
		}
	}
}

// moveStrangersRecords moves the received records in the store about
// peers nobody made known (a stranger's, written by an earlier version) to
// the strangers' memory, the ones observed first first (New).
func (b *Book) moveStrangersRecords() {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	var moved []store.KeyEvent
	for _, e := range b.KeyEvents() {
		if !b.protects(e) {
			moved = append(moved, e)
		}
	}
	if len(moved) == 0 {
		return
	}
	refs := make([]store.KeyEventRef, len(moved))
	for i, e := range moved {
		refs[i] = e.Ref()
	}
	if err := b.store.DeleteKeyEvents(refs...); err != nil {
		b.log.Warn("moving strangers' key lifecycle records out of the store", "err", err)
		return
	}
	slices.SortStableFunc(moved, func(x, y store.KeyEvent) int { return x.At.Compare(y.At) })
	for _, e := range moved {
		pid, _ := peer.Decode(e.Peer)
		b.hold(pid, e)
	}
	b.log.Info("moved strangers' key lifecycle records from the store to memory", "count", len(moved))
}

// protects says whether e is kept whatever strangers send: the owner's
// own, or about a peer the owner made known (or naming one as successor).
func (b *Book) protects(e store.KeyEvent) bool {
	if e.Direction == store.KeyGiven {
		return true
	}
	return b.Known(e.Peer) || (e.Successor != "" && b.Known(e.Successor))
}

func (b *Book) classOf(e store.KeyEvent) string {
	switch {
	case e.Direction == store.KeyGiven:
		return ClassOwner
	case b.protects(e):
		return ClassEstablished
	}
	return ClassStranger
}

// keyEvent is the record ref names.
func (b *Book) keyEvent(ref store.KeyEventRef) (store.KeyEvent, bool) {
	pid, err := peer.Decode(ref.Peer)
	if err != nil {
		return store.KeyEvent{}, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, ok := b.keys.byKind(ref.Kind)[pid]
	return e, ok
}

// putKeyEvent keeps e (about pid): written when the owner gave it or it is
// about a peer the owner made known, else held in memory with the
// strangers' records (hold). A received statement never replaces one
// this daemon gave.
func (b *Book) putKeyEvent(pid peer.ID, e store.KeyEvent) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.mu.RLock()
	prev, had := b.keys.byKind(e.Kind)[pid]
	b.mu.RUnlock()
	if had && prev.Direction == store.KeyGiven && e.Direction != store.KeyGiven {
		return fmt.Errorf("%w: the %s of %s is a statement this daemon gave about its own key", ErrStatementRefused, e.Kind, pid)
	}
	if !b.protects(e) {
		b.hold(pid, e)
		return nil
	}
	return b.write(pid, e)
}

// write stores e and keeps it (b.wmu held).
func (b *Book) write(pid peer.ID, e store.KeyEvent) error {
	if err := b.store.PutKeyEvent(e); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys.byKind(e.Kind)[pid] = e
	if el, ok := b.keys.index[e.Ref()]; ok {
		b.keys.held.Remove(el)
		delete(b.keys.index, e.Ref())
	}
	return nil
}

// hold keeps a stranger's record in memory (b.wmu held), and makes room:
// past MaxStrangerKeyRecords the record observed first goes, or is
// written when its peer was made known since.
func (b *Book) hold(pid peer.ID, e store.KeyEvent) {
	ref := e.Ref()
	b.mu.Lock()
	b.keys.byKind(e.Kind)[pid] = e
	if _, ok := b.keys.index[ref]; !ok {
		b.keys.index[ref] = b.keys.held.PushBack(ref)
	}
	b.mu.Unlock()
	evicted := 0
	for {
		b.mu.Lock()
		if b.keys.held.Len() <= MaxStrangerKeyRecords {
			b.mu.Unlock()
			break
		}
		front := b.keys.held.Front()
		old := front.Value.(store.KeyEventRef)
		b.keys.held.Remove(front)
		delete(b.keys.index, old)
		oldPid, _ := peer.Decode(old.Peer)
		oe, ok := b.keys.byKind(old.Kind)[oldPid]
		b.mu.Unlock()
		if !ok {
			continue
		}
		if b.protects(oe) {
			if err := b.write(oldPid, oe); err == nil {
				continue
			}
		}
		b.mu.Lock()
		delete(b.keys.byKind(old.Kind), oldPid)
		b.mu.Unlock()
		evicted++
	}
	if evicted > 0 {
		b.log.Debug("evicted strangers' key lifecycle records", "count", evicted)
	}
}

// keepRecords writes the records held in memory that name pid, once the
// owner made pid known (a pin, an admitted introduction, a succession that
// carried what the owner granted to it).
func (b *Book) keepRecords(pid peer.ID) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.mu.RLock()
	var refs []store.KeyEventRef
	for el := b.keys.held.Front(); el != nil; el = el.Next() {
		ref := el.Value.(store.KeyEventRef)
		if ref.Peer == pid.String() {
			refs = append(refs, ref)
			continue
		}
		if ref.Kind == store.KeySuccession {
			if old, err := peer.Decode(ref.Peer); err == nil && b.keys.succs[old].Successor == pid.String() {
				refs = append(refs, ref)
			}
		}
	}
	b.mu.RUnlock()
	for _, ref := range refs {
		e, ok := b.keyEvent(ref)
		if !ok || !b.protects(e) {
			continue
		}
		p, _ := peer.Decode(ref.Peer)
		if err := b.write(p, e); err != nil {
			b.log.Warn("keeping a key lifecycle record of a peer the owner made known", "peer", pid, "kind", ref.Kind, "err", err)
		}
	}
}

// promote writes the record of kind about pid when it is held in memory
// and its peer was made known since (a statement observed again).
func (b *Book) promote(pid peer.ID, kind string) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	ref := store.KeyEventRef{Kind: kind, Peer: pid.String()}
	b.mu.RLock()
	_, held := b.keys.index[ref]
	e, ok := b.keys.byKind(kind)[pid]
	b.mu.RUnlock()
	if !held || !ok || !b.protects(e) {
		return
	}
	if err := b.write(pid, e); err != nil {
		b.log.Warn("keeping a key lifecycle record of a peer the owner made known", "peer", pid, "kind", kind, "err", err)
	}
}

// RecordGiven records a statement about this daemon's own key (`ifaced key
// rotate`, `ifaced key revoke`, `ifaced key commit-next`), so that
// `ifaced trust` shows it.
func (b *Book) RecordGiven(e store.KeyEvent) error {
	pid, err := peer.Decode(e.Peer)
	if err != nil {
		return fmt.Errorf("recording a key statement: peer %q: %w", e.Peer, err)
	}
	e.Direction = store.KeyGiven
	return b.putKeyEvent(pid, e)
}

// KeyEvents lists the key statements given and followed, written or held
// in memory, by date.
func (b *Book) KeyEvents() []store.KeyEvent {
	b.mu.RLock()
	out := make([]store.KeyEvent, 0, len(b.keys.succs)+len(b.keys.revs)+len(b.keys.commits))
	for _, m := range []map[peer.ID]store.KeyEvent{b.keys.succs, b.keys.revs, b.keys.commits} {
		for _, e := range m {
			out = append(out, e)
		}
	}
	b.mu.RUnlock()
	slices.SortFunc(out, func(x, y store.KeyEvent) int { return x.Date.Compare(y.Date) })
	return out
}

// StrangerKeyRecords is how many key lifecycle records are held in memory
// for strangers (at most MaxStrangerKeyRecords).
func (b *Book) StrangerKeyRecords() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.keys.held.Len()
}

// Commitment is the commitment this daemon holds for pid's next key: the
// one observed first, or the one it gave for its own key.
func (b *Book) Commitment(pid peer.ID) (store.KeyEvent, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, ok := b.keys.commits[pid]
	return e, ok
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
	for pid := range b.keys.commits {
		out = append(out, pid)
	}
	return out
}

// records are the key lifecycle records about pid, with their class:
// its succession, revocation and commitment, and the succession to it.
func (b *Book) records(pid peer.ID) []KeyRecord {
	var evs []store.KeyEvent
	b.mu.RLock()
	for _, m := range []map[peer.ID]store.KeyEvent{b.keys.succs, b.keys.revs, b.keys.commits} {
		if e, ok := m[pid]; ok {
			evs = append(evs, e)
		}
	}
	for _, e := range b.keys.succs {
		if e.Successor == pid.String() {
			evs = append(evs, e)
		}
	}
	b.mu.RUnlock()
	out := make([]KeyRecord, 0, len(evs))
	for _, e := range evs {
		out = append(out, KeyRecord{KeyEvent: e, Class: b.classOf(e)})
	}
	return out
}

// Forget removes what this daemon holds about pid's key: its trust
// record (a pin, the owner's revocation, admitted introductions, checks)
// and the key statements about it (its succession, a revocation, a
// commitment), so that pid is a stranger at level 1 again. A succession
// to pid is its old key's record (forget that key). Statements this daemon
// gave about its own key are not forgotten. It returns what went, for
// people (Info.Forgot).
func (b *Book) Forget(pid peer.ID) (Info, error) {
	b.wmu.Lock()
	b.mu.RLock()
	var refs []store.KeyEventRef
	var forgot []string
	given := false
	for _, m := range []map[peer.ID]store.KeyEvent{b.keys.succs, b.keys.revs, b.keys.commits} {
		if e, ok := m[pid]; ok {
			if e.Direction == store.KeyGiven {
				given = true
				continue
			}
			refs = append(refs, e.Ref())
			forgot = append(forgot, e.Kind+" statement")
		}
	}
	rec, stored := b.recs[pid]
	b.mu.RUnlock()
	if given {
		b.wmu.Unlock()
		return Info{}, inputError("peer", "forgetting %s: it is this daemon's own key, whose statements it gave and delivers; they are not forgotten", pid)
	}
	if stored {
		if err := b.store.DeleteTrust(pid.String()); err != nil {
			b.wmu.Unlock()
			return Info{}, fmt.Errorf("forgetting %s: %w", pid, err)
		}
		forgot = append(forgot, "trust record"+ownerMadeWhat(rec))
	}
	if _, ok := b.strangers.Peek(pid); ok {
		b.strangers.Remove(pid)
		forgot = append(forgot, "trust record (in memory)")
	}
	if len(refs) > 0 {
		if err := b.store.DeleteKeyEvents(refs...); err != nil {
			b.wmu.Unlock()
			return Info{}, fmt.Errorf("forgetting %s: %w", pid, err)
		}
	}
	b.mu.Lock()
	delete(b.recs, pid)
	for _, ref := range refs {
		if el, ok := b.keys.index[ref]; ok {
			b.keys.held.Remove(el)
			delete(b.keys.index, ref)
		}
		delete(b.keys.byKind(ref.Kind), pid)
	}
	b.mu.Unlock()
	b.wmu.Unlock()
	b.log.Info("forgot what was held about a peer's key", "peer", pid, "forgot", forgot)
	info := b.Peer(pid)
	info.Forgot = forgot
	if len(forgot) == 0 {
		info.Forgot = []string{}
	}
	return info, nil
}

// ownerMadeWhat says what the owner made in rec, for people.
func ownerMadeWhat(rec store.TrustRecord) string {
	var what []string
	if rec.PinnedKey != "" {
		what = append(what, "pin")
	}
	if rec.RevokedKey != "" {
		what = append(what, "the owner's revocation")
	}
	if len(rec.Intros) > 0 {
		what = append(what, fmt.Sprintf("%d introduction(s)", len(rec.Intros)))
	}
	if len(what) == 0 {
		return ""
	}
	return " (" + strings.Join(what, ", ") + ")"
}
