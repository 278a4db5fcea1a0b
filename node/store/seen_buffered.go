package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ifaced/ifaced/identity"
	bolt "go.etcd.io/bbolt"
)

// keySeenFlushedAt (in meta) is when the last Flush of a BufferedSeen took
// its batch: every Add before that instant is on disk.
var keySeenFlushedAt = []byte("seen_flushed_at")

// BufferedSeen is the seen-set with its writes batched: Add answers from
// memory and the store together, and Flush commits what was added since
// the last Flush in one transaction (one fsync) instead of one per message.
// Between flushes the newest IDs live only in memory (not even in the
// kernel), so a crash loses them; the daemon rebuilds them from its audit log, which recorded every
// accepted message before it was acted on (node.recoverSeen), starting at
// SeenFlushedAt.
type BufferedSeen struct {
	s *Store

	mu        sync.Mutex           // orders Adds; held across the store lookup
	pending   map[string]time.Time // added since the last Flush took its batch
	flushing  map[string]time.Time // taken by a Flush, not yet committed
	forgotten map[string]bool      // forgotten while a Flush was under way: not put back if it fails

	flushMu sync.Mutex // one Flush at a time

	now  func() time.Time // the daemon's clock, the one its audit entries are dated by
	mark atomic.Int64     // SeenFlushedAt as last written, in Unix nanoseconds; 0 before the first Flush
}

var _ identity.SeenSet = (*BufferedSeen)(nil)

// BufferedSeen returns a seen-set over the same entries as Seen whose Adds
// are committed by Flush. now is the clock the daemon dates its audit
// entries by: the recovery after a crash reads the entries dated from
// SeenFlushedAt on, so the mark must be on the same clock.
func (s *Store) BufferedSeen(now func() time.Time) *BufferedSeen {
	return &BufferedSeen{s: s, pending: map[string]time.Time{}, flushing: map[string]time.Time{}, forgotten: map[string]bool{}, now: now}
}

// Add records id until expires and reports whether it was new, as Seen's
// Add does; the record reaches the disk at the next Flush.
func (b *BufferedSeen) Add(id string, expires time.Time) (bool, error) {
	if id == "" {
		return false, errors.New("recording message ID: empty ID")
	}
	if now := b.now(); now.UnixNano() < b.mark.Load()-int64(markSlack) {
		if err := b.lowerMark(now); err != nil {
			return false, fmt.Errorf("recording message ID %q: %w", id, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.pending[id]; ok {
		b.pending[id] = later(old, expires)
		return false, nil
	}
	if old, ok := b.flushing[id]; ok {
		if expires.After(old) {
			b.pending[id] = expires
		}
		return false, nil
	}
	var stored *seenRecord
	err := b.s.db.View(func(tx *bolt.Tx) error {
		key := []byte(id)
		raw := tx.Bucket(bucketSeen).Get(key)
		if raw == nil {
			return nil
		}
		stored = new(seenRecord)
		return decode(bucketSeen, key, raw, stored)
	})
	if err != nil {
		return false, fmt.Errorf("recording message ID %q: %w", id, err)
	}
	if stored == nil || expires.After(stored.Expires) {
		b.pending[id] = expires
	}
	return stored == nil, nil
}

// markSlack is how far before SeenFlushedAt the clock may read before
// Add moves the mark back: a reading taken just before a concurrent Flush
// took its own is no step, and the recovery reaches a minute before the
// mark anyway (node.recoverMargin).
const markSlack = time.Second

// lowerMark writes SeenFlushedAt back to now, which is before it: the
// clock went back (a laptop's sleep, an NTP step) since the last Flush, so
// the messages from here on are dated before the mark, and a crash before
// the next Flush would be recovered from after them, letting their replays
// in. Written before the ID is added, so before its message is recorded;
// it waits for a Flush under way, whose mark it then lowers.
func (b *BufferedSeen) lowerMark(now time.Time) error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	if now.UnixNano() >= b.mark.Load() {
		return nil
	}
	raw, err := encode(now.UTC())
	if err != nil {
		return err
	}
	if err := b.s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySeenFlushedAt, raw) }); err != nil {
		return fmt.Errorf("moving the seen set's flush mark back to %s, where the clock went: %w", now.UTC().Format(time.RFC3339), err)
	}
	b.mark.Store(now.UnixNano())
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Forget removes id from memory and from the store.
func (b *BufferedSeen) Forget(id string) error {
	b.mu.Lock()
	delete(b.pending, id)
	_, inFlight := b.flushing[id]
	if inFlight {
		b.forgotten[id] = true
	}
	b.mu.Unlock()
	if inFlight {
		b.flushMu.Lock() // wait for the Flush under way, which writes it, then delete it
		b.flushMu.Unlock()
	}
	return seenSet{b.s}.Forget(id)
}

// Prune commits what is pending, then deletes expired entries.
func (b *BufferedSeen) Prune(now time.Time) error {
	if err := b.Flush(); err != nil {
		return err
	}
	return seenSet{b.s}.Prune(now)
}

// PrunedTo is the store's seen set's (Prune prunes it).
func (b *BufferedSeen) PrunedTo() time.Time { return seenSet{b.s}.PrunedTo() }

// Flush commits every ID added before it was called, and records that
// instant as SeenFlushedAt, in one transaction. On failure the batch stays
// in memory for the next Flush.
func (b *BufferedSeen) Flush() error {
	b.flushMu.Lock()
	defer b.flushMu.Unlock()
	at := b.now() // before the swap: every Add before at is in this batch or stored already
	b.mu.Lock()
	batch := b.pending
	b.flushing, b.pending = batch, map[string]time.Time{}
	b.forgotten = map[string]bool{}
	b.mu.Unlock()
	err := b.s.db.Update(func(tx *bolt.Tx) error {
		added := 0
		for id, expires := range batch {
			if tx.Bucket(bucketSeen).Get([]byte(id)) == nil {
				added++
			}
			if err := putSeen(tx, id, expires); err != nil {
				return err
			}
		}
		if err := b.s.countSeen(tx, added); err != nil {
			return err
		}
		raw, err := encode(at.UTC())
		if err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySeenFlushedAt, raw)
	})
	if err == nil {
		b.mark.Store(at.UnixNano())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		// Put the batch back under anything added since, but for what
		// was forgotten meanwhile.
		for id, expires := range batch {
			if !b.forgotten[id] {
				b.pending[id] = later(b.pending[id], expires)
			}
		}
		b.flushing = map[string]time.Time{}
		return fmt.Errorf("committing seen message IDs: %w", err)
	}
	b.flushing = map[string]time.Time{}
	return nil
}

// Pending is how many IDs wait for the next Flush.
func (b *BufferedSeen) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending) + len(b.flushing)
}

// ClearSeenFlushedAt forgets when a BufferedSeen last flushed: a daemon
// that commits every Add at once (and has recovered what a buffered run
// left) has nothing to rebuild after its next crash.
func (s *Store) ClearSeenFlushedAt() error {
	err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keySeenFlushedAt) })
	if err != nil {
		return fmt.Errorf("clearing %s/%s: %w", bucketMeta, keySeenFlushedAt, err)
	}
	return nil
}

// SeenFlushedAt is when the last BufferedSeen.Flush took its batch, or the
// zero time when none ever did (every Add was committed at once).
func (s *Store) SeenFlushedAt() (time.Time, error) {
	var at time.Time
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketMeta).Get(keySeenFlushedAt)
		if raw == nil {
			return nil
		}
		return decode(bucketMeta, keySeenFlushedAt, raw, &at)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading %s/%s: %w", bucketMeta, keySeenFlushedAt, err)
	}
	return at, nil
}
