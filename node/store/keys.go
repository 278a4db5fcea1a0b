package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Key lifecycle records. The bucket "key_lifecycle" holds one JSON record
// (KeyEvent) per key statement this daemon gave or followed: successions
// under "succession/<old peer ID>", revocations under "revocation/<revoked
// peer ID>", so that a key has at most one of each. Statements about peers
// this daemon never met are not stored (the trust component refuses
// them), so the bucket grows only with the peers the owner's daemon
// already keeps, and MaxKeyEvents bounds it besides.

var bucketKeys = []byte("key_lifecycle")

// MaxKeyEvents bounds the key lifecycle records: PutKeyEvent refuses a
// new one past it (ErrKeyEventsFull).
const MaxKeyEvents = 4096

// ErrKeyEventsFull: the key lifecycle bucket holds MaxKeyEvents records.
var ErrKeyEventsFull = errors.New("the store holds as many key lifecycle records as it may")

// Kinds of key lifecycle records.
const (
	KeySuccession = "succession"
	KeyRevocation = "revocation"
)

// Directions of a key lifecycle record.
const (
	KeyGiven    = "given"    // this daemon's own key
	KeyReceived = "received" // a peer's key, followed here
)

// KeyEvent is one key statement given or followed.
type KeyEvent struct {
	Kind      string `json:"kind"`      // KeySuccession or KeyRevocation
	Direction string `json:"direction"` // KeyGiven or KeyReceived
	Peer      string `json:"peer"`      // the key the statement is about: the old or the revoked peer ID
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
	At         time.Time       `json:"at"`             // when this daemon gave or followed it
	Via        string          `json:"via,omitempty"`  // the transport that brought it
	Note       string          `json:"note,omitempty"` // what was carried over or voided, for people
	// Delivered are the peers a statement given here was sent to (in a
	// conversation, or left at their mailbox relays); at most the peer
	// cache's size.
	Delivered []string `json:"delivered,omitempty"`
}

func keyEventKey(kind, peerID string) string { return kind + "/" + peerID }

// PutKeyEvent stores e under its kind and peer, replacing what was there.
func (s *Store) PutKeyEvent(e KeyEvent) error {
	if e.Peer == "" || (e.Kind != KeySuccession && e.Kind != KeyRevocation) {
		return fmt.Errorf("storing key event: kind %q, peer %q: want succession or revocation, and a peer", e.Kind, e.Peer)
	}
	raw, err := encode(e)
	if err != nil {
		return fmt.Errorf("storing key event: %w", err)
	}
	key := []byte(keyEventKey(e.Kind, e.Peer))
	err = s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketKeys)
		if err != nil {
			return err
		}
		if b.Get(key) == nil && b.Stats().KeyN >= MaxKeyEvents {
			return ErrKeyEventsFull
		}
		return b.Put(key, raw)
	})
	if err != nil {
		return fmt.Errorf("storing the %s of %s: %w", e.Kind, e.Peer, err)
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
