package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/ifaced/ifaced/node/internal/costlru"
	bolt "go.etcd.io/bbolt"
)

// PeerRecord is what the daemon knows about a peer: its last verified
// capability view and where to reach it.
type PeerRecord struct {
	PeerID    string          `json:"peer_id"`
	AgentID   string          `json:"agent_id,omitempty"`
	Display   string          `json:"display,omitempty"`
	Addrs     []string        `json:"addrs,omitempty"`
	Seq       uint64          `json:"seq"`
	DocHash   string          `json:"doc_hash"`          // hex SHA-256 of the view's canonical bytes
	View      json.RawMessage `json:"view"`              // the verified view the peer showed us (JSON)
	Context   json.RawMessage `json:"context,omitempty"` // what was negotiated when we got it (JSON)
	FetchedAt time.Time       `json:"fetched_at"`        // last time the peer confirmed this view (refresh)
	ChangedAt time.Time       `json:"changed_at"`        // when Seq/DocHash last changed
}

// Age is how long ago the peer last confirmed this view.
func (r PeerRecord) Age(now time.Time) time.Duration { return now.Sub(r.FetchedAt) }

// PutPeer stores rec. Rules: a record with a lower Seq than the cached one is
// refused with ErrStaleSeq (nothing changes); the same Seq with the same
// DocHash only refreshes FetchedAt/Addrs/Context (ChangedAt kept); the same
// Seq with a different DocHash is another view of the same document (the
// peer shows each requester what its context allows, and the context can
// rise) and replaces the record; a higher Seq replaces the record
// (ChangedAt = rec.FetchedAt). It returns whether the view changed.
//
// On a refresh, FetchedAt never moves backwards (two fetches may finish out
// of order), and Addrs and Context are replaced only when rec carries them,
// so a refresh learned without addresses (through a relay, say) does not
// forget how to dial the peer. A cached record that does not decode is
// reported (ErrCorrupt) rather than overwritten; DeletePeer clears it.
//
// Where the record goes depends on the peer (see "The peer cache" in the
// package comment): the file for a peer the gate (SetPeerGate) says is
// known or whose record the file holds already, the strangers' memory
// otherwise. A stranger's record moves to the file the first time it is
// put once the peer is known.
func (s *Store) PutPeer(rec PeerRecord) (changed bool, err error) {
	if rec.PeerID == "" {
		return false, errors.New("storing peer: empty peer ID")
	}
	if !s.knownPeer(rec.PeerID) && !s.persisted(rec.PeerID) {
		s.strangersMu.Lock() // one merge at a time, so the seq rules hold
		defer s.strangersMu.Unlock()
		var old *PeerRecord
		if mem, ok := s.strangers.Peek(rec.PeerID); ok {
			old = &mem
		}
		next, changed, err := mergePeer(old, rec)
		if err != nil {
			return false, fmt.Errorf("storing peer %s: %w", rec.PeerID, err)
		}
		s.strangers.Add(rec.PeerID, next, strangerCost(next))
		return changed, nil
	}
	mem, inMemory := s.strangers.Peek(rec.PeerID)
	if !inMemory && s.confirmsRecently(rec) {
		return false, nil
	}
	var next PeerRecord
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPeers)
		key := []byte(rec.PeerID)
		var old *PeerRecord
		if raw := b.Get(key); raw != nil {
			old = new(PeerRecord)
			if err := decode(bucketPeers, key, raw, old); err != nil {
				return err
			}
		} else if inMemory {
			old = &mem // a stranger made known: its record moves to the file
		}
		var err error
		if next, changed, err = mergePeer(old, rec); err != nil {
			return err
		}
		raw, err := encode(next)
		if err != nil {
			return fmt.Errorf("encoding record: %w", err)
		}
		// Inside the transaction, so heads are remembered in the order
		// the writes were made: an older head set after a newer one
		// would let confirmsRecently take a stale seq.
		s.rememberHead(rec.PeerID, &next)
		return b.Put(key, raw)
	})
	if err != nil {
		s.rememberHead(rec.PeerID, nil) // the file decides again
		return false, fmt.Errorf("storing peer %s: %w", rec.PeerID, err)
	}
	if inMemory {
		s.strangers.Remove(rec.PeerID)
	}
	return changed, nil
}

