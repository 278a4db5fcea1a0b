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

// keyViewMarks holds, beside the document, what node's documents keep of
// the views they showed: per class of requester, the seq of the last
// change visible in its view (and per peer the highest seq shown), so
// that a change no class can see moves no view's seq across restarts.
// The record is the caller's JSON, bounded by the caller.
var keyViewMarks = []byte("view_marks")

// SaveViewMarks stores the view marks record (see keyViewMarks).
func (s *Own) SaveViewMarks(raw json.RawMessage) error {
	if !json.Valid(raw) {
		return fmt.Errorf("saving view marks: not valid JSON")
	}
	err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketOwn).Put(keyViewMarks, raw) })
	if err != nil {
		return fmt.Errorf("saving view marks: %w", err)
	}
	return nil
}

// ViewMarks returns the stored view marks record, or nil before the first.
func (s *Own) ViewMarks() (json.RawMessage, error) {
	var out json.RawMessage
	err := s.db.View(func(tx *bolt.Tx) error {
		if raw := tx.Bucket(bucketOwn).Get(keyViewMarks); raw != nil {
			out = append(json.RawMessage(nil), raw...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading view marks: %w", err)
	}
	return out, nil
}
