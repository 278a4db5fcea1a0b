package identity

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mr-tron/base58"
)

// Introduction tokens (IFP-5 level 0). A human mints one with
// `ifaced introduce`, hands the printed string to the other human by any
// channel, and the other daemon proves possession in its greeting with an
// HMAC-SHA256 over the greeting's signing input. The secret never travels
// in a message.

const (
	introPrefix  = "ifintro1"
	introIDBytes = 8
	// MaxIntroLabel bounds the label humans give a token.
	MaxIntroLabel = 128
)

var (
	// ErrBadIntroduction: the string is not an introduction token.
	ErrBadIntroduction = errors.New("not a valid introduction token")
	// ErrIntroExpired: the token is past its expiry.
	ErrIntroExpired = errors.New("introduction token expired")
	// ErrIntroRevoked: the issuer revoked the token.
	ErrIntroRevoked = errors.New("introduction token revoked")
	// ErrIntroBound: the token was already used by another peer.
	ErrIntroBound = errors.New("introduction token is bound to another peer")
	// ErrBadIntroProof: the HMAC proof does not match.
	ErrBadIntroProof = errors.New("introduction proof does not verify")
)

// Introduction is a level-0 introduction token.
type Introduction struct {
	ID      string    // 16 hex digits, public: names the token in key_id "intro:<ID>"
	Issuer  string    // the minting daemon's did:key
	Label   string    // the human's note ("Bob from the conference")
	Expires time.Time // UTC, second precision
	Secret  []byte    // 32 bytes
}

type introWire struct {
	V       int    `json:"v"`
	ID      string `json:"id"`
	Issuer  string `json:"iss"`
	Label   string `json:"label"`
	Expires string `json:"exp"`
	Secret  string `json:"sec"`
}

// MintIntroduction creates a token issued by issuer (a did:key) valid for
// ttl from now. r is crypto/rand when nil.
func MintIntroduction(issuer, label string, ttl time.Duration, now time.Time, r io.Reader) (*Introduction, error) {
	if r == nil {
		r = rand.Reader
	}
	if _, err := PublicKeyFromDID(issuer); err != nil {
		return nil, fmt.Errorf("minting introduction: issuer: %w", err)
	}
	if err := checkIntroLabel(label); err != nil {
		return nil, fmt.Errorf("minting introduction: %w", err)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("minting introduction: expiry must be in the future, got %s", ttl)
	}
	buf := make([]byte, introIDBytes+32)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("minting introduction: reading randomness: %w", err)
	}
	return &Introduction{
		ID:      hex.EncodeToString(buf[:introIDBytes]),
		Issuer:  issuer,
		Label:   label,
		Expires: now.Add(ttl).UTC().Truncate(time.Second),
		Secret:  buf[introIDBytes:],
	}, nil
}

func checkIntroLabel(label string) error {
	if strings.TrimSpace(label) == "" {
		return errors.New("label is required (who is this token for?)")
	}
	if len(label) > MaxIntroLabel {
		return fmt.Errorf("label is %d bytes, at most %d", len(label), MaxIntroLabel)
	}
	return nil
}

// Encode returns the token as one word a human can paste: "ifintro1"
// followed by base58 of the token's JSON and a 4-byte SHA-256 checksum, so
// a mangled paste is caught before any network use.
func (t *Introduction) Encode() string {
	payload, _ := json.Marshal(introWire{
		V: 1, ID: t.ID, Issuer: t.Issuer, Label: t.Label,
		Expires: t.Expires.UTC().Format(time.RFC3339),
		Secret:  base64.RawURLEncoding.EncodeToString(t.Secret),
	})
	sum := sha256.Sum256(payload)
	return introPrefix + base58.Encode(append(payload, sum[:4]...))
}

