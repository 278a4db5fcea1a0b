package gossip

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ifaced/ifaced/identity"
	"github.com/oklog/ulid/v2"
)

// Version is the IFP number of the structured message format this package
// speaks; a message whose ifp field differs is refused with
// ErrUnknownVersion, which names this value.
const Version = 4

// DefaultContentType is the IFP-4 default media type of body.text.
const DefaultContentType = "text/markdown; charset=utf-8"

// Phase is an IFP-3 conversation phase.
type Phase string

// The IFP-3 §2 phases.
const (
	PhaseGreeting  Phase = "greeting"
	PhaseContext   Phase = "context"
	PhaseProbe     Phase = "probe"
	PhaseRecommend Phase = "recommend"
	PhaseClose     Phase = "close"
	PhaseError     Phase = "error"
)

// Phases lists every phase in IFP-3 order.
var Phases = []Phase{PhaseGreeting, PhaseContext, PhaseProbe, PhaseRecommend, PhaseClose, PhaseError}

// Valid reports whether p is an IFP-3 phase.
func (p Phase) Valid() bool {
	for _, q := range Phases {
		if p == q {
			return true
		}
	}
	return false
}

// Message is an IFP-4 structured message.
type Message struct {
	IFP      int       `json:"ifp"`
	Headers  Headers   `json:"headers"`
	Body     Body      `json:"body"`
	Trace    *Trace    `json:"trace,omitempty"`
	Security *Security `json:"security,omitempty"`
}

// Headers are the IFP-4 §2.1 headers. Optional headers are absent when
// zero. A signature sees them in the signed form (sign.go, and the
// identity package comment): a member that is null, false, "", 0, [] or
// {} is absent, so thread: {} signs as no thread.
type Headers struct {
	MessageID      string             `json:"message_id"`
	Date           string             `json:"date"` // kept as sent: reformatting would break signatures
	From           Agent              `json:"from"`
	To             []Agent            `json:"to"`
	ConversationID string             `json:"conversation_id"`
	Sequence       int64              `json:"sequence"`
	Phase          Phase              `json:"phase"`
	ContentType    string             `json:"content_type"`
	Subject        string             `json:"subject,omitempty"`
	Thread         *Thread            `json:"thread,omitempty"`
	Languages      *Languages         `json:"languages,omitempty"`
	Disclosure     string             `json:"disclosure,omitempty"`
	Persona        string             `json:"persona,omitempty"`
	Priority       string             `json:"priority,omitempty"`
	TTLSeconds     int64              `json:"ttl_seconds,omitempty"`
	Capabilities   *CapabilityHeaders `json:"capabilities,omitempty"`
	// Extensions holds fields no IFP defines. They are kept as received and
	// forwarded unchanged; nothing is decided on them.
	Extensions map[string]any `json:"extensions,omitempty"`
}

// Agent names a sender or recipient (IFP-4 §2.1.1, IFP-10 §4.2).
type Agent struct {
	Agent   string `json:"agent"`
	Display string `json:"display,omitempty"`
	Human   string `json:"human,omitempty"`
}

// Thread carries RFC 5322-style threading (IFP-4 §2.1.2).
type Thread struct {
	InReplyTo  string   `json:"in_reply_to,omitempty"`
	References []string `json:"references,omitempty"`
}

// Languages are the IFP-4 §2.1.3 language fields.
type Languages struct {
	Content   string   `json:"content,omitempty" yaml:"content,omitempty"`
	Preferred []string `json:"preferred,omitempty" yaml:"preferred,omitempty"`
	Human     []string `json:"human,omitempty" yaml:"human,omitempty"`
}

// CapabilityHeaders are headers.capabilities (IFP-4 §2.1.4).
type CapabilityHeaders struct {
	Request []string `json:"request,omitempty"`
	Offer   []string `json:"offer,omitempty"`
}

// Body is the message content (IFP-4 §2.2).
type Body struct {
	Text  string `json:"text,omitempty"`
	Parts []Part `json:"parts,omitempty"`
}

// Part is one MIME-like body part. Content is any JSON value; it must not
// change once the part is in a signed message (see canonical.go).
type Part struct {
	ContentType string `json:"content_type"`
	Name        string `json:"name,omitempty"`
	Content     any    `json:"content,omitempty"`

	canon    []byte    // RFC 8785 form of Content, when known
	cborRaw  []byte    // CBOR encoding of Content, when known
	rawSum   *[32]byte // SHA-256 of the CBOR Content was decoded from, for large contents
	fromMemo bool      // Content is a copy of a memoized value (already in the memos)
	decoded  bool      // Content was decoded from CBOR as received, so its canonical form, once computed, is kept
}

