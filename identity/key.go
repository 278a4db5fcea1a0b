package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

var (
	// ErrKeyExists is returned by SaveKey when a key file is already there:
	// a daemon's key is its identity and is never silently replaced.
	ErrKeyExists = errors.New("key file already exists")
	// ErrKeyPermissions is returned by LoadKey for a key file that group or
	// others can read or write.
	ErrKeyPermissions = errors.New("key file is accessible by other users")
	// ErrNoKey is returned by LoadKey when there is no key file yet.
	ErrNoKey = errors.New("no key file")
)

const pemType = "PRIVATE KEY"

// Identity is a daemon's Ed25519 key with the identifiers derived from it.
// Its String and LogValue show only the peer ID, so it is safe to log.
type Identity struct {
	priv   ed25519.PrivateKey
	pub    ed25519.PublicKey
	peerID peer.ID
	did    string
}

// Generate creates a new identity from r (crypto/rand when nil).
func Generate(r io.Reader) (*Identity, error) {
	if r == nil {
		r = rand.Reader
	}
	_, priv, err := ed25519.GenerateKey(r)
	if err != nil {
		return nil, fmt.Errorf("generating ed25519 key: %w", err)
	}
	return New(priv)
}

// FromSeed derives an identity from a 32-byte RFC 8032 seed.
func FromSeed(seed []byte) (*Identity, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("ed25519 seed: want %d bytes, got %d", ed25519.SeedSize, len(seed))
	}
	return New(ed25519.NewKeyFromSeed(seed))
}

// New wraps an Ed25519 private key.
func New(priv ed25519.PrivateKey) (*Identity, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("ed25519 private key: want %d bytes, got %d", ed25519.PrivateKeySize, len(priv))
	}
	pub := priv.Public().(ed25519.PublicKey)
	pid, err := PeerIDFromPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return &Identity{priv: priv, pub: pub, peerID: pid, did: DIDKey(pub)}, nil
}

// PeerID is the libp2p peer ID of the key.
func (id *Identity) PeerID() peer.ID { return id.peerID }

// DID is the key's did:key identifier.
func (id *Identity) DID() string { return id.did }

// KeyID is the IFP-5 key_id of the key: did#fragment.
func (id *Identity) KeyID() string { return KeyIDFor(id.did) }

// PublicKey returns the raw Ed25519 public key.
func (id *Identity) PublicKey() ed25519.PublicKey { return id.pub }

// Fingerprint is the string humans compare out of band.
func (id *Identity) Fingerprint() string { return Fingerprint(id.pub) }

// LibP2PKey returns the key in the form go-libp2p takes for a host identity.
func (id *Identity) LibP2PKey() crypto.PrivKey {
	k, err := crypto.UnmarshalEd25519PrivateKey(id.priv)
	if err != nil {
		// New checked the length, which is all this can fail on.
		panic(fmt.Sprintf("identity: converting a checked ed25519 key: %v", err))
	}
	return k
}

// sign signs input with the private key.
func (id *Identity) sign(input []byte) []byte { return ed25519.Sign(id.priv, input) }

// String shows the peer ID only.
func (id *Identity) String() string { return id.peerID.String() }

// LogValue keeps the private key out of logs.
func (id *Identity) LogValue() slog.Value { return slog.StringValue(id.peerID.String()) }

// Fingerprint returns "SHA256:" + unpadded base64 of SHA-256(pub).
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// PeerIDFromPublicKey derives the libp2p peer ID of an Ed25519 public key.
func PeerIDFromPublicKey(pub ed25519.PublicKey) (peer.ID, error) {
	lk, err := crypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("converting public key for libp2p: %w", err)
	}
	pid, err := peer.IDFromPublicKey(lk)
	if err != nil {
		return "", fmt.Errorf("deriving peer ID: %w", err)
	}
	return pid, nil
}

// PublicKeyFromPeerID extracts the Ed25519 public key embedded in a peer ID.
func PublicKeyFromPeerID(pid peer.ID) (ed25519.PublicKey, error) {
	lk, err := pid.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("extracting public key from peer ID %s: %w", pid, err)
	}
	if lk.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("peer ID %s: key type %s, want Ed25519", pid, lk.Type())
	}
	raw, err := lk.Raw()
	if err != nil {
		return nil, fmt.Errorf("peer ID %s: reading public key: %w", pid, err)
	}
	return ed25519.PublicKey(raw), nil
}

// SaveKey writes the identity's key to path as PKCS#8 PEM with mode 0600,
// creating parent directories with mode 0700. It never overwrites: an
// existing file gives ErrKeyExists.
func SaveKey(path string, id *Identity) error {
	der, err := x509.MarshalPKCS8PrivateKey(id.priv)
	if err != nil {
		return fmt.Errorf("encoding key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating key directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("saving key to %s: %w (remove it first if you really mean to replace this daemon's identity)", path, ErrKeyExists)
	}
	if err != nil {
		return fmt.Errorf("saving key: %w", err)
	}
	werr := pem.Encode(f, &pem.Block{Type: pemType, Bytes: der})
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return fmt.Errorf("writing key to %s: %w", path, werr)
	}
	return nil
}

// LoadKey reads a key written by SaveKey. It refuses a file that group or
// others can access, and says how to fix it.
func LoadKey(path string) (*Identity, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("loading key %s: %w (run `ifaced init` to create one)", path, ErrNoKey)
	}
	if err != nil {
		return nil, fmt.Errorf("loading key: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("loading key %s: %w (mode %#o); run `chmod 600 %s`", path, ErrKeyPermissions, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading key: %w", err)
	}
	block, rest := pem.Decode(b)
	if block == nil || block.Type != pemType {
		return nil, fmt.Errorf("loading key %s: not a PEM %q block", path, pemType)
	}
	if len(bytesTrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("loading key %s: unexpected data after the PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("loading key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("loading key %s: key type %T, want Ed25519", path, k)
	}
	return New(priv)
}

func bytesTrimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}