// SetPeerAddrs replaces the addresses of the record cached for peerID
// when the cache holds one and its list differs from addrs. It creates no
// record, and an empty list changes nothing (a peer reached without
// addresses is still dialable where it was). It is how addresses learned
// after the view follow it: the side that answers a greeting may keep the
// view before libp2p's identify has told it where the dialer listens.
// It reports whether the record changed. A record that does not decode is
// left as it is: PutPeer reports it (ErrCorrupt) at the peer's next
// greeting, and the daemon replaces it then.
func (s *Store) SetPeerAddrs(peerID string, addrs []string) (bool, error) {
	if len(addrs) == 0 {
		return false, nil
	}
	s.strangersMu.Lock()
	if mem, ok := s.strangers.Peek(peerID); ok {
		defer s.strangersMu.Unlock()
		if slices.Equal(mem.Addrs, addrs) {
			return false, nil
		}
		mem.Addrs = slices.Clone(addrs)
		s.strangers.Add(peerID, mem, strangerCost(mem))
		return true, nil
	}
	s.strangersMu.Unlock()
	// The head first: identify completes on every connection, most of
	// them of peers the cache does not hold, and a write transaction syncs.
	if head, ok := s.head(peerID); !ok || slices.Equal(head.Addrs, addrs) {
		return false, nil
	}
	var next *PeerRecord
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPeers)
		key := []byte(peerID)
		raw := b.Get(key)
		if raw == nil {
			return nil
		}
		var rec PeerRecord
		if err := decode(bucketPeers, key, raw, &rec); err != nil {
			return err
		}
		rec.Addrs = slices.Clone(addrs)
		raw, err := encode(rec)
		if err != nil {
			return fmt.Errorf("encoding record: %w", err)
		}
		next = &rec
		s.rememberHead(peerID, next) // in write order (PutPeer)
		return b.Put(key, raw)
	})
	if err != nil {
		s.rememberHead(peerID, nil)
		return false, fmt.Errorf("storing addresses of peer %s: %w", peerID, err)
	}
	return next != nil, nil
}

// mergePeer applies the seq rules of PutPeer to rec over old (nil when
// none is cached) and returns the record to keep.
func mergePeer(old *PeerRecord, rec PeerRecord) (next PeerRecord, changed bool, err error) {
	next = rec
	if old == nil {
		next.ChangedAt = rec.FetchedAt
		return next, true, nil
	}
	switch {
	case rec.Seq < old.Seq:
		return PeerRecord{}, false, fmt.Errorf("%w: got seq %d, cached seq %d", ErrStaleSeq, rec.Seq, old.Seq)
	case rec.Seq == old.Seq && rec.DocHash == old.DocHash:
		next = *old
		if rec.FetchedAt.After(old.FetchedAt) {
			next.FetchedAt = rec.FetchedAt
		}
		if len(rec.Addrs) > 0 {
			next.Addrs = rec.Addrs
		}
		if len(rec.Context) > 0 {
			next.Context = rec.Context
		}
		return next, false, nil
	default:
		next.ChangedAt = rec.FetchedAt
		// A pushed update carries no negotiated context; the last one
		// still describes the conversation.
		if len(next.Context) == 0 {
			next.Context = old.Context
		}
		return next, true, nil
	}
}

// PeerGate tells whether the owner, or a grant above public, made a peer
// known: the peer cache persists the views of those peers only. The daemon
// defines it (package node); the store only asks.
type PeerGate func(peerID string) bool

// SetPeerGate installs the gate PutPeer asks. Until one is installed
// every peer counts as known, as a store used on its own (a tool, a test)
// expects.
func (s *Store) SetPeerGate(known PeerGate) { s.gate.Store(&known) }

func (s *Store) knownPeer(peerID string) bool {
	g := s.gate.Load()
	return g == nil || (*g)(peerID)
}

// persisted reports whether the file holds a record of peerID.
func (s *Store) persisted(peerID string) bool {
	s.headsMu.Lock()
	_, ok := s.heads[peerID]
	s.headsMu.Unlock()
	if ok {
		return true
	}
	s.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketPeers).Get([]byte(peerID)) != nil
		return nil
	})
	return ok
}

// MaxStrangerBytes bounds the strangers' records kept in memory, by
// strangerCost: about 550 peers with 14.5 KB views (20 capabilities).
// The least recently put goes first. A record's view is mostly the same
// bytes the daemon's verified-view memory holds, so the two together
// cost about one budget when they hold the same peers.
const MaxStrangerBytes = 8 << 20

// StrangersFill is how full the strangers' peer records in memory are.
func (s *Store) StrangersFill() costlru.Fill { return s.strangers.Fill() }

// strangerCost is what rec is counted as in the strangers' memory: its
// bytes and the record around them.
func strangerCost(rec PeerRecord) int64 {
	n := len(rec.PeerID) + len(rec.AgentID) + len(rec.Display) + len(rec.DocHash) + len(rec.View) + len(rec.Context) + 256
	for _, a := range rec.Addrs {
		n += len(a) + 16
	}
	return int64(n)
}