// ParseIntroduction decodes a token made by Encode.
func ParseIntroduction(s string) (*Introduction, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, introPrefix) {
		return nil, fmt.Errorf("%w: it should start with %q", ErrBadIntroduction, introPrefix)
	}
	raw, err := base58.Decode(strings.TrimPrefix(s, introPrefix))
	if err != nil || len(raw) < 5 {
		return nil, fmt.Errorf("%w: not base58 (was it copied whole?)", ErrBadIntroduction)
	}
	payload, check := raw[:len(raw)-4], raw[len(raw)-4:]
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:4], check) {
		return nil, fmt.Errorf("%w: checksum mismatch (was it copied whole?)", ErrBadIntroduction)
	}
	var w introWire
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadIntroduction, err)
	}
	if w.V != 1 {
		return nil, fmt.Errorf("%w: version %d (this ifaced reads version 1)", ErrBadIntroduction, w.V)
	}
	t := &Introduction{ID: w.ID, Issuer: w.Issuer, Label: w.Label}
	if id, err := hex.DecodeString(w.ID); err != nil || len(id) != introIDBytes {
		return nil, fmt.Errorf("%w: id %q", ErrBadIntroduction, w.ID)
	}
	if _, err := PublicKeyFromDID(w.Issuer); err != nil {
		return nil, fmt.Errorf("%w: issuer: %v", ErrBadIntroduction, err)
	}
	if err := checkIntroLabel(w.Label); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadIntroduction, err)
	}
	if t.Expires, err = time.Parse(time.RFC3339, w.Expires); err != nil {
		return nil, fmt.Errorf("%w: expiry %q", ErrBadIntroduction, w.Expires)
	}
	if t.Secret, err = base64.RawURLEncoding.DecodeString(w.Secret); err != nil || len(t.Secret) != 32 {
		return nil, fmt.Errorf("%w: secret must be 32 bytes", ErrBadIntroduction)
	}
	return t, nil
}

// KeyID is the key_id of the token's proofs.
func (t *Introduction) KeyID() string { return "intro:" + t.ID }

// Prove fills sig.Sig with the HMAC-SHA256 proof over the message signing
// input; sig.Alg and sig.KeyID are set to the token's.
func (t *Introduction) Prove(sig *MessageSignature, headers map[string]any, bodyCanonical []byte) error {
	sig.Alg, sig.KeyID = AlgHMACSHA256, t.KeyID()
	input, err := MessageSigningInput(sig, headers, bodyCanonical)
	if err != nil {
		return err
	}
	sig.Sig = base64.RawURLEncoding.EncodeToString(t.mac(input))
	return nil
}

func (t *Introduction) mac(input []byte) []byte {
	m := hmac.New(sha256.New, t.Secret)
	m.Write(input)
	return m.Sum(nil)
}

// IssuedIntroduction is the issuer's record of a token it minted.
type IssuedIntroduction struct {
	Introduction
	BoundPeer string // the first peer that used it; "" until then
	Revoked   bool
}

// Admit checks a proof presented by peer at now. On the first valid use it
// binds the token to peer (the caller persists the record); afterwards only
// that peer is admitted.
func (r *IssuedIntroduction) Admit(peer string, sig *MessageSignature, headers map[string]any, bodyCanonical []byte, now time.Time) error {
	if sig.Alg != AlgHMACSHA256 || sig.KeyID != r.KeyID() {
		return fmt.Errorf("%w: proof names %s %q, want %s %q", ErrBadIntroProof, sig.Alg, sig.KeyID, AlgHMACSHA256, r.KeyID())
	}
	// The proof is checked first so that only a holder of the secret learns
	// anything about the token's state.
	input, err := MessageSigningInput(sig, headers, bodyCanonical)
	if err != nil {
		return err
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig.Sig)
	if err != nil || !hmac.Equal(got, r.mac(input)) {
		return fmt.Errorf("token %s: %w", r.ID, ErrBadIntroProof)
	}
	if r.Revoked {
		return fmt.Errorf("token %s (%q): %w; ask its issuer for a new one", r.ID, r.Label, ErrIntroRevoked)
	}
	if now.After(r.Expires) {
		return fmt.Errorf("token %s (%q): %w on %s; ask its issuer for a new one", r.ID, r.Label, ErrIntroExpired, r.Expires.Format(time.RFC3339))
	}
	if r.BoundPeer != "" && r.BoundPeer != peer {
		return fmt.Errorf("token %s (%q): %w", r.ID, r.Label, ErrIntroBound)
	}
	r.BoundPeer = peer
	return nil
}
