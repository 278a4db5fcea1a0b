package store

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Trust records and introduction tokens. Three buckets hold them, each a
// JSON record per key:
//
//   - "trust" (key: peer ID): what the owner and this daemon established
//     about one peer beyond its signature: a pinned or revoked key, the
//     introduction tokens it was admitted with, the last identity document
//     check and the last refused introduction proof (TrustRecord);
//   - "intros_issued" (key: token ID): tokens this daemon minted, with
//     their secret, the peer each is bound to and whether it is revoked
//     (IssuedIntro);
//   - "intros_held" (key: token ID): tokens other daemons minted for this
//     one, as the pasted string (HeldIntro).
//
// The store keeps these records; what they mean is decided in package node.

var (
	bucketTrust        = []byte("trust")
	bucketIntrosIssued = []byte("intros_issued")
	bucketIntrosHeld   = []byte("intros_held")
)

// TrustRecord is what this daemon established about one peer beyond the
// signature every peer's messages carry.
type TrustRecord struct {
	PeerID string `json:"peer_id"`
	// PinnedKey is the fingerprint (identity.Fingerprint) of the peer's key
	// the owner compared out of band and pinned; "" when none.
	PinnedKey string    `json:"pinned_key,omitempty"`
	PinnedAt  time.Time `json:"pinned_at,omitzero"`
	// RevokedKey is the fingerprint of the peer's key the owner revoked
	// trust in; "" when none.
	RevokedKey string    `json:"revoked_key,omitempty"`
	RevokedAt  time.Time `json:"revoked_at,omitzero"`
	// RevokedWith is the peer whose key the owner revoked when this one
	// was revoked with it, as a key of the same identity (a succession
	// followed between them); "" when the owner revoked this key itself.
	RevokedWith string `json:"revoked_with,omitempty"`
	// Intros are the introduction tokens the peer proved it holds.
	Intros []TrustIntro `json:"intros,omitempty"`
	// Check is the last identity document check for the peer's agent ID.
	Check *DocCheck `json:"check,omitempty"`
	// CheckFailure is the last check that fetched no document while Check,
	// an earlier success for the same agent ID, still stands; nil once a
	// later check replaces Check.
	CheckFailure *DocCheck `json:"check_failure,omitempty"`
	// Refusal is why the last introduction proof the peer presented was
	// refused; "" once a later one is admitted.
	Refusal   string    `json:"refusal,omitempty"`
	RefusedAt time.Time `json:"refused_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at"`
}

// TrustIntro is one introduction token a peer was admitted with.
type TrustIntro struct {
	TokenID    string    `json:"token_id"`
	Label      string    `json:"label"`
	Persona    string    `json:"persona,omitempty"`    // the disclosure-map persona the tier applies under
	Disclosure string    `json:"disclosure,omitempty"` // the tier the token grants at least; "" grants none
	Expires    time.Time `json:"expires"`
	AdmittedAt time.Time `json:"admitted_at"`
}

// DocCheck is the outcome of fetching a peer's identity document (its
// https agent ID, or the DID document of its did:web).
type DocCheck struct {
	AgentID   string    `json:"agent_id"`      // the agent ID the peer presented
	URL       string    `json:"url,omitempty"` // what was fetched; "" when nothing was
	Method    string    `json:"method"`        // "url" or "did:web"
	Level     int       `json:"level"`         // the level the document supports: 1, 2 or 3
	Outcome   string    `json:"outcome"`       // a short code: bound, id_mismatch, fetch_failed, key_not_listed, …
	Reason    string    `json:"reason,omitempty"`
	CheckedAt time.Time `json:"checked_at"`
}

// IssuedIntro is an introduction token this daemon minted.
type IssuedIntro struct {
	ID         string    `json:"id"`
	Issuer     string    `json:"issuer"`
	Label      string    `json:"label"`
	Expires    time.Time `json:"expires"`
	Secret     []byte    `json:"secret"`
	Disclosure string    `json:"disclosure,omitempty"`
	Persona    string    `json:"persona,omitempty"`
	BoundPeer  string    `json:"bound_peer,omitempty"`
	BoundAt    time.Time `json:"bound_at,omitzero"`
	Revoked    bool      `json:"revoked,omitempty"`
	RevokedAt  time.Time `json:"revoked_at,omitzero"`
	Created    time.Time `json:"created"`
}

