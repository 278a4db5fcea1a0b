package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// ownRecord is the value under "document" in the own bucket.
type ownRecord struct {
	Seq uint64          `json:"seq"`
	Doc json.RawMessage `json:"doc"`
}

// Own is the store's room for the owner's own document: its seq, its
// JSON, and the owner's run-time changes to its capabilities.
type Own struct{ db *bolt.DB }

// Own returns the store's room for the owner's document.
func (s *Store) Own() *Own { return &Own{db: s.db} }

// SaveOwnDocument stores the owner's capability document and its seq, so
// that the seq survives restarts and keeps increasing. It refuses a seq
// that is not higher than the stored one with ErrStaleSeq: peers that
// cached the stored document would refuse a reused or lower seq.
func (s *Own) SaveOwnDocument(seq uint64, doc json.RawMessage) error {
	err := s.db.Update(func(tx *bolt.Tx) error { return putOwnDocument(tx, seq, doc) })
	if err != nil {
		return fmt.Errorf("saving own document (seq %d): %w", seq, err)
	}
	return nil
}

// putOwnDocument is SaveOwnDocument within tx.
func putOwnDocument(tx *bolt.Tx, seq uint64, doc json.RawMessage) error {
	if !json.Valid(doc) {
		return fmt.Errorf("document is not valid JSON")
	}
	b := tx.Bucket(bucketOwn)
	if raw := b.Get(keyOwnDocument); raw != nil {
		var old ownRecord
		if err := decode(bucketOwn, keyOwnDocument, raw, &old); err != nil {
			return err
		}
		if seq <= old.Seq {
			return fmt.Errorf("%w: seq %d is not higher than the stored seq %d", ErrStaleSeq, seq, old.Seq)
		}
	}
	raw, err := encode(ownRecord{Seq: seq, Doc: doc})
	if err != nil {
		return fmt.Errorf("encoding record: %w", err)
	}
	return b.Put(keyOwnDocument, raw)
}

// OwnDocument returns the last saved document and its seq, or ErrNotFound
// before the first save.
func (s *Own) OwnDocument() (seq uint64, doc json.RawMessage, err error) {
	var rec ownRecord
	err = s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketOwn).Get(keyOwnDocument)
		if raw == nil {
			return ErrNotFound
		}
		return decode(bucketOwn, keyOwnDocument, raw, &rec)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("reading own document: %w", err)
	}
	return rec.Seq, rec.Doc, nil
}
