package auditproof

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/identity"
	"golang.org/x/mod/sumdb/note"
)

// Checkpoint is what a checkpoint says of a day's tree: its origin
// ("ifaced-audit/<day>"), how many leaves it has, the root hash over them,
// and when the daemon signed it.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   Hash
	Time   time.Time
}

// Origin is the origin line of the checkpoints of day (YYYY-MM-DD).
func Origin(day string) string { return identity.CheckpointPrefix + day }

// DayOf is the day an origin names, or "" when it names none.
func DayOf(origin string) string {
	day, ok := strings.CutPrefix(origin, identity.CheckpointPrefix)
	if !ok || len(day) != len("2006-01-02") {
		return ""
	}
	if _, err := time.Parse("2006-01-02", day); err != nil {
		return ""
	}
	return day
}

// Text is the checkpoint's note text (C2SP tlog-checkpoint): the origin,
// the tree size in decimal, the root hash in standard base64, and one
// extension line "time <RFC 3339, UTC, seconds>", each ending in a newline.
func (c Checkpoint) Text() string {
	return fmt.Sprintf("%s\n%d\n%s\ntime %s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]),
		c.Time.UTC().Format(time.RFC3339))
}

// ErrCheckpoint: a checkpoint's text or signature is not as the audit
// format says.
var ErrCheckpoint = errors.New("malformed checkpoint")

// ParseCheckpoint reads a checkpoint's note text (without its signature
// lines). Extension lines other than "time" are ignored, as C2SP says.
func ParseCheckpoint(text string) (Checkpoint, error) {
	if !strings.HasSuffix(text, "\n") {
		return Checkpoint{}, fmt.Errorf("%w: the text does not end with a newline", ErrCheckpoint)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return Checkpoint{}, fmt.Errorf("%w: %d lines, want the origin, the tree size and the root hash", ErrCheckpoint, len(lines))
	}
	c := Checkpoint{Origin: lines[0]}
	if c.Origin == "" {
		return Checkpoint{}, fmt.Errorf("%w: empty origin", ErrCheckpoint)
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("%w: tree size %q is not a decimal number without leading zeros", ErrCheckpoint, lines[1])
	}
	c.Size = n
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != HashSize {
		return Checkpoint{}, fmt.Errorf("%w: root hash %q is not %d bytes in standard base64", ErrCheckpoint, lines[2], HashSize)
	}
	copy(c.Root[:], root)
	for _, l := range lines[3:] {
		if v, ok := strings.CutPrefix(l, "time "); ok {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return Checkpoint{}, fmt.Errorf("%w: time %q is not RFC 3339", ErrCheckpoint, v)
			}
			c.Time = t.UTC()
		}
	}
	return c, nil
}

// Signer signs checkpoints: the daemon's identity (identity.Identity).
type Signer interface {
	DID() string
	PublicKey() ed25519.PublicKey
	SignCheckpoint(text []byte) ([]byte, error)
}

// noteSigner is a Signer as the note package takes one: its name is the
// did:key of the key.
type noteSigner struct {
	s    Signer
	hash uint32
}

func (n noteSigner) Name() string                    { return n.s.DID() }
func (n noteSigner) KeyHash() uint32                 { return n.hash }
func (n noteSigner) Sign(msg []byte) ([]byte, error) { return n.s.SignCheckpoint(msg) }

// KeyHash is the note key hash of an Ed25519 key named name: the first
// four bytes, big-endian, of SHA-256(name || "\n" || 0x01 || key).
func KeyHash(name string, pub ed25519.PublicKey) (uint32, error) {
	v, err := verifierFor(name, pub)
	if err != nil {
		return 0, err
	}
	return v.KeyHash(), nil
}

func verifierFor(name string, pub ed25519.PublicKey) (note.Verifier, error) {
	vkey, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: %v", ErrCheckpoint, name, err)
	}
	return note.NewVerifier(vkey)
}

// Sign returns c as a signed note, signed by s under the name of its
// did:key.
func Sign(c Checkpoint, s Signer) ([]byte, error) {
	h, err := KeyHash(s.DID(), s.PublicKey())
	if err != nil {
		return nil, err
	}
	msg, err := note.Sign(&note.Note{Text: c.Text()}, noteSigner{s: s, hash: h})
	if err != nil {
		return nil, fmt.Errorf("signing checkpoint: %w", err)
	}
	return msg, nil
}

// ErrUntrustedSigner: a checkpoint is signed, but by no key the verifier
// was told to trust.
var ErrUntrustedSigner = errors.New("checkpoint signed by a key that is not trusted")

// Open verifies a signed checkpoint: every signature line must name a
// did:key (its name), and at least one of them a key trusted says yes to,
// whose signature verifies. It returns the checkpoint and the did:key
// that signed it. A signature that does not verify is an error wrapping
// ErrCheckpoint that says so; a note signed only by keys not trusted is
// an error wrapping ErrUntrustedSigner that names them.
func Open(msg []byte, trusted func(did string) bool) (Checkpoint, string, error) {
	n, err := note.Open(msg, verifiers{trusted})
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		var names []string
		for _, s := range unverified.Note.UnverifiedSigs {
			names = append(names, s.Name)
		}
		return Checkpoint{}, "", fmt.Errorf("%w: signed by %s", ErrUntrustedSigner, strings.Join(names, ", "))
	case errors.As(err, &invalid):
		return Checkpoint{}, "", fmt.Errorf("%w: the signature of %s does not verify", ErrCheckpoint, invalid.Name)
	case err != nil:
		return Checkpoint{}, "", fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, "", err
	}
	return c, n.Sigs[0].Name, nil
}

// verifiers finds the verifier of a did:key the caller trusts.
type verifiers struct{ trusted func(string) bool }

func (v verifiers) Verifier(name string, hash uint32) (note.Verifier, error) {
	if v.trusted == nil || !v.trusted(name) {
		return nil, &note.UnknownVerifierError{Name: name, KeyHash: hash}
	}
	pub, err := identity.PublicKeyFromDID(name)
	if err != nil {
		return nil, fmt.Errorf("signature name %q is not a did:key: %v", name, err)
	}
	ver, err := verifierFor(name, pub)
	if err != nil {
		return nil, err
	}
	if ver.KeyHash() != hash {
		return nil, &note.UnknownVerifierError{Name: name, KeyHash: hash}
	}
	return ver, nil
}

// Signers lists the names on a signed note's signature lines, without
// verifying anything: what a report says signed a checkpoint that does
// not verify.
func Signers(msg []byte) []string {
	s := string(msg)
	i := strings.LastIndex(s, "\n\n")
	if i < 0 {
		return nil
	}
	var names []string
	for _, l := range strings.Split(strings.TrimSuffix(s[i+2:], "\n"), "\n") {
		if rest, ok := strings.CutPrefix(l, "— "); ok {
			name, _, _ := strings.Cut(rest, " ")
			names = append(names, name)
		}
	}
	return names
}
