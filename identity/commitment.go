package identity

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Pre-rotation: a key commits, ahead of its succession, to the digest of
// the key that will succeed it, so that whoever steals the current key
// cannot rotate the identity to a key of their own (the next key is kept
// offline, and only its digest is published). The form is in the package
// comment ("Pre-rotation"), pinned by testdata/lifecycle-vectors.json.

// Pre-rotation constants.
const (
	// CommitmentPrefix is the domain-separation prefix of a commitment
	// statement's signing input.
	CommitmentPrefix = "ifp/5/key-commitment/v1\n"
	// NextKeyPrefix is the domain-separation prefix of the digest input.
	NextKeyPrefix = "ifp/5/next-key/v1\n"
	// TypeCommitment is a commitment statement's "type".
	TypeCommitment = "key_commitment"
	// digestAlg is the algorithm label a next_key_digest starts with.
	digestAlg = "sha256:"
)

// NextKeyDigest is the commitment to pub as the next key:
//
//	"sha256:" || base64url-unpadded(SHA-256(NextKeyPrefix || pub))
//
// where pub is the 32 bytes of the Ed25519 public key: 50 characters.
func NextKeyDigest(pub ed25519.PublicKey) string {
	h := sha256.New()
	h.Write([]byte(NextKeyPrefix))
	h.Write(pub)
	return digestAlg + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// checkDigest rejects a next_key_digest not of the form NextKeyDigest makes.
func checkDigest(d string) error {
	rest, ok := strings.CutPrefix(d, digestAlg)
	if !ok {
		return fmt.Errorf("%q: want %q followed by the unpadded base64url SHA-256 digest (see identity.NextKeyDigest)", d, digestAlg)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || len(raw) != sha256.Size {
		return fmt.Errorf("%q: want %q followed by 43 unpadded base64url characters (32 bytes)", d, digestAlg)
	}
	return nil
}

// Commits reports whether digest is the commitment to the key of keyID.
func Commits(digest, keyID string) bool {
	pub, err := PublicKeyFromKeyID(keyID)
	return err == nil && digest == NextKeyDigest(pub)
}

// Commitment is a commitment statement: key_id commits to the key whose
// digest is next_key_digest as its successor. Signed by key_id.
type Commitment struct {
	Type          string `json:"type"`
	KeyID         string `json:"key_id"`
	NextKeyDigest string `json:"next_key_digest"`
	Date          string `json:"date"`
	Sig           string `json:"sig"`
}

type commitmentParams struct {
	Type          string `json:"type"`
	KeyID         string `json:"key_id"`
	NextKeyDigest string `json:"next_key_digest"`
	Date          string `json:"date"`
}

// NewCommitment makes the statement, signed by current, that the key
// after it is next, dated date.
func NewCommitment(current *Identity, next ed25519.PublicKey, date time.Time) (*Commitment, error) {
	c := &Commitment{Type: TypeCommitment, KeyID: current.KeyID(), NextKeyDigest: NextKeyDigest(next),
		Date: date.UTC().Format(time.RFC3339)}
	in, err := c.SigningInput()
	if err != nil {
		return nil, err
	}
	c.Sig = base64.RawURLEncoding.EncodeToString(current.sign(in))
	return c, nil
}

func (c *Commitment) check() (ed25519.PublicKey, error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrMalformedStatement, field, fmt.Sprintf(format, args...))
	}
	if c.Type != TypeCommitment {
		return nil, bad("type", "want %q, got %q", TypeCommitment, c.Type)
	}
	pub, err := PublicKeyFromKeyID(c.KeyID)
	if err != nil {
		return nil, bad("key_id", "%v (want a did:key key_id, did:key:z6Mk…#z6Mk…)", err)
	}
	if err := checkDigest(c.NextKeyDigest); err != nil {
		return nil, bad("next_key_digest", "%v", err)
	}
	if c.NextKeyDigest == NextKeyDigest(pub) {
		return nil, bad("next_key_digest", "is the digest of key_id itself; a commitment names the key after it")
	}
	if _, err := parseStatementDate(c.Date); err != nil {
		return nil, bad("date", "%v", err)
	}
	return pub, nil
}

// SigningInput is CommitmentPrefix followed by the canonical JSON of the
// statement without sig.
func (c *Commitment) SigningInput() ([]byte, error) {
	if _, err := c.check(); err != nil {
		return nil, err
	}
	j, err := Canonicalize(commitmentParams{c.Type, c.KeyID, c.NextKeyDigest, c.Date})
	if err != nil {
		return nil, fmt.Errorf("commitment statement: %w", err)
	}
	return append([]byte(CommitmentPrefix), j...), nil
}

// Verify checks that the statement is well formed and that key_id signed it.
func (c *Commitment) Verify() error {
	pub, err := c.check()
	if err != nil {
		return err
	}
	in, err := c.SigningInput()
	if err != nil {
		return err
	}
	if err := verifyEd25519(pub, in, c.Sig); err != nil {
		return fmt.Errorf("commitment statement: sig (by %s): %w", c.KeyID, err)
	}
	return nil
}

// Peer is the peer ID of the committing key.
func (c *Commitment) Peer() (peer.ID, error) { return peerOfKeyID(c.KeyID) }

// DateTime is the statement's date (the zero time when it does not parse).
func (c *Commitment) DateTime() time.Time { t, _ := parseStatementDate(c.Date); return t }

// DecodeCommitment reads one commitment statement, as DecodeSuccession.
func DecodeCommitment(raw []byte) (*Commitment, error) {
	var c Commitment
	if err := decodeStatement(raw, &c); err != nil {
		return nil, fmt.Errorf("commitment statement: %w", err)
	}
	return &c, nil
}