// HeldIntro is an introduction token another daemon minted for this one.
type HeldIntro struct {
	ID         string    `json:"id"`
	Issuer     string    `json:"issuer"` // the issuer's did:key
	Label      string    `json:"label"`
	Expires    time.Time `json:"expires"`
	Token      string    `json:"token"` // as pasted (identity.Introduction.Encode)
	AcceptedAt time.Time `json:"accepted_at"`
}

// PutTrust stores rec under its peer ID, replacing what was there.
func (s *Store) PutTrust(rec TrustRecord) error {
	if rec.PeerID == "" {
		return errors.New("storing trust record: empty peer ID")
	}
	return s.put(bucketTrust, rec.PeerID, rec, "storing trust record for "+rec.PeerID)
}

// Trust returns the trust record of peerID, or ErrNotFound.
func (s *Store) Trust(peerID string) (TrustRecord, error) {
	var rec TrustRecord
	err := s.get(bucketTrust, peerID, &rec)
	if err != nil {
		return TrustRecord{}, fmt.Errorf("reading trust record of %s: %w", peerID, err)
	}
	return rec, nil
}

// Trusts returns every trust record, sorted by peer ID. A record that does
// not decode is left out and reported in the error (wrapping ErrCorrupt)
// beside the records that did: one bad record must not hide the others.
func (s *Store) Trusts() ([]TrustRecord, error) {
	return list[TrustRecord](s, bucketTrust, "reading trust records")
}

// DeleteTrust forgets the trust record of peerID; forgetting an unknown
// one is not an error.
func (s *Store) DeleteTrust(peerID string) error {
	return s.delete(bucketTrust, peerID, "deleting trust record of "+peerID)
}

// PutIssuedIntro stores an issued token, replacing one of the same ID.
func (s *Store) PutIssuedIntro(rec IssuedIntro) error {
	if rec.ID == "" {
		return errors.New("storing issued introduction: empty token ID")
	}
	return s.put(bucketIntrosIssued, rec.ID, rec, "storing issued introduction "+rec.ID)
}

// IssuedIntro returns the issued token id, or ErrNotFound.
func (s *Store) IssuedIntro(id string) (IssuedIntro, error) {
	var rec IssuedIntro
	if err := s.get(bucketIntrosIssued, id, &rec); err != nil {
		return IssuedIntro{}, fmt.Errorf("reading issued introduction %s: %w", id, err)
	}
	return rec, nil
}

// IssuedIntros returns every issued token, sorted by ID, with the same
// handling of undecodable records as Trusts.
func (s *Store) IssuedIntros() ([]IssuedIntro, error) {
	return list[IssuedIntro](s, bucketIntrosIssued, "reading issued introductions")
}

// PutHeldIntro stores a held token, replacing one of the same ID.
func (s *Store) PutHeldIntro(rec HeldIntro) error {
	if rec.ID == "" {
		return errors.New("storing held introduction: empty token ID")
	}
	return s.put(bucketIntrosHeld, rec.ID, rec, "storing held introduction "+rec.ID)
}

// HeldIntros returns every held token, sorted by ID, with the same
// handling of undecodable records as Trusts.
func (s *Store) HeldIntros() ([]HeldIntro, error) {
	return list[HeldIntro](s, bucketIntrosHeld, "reading held introductions")
}

// DeleteHeldIntro forgets a held token; forgetting an unknown one is not
// an error.
func (s *Store) DeleteHeldIntro(id string) error {
	return s.delete(bucketIntrosHeld, id, "deleting held introduction "+id)
}

func (s *Store) put(bucket []byte, key string, v any, what string) error {
	raw, err := encode(v)
	if err != nil {
		return fmt.Errorf("%s: encoding record: %w", what, err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(key), raw)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (s *Store) get(bucket []byte, key string, v any) error {
	return s.db.View(func(tx *bolt.Tx) error {
		k := []byte(key)
		raw := tx.Bucket(bucket).Get(k)
		if raw == nil {
			return ErrNotFound
		}
		return decode(bucket, k, raw, v)
	})
}

func (s *Store) delete(bucket []byte, key, what string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// list decodes every record of bucket, keeping the good ones and joining
// the errors of the bad ones.
func list[T any](s *Store, bucket []byte, what string) ([]T, error) {
	var out []T
	var bad []error
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			var rec T
			if err := decode(bucket, k, v, &rec); err != nil {
				bad = append(bad, err)
				return nil
			}
			out = append(out, rec)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%s: %w", what, errors.Join(bad...))
	}
	return out, nil
}
