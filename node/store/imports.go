package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketImports holds outside agents the owner imported (ifaced import):
// source URL → ImportRecord. They are kept apart from the peer cache,
// which holds only views signed by a peer's own key.
var bucketImports = []byte("imports")

// ImportRecord is an outside agent's document in IFP-7 form.
type ImportRecord struct {
	URL       string          `json:"url"`
	Format    string          `json:"format"` // ag-ui, a2a or orchestrator
	Name      string          `json:"name,omitempty"`
	Signed    bool            `json:"signed"`         // an A2A card whose JWS verified
	Note      string          `json:"note,omitempty"` // e.g. why a signed card counts as unsigned
	View      json.RawMessage `json:"view"`           // the converted document (JSON)
	Hash      string          `json:"hash"`           // hex SHA-256 of the source bytes
	FetchedAt time.Time       `json:"fetched_at"`
	ChangedAt time.Time       `json:"changed_at"`
	LastError string          `json:"last_error,omitempty"` // the last refresh's failure; the view is the last good one
}

// Imports is the store's room for the outside agents the owner imported.
type Imports struct{ db *bolt.DB }

// Imports returns the store's imports.
func (s *Store) Imports() *Imports { return &Imports{db: s.db} }

// Put stores rec, keeping ChangedAt when the source did not change.
func (s *Imports) Put(rec ImportRecord) error {
	if rec.URL == "" {
		return errors.New("storing import: empty URL")
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketImports)
		if raw := b.Get([]byte(rec.URL)); raw != nil {
			var old ImportRecord
			if err := decode(bucketImports, []byte(rec.URL), raw, &old); err == nil && old.Hash == rec.Hash {
				rec.ChangedAt = old.ChangedAt
			}
		}
		raw, err := encode(rec)
		if err != nil {
			return fmt.Errorf("encoding record: %w", err)
		}
		return b.Put([]byte(rec.URL), raw)
	})
	if err != nil {
		return fmt.Errorf("storing import %s: %w", rec.URL, err)
	}
	return nil
}

// Get returns the record of url, or ErrNotFound.
func (s *Imports) Get(url string) (ImportRecord, error) {
	var rec ImportRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketImports).Get([]byte(url))
		if raw == nil {
			return ErrNotFound
		}
		return decode(bucketImports, []byte(url), raw, &rec)
	})
	if err != nil {
		return rec, fmt.Errorf("reading import %s: %w", url, err)
	}
	return rec, nil
}

// All returns every import, by URL.
func (s *Imports) All() ([]ImportRecord, error) {
	var out []ImportRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketImports).ForEach(func(k, v []byte) error {
			var rec ImportRecord
			if err := decode(bucketImports, k, v, &rec); err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading imports: %w", err)
	}
	return out, nil
}

// Delete forgets url; ErrNotFound if it was not imported.
func (s *Imports) Delete(url string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketImports)
		if b.Get([]byte(url)) == nil {
			return ErrNotFound
		}
		return b.Delete([]byte(url))
	})
	if err != nil {
		return fmt.Errorf("removing import %s: %w", url, err)
	}
	return nil
}
