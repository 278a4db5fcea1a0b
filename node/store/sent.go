package store

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ifaced/ifaced/node/internal/costlru"
	bolt "go.etcd.io/bbolt"
)

// The views sent: for each peer, a small record of the last view of the
// owner's document this daemon sent it (in a greeting, a capabilities
// query's answer or an update push), so that the owner can see what a
// peer holds beside what it would be shown at its next greeting. It is
// a summary, never the view: when, how, the document's seq, the grant it
// was cut for, and the names of the capabilities it showed eligible and
// shown with their conditions (a hidden capability is in neither list,
// as it is in no view).
//
// Kept like the peer cache: in the file for peers the gate says are known
// (bucket "sent", key: peer ID), in a memory bounded by bytes for
// strangers (MaxSentStrangerBytes, the least recently put evicted first),
// so a flood of fresh keys costs no write and a bounded memory, and never
// takes the record of a known peer. A stranger made known moves to the
// file when its next view is sent. A record that repeats the one held,
// sent again within sentGranularity, is not written again.

// SentView is the record of the last view this daemon sent a peer.
type SentView struct {
	PeerID         string    `json:"peer_id"`
	At             time.Time `json:"at"`                        // when it was last sent (to sentGranularity)
	Via            string    `json:"via"`                       // greeting, capabilities query, update
	ConversationID string    `json:"conversation_id,omitempty"` // the conversation it was sent in
	Seq            uint64    `json:"seq"`                       // of the owner's document it was cut from
	Sum            string    `json:"sum,omitempty"`             // its have_view hash (hex SHA-256)
	Tier           string    `json:"tier"`                      // the grant it was cut for
	Level          int       `json:"level"`
	Temperature    string    `json:"temperature"`
	Persona        string    `json:"persona,omitempty"`
	Eligible       []string  `json:"eligible"` // capabilities it showed the peer may use
	Shown          []string  `json:"shown"`    // capabilities it showed with their conditions, not eligible
}

// sameView reports whether a and b record the same view sent the same
// way, whenever.
func sameView(a, b SentView) bool {
	return a.PeerID == b.PeerID && a.Via == b.Via && a.ConversationID == b.ConversationID && a.Seq == b.Seq && a.Sum == b.Sum &&
		a.Tier == b.Tier && a.Level == b.Level && a.Temperature == b.Temperature && a.Persona == b.Persona &&
		slices.Equal(a.Eligible, b.Eligible) && slices.Equal(a.Shown, b.Shown)
}

var bucketSent = []byte("sent")

// MaxSentStrangerBytes bounds the strangers' sent-view records kept in
// memory, by sentCost: some 16,000 records of a few capability names.
const MaxSentStrangerBytes = 4 << 20

// sentGranularity is how precisely At is kept for a view sent again
// unchanged: a greeting a minute does not cost a write (and its fsync)
// each.
const sentGranularity = time.Minute

func sentCost(v SentView) int64 {
	n := len(v.PeerID) + len(v.Via) + len(v.ConversationID) + len(v.Sum) + len(v.Tier) + len(v.Temperature) + len(v.Persona) + 192
	for _, s := range v.Eligible {
		n += len(s) + 16
	}
	for _, s := range v.Shown {
		n += len(s) + 16
	}
	return int64(n)
}

// SentStrangersFill is how full the strangers' sent-view records are.
func (s *Store) SentStrangersFill() costlru.Fill { return s.sentStrangers.Fill() }

func newSentStrangers() *costlru.Cache[string, SentView] {
	return costlru.New[string, SentView](MaxSentStrangerBytes)
}

// PutSentView records v as the last view sent to v.PeerID: in the file
// when the gate says the peer is known or the file holds its record
// already, in the strangers' memory otherwise. A record that repeats the
// one held, less than sentGranularity later, is not written.
func (s *Store) PutSentView(v SentView) error {
	if v.PeerID == "" {
		return errors.New("storing the view sent: empty peer ID")
	}
	v.At = v.At.UTC()
	key := []byte(v.PeerID)
	if !s.knownPeer(v.PeerID) {
		held := false
		s.db.View(func(tx *bolt.Tx) error {
			held = tx.Bucket(bucketSent).Get(key) != nil
			return nil
		})
		if !held {
			if old, ok := s.sentStrangers.Peek(v.PeerID); ok && sameView(old, v) && v.At.Sub(old.At) < sentGranularity {
				return nil
			}
			s.sentStrangers.Add(v.PeerID, v, sentCost(v))
			return nil
		}
	}
	if old, ok, err := s.sentInFile(v.PeerID); err == nil && ok && sameView(old, v) && v.At.Sub(old.At) < sentGranularity {
		s.sentStrangers.Remove(v.PeerID)
		return nil
	}
	raw, err := encode(v)
	if err != nil {
		return fmt.Errorf("storing the view sent to %s: %w", v.PeerID, err)
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketSent).Put(key, raw) }); err != nil {
		return fmt.Errorf("storing the view sent to %s: %w", v.PeerID, err)
	}
	s.sentStrangers.Remove(v.PeerID)
	return nil
}

func (s *Store) sentInFile(peerID string) (SentView, bool, error) {
	var v SentView
	found := false
	err := s.db.View(func(tx *bolt.Tx) error {
		key := []byte(peerID)
		raw := tx.Bucket(bucketSent).Get(key)
		if raw == nil {
			return nil
		}
		found = true
		return decode(bucketSent, key, raw, &v)
	})
	return v, found, err
}

// SentView returns the record of the last view sent to peerID, or
// ErrNotFound when none is held (none was sent, it was a stranger's and
// was evicted, or the daemon restarted since).
func (s *Store) SentView(peerID string) (SentView, error) {
	v, ok, err := s.sentInFile(peerID)
	if err != nil {
		return SentView{}, fmt.Errorf("reading the view sent to %s: %w", peerID, err)
	}
	if ok {
		return v, nil
	}
	if v, ok := s.sentStrangers.Get(peerID); ok {
		return v, nil
	}
	return SentView{}, fmt.Errorf("reading the view sent to %s: %w", peerID, ErrNotFound)
}

// sentStrangerCount is how many strangers' records the memory holds.
func (s *Store) sentStrangerCount() int { return s.sentStrangers.Len() }
