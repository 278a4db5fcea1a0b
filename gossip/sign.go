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

// The signed form. A signature covers the IFP-4 form of a message, and
// that form must not depend on how one implementation spells "nothing". So
// the signed form of a message is its IFP-4 JSON form with this rule
// applied, from the innermost members out:
//
//	A member of an object IFP-4 defines (a header; a member of from, of
//	an entry of to, of thread, languages, capabilities, the body or a
//	body part) whose value is null, false, the empty string, the number
//	0, an empty array or an empty object is absent; every other member
//	is present.
//
// From the innermost out: an object whose members are all absent is empty
// and so absent itself ("thread": {"references": []} is absent). Array
// elements are never absent (to[0] stays, whatever it holds). The rule
// stops at free-form values, which are signed exactly as received: a
// part's content (absent only when it is null) and the value of each
// member of headers.extensions (present whatever it is; extensions itself
// is absent when it has no members). Absent headers are signed as null.

// signedAgent is an Agent in the signed form: every member optional.
type signedAgent struct {
	Agent   string `json:"agent,omitempty"`
	Display string `json:"display,omitempty"`
	Human   string `json:"human,omitempty"`
}

// AppendCanonical writes the agent as identity.Canonicalize would, its
// members in RFC 8785 order (agent, display, human): from and to are in
// every signing input.
func (a signedAgent) AppendCanonical(dst []byte) ([]byte, error) {
	start, n := len(dst), 0
	dst = append(dst, '{')
	for _, m := range [...]struct{ name, value string }{{"agent", a.Agent}, {"display", a.Display}, {"human", a.Human}} {
		if m.value == "" {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, '"')
		dst = append(dst, m.name...)
		dst = append(dst, '"', ':')
		var ok bool
		if dst, ok = identity.AppendCanonicalString(dst, m.value); !ok {
			c, err := identity.Canonicalize(a) // not UTF-8: the engine's bytes
			if err != nil {
				return nil, err
			}
			return append(dst[:start], c...), nil
		}
	}
	return append(dst, '}'), nil
}

func (a Agent) signed() any {
	if a == (Agent{}) {
		return nil
	}
	return signedAgent(a)
}

// headerValue returns the value of one header in the signed form, or nil
// when the signed form leaves it out.
func (h *Headers) headerValue(name string) (any, error) {
	switch name {
	case "message_id":
		return orNil(h.MessageID != "", h.MessageID), nil
	case "date":
		return orNil(h.Date != "", h.Date), nil
	case "from":
		return h.From.signed(), nil
	case "to":
		if len(h.To) == 0 {
			return nil, nil
		}
		to := make([]any, len(h.To))
		for i, a := range h.To {
			if to[i] = a.signed(); to[i] == nil {
				to[i] = struct{}{} // an element is never absent: {}
			}
		}
		return to, nil
	case "conversation_id":
		return orNil(h.ConversationID != "", h.ConversationID), nil
	case "sequence":
		return orNil(h.Sequence != 0, h.Sequence), nil
	case "phase":
		return orNil(h.Phase != "", string(h.Phase)), nil
	case "content_type":
		return orNil(h.ContentType != "", h.ContentType), nil
	case "subject":
		return orNil(h.Subject != "", h.Subject), nil
	case "thread":
		t := h.Thread
		return orNil(t != nil && (t.InReplyTo != "" || len(t.References) > 0), t), nil
	case "languages":
		l := h.Languages
		return orNil(l != nil && (l.Content != "" || len(l.Preferred) > 0 || len(l.Human) > 0), l), nil
	case "disclosure":
		return orNil(h.Disclosure != "", h.Disclosure), nil
	case "persona":
		return orNil(h.Persona != "", h.Persona), nil
	case "priority":
		return orNil(h.Priority != "", h.Priority), nil
	case "ttl_seconds":
		return orNil(h.TTLSeconds != 0, h.TTLSeconds), nil
	case "capabilities":
		c := h.Capabilities
		return orNil(c != nil && (len(c.Request) > 0 || len(c.Offer) > 0), c), nil
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
