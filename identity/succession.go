package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Key lifecycle statements: how a daemon tells its peers that its key was
// replaced (a succession statement) or must no longer be believed (a
// revocation statement). The exact form is in the package comment
// ("Key succession and revocation") and pinned by
// testdata/lifecycle-vectors.json.

// Domain-separation prefixes of the key lifecycle statements.
const (
	SuccessionPrefix = "ifp/5/key-succession/v1\n"
	RevocationPrefix = "ifp/5/key-revocation/v1\n"
)

// Statement types, the value of each statement's "type".
const (
	TypeSuccession = "key_succession"
	TypeRevocation = "key_revocation"
)

// Limits of a statement.
const (
	// MaxStatementBytes bounds the JSON of one statement: both kinds are
	// well under 1 KiB.
	MaxStatementBytes = 4096
	// MaxTransition bounds a succession's transition period: a retired key
	// never verifies for more than a year after its successor took over.
	MaxTransition = 365 * 24 * time.Hour
	// MaxReason bounds a revocation's reason, in bytes.
	MaxReason = 256
)

var (
	// ErrMalformedStatement: a statement is not well formed (a member
	// missing, of the wrong kind, or out of range).
	ErrMalformedStatement = errors.New("malformed key statement")
	// ErrStatementSigner: a revocation signed by a key that may not revoke
	// the key it names (only the key itself, or its successor).
	ErrStatementSigner = errors.New("key statement signed by a key that may not make it")
)

// Succession is a key succession statement: the key old_key_id is
// replaced by new_key_id from date on, and old_key_id still verifies for
// transition_seconds after date. Both keys sign it (sig_old, sig_new), over
// the same signing input, so that no one holding only one of them can make
// one. NextKeyDigest, when present, is new_key_id's commitment to the key
// that will succeed it (pre-rotation, NextKeyDigest); absent, the
// statement and its signing input are as they were before pre-rotation.
type Succession struct {
	Type          string `json:"type"`
	OldKeyID      string `json:"old_key_id"`
	NewKeyID      string `json:"new_key_id"`
	Date          string `json:"date"`
	Transition    int64  `json:"transition_seconds"`
	NextKeyDigest string `json:"next_key_digest,omitempty"`
	SigOld        string `json:"sig_old"`
	SigNew        string `json:"sig_new"`
}

// successionParams is the signed object: every member but the signatures.
type successionParams struct {
	Type          string `json:"type"`
	OldKeyID      string `json:"old_key_id"`
	NewKeyID      string `json:"new_key_id"`
	Date          string `json:"date"`
	Transition    int64  `json:"transition_seconds"`
	NextKeyDigest string `json:"next_key_digest,omitempty"`
}

// Revocation is a key revocation statement: key_id must no longer be
// believed, and is refused from the moment the statement is received;
// date is when the statement was made (it bounds its freshness, and
// decides nothing else: a receiver judges by the order it observed
// statements in). signer is key_id itself (a statement prepared while the
// owner held the key, `ifaced key revocation-statement`) or the key that
// succeeded it, and then the succession statement naming both must travel
// with it.
type Revocation struct {
	Type   string `json:"type"`
	KeyID  string `json:"key_id"`
	Date   string `json:"date"`
	Reason string `json:"reason"`
	Signer string `json:"signer"`
	Sig    string `json:"sig"`
}

type revocationParams struct {
	Type   string `json:"type"`
	KeyID  string `json:"key_id"`
	Date   string `json:"date"`
	Reason string `json:"reason"`
	Signer string `json:"signer"`
}

// NewSuccession makes the statement that next succeeds old from date on,
// with a transition period during which old still verifies, signed by
// both keys.
func NewSuccession(old, next *Identity, date time.Time, transition time.Duration) (*Succession, error) {
	return NewCommittedSuccession(old, next, nil, date, transition)
}

// NewCommittedSuccession is NewSuccession whose statement also carries
// next's commitment to after as its own successor (next_key_digest);
// after nil makes none.
func NewCommittedSuccession(old, next *Identity, after ed25519.PublicKey, date time.Time, transition time.Duration) (*Succession, error) {
	s := &Succession{Type: TypeSuccession, OldKeyID: old.KeyID(), NewKeyID: next.KeyID(),
		Date: date.UTC().Format(time.RFC3339), Transition: int64(transition / time.Second)}
	if after != nil {
		s.NextKeyDigest = NextKeyDigest(after)
	}
	in, err := s.SigningInput()
	if err != nil {
		return nil, err
	}
	s.SigOld = base64.RawURLEncoding.EncodeToString(old.sign(in))
	s.SigNew = base64.RawURLEncoding.EncodeToString(next.sign(in))
	return s, nil
}

