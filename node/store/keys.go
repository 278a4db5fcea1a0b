package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Key lifecycle records. The bucket "key_lifecycle" holds one JSON record
// (KeyEvent) per key statement this daemon gave or followed: successions
// under "succession/<old peer ID>", revocations under "revocation/<revoked
// peer ID>", commitments to a next key under "commitment/<committing peer
// ID>", so that a key has at most one of each. The store keeps them; which
// to keep is the trust component's (package trust: a cap on the records
// strangers cause, oldest first evicted, never the owner's own statements
// nor those about peers the owner made known). PutKeyEvent writes a record
// and deletes the ones it evicts in one transaction.

var bucketKeys = []byte("key_lifecycle")

// Kinds of key lifecycle records.
const (
	KeySuccession = "succession"
	KeyRevocation = "revocation"
	KeyCommitment = "commitment"
)

// Directions of a key lifecycle record.
const (
	KeyGiven    = "given"    // this daemon's own key
	KeyReceived = "received" // a peer's key, followed here
)

// Sources of a received statement: who signed it.
const (
	KeySignedBySelf      = "self"      // the key the statement is about
	KeySignedBySuccessor = "successor" // a revocation signed by the key that succeeded the revoked one
	KeySignedByBoth      = "both"      // a succession: its old and its new key
)

// KeyEventRef names one key lifecycle record.
type KeyEventRef struct {
	Kind string
	Peer string
}

// KeyEvent is one key statement given or followed.
type KeyEvent struct {
	Kind      string `json:"kind"`      // KeySuccession, KeyRevocation or KeyCommitment
	Direction string `json:"direction"` // KeyGiven or KeyReceived
	Peer      string `json:"peer"`      // the key the statement is about: the old, revoked or committing peer ID
	Successor string `json:"successor,omitempty"`
	// Date is the statement's date; Until, for a succession, the end of
	// its transition period.
	Date  time.Time `json:"date"`
	Until time.Time `json:"until,omitzero"`
	// Statement is the statement as received (JSON), and Succession the
	// succession statement that came with a revocation its successor signed.
	Statement  json.RawMessage `json:"statement"`
	Succession json.RawMessage `json:"succession,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	// NextKeyDigest is a commitment's digest of the next key, or the one a
	// succession carries for the key after its successor.
	NextKeyDigest string `json:"next_key_digest,omitempty"`
	// SignedBy says who signed a received statement (KeySignedBySelf,
	// KeySignedBySuccessor, KeySignedByBoth).
	SignedBy string    `json:"signed_by,omitempty"`
	At       time.Time `json:"at"`             // when this daemon gave or followed it
	Via      string    `json:"via,omitempty"`  // the transport that brought it
	Note     string    `json:"note,omitempty"` // what was carried over, or what the owner should know, for people
	// Delivered are the peers a statement given here was sent to (in a
	// conversation, or left at their mailbox relays); at most the peer
	// cache's size.
	Delivered []string `json:"delivered,omitempty"`
}

func keyEventKey(kind, peerID string) string { return kind + "/" + peerID }

// Ref names e's record.
func (e KeyEvent) Ref() KeyEventRef { return KeyEventRef{Kind: e.Kind, Peer: e.Peer} }

// PutKeyEvent stores e under its kind and peer, replacing what was there,
// and deletes the records evict names, in one transaction.
func (s *Store) PutKeyEvent(e KeyEvent, evict ...KeyEventRef) error {
	if e.Peer == "" || (e.Kind != KeySuccession && e.Kind != KeyRevocation && e.Kind != KeyCommitment) {
		return fmt.Errorf("storing key event: kind %q, peer %q: want succession, revocation or commitment, and a peer", e.Kind, e.Peer)
	}
	raw, err := encode(e)
	if err != nil {
		return fmt.Errorf("storing key event: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketKeys)
		if err != nil {
			return err
		}
		for _, r := range evict {
			if err := b.Delete([]byte(keyEventKey(r.Kind, r.Peer))); err != nil {
				return err
			}
		}
		return b.Put([]byte(keyEventKey(e.Kind, e.Peer)), raw)
	})
	if err != nil {
		return fmt.Errorf("storing the %s of %s: %w", e.Kind, e.Peer, err)
	}
	return nil
}

// DeleteKeyEvents deletes the records refs names (those not there are
// not an error), in one transaction.
func (s *Store) DeleteKeyEvents(refs ...KeyEventRef) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		if b == nil {
			return nil
		}
		for _, r := range refs {
			if err := b.Delete([]byte(keyEventKey(r.Kind, r.Peer))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting key lifecycle records: %w", err)
	}
	return nil
}

// KeyEvents returns every key lifecycle record.
func (s *Store) KeyEvents() ([]KeyEvent, error) {
	var out []KeyEvent
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var e KeyEvent
			if err := decode(bucketKeys, k, v, &e); err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading key lifecycle records: %w", err)
	}
	return out, nil
}