// fetchedGranularity is how precisely FetchedAt is kept: a view confirmed
// again within it, with nothing else new, is not written again. Ages are
// shown in seconds and go stale after a day; a write (and its fsync) per
// greeting would cost more than the precision is worth.
const fetchedGranularity = time.Minute

// peerHead is what confirmsRecently compares of a stored record.
type peerHead struct {
	Seq       uint64          `json:"seq"`
	DocHash   string          `json:"doc_hash"`
	Addrs     []string        `json:"addrs"`
	Context   json.RawMessage `json:"context"`
	FetchedAt time.Time       `json:"fetched_at"`
}

// maxHeads bounds the records whose head is remembered; past it the memory
// starts again and heads are read back from the file.
const maxHeads = 8192

// confirmsRecently reports whether rec only repeats what the cache holds,
// confirmed less than fetchedGranularity ago. It runs on every greeting, so
// the head of each record is remembered as PutPeer writes it (only PutPeer
// and DeletePeer write the bucket) and read back, fields only, otherwise.
func (s *Store) confirmsRecently(rec PeerRecord) bool {
	old, ok := s.head(rec.PeerID)
	return ok && rec.Seq == old.Seq && rec.DocHash == old.DocHash &&
		(len(rec.Addrs) == 0 || slices.Equal(rec.Addrs, old.Addrs)) &&
		(len(rec.Context) == 0 || bytes.Equal(rec.Context, old.Context)) &&
		rec.FetchedAt.Sub(old.FetchedAt) < fetchedGranularity
}

// head is the head of the record the file holds for peerID: remembered,
// or read back, fields only; false when the file holds none (or one that
// does not decode, which PutPeer reports).
func (s *Store) head(peerID string) (peerHead, bool) {
	s.headsMu.Lock()
	h, ok := s.heads[peerID]
	s.headsMu.Unlock()
	if ok {
		return h, true
	}
	s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketPeers).Get([]byte(peerID))
		ok = raw != nil && jsonv2.Unmarshal(raw, &h) == nil
		return nil
	})
	return h, ok
}

// rememberHead records (or with nil, forgets) the head of what was stored
// for peerID.
func (s *Store) rememberHead(peerID string, rec *PeerRecord) {
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	if rec == nil {
		delete(s.heads, peerID)
		return
	}
	if s.heads == nil || len(s.heads) >= maxHeads {
		s.heads = map[string]peerHead{}
	}
	s.heads[peerID] = peerHead{Seq: rec.Seq, DocHash: rec.DocHash, Addrs: rec.Addrs, Context: rec.Context, FetchedAt: rec.FetchedAt}
}

// Peer returns the cached record of peerID, or ErrNotFound.
func (s *Store) Peer(peerID string) (PeerRecord, error) {
	var rec PeerRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		key := []byte(peerID)
		raw := tx.Bucket(bucketPeers).Get(key)
		if raw == nil {
			return ErrNotFound
		}
		return decode(bucketPeers, key, raw, &rec)
	})
	if errors.Is(err, ErrNotFound) {
		if mem, ok := s.strangers.Get(peerID); ok {
			return mem, nil
		}
	}
	if err != nil {
		return PeerRecord{}, fmt.Errorf("reading peer %s: %w", peerID, err)
	}
	return rec, nil
}

// Peers returns every cached record, the file's and the strangers' in
// memory, sorted by PeerID.
func (s *Store) Peers() ([]PeerRecord, error) {
	var recs []PeerRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPeers).ForEach(func(k, v []byte) error {
			var rec PeerRecord
			if err := decode(bucketPeers, k, v, &rec); err != nil {
				return err
			}
			recs = append(recs, rec)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading peers: %w", err)
	}
	for _, id := range s.strangers.Keys() {
		if mem, ok := s.strangers.Peek(id); ok && !slices.ContainsFunc(recs, func(r PeerRecord) bool { return r.PeerID == id }) {
			recs = append(recs, mem)
		}
	}
	slices.SortFunc(recs, func(a, b PeerRecord) int { return strings.Compare(a.PeerID, b.PeerID) })
	return recs, nil
}

// DeletePeer forgets peerID; forgetting an unknown peer is not an error.
func (s *Store) DeletePeer(peerID string) error {
	s.rememberHead(peerID, nil)
	s.strangersMu.Lock() // not between a merge's read and its write (PutPeer, SetPeerAddrs)
	s.strangers.Remove(peerID)
	s.strangersMu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPeers).Delete([]byte(peerID))
	})
	if err != nil {
		return fmt.Errorf("deleting peer %s: %w", peerID, err)
	}
	return nil
}