// Trace records the hops a message took (IFP-4 §2.3).
type Trace struct {
	Received []TraceEntry `json:"received,omitempty"`
}

// TraceEntry is one hop, appended by the intermediary.
type TraceEntry struct {
	By   string `json:"by"`
	With string `json:"with"`
	At   string `json:"at"`
	From string `json:"from,omitempty"`
}

// Security carries signatures and encryption metadata (IFP-4 §2.4).
type Security struct {
	Signatures []identity.MessageSignature `json:"signatures,omitempty"`
	Encryption *Encryption                 `json:"encryption,omitempty"`
}

// Encryption is the IFP-5 §6 encryption metadata.
type Encryption struct {
	Scheme     string   `json:"scheme"`
	Recipients []string `json:"recipients,omitempty"`
}

// Part returns the first body part with the given name.
func (b *Body) Part(name string) (*Part, bool) {
	for i := range b.Parts {
		if b.Parts[i].Name == name {
			return &b.Parts[i], true
		}
	}
	return nil, false
}

// NewID returns a fresh identifier with the given prefix ("msg", "conv"):
// prefix + ":" + a ULID, which sorts by creation time.
func NewID(prefix string, now time.Time) string {
	return prefix + ":" + ulid.MustNew(ulid.Timestamp(now), rand.Reader).String()
}

// FormatDate is the date format ifaced writes: RFC 3339, UTC, seconds.
func FormatDate(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Limits on what a valid message may hold. A frame is at most
// MaxMessageSize bytes anyway; these keep any single field reasonable.
const (
	MaxIDLen         = 256
	MaxAgentLen      = 512
	MaxRecipients    = 64
	MaxParts         = 64
	MaxTraceEntries  = 64
	MaxSignatures    = 8
	MaxReferences    = 256
	MaxValueDepth    = 32
	MaxCapabilityRef = 256
)

// MaxSafeInteger is the largest integer a message may carry anywhere
// (headers.sequence, headers.ttl_seconds, numbers in part contents and
// extensions): 2^53−1, the largest integer every JSON implementation holds
// exactly (RFC 7493 §2.2) and the largest below which every integer is an
// IEEE 754 double. Messages travel as JSON as well as CBOR, and their
// signatures cover RFC 8785 JSON, which writes every number as a double:
// past 2^53 two different integers would have one canonical form, so one
// signature would cover two messages, and a JSON reader might see another
// number than the signer wrote. Bounding every integer here also means no
// arithmetic on a sequence number can overflow.
const MaxSafeInteger = 1<<53 - 1

// MaxSequence is the highest sequence number (MaxSafeInteger). A
// conversation that has used it up cannot go on; start a new one.
const MaxSequence = MaxSafeInteger

// ErrInvalidMessage wraps every validation failure; ErrUnknownVersion also
// wraps it.
var (
	ErrInvalidMessage = errors.New("invalid message")
	ErrUnknownVersion = fmt.Errorf("%w: unknown ifp version", ErrInvalidMessage)
)

// FieldError says which member of a message is wrong and why. Every
// problem Validate, DecodeCBOR and DecodeJSON find is one: a wrong type
// ("headers.sequence: expected an integer, got a text string"), a value
// out of bounds, a missing member. Its text never names Go types, so it
// can be sent to the peer as it is.
type FieldError struct {
	// Field is the dotted IFP-4 path ("headers.sequence",
	// "body.parts[0].content.x"); "" is the message as a whole.
	Field   string
	Problem string
	// Err is the sentinel the problem is an instance of, when it is more
	// precise than ErrInvalidMessage (ErrUnknownVersion); it wraps
	// ErrInvalidMessage. Nil means ErrInvalidMessage.
	Err error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "message: " + e.Problem
	}
	return e.Field + ": " + e.Problem
}

// Unwrap lets errors.Is match ErrInvalidMessage (and Err, when set).
func (e *FieldError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return ErrInvalidMessage
}