// check rejects what would make the signing input ambiguous, naming the
// member at fault.
func (s *Succession) check() (old, next ed25519.PublicKey, err error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrMalformedStatement, field, fmt.Sprintf(format, args...))
	}
	if s.Type != TypeSuccession {
		return nil, nil, bad("type", "want %q, got %q", TypeSuccession, s.Type)
	}
	if old, err = PublicKeyFromKeyID(s.OldKeyID); err != nil {
		return nil, nil, bad("old_key_id", "%v (want a did:key key_id, did:key:z6Mk…#z6Mk…)", err)
	}
	if next, err = PublicKeyFromKeyID(s.NewKeyID); err != nil {
		return nil, nil, bad("new_key_id", "%v (want a did:key key_id, did:key:z6Mk…#z6Mk…)", err)
	}
	if old.Equal(next) {
		return nil, nil, bad("new_key_id", "is the old key itself; a succession names a new key")
	}
	if _, err := parseStatementDate(s.Date); err != nil {
		return nil, nil, bad("date", "%v", err)
	}
	if s.Transition < 0 || time.Duration(s.Transition)*time.Second > MaxTransition {
		return nil, nil, bad("transition_seconds", "%d is out of range (0 to %d, a year)", s.Transition, int64(MaxTransition/time.Second))
	}
	if s.NextKeyDigest != "" {
		if err := checkDigest(s.NextKeyDigest); err != nil {
			return nil, nil, bad("next_key_digest", "%v", err)
		}
		if s.NextKeyDigest == NextKeyDigest(next) || s.NextKeyDigest == NextKeyDigest(old) {
			return nil, nil, bad("next_key_digest", "is the digest of a key the statement names; it commits to the key after new_key_id")
		}
	}
	return old, next, nil
}

// parseStatementDate reads a statement's date: RFC 3339 in UTC, to the
// second, as the statements are made.
func parseStatementDate(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time", s)
	}
	if t.UTC().Format(time.RFC3339) != s {
		return time.Time{}, fmt.Errorf("%q: write it in UTC to the second, as %s", s, t.UTC().Format(time.RFC3339))
	}
	return t, nil
}

// SigningInput is SuccessionPrefix followed by the canonical JSON of the
// statement without its signatures.
func (s *Succession) SigningInput() ([]byte, error) {
	if _, _, err := s.check(); err != nil {
		return nil, err
	}
	c, err := Canonicalize(successionParams{s.Type, s.OldKeyID, s.NewKeyID, s.Date, s.Transition, s.NextKeyDigest})
	if err != nil {
		return nil, fmt.Errorf("succession statement: %w", err)
	}
	return append([]byte(SuccessionPrefix), c...), nil
}

// Verify checks that the statement is well formed and that both keys
// signed it; an error names the signature that failed (sig_old, sig_new).
func (s *Succession) Verify() error {
	old, next, err := s.check()
	if err != nil {
		return err
	}
	in, err := s.SigningInput()
	if err != nil {
		return err
	}
	if err := verifyEd25519(old, in, s.SigOld); err != nil {
		return fmt.Errorf("succession statement: sig_old (by the old key %s): %w", s.OldKeyID, err)
	}
	if err := verifyEd25519(next, in, s.SigNew); err != nil {
		return fmt.Errorf("succession statement: sig_new (by the new key %s): %w", s.NewKeyID, err)
	}
	return nil
}

// OldPeer and NewPeer are the libp2p peer IDs of the two keys; DateTime is
// the date; Until is when the transition period ends. Call them on a
// statement that verified.
func (s *Succession) OldPeer() (peer.ID, error) { return peerOfKeyID(s.OldKeyID) }

// NewPeer is the peer ID of the successor key.
func (s *Succession) NewPeer() (peer.ID, error) { return peerOfKeyID(s.NewKeyID) }

// DateTime is the statement's date (the zero time when it does not parse).
func (s *Succession) DateTime() time.Time { t, _ := parseStatementDate(s.Date); return t }

// TransitionPeriod is how long the old key still verifies after the date.
func (s *Succession) TransitionPeriod() time.Duration {
	return time.Duration(s.Transition) * time.Second
}

// Until is the end of the transition period: from then on the old key
// verifies nothing.
func (s *Succession) Until() time.Time { return s.DateTime().Add(s.TransitionPeriod()) }

func peerOfKeyID(keyID string) (peer.ID, error) {
	pub, err := PublicKeyFromKeyID(keyID)
	if err != nil {
		return "", err
	}
	return PeerIDFromPublicKey(pub)
}

// NewRevocation makes the statement, signed by signer and dated date, that
// keyID must no longer be believed. signer is the key itself or its
// successor (see Revocation.Verify).
func NewRevocation(signer *Identity, keyID string, date time.Time, reason string) (*Revocation, error) {
	r := &Revocation{Type: TypeRevocation, KeyID: keyID, Date: date.UTC().Format(time.RFC3339), Reason: reason, Signer: signer.KeyID()}
	in, err := r.SigningInput()
	if err != nil {
		return nil, err
	}
	r.Sig = base64.RawURLEncoding.EncodeToString(signer.sign(in))
	return r, nil
}

