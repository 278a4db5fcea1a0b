package identity

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Domain-separation prefixes of the signing inputs (see the package comment).
const (
	MessagePrefix  = "ifp/5/message-signature/v1\n"
	DocumentPrefix = "ifp/7/capability-document-signature/v1\n"
)

// Signature algorithms of IFP-5 §3.4.
const (
	AlgEd25519    = "ed25519"
	AlgHMACSHA256 = "hmac-sha256"
)

var (
	// ErrBadSignature means the signature does not verify under the key.
	ErrBadSignature = errors.New("signature does not verify")
	// ErrMalformedSignature means a signature entry is not well formed.
	ErrMalformedSignature = errors.New("malformed signature")
)

// MessageSignature is one entry of an IFP-4 message's security.signatures.
type MessageSignature struct {
	Alg           string   `json:"alg"`
	KeyID         string   `json:"key_id"`
	Created       string   `json:"created"`
	SignedHeaders []string `json:"signed_headers"`
	SignedBody    bool     `json:"signed_body"`
	Sig           string   `json:"sig"`
}

// DocumentSignature is the signature carried by a capability document served
// on its own.
type DocumentSignature struct {
	Alg     string `json:"alg"`
	KeyID   string `json:"key_id"`
	Created string `json:"created"`
	Sig     string `json:"sig"`
}

// messageParams is the signature object inside the signing input: every
// parameter but sig, with signed_headers and signed_body always present.
type messageParams struct {
	Alg           string   `json:"alg"`
	KeyID         string   `json:"key_id"`
	Created       string   `json:"created"`
	SignedHeaders []string `json:"signed_headers"`
	SignedBody    bool     `json:"signed_body"`
}

