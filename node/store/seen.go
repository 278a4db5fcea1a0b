package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ifaced/ifaced/identity"
	bolt "go.etcd.io/bbolt"
)

// seenRecord is the value under a message ID in the seen bucket.
type seenRecord struct {
	Expires time.Time `json:"expires"`
}

// seenSet is the persistent identity.SeenSet. Each ID lives in two
// buckets: seen (ID → expiry), which answers Add, and seen_by_expiry
// (expiry ‖ ID → nothing), which lets Prune stop at the first live entry.
// Both change in one transaction, so they never disagree after a crash.
type seenSet struct{ s *Store }

var _ identity.SeenSet = seenSet{}

// Seen returns the persistent identity.SeenSet of message IDs (replay
// protection that survives restarts). Add is atomic: two concurrent Adds of
// one id return true exactly once, because bbolt runs one write
// transaction at a time.
func (s *Store) Seen() identity.SeenSet { return seenSet{s} }

// Add records id until expires and reports whether it was new. Adding a
// known id with a later expiry keeps it until the later time: remembering
// an ID longer never lets a replay through.
func (ss seenSet) Add(id string, expires time.Time) (added bool, err error) {
	if id == "" {
		return false, errors.New("recording message ID: empty ID")
	}
	err = ss.s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketSeen).Get([]byte(id)) == nil {
			added = true
		}
		if err := putSeen(tx, id, expires); err != nil {
			return err
		}
		if added {
			return ss.s.countSeen(tx, 1)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("recording message ID %q: %w", id, err)
	}
	return added, nil
}

// putSeen records id until expires, or until its stored expiry when that
// is later.
func putSeen(tx *bolt.Tx, id string, expires time.Time) error {
	seen, index := tx.Bucket(bucketSeen), tx.Bucket(bucketSeenByExpiry)
	key := []byte(id)
	if raw := seen.Get(key); raw != nil {
		var old seenRecord
		if err := decode(bucketSeen, key, raw, &old); err != nil {
			return err
		}
		if !expires.After(old.Expires) {
			return nil
		}
		if err := index.Delete(expiryKey(old.Expires, id)); err != nil {
			return err
		}
	}
	raw, err := encode(seenRecord{Expires: expires})
	if err != nil {
		return fmt.Errorf("encoding record: %w", err)
	}
	if err := seen.Put(key, raw); err != nil {
		return err
	}
	return index.Put(expiryKey(expires, id), nil)
}

// Forget removes id, so a message whose processing failed after its check
// (its audit could not be written) is not refused as a replay when it
// comes again.
func (ss seenSet) Forget(id string) error {
	err := ss.s.db.Update(func(tx *bolt.Tx) error {
		seen, index := tx.Bucket(bucketSeen), tx.Bucket(bucketSeenByExpiry)
		key := []byte(id)
		raw := seen.Get(key)
		if raw == nil {
			return nil
		}
		var old seenRecord
		if err := decode(bucketSeen, key, raw, &old); err != nil {
			return err
		}
		if err := index.Delete(expiryKey(old.Expires, id)); err != nil {
			return err
		}
		if err := seen.Delete(key); err != nil {
			return err
		}
		return ss.s.countSeen(tx, -1)
	})
	if err != nil {
		return fmt.Errorf("forgetting message ID %q: %w", id, err)
	}
	return nil
}

// Prune deletes entries whose expiry is before now. It reads the expiry
// index from its start and stops at the first entry that is still live, so
// its cost follows the number of expired entries, not the size of the set.
func (ss seenSet) Prune(now time.Time) error {
	limit := expiryNanos(now)
	err := ss.s.db.Update(func(tx *bolt.Tx) error {
		seen, index := tx.Bucket(bucketSeen), tx.Bucket(bucketSeenByExpiry)
		// Collect first: deleting under a live bbolt cursor can skip keys.
		var expired [][]byte
		c := index.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) < 8 {
				return fmt.Errorf("%w: %s/%q: key shorter than its 8-byte expiry", ErrCorrupt, bucketSeenByExpiry, k)
			}
			if binary.BigEndian.Uint64(k[:8]) >= limit {
				break
			}
			expired = append(expired, bytes.Clone(k))
		}
		for _, k := range expired {
			if err := index.Delete(k); err != nil {
				return err
			}
			if err := seen.Delete(k[8:]); err != nil {
				return err
			}
		}
		if limit > uint64(ss.s.seenPruned.Load()) {
			raw, err := encode(time.Unix(0, int64(limit)).UTC())
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketMeta).Put(keySeenPrunedTo, raw); err != nil {
				return err
			}
			tx.OnCommit(func() { ss.s.seenPruned.Store(int64(limit)) })
		}
		return ss.s.countSeen(tx, -len(expired))
	})
	if err != nil {
		return fmt.Errorf("pruning seen message IDs: %w", err)
	}
	return nil
}

