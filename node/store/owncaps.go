package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The owner's capability changes made at run time (caps add and caps
// remove, through the control API), kept under "runtime_capabilities" in
// the own bucket. Like the policy's run-time changes they are a layer over
// config.toml, which the daemon never rewrites: the config's capabilities,
// less the ones removed, plus the ones added. They are written in the same
// transaction as the document they made (SaveOwnDocumentWith), so a seq
// never rises for a change the file does not keep, and a crash keeps both
// or neither. The record is bounded by the owner's acts: a document holds
// at most 256 capabilities (negotiate.MaxCapabilities) and the daemon
// keeps no more added ones, nor removals of capabilities the config does
// not have.

var keyRuntimeCapabilities = []byte("runtime_capabilities")

// RuntimeCapabilities are the owner's run-time capability changes.
type RuntimeCapabilities struct {
	// Added are the capabilities added, in the order they were, each the
	// JSON object of one capability.
	Added []json.RawMessage `json:"added,omitempty"`
	// Removed are the names of the config's capabilities removed.
	Removed []string `json:"removed,omitempty"`
}

// RuntimeCapabilities returns the run-time capability changes; none (the
// zero value) before the first.
func (s *Own) RuntimeCapabilities() (RuntimeCapabilities, error) {
	var rc RuntimeCapabilities
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketOwn).Get(keyRuntimeCapabilities)
		if raw == nil {
			return nil
		}
		return decode(bucketOwn, keyRuntimeCapabilities, raw, &rc)
	})
	if err != nil {
		return RuntimeCapabilities{}, fmt.Errorf("reading run-time capabilities: %w", err)
	}
	return rc, nil
}

// SaveOwnDocumentWith stores the run-time capability changes rc and, when
// doc is not nil, the owner's document and its seq by the rules of
// SaveOwnDocument, in one transaction.
func (s *Own) SaveOwnDocumentWith(seq uint64, doc json.RawMessage, rc RuntimeCapabilities) error {
	raw, err := encode(rc)
	if err != nil {
		return fmt.Errorf("saving run-time capabilities: encoding record: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		if doc != nil {
			if err := putOwnDocument(tx, seq, doc); err != nil {
				return fmt.Errorf("saving own document (seq %d): %w", seq, err)
			}
		}
		if err := tx.Bucket(bucketOwn).Put(keyRuntimeCapabilities, raw); err != nil {
			return fmt.Errorf("saving run-time capabilities: %w", err)
		}
		return nil
	})
	return err
}