// Validate checks a message against IFP-4 and this package's limits and
// returns every problem, each a *FieldError naming its field.
func (m *Message) Validate() error {
	var v validator
	if m.IFP != Version {
		v.errs = append(v.errs, &FieldError{Field: "ifp", Err: ErrUnknownVersion,
			Problem: fmt.Sprintf("is %d; this daemon speaks IFP-%d messages (resend with \"ifp\": %d)", m.IFP, Version, Version)})
	}
	h := &m.Headers
	v.id("headers.message_id", h.MessageID, true)
	v.date("headers.date", h.Date, true)
	v.agent("headers.from", h.From)
	if len(h.To) == 0 {
		v.bad("headers.to", "needs at least one recipient")
	}
	if len(h.To) > MaxRecipients {
		v.bad("headers.to", "has %d recipients, at most %d", len(h.To), MaxRecipients)
	}
	for i, a := range h.To {
		v.agent(fmt.Sprintf("headers.to[%d]", i), a)
	}
	v.id("headers.conversation_id", h.ConversationID, true)
	switch {
	case h.Sequence < 1:
		v.bad("headers.sequence", "must be 1 or more, got %d", h.Sequence)
	case h.Sequence > MaxSequence:
		v.bad("headers.sequence", "must be at most %d (2^53-1), got %d", MaxSequence, h.Sequence)
	}
	if !h.Phase.Valid() {
		v.bad("headers.phase", "%q is not a phase (want one of greeting, context, probe, recommend, close, error)", h.Phase)
	}
	if h.ContentType == "" {
		v.bad("headers.content_type", "is required (the IFP-4 default is %q)", DefaultContentType)
	}
	v.text("headers.subject", h.Subject, 1024)
	if h.Thread != nil {
		v.id("headers.thread.in_reply_to", h.Thread.InReplyTo, false)
		if len(h.Thread.References) > MaxReferences {
			v.bad("headers.thread.references", "has %d entries, at most %d", len(h.Thread.References), MaxReferences)
		}
		for i, r := range h.Thread.References {
			v.id(fmt.Sprintf("headers.thread.references[%d]", i), r, true)
		}
	}
	if l := h.Languages; l != nil {
		v.text("headers.languages.content", l.Content, 64)
		for i, s := range l.Preferred {
			v.nonEmpty(fmt.Sprintf("headers.languages.preferred[%d]", i), s, 64)
		}
		for i, s := range l.Human {
			v.nonEmpty(fmt.Sprintf("headers.languages.human[%d]", i), s, 64)
		}
	}
	v.text("headers.disclosure", h.Disclosure, 128)
	v.text("headers.persona", h.Persona, 128)
	switch h.Priority {
	case "", "low", "normal", "urgent":
	default:
		v.bad("headers.priority", "%q is not a priority (want low, normal or urgent)", h.Priority)
	}
	switch {
	case h.TTLSeconds < 0:
		v.bad("headers.ttl_seconds", "must not be negative, got %d", h.TTLSeconds)
	case h.TTLSeconds > MaxSafeInteger:
		v.bad("headers.ttl_seconds", "must be at most %d (2^53-1), got %d", MaxSafeInteger, h.TTLSeconds)
	}
	if c := h.Capabilities; c != nil {
		for i, s := range c.Request {
			v.nonEmpty(fmt.Sprintf("headers.capabilities.request[%d]", i), s, MaxCapabilityRef)
		}
		for i, s := range c.Offer {
			v.nonEmpty(fmt.Sprintf("headers.capabilities.offer[%d]", i), s, MaxCapabilityRef)
		}
	}
	for k, x := range h.Extensions {
		v.value("headers.extensions."+k, x, 1)
	}
	if len(m.Body.Parts) > MaxParts {
		v.bad("body.parts", "has %d parts, at most %d", len(m.Body.Parts), MaxParts)
	}
	for i, p := range m.Body.Parts {
		f := fmt.Sprintf("body.parts[%d]", i)
		v.nonEmpty(f+".content_type", p.ContentType, 256)
		v.text(f+".name", p.Name, 256)
		v.value(f+".content", p.Content, 1)
	}
	if m.Trace != nil {
		if len(m.Trace.Received) > MaxTraceEntries {
			v.bad("trace.received", "has %d entries, at most %d", len(m.Trace.Received), MaxTraceEntries)
		}
		for i, e := range m.Trace.Received {
			f := fmt.Sprintf("trace.received[%d]", i)
			v.nonEmpty(f+".by", e.By, MaxAgentLen)
			v.nonEmpty(f+".with", e.With, 128)
			v.date(f+".at", e.At, true)
			v.text(f+".from", e.From, MaxAgentLen)
		}
	}
	if s := m.Security; s != nil {
		if len(s.Signatures) > MaxSignatures {
			v.bad("security.signatures", "has %d entries, at most %d", len(s.Signatures), MaxSignatures)
		}
		for i, sig := range s.Signatures {
			f := fmt.Sprintf("security.signatures[%d]", i)
			switch sig.Alg {
			case identity.AlgEd25519, identity.AlgHMACSHA256:
			default:
				v.bad(f+".alg", "%q is not supported (want %s or %s)", sig.Alg, identity.AlgEd25519, identity.AlgHMACSHA256)
			}
			v.nonEmpty(f+".key_id", sig.KeyID, MaxAgentLen)
			v.date(f+".created", sig.Created, true)
			if len(sig.SignedHeaders) == 0 {
				v.bad(f+".signed_headers", "is empty")
			}
			for j, name := range sig.SignedHeaders {
				if !isHeaderName(name) {
					v.bad(fmt.Sprintf("%s.signed_headers[%d]", f, j), "%q is not an IFP-4 header", name)
				}
			}
			v.nonEmpty(f+".sig", sig.Sig, 1024)
		}
		if e := s.Encryption; e != nil {
			v.nonEmpty("security.encryption.scheme", e.Scheme, 64)
		}
	}
	return errors.Join(v.errs...)
}