// keySeenPrunedTo (in meta) is the latest time the seen set was pruned
// at (PrunedTo): it only moves forward, and outlives a restart, so that a
// clock that went back finds the guard still refusing what was pruned.
var keySeenPrunedTo = []byte("seen_pruned_to")

// PrunedTo is the latest now Prune was called with, or the zero time.
func (ss seenSet) PrunedTo() time.Time {
	if n := ss.s.seenPruned.Load(); n != 0 {
		return time.Unix(0, n).UTC()
	}
	return time.Time{}
}

// loadSeenPruned reads keySeenPrunedTo at Open.
func (s *Store) loadSeenPruned() error {
	return s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketMeta).Get(keySeenPrunedTo)
		if raw == nil {
			return nil
		}
		var at time.Time
		if err := decode(bucketMeta, keySeenPrunedTo, raw, &at); err != nil {
			return err
		}
		s.seenPruned.Store(int64(expiryNanos(at)))
		return nil
	})
}

// expiryKey is the seen_by_expiry key of id: big-endian expiry nanoseconds,
// so byte order is time order, then the ID to keep keys unique.
func expiryKey(expires time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, expiryNanos(expires))
	return append(k, id...)
}

// expiryNanos maps t to unsigned Unix nanoseconds, clamping times outside
// what int64 nanoseconds can hold (UnixNano is undefined there) so that the
// order stays right.
func expiryNanos(t time.Time) uint64 {
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return uint64(t.UnixNano())
}

// MaxSeenIDs bounds the seen set: about 60 MB of store file at most (an
// ID with its expiry, in both buckets, some 250 bytes). Every admitted
// message adds an ID that stays for the replay window, and fresh keys
// are free, so without a cap strangers would grow the file for as long
// as they send. Past the cap the IDs that expire first are evicted: their
// messages are the closest to leaving the replay window, after which the
// date check refuses them anyway, so evicting them shortens replay
// protection the least. An evicted ID's message could be replayed until
// its date leaves the window; a replay needs the genuine signed message,
// which only its recipient (or a relay that carried it) holds.
const MaxSeenIDs = 250_000

// countSeen notes, in tx, that delta IDs were added to the seen set (or
// removed, when negative), and evicts the IDs that expire first while the
// set is over its cap. The count is the store's, kept in memory (read
// once at Open) and moved when tx commits.
func (s *Store) countSeen(tx *bolt.Tx, delta int) error {
	over := int(s.seenCount.Load()) + delta - s.maxSeen
	if over > 0 {
		evicted, err := evictSeen(tx, over)
		if err != nil {
			return err
		}
		delta -= evicted
	}
	tx.OnCommit(func() { s.seenCount.Add(int64(delta)) })
	return nil
}

// evictSeen deletes the n IDs that expire first and returns how many it
// deleted.
func evictSeen(tx *bolt.Tx, n int) (int, error) {
	seen, index := tx.Bucket(bucketSeen), tx.Bucket(bucketSeenByExpiry)
	// Collect first: deleting under a live bbolt cursor can skip keys.
	var keys [][]byte
	c := index.Cursor()
	for k, _ := c.First(); k != nil && len(keys) < n; k, _ = c.Next() {
		if len(k) < 8 {
			return 0, fmt.Errorf("%w: %s/%q: key shorter than its 8-byte expiry", ErrCorrupt, bucketSeenByExpiry, k)
		}
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := index.Delete(k); err != nil {
			return 0, err
		}
		if err := seen.Delete(k[8:]); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}