func (r *Revocation) check() (signer ed25519.PublicKey, err error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrMalformedStatement, field, fmt.Sprintf(format, args...))
	}
	if r.Type != TypeRevocation {
		return nil, bad("type", "want %q, got %q", TypeRevocation, r.Type)
	}
	if _, err := PublicKeyFromKeyID(r.KeyID); err != nil {
		return nil, bad("key_id", "%v (want a did:key key_id)", err)
	}
	if signer, err = PublicKeyFromKeyID(r.Signer); err != nil {
		return nil, bad("signer", "%v (want a did:key key_id)", err)
	}
	if _, err := parseStatementDate(r.Date); err != nil {
		return nil, bad("date", "%v", err)
	}
	if len(r.Reason) > MaxReason {
		return nil, bad("reason", "%d bytes, at most %d", len(r.Reason), MaxReason)
	}
	return signer, nil
}

// SigningInput is RevocationPrefix followed by the canonical JSON of the
// statement without sig (reason present even when empty).
func (r *Revocation) SigningInput() ([]byte, error) {
	if _, err := r.check(); err != nil {
		return nil, err
	}
	c, err := Canonicalize(revocationParams{r.Type, r.KeyID, r.Date, r.Reason, r.Signer})
	if err != nil {
		return nil, fmt.Errorf("revocation statement: %w", err)
	}
	return append([]byte(RevocationPrefix), c...), nil
}

// Verify checks the statement and its signer's right to make it: the
// revoked key itself, or — when succ is given — the successor it names,
// with succ a valid succession statement from key_id to signer. Any other
// signer is refused with ErrStatementSigner: no key may revoke a key it
// does not hold or succeed.
func (r *Revocation) Verify(succ *Succession) error {
	signer, err := r.check()
	if err != nil {
		return err
	}
	if r.Signer != r.KeyID {
		if succ == nil {
			return fmt.Errorf("%w: %s revokes %s, but a revocation is signed by the revoked key itself or by its successor, and no succession statement from %s to %s came with it",
				ErrStatementSigner, r.Signer, r.KeyID, r.KeyID, r.Signer)
		}
		if err := succ.Verify(); err != nil {
			return fmt.Errorf("revocation statement: the succession that names its signer: %w", err)
		}
		if succ.OldKeyID != r.KeyID || succ.NewKeyID != r.Signer {
			return fmt.Errorf("%w: %s revokes %s, but the succession statement with it is from %s to %s",
				ErrStatementSigner, r.Signer, r.KeyID, succ.OldKeyID, succ.NewKeyID)
		}
	}
	in, err := r.SigningInput()
	if err != nil {
		return err
	}
	if err := verifyEd25519(signer, in, r.Sig); err != nil {
		return fmt.Errorf("revocation statement: sig (by %s): %w", r.Signer, err)
	}
	return nil
}

// RevokedPeer is the peer ID of the revoked key.
func (r *Revocation) RevokedPeer() (peer.ID, error) { return peerOfKeyID(r.KeyID) }

// DateTime is the revocation date (the zero time when it does not parse).
func (r *Revocation) DateTime() time.Time { t, _ := parseStatementDate(r.Date); return t }

// DecodeSuccession reads one succession statement from JSON: at most
// MaxStatementBytes, no member it does not define, nothing after it. It
// does not verify it.
func DecodeSuccession(raw []byte) (*Succession, error) {
	var s Succession
	if err := decodeStatement(raw, &s); err != nil {
		return nil, fmt.Errorf("succession statement: %w", err)
	}
	return &s, nil
}

// DecodeRevocation reads one revocation statement, as DecodeSuccession.
func DecodeRevocation(raw []byte) (*Revocation, error) {
	var r Revocation
	if err := decodeStatement(raw, &r); err != nil {
		return nil, fmt.Errorf("revocation statement: %w", err)
	}
	return &r, nil
}

func decodeStatement(raw []byte, v any) error {
	if len(raw) > MaxStatementBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrMalformedStatement, len(raw), MaxStatementBytes)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedStatement, err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the statement", ErrMalformedStatement)
	}
	return nil
}

// RetireFor returns the identity document of the successor key of s: the
// new key active, the old key listed as retired with retired_date the
// statement's date (IFP-5 §5). base is the document of the new key (one
// active key), as NewDocument builds it; it is not modified.
func RetireFor(base *Document, s *Succession, oldCreated time.Time) (*Document, error) {
	old, _, err := s.check()
	if err != nil {
		return nil, err
	}
	d := *base
	d.Keys = append([]DocumentKey{}, base.Keys...)
	d.Keys = append(d.Keys, DocumentKey{KeyID: s.OldKeyID, Type: AlgEd25519,
		PublicKey: base64.RawURLEncoding.EncodeToString(old), Created: oldCreated.UTC().Format(time.RFC3339),
		Status: KeyRetired, RetiredDate: s.Date})
	return &d, nil
}
