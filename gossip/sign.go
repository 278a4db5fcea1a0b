package gossip

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ifaced/ifaced/identity"
)

// HeaderNames lists every IFP-4 header in IFP-4 §2.1 order. ifaced signs
// all of them (absent ones as null), so no header can be added, removed or
// changed after signing; extensions included, against extension injection
// (IFP-4 security considerations).
var HeaderNames = []string{
	"message_id", "date", "from", "to", "conversation_id", "sequence", "phase", "content_type",
	"subject", "thread", "languages", "disclosure", "persona", "priority", "ttl_seconds",
	"capabilities", "extensions",
}

// RequiredSignedHeaders must be covered by any signature ifaced accepts:
// every header, because every one of them can drive a decision (which
// capability is requested, which request is answered, the proposed tier)
// and a relay or inbox between the peers must not be able to change one.
var RequiredSignedHeaders = HeaderNames

var (
	// ErrUnsigned: the message carries no Ed25519 signature.
	ErrUnsigned = errors.New("message is not signed")
	// ErrWrongKey: the message is signed, but not by the expected key.
	ErrWrongKey = errors.New("message is signed by another key")
	// ErrWeakSignature: the signature leaves required headers or the body unsigned.
	ErrWeakSignature = errors.New("signature does not cover the required headers and body")
)

func isHeaderName(name string) bool {
	for _, h := range HeaderNames {
		if h == name {
			return true
		}
	}
	return false
}

// headerValue returns the IFP-4 value of one header, or nil when the
// message does not carry it (exactly when JSON encoding omits it).
func (h *Headers) headerValue(name string) (any, error) {
	switch name {
	case "message_id":
		return h.MessageID, nil
	case "date":
		return h.Date, nil
	case "from":
		return h.From, nil
	case "to":
		return h.To, nil
	case "conversation_id":
		return h.ConversationID, nil
	case "sequence":
		return h.Sequence, nil
	case "phase":
		return h.Phase, nil
	case "content_type":
		return h.ContentType, nil
	case "subject":
		return orNil(h.Subject != "", h.Subject), nil
	case "thread":
		return orNil(h.Thread != nil, h.Thread), nil
	case "languages":
		return orNil(h.Languages != nil, h.Languages), nil
	case "disclosure":
		return orNil(h.Disclosure != "", h.Disclosure), nil
	case "persona":
		return orNil(h.Persona != "", h.Persona), nil
	case "priority":
		return orNil(h.Priority != "", h.Priority), nil
	case "ttl_seconds":
		return orNil(h.TTLSeconds != 0, h.TTLSeconds), nil
	case "capabilities":
		return orNil(h.Capabilities != nil, h.Capabilities), nil
	case "extensions":
		return orNil(len(h.Extensions) > 0, h.Extensions), nil
	}
	return nil, fmt.Errorf("%w: %q is not an IFP-4 header", identity.ErrMalformedSignature, name)
}

func orNil(present bool, v any) any {
	if present {
		return v
	}
	return nil
}

// SignedValues returns what sig covers in m: the listed header values and,
// when sig.SignedBody, the canonical body.
func (m *Message) SignedValues(sig *identity.MessageSignature) (map[string]any, []byte, error) {
	headers := make(map[string]any, len(sig.SignedHeaders))
	for _, name := range sig.SignedHeaders {
		v, err := m.Headers.headerValue(name)
		if err != nil {
			return nil, nil, err
		}
		headers[name] = v
	}
	var body []byte
	if sig.SignedBody {
		var err error
		if body, err = m.Body.canonical(); err != nil {
			return nil, nil, fmt.Errorf("canonicalizing body: %w", err)
		}
	}
	return headers, body, nil
}

func (m *Message) newSignature(created time.Time) identity.MessageSignature {
	return identity.MessageSignature{
		Created:       FormatDate(created),
		SignedHeaders: append([]string(nil), HeaderNames...),
		SignedBody:    true,
	}
}

