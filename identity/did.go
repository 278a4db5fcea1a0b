package identity

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"

	"github.com/mr-tron/base58"
)

// ErrBadKeyID is returned for a key_id or did:key that does not name an
// Ed25519 key.
var ErrBadKeyID = errors.New("not an ed25519 did:key")

const (
	didKeyPrefix = "did:key:z"
	// multicodec ed25519-pub (0xed) as an unsigned varint.
	ed25519Multicodec0, ed25519Multicodec1 = 0xed, 0x01
)

// DIDKey returns the did:key identifier of an Ed25519 public key.
func DIDKey(pub ed25519.PublicKey) string {
	b := make([]byte, 0, 2+len(pub))
	b = append(b, ed25519Multicodec0, ed25519Multicodec1)
	b = append(b, pub...)
	return didKeyPrefix + base58.Encode(b)
}

// KeyIDFor returns the IFP-5 key_id of a did:key: the did with its
// multibase part repeated as the fragment.
func KeyIDFor(did string) string {
	return did + "#" + strings.TrimPrefix(did, "did:key:")
}

// PublicKeyFromDID decodes a did:key (with or without a #fragment).
func PublicKeyFromDID(did string) (ed25519.PublicKey, error) {
	base, _, _ := strings.Cut(did, "#")
	if !strings.HasPrefix(base, didKeyPrefix) {
		return nil, fmt.Errorf("%q: %w (want did:key:z6Mk…)", did, ErrBadKeyID)
	}
	raw, err := base58.Decode(strings.TrimPrefix(base, didKeyPrefix))
	if err != nil {
		return nil, fmt.Errorf("%q: %w: base58: %v", did, ErrBadKeyID, err)
	}
	if len(raw) != 2+ed25519.PublicKeySize || raw[0] != ed25519Multicodec0 || raw[1] != ed25519Multicodec1 {
		return nil, fmt.Errorf("%q: %w: want multicodec ed25519-pub and %d key bytes", did, ErrBadKeyID, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw[2:]), nil
}

// PublicKeyFromKeyID decodes the key of a key_id of the form KeyIDFor
// returns, checking that the fragment names the same key as the did.
func PublicKeyFromKeyID(keyID string) (ed25519.PublicKey, error) {
	did, frag, ok := strings.Cut(keyID, "#")
	if !ok {
		return nil, fmt.Errorf("key_id %q: %w: no #fragment", keyID, ErrBadKeyID)
	}
	if "did:key:"+frag != did {
		return nil, fmt.Errorf("key_id %q: %w: fragment does not match the did", keyID, ErrBadKeyID)
	}
	return PublicKeyFromDID(did)
}
