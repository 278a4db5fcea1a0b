package negotiate

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/ifaced/ifaced/identity"
)

// VerifiedView is a view a peer sent, decoded and verified. The same
// bytes from the same peer need neither again, so a caller keeps it per
// peer and compares Sum.
type VerifiedView struct {
	Sum   [32]byte  // SHA-256 of Canon: what this daemon names in have_view
	Canon []byte    // the view's RFC 8785 form as received, signature included
	Doc   *Document // decoded, with the members it does not model; shared, never to be changed
	// DocHash is the hex SHA-256 of the signed bytes: Canon without its
	// signature member.
	DocHash string
}

// VerifyView decodes canon, the RFC 8785 form of a view a peer sent
// (gossip.Part.CanonicalContent gives it), and verifies its signature
// under pub over canon itself without its "signature" member: the content
// as received, so that members this daemon does not model, and forms it
// would write differently, are covered as they came. Bytes in another
// form than the signer's fail to verify; they never verify as something
// else. Decoding is DecodeView's. canon is kept in the result and must
// not be changed afterwards.
//
// A view that does not decode wraps ErrNotAView; one without a signature
// wraps identity.ErrMalformedSignature; one whose signature does not
// verify wraps identity.ErrBadSignature.
func VerifyView(pub ed25519.PublicKey, canon []byte) (VerifiedView, error) {
	vv, _, err := verifyView(pub, canon)
	return vv, err
}

func verifyView(pub ed25519.PublicKey, canon []byte) (VerifiedView, []byte, error) {
	doc, err := decodeView(canon)
	if err != nil {
		return VerifiedView{}, nil, err
	}
	if doc.Signature == nil {
		return VerifiedView{}, nil, fmt.Errorf("verifying capability view: %w: no signature", identity.ErrMalformedSignature)
	}
	signed, err := withoutMember(canon, "signature")
	if err != nil {
		return VerifiedView{}, nil, fmt.Errorf("%w: %v", ErrNotAView, err)
	}
	if err := identity.VerifyDocument(pub, doc.Signature, signed); err != nil {
		return VerifiedView{}, nil, fmt.Errorf("verifying capability view: %w", err)
	}
	docSum := sha256.Sum256(signed)
	return VerifiedView{Sum: sha256.Sum256(canon), Canon: canon, Doc: doc, DocHash: hex.EncodeToString(docSum[:])}, signed, nil
}

// withoutMember returns obj, a JSON object, without its member name (and
// the comma that separated it), as new bytes. Removing a member from a
// canonical object leaves the canonical form of the rest.
func withoutMember(obj []byte, name string) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, errors.New("not a JSON object")
	}
	for first := true; dec.PeekKind() != '}'; first = false {
		start := int(dec.InputOffset()) // before the comma, for all but the first member
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		match := tok.String() == name // before the next read, which reuses the token's buffer
		if err := dec.SkipValue(); err != nil {
			return nil, err
		}
		if !match {
			continue
		}
		end := int(dec.InputOffset())
		if first {
			// The member after it, if any, loses its comma instead.
			rest := bytes.TrimLeft(obj[end:], " \t\r\n")
			if len(rest) > 0 && rest[0] == ',' {
				end = len(obj) - len(rest) + 1
			}
		}
		return append(bytes.Clone(obj[:start]), obj[end:]...), nil
	}
	return bytes.Clone(obj), nil
}