func (m *Message) addSignature(sig identity.MessageSignature) {
	if m.Security == nil {
		m.Security = &Security{}
	}
	m.Security.Signatures = append(m.Security.Signatures, sig)
}

// Sign appends an Ed25519 signature by id covering every header and the
// body. Sign after the message is complete: any later change breaks it.
func (m *Message) Sign(id *identity.Identity, created time.Time) error {
	sig := m.newSignature(created)
	headers, body, err := m.SignedValues(&sig)
	if err != nil {
		return fmt.Errorf("signing message: %w", err)
	}
	if err := id.SignMessage(&sig, headers, body); err != nil {
		return fmt.Errorf("signing message: %w", err)
	}
	m.addSignature(sig)
	return nil
}

// AddIntroProof appends the level-0 HMAC proof of an introduction token
// over the same signing input as Sign.
func (m *Message) AddIntroProof(tok *identity.Introduction, created time.Time) error {
	sig := m.newSignature(created)
	headers, body, err := m.SignedValues(&sig)
	if err != nil {
		return fmt.Errorf("adding introduction proof: %w", err)
	}
	if err := tok.Prove(&sig, headers, body); err != nil {
		return fmt.Errorf("adding introduction proof: %w", err)
	}
	m.addSignature(sig)
	return nil
}

// IntroProof returns the message's introduction proof, if it has one that
// covers every header and the body, as a signature must.
func (m *Message) IntroProof() (*identity.MessageSignature, bool) {
	if m.Security == nil {
		return nil, false
	}
	for i := range m.Security.Signatures {
		s := &m.Security.Signatures[i]
		if s.Alg == identity.AlgHMACSHA256 && strings.HasPrefix(s.KeyID, "intro:") &&
			s.SignedBody && len(s.Covers(RequiredSignedHeaders)) == 0 {
			return s, true
		}
	}
	return nil, false
}

// Verify checks that m carries an Ed25519 signature by pub that covers the
// required headers and the body. Only the first Ed25519 signature not
// naming another did:key is tried. A signature whose did:key key_id names
// another key is not tried; if only such signatures exist the error is
// ErrWrongKey, which says whose key signed.
func (m *Message) Verify(pub ed25519.PublicKey) error {
	var tried int
	var wrong []string
	var lastErr error
	if m.Security != nil {
		for i := range m.Security.Signatures {
			sig := &m.Security.Signatures[i]
			if sig.Alg != identity.AlgEd25519 {
				continue
			}
			if named, err := identity.PublicKeyFromKeyID(sig.KeyID); err == nil && !named.Equal(pub) {
				wrong = append(wrong, sig.KeyID)
				continue
			}
			if tried > 0 {
				// One candidate is enough for an honest sender; trying more
				// would let a hostile one multiply the work per message.
				break
			}
			tried++
			if missing := sig.Covers(RequiredSignedHeaders); len(missing) > 0 || !sig.SignedBody {
				lastErr = fmt.Errorf("%w: leaves %s unsigned (signed_body %v)", ErrWeakSignature, strings.Join(missing, ", "), sig.SignedBody)
				continue
			}
			headers, body, err := m.SignedValues(sig)
			if err != nil {
				lastErr = err
				continue
			}
			if err := identity.VerifyMessage(pub, sig, headers, body); err != nil {
				lastErr = fmt.Errorf("signature %d: %w", i, err)
				continue
			}
			m.memoize()
			return nil
		}
	}
	switch {
	case tried > 0:
		return lastErr
	case len(wrong) > 0:
		return fmt.Errorf("%w: signed by %s, expected %s", ErrWrongKey, strings.Join(wrong, ", "), identity.KeyIDFor(identity.DIDKey(pub)))
	default:
		return fmt.Errorf("%w: no %s signature in security.signatures", ErrUnsigned, identity.AlgEd25519)
	}
}