// appendCanonical appends Canonicalize(p), written member by member in
// RFC 8785 order (alg, created, key_id, signed_body, signed_headers).
func (p messageParams) appendCanonical(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"alg":`...)
	var ok [3]bool
	dst, ok[0] = AppendCanonicalString(dst, p.Alg)
	dst = append(dst, `,"created":`...)
	dst, ok[1] = AppendCanonicalString(dst, p.Created)
	dst = append(dst, `,"key_id":`...)
	dst, ok[2] = AppendCanonicalString(dst, p.KeyID)
	if ok != [3]bool{true, true, true} {
		c, err := Canonicalize(p) // a string that is not UTF-8: the engine's bytes
		return append(dst[:start], c...), err
	}
	dst = append(dst, `,"signed_body":`...)
	dst = strconv.AppendBool(dst, p.SignedBody)
	dst = append(dst, `,"signed_headers":`...)
	dst, err := AppendCanonical(dst, p.SignedHeaders)
	if err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

type documentParams struct {
	Alg     string `json:"alg"`
	KeyID   string `json:"key_id"`
	Created string `json:"created"`
}

// checkParams rejects what would make a signing input ambiguous or
// unverifiable before any bytes are computed.
func (s *MessageSignature) checkParams() error {
	if s.Alg != AlgEd25519 && s.Alg != AlgHMACSHA256 {
		return fmt.Errorf("%w: alg %q (supported: %s, %s)", ErrMalformedSignature, s.Alg, AlgEd25519, AlgHMACSHA256)
	}
	if s.KeyID == "" {
		return fmt.Errorf("%w: key_id is empty", ErrMalformedSignature)
	}
	if _, err := time.Parse(time.RFC3339, s.Created); err != nil {
		return fmt.Errorf("%w: created %q is not an RFC 3339 time", ErrMalformedSignature, s.Created)
	}
	if len(s.SignedHeaders) == 0 {
		return fmt.Errorf("%w: signed_headers is empty", ErrMalformedSignature)
	}
	// Sorted, a name listed twice sits next to itself: one copy instead
	// of a map, on every signature made or checked.
	names := slices.Clone(s.SignedHeaders)
	slices.Sort(names)
	for i, h := range names {
		if h == "" || (i > 0 && names[i-1] == h) {
			return fmt.Errorf("%w: signed_headers lists %q twice or empty", ErrMalformedSignature, h)
		}
	}
	return nil
}

// MessageSigningInput returns the bytes a message signature covers.
// headers must hold a value (nil for an absent header) for every name in
// sig.SignedHeaders and nothing else; bodyCanonical is the canonical JSON
// of the IFP-4 body and is used only when sig.SignedBody.
func MessageSigningInput(sig *MessageSignature, headers map[string]any, bodyCanonical []byte) ([]byte, error) {
	if err := sig.checkParams(); err != nil {
		return nil, err
	}
	if len(headers) != len(sig.SignedHeaders) {
		return nil, fmt.Errorf("%w: %d header values for %d signed_headers", ErrMalformedSignature, len(headers), len(sig.SignedHeaders))
	}
	for _, h := range sig.SignedHeaders {
		if _, ok := headers[h]; !ok {
			return nil, fmt.Errorf("%w: no value for signed header %q", ErrMalformedSignature, h)
		}
	}
	if sig.SignedBody && len(bodyCanonical) == 0 {
		return nil, fmt.Errorf("%w: signed_body is true but there is no body", ErrMalformedSignature)
	}
	// One buffer, members in RFC 8785 order: body, headers, signature.
	out := make([]byte, 0, len(MessagePrefix)+len(bodyCanonical)+1024)
	out = append(out, MessagePrefix...)
	out = append(out, '{')
	if sig.SignedBody {
		out = append(out, `"body":`...)
		out = append(out, bodyCanonical...)
		out = append(out, ',')
	}
	out = append(out, `"headers":`...)
	out, err := AppendCanonical(out, headers)
	if err != nil {
		return nil, fmt.Errorf("signed headers: %w", err)
	}
	out = append(out, `,"signature":`...)
	if out, err = (messageParams{sig.Alg, sig.KeyID, sig.Created, sig.SignedHeaders, sig.SignedBody}).appendCanonical(out); err != nil {
		return nil, fmt.Errorf("signature parameters: %w", err)
	}
	return append(out, '}'), nil
}

// DocumentSigningInput returns the bytes a capability-document signature
// covers, given the canonical JSON of the document without its signature.
func DocumentSigningInput(sig *DocumentSignature, docCanonical []byte) ([]byte, error) {
	if sig.Alg != AlgEd25519 {
		return nil, fmt.Errorf("%w: document alg %q (supported: %s)", ErrMalformedSignature, sig.Alg, AlgEd25519)
	}
	if _, err := time.Parse(time.RFC3339, sig.Created); err != nil {
		return nil, fmt.Errorf("%w: created %q is not an RFC 3339 time", ErrMalformedSignature, sig.Created)
	}
	if sig.KeyID == "" {
		return nil, fmt.Errorf("%w: key_id is empty", ErrMalformedSignature)
	}
	pc, err := Canonicalize(documentParams{sig.Alg, sig.KeyID, sig.Created})
	if err != nil {
		return nil, fmt.Errorf("signature parameters: %w", err)
	}
	obj := canonicalObject([]byte("document"), docCanonical, []byte("signature"), pc)
	return append([]byte(DocumentPrefix), obj...), nil
}

// SignMessage fills sig.Sig (and Alg, KeyID when empty) with an Ed25519
// signature by id over the message signing input.
func (id *Identity) SignMessage(sig *MessageSignature, headers map[string]any, bodyCanonical []byte) error {
	if sig.Alg == "" {
		sig.Alg = AlgEd25519
	}
	if sig.KeyID == "" {
		sig.KeyID = id.KeyID()
	}
	if sig.Alg != AlgEd25519 {
		return fmt.Errorf("%w: SignMessage makes %s signatures, not %q", ErrMalformedSignature, AlgEd25519, sig.Alg)
	}
	input, err := MessageSigningInput(sig, headers, bodyCanonical)
	if err != nil {
		return err
	}
	sig.Sig = base64.RawURLEncoding.EncodeToString(id.sign(input))
	return nil
}

// VerifyMessage checks an Ed25519 message signature under pub.
func VerifyMessage(pub ed25519.PublicKey, sig *MessageSignature, headers map[string]any, bodyCanonical []byte) error {
	if sig.Alg != AlgEd25519 {
		return fmt.Errorf("%w: want alg %s, got %q", ErrMalformedSignature, AlgEd25519, sig.Alg)
	}
	input, err := MessageSigningInput(sig, headers, bodyCanonical)
	if err != nil {
		return err
	}
	return verifyEd25519(pub, input, sig.Sig)
}

// SignDocument fills sig with an Ed25519 signature by id over the document
// signing input. created is the signature time.
func (id *Identity) SignDocument(docCanonical []byte, created time.Time) (*DocumentSignature, error) {
	sig := &DocumentSignature{Alg: AlgEd25519, KeyID: id.KeyID(), Created: created.UTC().Format(time.RFC3339)}
	input, err := DocumentSigningInput(sig, docCanonical)
	if err != nil {
		return nil, err
	}
	sig.Sig = base64.RawURLEncoding.EncodeToString(id.sign(input))
	return sig, nil
}

// VerifyDocument checks a capability-document signature under pub.
func VerifyDocument(pub ed25519.PublicKey, sig *DocumentSignature, docCanonical []byte) error {
	input, err := DocumentSigningInput(sig, docCanonical)
	if err != nil {
		return err
	}
	return verifyEd25519(pub, input, sig.Sig)
}

func verifyEd25519(pub ed25519.PublicKey, input []byte, sig string) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: public key has %d bytes, want %d", ErrMalformedSignature, len(pub), ed25519.PublicKeySize)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: sig is not canonical unpadded base64url: %v", ErrMalformedSignature, err)
	}
	if len(raw) != ed25519.SignatureSize {
		return fmt.Errorf("%w: sig has %d bytes, want %d", ErrMalformedSignature, len(raw), ed25519.SignatureSize)
	}
	if !ed25519.Verify(pub, input, raw) {
		return ErrBadSignature
	}
	return nil
}

// Covers reports whether sig covers every header in want.
func (s *MessageSignature) Covers(want []string) (missing []string) {
	for _, h := range want {
		if !slices.Contains(s.SignedHeaders, h) {
			missing = append(missing, h)
		}
	}
	return missing
}