type validator struct{ errs []error }

func (v *validator) bad(field, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

func (v *validator) text(field, s string, max int) {
	if len(s) > max {
		v.bad(field, "is %d bytes, at most %d", len(s), max)
	}
}

func (v *validator) nonEmpty(field, s string, max int) {
	if s == "" {
		v.bad(field, "is required")
		return
	}
	v.text(field, s, max)
}

// id checks an identifier: printable, no white space, bounded.
func (v *validator) id(field, s string, required bool) {
	if s == "" {
		if required {
			v.bad(field, "is required")
		}
		return
	}
	if len(s) > MaxIDLen {
		v.bad(field, "is %d bytes, at most %d", len(s), MaxIDLen)
		return
	}
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		v.bad(field, "%q contains white space or control characters", s)
	}
}

func (v *validator) date(field, s string, required bool) {
	if s == "" {
		if required {
			v.bad(field, "is required (an RFC 3339 time such as 2026-03-04T23:58:12Z)")
		}
		return
	}
	if _, err := time.Parse(time.RFC3339, s); err != nil {
		v.bad(field, "%q is not an RFC 3339 time (e.g. 2026-03-04T23:58:12Z)", s)
	}
}

func (v *validator) agent(field string, a Agent) {
	v.nonEmpty(field+".agent", a.Agent, MaxAgentLen)
	v.text(field+".display", a.Display, 256)
	v.text(field+".human", a.Human, 256)
}

// value checks that x is a JSON value both codecs carry unchanged: no byte
// strings, no non-finite numbers, string keys, bounded depth. It reports
// the first problem in x; the field path is built only then, since
// contents are large (a capability view has thousands of members).
func (v *validator) value(field string, x any, depth int) {
	if path, problem := checkValue(x, depth); problem != "" {
		v.bad(field+path, "%s", problem)
	}
}

func unsafeInteger(n string) string {
	return fmt.Sprintf("integer %s is outside -(2^53-1) to 2^53-1, which JSON does not hold exactly (send it as a string)", n)
}

// checkValue returns the path below x (".key", "[3]") and the problem of
// the first value that is not plain JSON, or "" and "".
func checkValue(x any, depth int) (path, problem string) {
	if depth > MaxValueDepth {
		return "", fmt.Sprintf("nests deeper than %d levels", MaxValueDepth)
	}
	switch x := x.(type) {
	case nil, bool, string, int32, uint32:
	case int64:
		if x > MaxSafeInteger || x < -MaxSafeInteger {
			return "", unsafeInteger(strconv.FormatInt(x, 10))
		}
	case int:
		if x > MaxSafeInteger || x < -MaxSafeInteger {
			return "", unsafeInteger(strconv.Itoa(x))
		}
	case uint64:
		if x > MaxSafeInteger {
			return "", unsafeInteger(strconv.FormatUint(x, 10))
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", fmt.Sprintf("%v has no JSON form", x)
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return "", fmt.Sprintf("%v has no JSON form", x)
		}
	case []any:
		for i, e := range x {
			if p, problem := checkValue(e, depth+1); problem != "" {
				return "[" + strconv.Itoa(i) + "]" + p, problem
			}
		}
	case map[string]any:
		for k, e := range x {
			if p, problem := checkValue(e, depth+1); problem != "" {
				return "." + k + p, problem
			}
		}
	case []byte:
		return "", "is a byte string, which is not a JSON value (send it as text, e.g. base64)"
	default:
		what := describeCBOR(x)
		if what == "a value of another kind" {
			what = fmt.Sprintf("a %T", x) // built in Go, not decoded
		}
		return "", "is " + what + ", which is not a JSON value"
	}
	return "", ""
}
