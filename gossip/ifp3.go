package gossip

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"go.yaml.in/yaml/v3"
)

// IFP-3 rendering. An IFP-3 document is YAML front matter (the envelope)
// and the natural-language body, readable in any text editor. IFP-4 fields
// with no IFP-3 form (parts, trace, security, and headers such as
// capabilities or extensions) follow the body as an appendix: a marker
// comment and a fenced, indented JSON block, so that parsing the rendering
// gives back the same IFP-4 message and its signatures still verify.
//
//	---
//	ifp: 3
//	message-id: msg:01J…
//	from: did:key:z6Mk…
//	to: did:key:z6Mk…
//	date: "2026-03-04T23:58:12Z"
//	conversation: conv:01J…
//	sequence: 2
//	phase: context
//	reply-to: 1
//	---
//	Here's what's current for Pete: …
//
//	<!-- ifp-4 -->
//	```json
//	{ "parts": [ … ], "security": { … } }
//	```
//
// The body is written verbatim followed by one newline; the appendix is
// present whenever there is something to put in it, or when the body itself
// contains the marker line (the parser takes the last marker).

// MaxIFP3Size bounds a rendering accepted by ParseIFP3: the largest message
// plus room for indentation.
const MaxIFP3Size = 4 * MaxMessageSize

const (
	frontMatterDelim = "---\n"
	appendixMarker   = "\n<!-- ifp-4 -->\n```json\n"
	appendixEnd      = "\n```\n"
)

// ErrIFP3 wraps every IFP-3 parse failure.
var ErrIFP3 = errors.New("malformed IFP-3 document")

// envelope is the IFP-3 §1.1 front matter, in the order humans read it.
type envelope struct {
	IFP          int        `yaml:"ifp"`
	MessageID    string     `yaml:"message-id"`
	From         string     `yaml:"from"`
	To           string     `yaml:"to"`
	Date         string     `yaml:"date"`
	Conversation string     `yaml:"conversation"`
	Sequence     int64      `yaml:"sequence"`
	Phase        string     `yaml:"phase"`
	Subject      string     `yaml:"subject,omitempty"`
	Languages    *Languages `yaml:"languages,omitempty"`
	Disclosure   string     `yaml:"disclosure,omitempty"`
	ReplyTo      int64      `yaml:"reply-to,omitempty"`
	Persona      string     `yaml:"persona,omitempty"`
}

// appendix holds what IFP-3 cannot say.
type appendix struct {
	Headers  *appendixHeaders `json:"headers,omitempty"`
	Parts    []Part           `json:"parts,omitempty"`
	Trace    *Trace           `json:"trace,omitempty"`
	Security *Security        `json:"security,omitempty"`
}

type appendixHeaders struct {
	From         *Agent             `json:"from,omitempty"` // when it has more than an agent id
	To           []Agent            `json:"to,omitempty"`   // when not exactly one bare recipient
	ContentType  string             `json:"content_type,omitempty"`
	Thread       *Thread            `json:"thread,omitempty"`
	Priority     string             `json:"priority,omitempty"`
	TTLSeconds   int64              `json:"ttl_seconds,omitempty"`
	Capabilities *CapabilityHeaders `json:"capabilities,omitempty"`
	Extensions   map[string]any     `json:"extensions,omitempty"`
}

func (a *appendixHeaders) empty() bool {
	return a.From == nil && a.To == nil && a.ContentType == "" && a.Thread == nil && a.Priority == "" &&
		a.TTLSeconds == 0 && a.Capabilities == nil && len(a.Extensions) == 0
}

// RenderIFP3 writes m in IFP-3 form. seqOf maps a message_id of the same
// conversation to its sequence number, for the reply-to field; it may be
// nil, and thread information is kept in the appendix either way.
func RenderIFP3(m *Message, seqOf func(messageID string) (int64, bool)) ([]byte, error) {
	var out bytes.Buffer
	if err := renderIFP3(&out, m, seqOf); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// renderIFP3 is RenderIFP3 into out, which it may leave half written on
// error.
func renderIFP3(out *bytes.Buffer, m *Message, seqOf func(messageID string) (int64, bool)) error {
	return renderIFP3With(out, m, seqOf, writeEnvelope)
}

// renderIFP3With is renderIFP3 with the envelope written by writeEnv
// (writeEnvelopeYAML in the tests and benchmark that compare the two).
func renderIFP3With(out *bytes.Buffer, m *Message, seqOf func(messageID string) (int64, bool), writeEnv func(*bytes.Buffer, *envelope) error) error {
	if strings.ContainsRune(m.Body.Text, '\r') {
		// A reader (ParseIFP3 among them) takes CR as a line end: the
		// text would not come back as it was signed.
		return fmt.Errorf("%w: the body text holds a carriage return (U+000D), which IFP-3 text does not keep", ErrIFP3)
	}
	h := &m.Headers
	env := envelope{
		IFP: 3, MessageID: h.MessageID, From: h.From.Agent, Date: h.Date,
		Conversation: h.ConversationID, Sequence: h.Sequence, Phase: string(h.Phase),
		Subject: h.Subject, Languages: h.Languages, Disclosure: h.Disclosure, Persona: h.Persona,
	}
	if len(h.To) > 0 {
		env.To = h.To[0].Agent
	}
	if h.Thread != nil && h.Thread.InReplyTo != "" && seqOf != nil {
		if seq, ok := seqOf(h.Thread.InReplyTo); ok {
			env.ReplyTo = seq
		}
	}
	ah := appendixHeaders{
		Thread: h.Thread, Priority: h.Priority, TTLSeconds: h.TTLSeconds,
		Capabilities: h.Capabilities, Extensions: h.Extensions,
	}
	if h.From.Display != "" || h.From.Human != "" {
		from := h.From
		ah.From = &from
	}
	if len(h.To) != 1 || h.To[0].Display != "" || h.To[0].Human != "" {
		ah.To = h.To
		if ah.To == nil {
			ah.To = []Agent{}
		}
	}
	if h.ContentType != DefaultContentType {
		ah.ContentType = h.ContentType
	}
	app := appendix{Parts: m.Body.Parts, Trace: m.Trace, Security: m.Security}
	if !ah.empty() {
		app.Headers = &ah
	}

	size := 2048 + len(m.Body.Text)
	for i := range m.Body.Parts {
		size += 2 * len(m.Body.Parts[i].canon) // indented, the appendix is about twice the canonical bytes
	}
	out.Grow(size)
	out.WriteString(frontMatterDelim)
	if err := writeEnv(out, &env); err != nil {
		return err
	}
	out.WriteString(frontMatterDelim)
	out.WriteString(m.Body.Text)
	out.WriteByte('\n')
	hasAppendix := app.Headers != nil || len(app.Parts) > 0 || app.Trace != nil || app.Security != nil
	if hasAppendix || strings.Contains(m.Body.Text, strings.TrimSuffix(appendixMarker, "```json\n")) {
		out.WriteString(appendixMarker)
		if err := writeAppendix(out, &app); err != nil {
			return fmt.Errorf("rendering IFP-3 appendix: %w", err)
		}
		out.WriteString(appendixEnd)
	}
	return nil
}

// writeAppendix writes app as json.MarshalIndent(app, "", "  ") would,
// but member by member, so that a part whose canonical content is known
// (a capability view, sent and received again and again) is indented once
// and then taken from indentMemo: indenting a 13 KB view was most of what
// recording a greeting cost.
func writeAppendix(out *bytes.Buffer, app *appendix) error {
	n := 0
	member := func(name string) {
		if n > 0 {
			out.WriteByte(',')
		}
		n++
		out.WriteString("\n  \"" + name + "\": ")
	}
	value := func(v any, prefix string) error {
		b, err := jsonv1.MarshalIndent(v, prefix, "  ")
		out.Write(b)
		return err
	}
	out.WriteByte('{')
	if app.Headers != nil {
		member("headers")
		if err := value(app.Headers, "  "); err != nil {
			return err
		}
	}
	if len(app.Parts) > 0 {
		member("parts")
		out.WriteByte('[')
		for i := range app.Parts {
			if i > 0 {
				out.WriteByte(',')
			}
			out.WriteString("\n    ")
			if err := writePart(out, &app.Parts[i], value); err != nil {
				return fmt.Errorf("parts[%d]: %w", i, err)
			}
		}
		out.WriteString("\n  ]")
	}
	if app.Trace != nil {
		member("trace")
		if err := value(app.Trace, "  "); err != nil {
			return err
		}
	}
	if app.Security != nil {
		member("security")
		if err := value(app.Security, "  "); err != nil {
			return err
		}
	}
	if n > 0 {
		out.WriteByte('\n')
	}
	out.WriteByte('}')
	return nil
}

// partIndent is where a part's members start in the appendix.
const partIndent = "      "

func writePart(out *bytes.Buffer, p *Part, value func(any, string) error) error {
	if p.canon == nil {
		return value(p, "    ")
	}
	out.WriteString("{\n" + partIndent + `"content_type": `)
	if err := value(p.ContentType, ""); err != nil {
		return err
	}
	if p.Name != "" {
		out.WriteString(",\n" + partIndent + `"name": `)
		if err := value(p.Name, ""); err != nil {
			return err
		}
	}
	out.WriteString(",\n" + partIndent + `"content": `)
	sum := sha256.Sum256(p.canon)
	indented, ok := indentMemo.get(sum)
	if !ok {
		v := jsontext.Value(bytes.Clone(p.canon))
		if err := v.Indent(jsontext.WithIndentPrefix(partIndent), jsontext.WithIndent("  ")); err != nil {
			return err
		}
		indented = v
		indentMemo.add(sum, indented, len(indented))
	}
	out.Write(indented)
	out.WriteString("\n    }")
	return nil
}

// indentMemo keeps the indented appendix form of canonical part contents,
// by the SHA-256 of the canonical bytes. What it saves is rendering the
// same view again: mostly this daemon's own views (one per class of
// requester, sent to every new peer), since a peer's view is sent once
// and then named by hash. 2 MiB holds about a hundred 20-capability
// views; its 8 MiB of before the audit's .md moved to a background
// writer were 1.6 KB of every greeted idle peer's share at 5,000 peers.
var indentMemo = newMemo[[]byte](indentMemoBudget)

const indentMemoBudget = 2 << 20

// ParseIFP3 reads a rendering made by RenderIFP3 (or an IFP-3 message
// written by hand) back into an IFP-4 message and validates it. idOf maps a
// reply-to sequence number to its message_id when the appendix carries no
// thread; it may be nil. Errors name the envelope line or appendix field.
func ParseIFP3(b []byte, idOf func(seq int64) (string, bool)) (*Message, error) {
	if len(b) > MaxIFP3Size {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrIFP3, len(b), MaxIFP3Size)
	}
	// Line ends as a text editor may leave them: CRLF, or a lone CR.
	s := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n")
	if !strings.HasPrefix(s, frontMatterDelim) {
		return nil, fmt.Errorf("%w: line 1: want \"---\" to open the YAML envelope", ErrIFP3)
	}
	s = s[len(frontMatterDelim):]
	end := strings.Index(s, "\n"+frontMatterDelim)
	var front string
	switch {
	case strings.HasPrefix(s, frontMatterDelim):
		front, s = "", s[len(frontMatterDelim):]
	case end >= 0:
		front, s = s[:end+1], s[end+1+len(frontMatterDelim):]
	default:
		return nil, fmt.Errorf("%w: no closing \"---\" after the envelope", ErrIFP3)
	}

	var env envelope
	dec := yaml.NewDecoder(strings.NewReader(front))
	dec.KnownFields(true)
	if err := dec.Decode(&env); err != nil {
		// yaml reports lines within the envelope; line 1 of the file is "---".
		return nil, fmt.Errorf("%w: envelope (line numbers count from the line after the opening ---): %v", ErrIFP3, err)
	}
	if env.IFP != 3 {
		return nil, fmt.Errorf("%w: envelope ifp is %d, want 3", ErrIFP3, env.IFP)
	}

	text, app := s, ""
	if i := strings.LastIndex(s, appendixMarker); i >= 0 {
		text, app = s[:i], s[i+len(appendixMarker):]
		if !strings.HasSuffix(app, appendixEnd) {
			return nil, fmt.Errorf("%w: appendix is not closed by a ``` line", ErrIFP3)
		}
		app = strings.TrimSuffix(app, appendixEnd)
	}
	text = strings.TrimSuffix(text, "\n")

	m := &Message{IFP: Version, Body: Body{Text: text}}
	h := &m.Headers
	h.MessageID, h.Date, h.ConversationID = env.MessageID, env.Date, env.Conversation
	h.Sequence, h.Phase, h.Subject = env.Sequence, Phase(env.Phase), env.Subject
	h.Languages, h.Disclosure, h.Persona = env.Languages, env.Disclosure, env.Persona
	h.From = Agent{Agent: env.From}
	if env.To != "" {
		h.To = []Agent{{Agent: env.To}}
	}
	h.ContentType = DefaultContentType

	if app != "" {
		var a appendix
		if err := jsonv2.Unmarshal([]byte(app), &a, jsonv2.RejectUnknownMembers(true)); err != nil {
			return nil, fmt.Errorf("%w: appendix: %v", ErrIFP3, err)
		}
		m.Body.Parts, m.Trace, m.Security = a.Parts, a.Trace, a.Security
		if ah := a.Headers; ah != nil {
			if ah.From != nil {
				if ah.From.Agent != env.From {
					return nil, fmt.Errorf("%w: appendix headers.from.agent %q differs from envelope from %q", ErrIFP3, ah.From.Agent, env.From)
				}
				h.From = *ah.From
			}
			if ah.To != nil {
				h.To = ah.To
			}
			if ah.ContentType != "" {
				h.ContentType = ah.ContentType
			}
			h.Thread, h.Priority, h.TTLSeconds = ah.Thread, ah.Priority, ah.TTLSeconds
			h.Capabilities, h.Extensions = ah.Capabilities, ah.Extensions
		}
	}
	if env.ReplyTo != 0 && (h.Thread == nil || h.Thread.InReplyTo == "") {
		id, ok := "", false
		if idOf != nil {
			id, ok = idOf(env.ReplyTo)
		}
		if !ok {
			return nil, fmt.Errorf("%w: reply-to %d: no message with that sequence in conversation %q", ErrIFP3, env.ReplyTo, env.Conversation)
		}
		if h.Thread == nil {
			h.Thread = &Thread{}
		}
		h.Thread.InReplyTo = id
	}
	if h.MessageID == "" {
		// IFP-4 §4: a hand-written IFP-3 message gets an ID on conversion.
		h.MessageID = NewID("msg", time.Now())
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("parsing IFP-3: %w", err)
	}
	return m, nil
}

// decisionMarker opens the decision under a message in the audit log's
// .md. It starts as every audit marker does, so no message's rendering
// can hold it (writeEntry shows such a message as JSON instead).
const decisionMarker = auditMarkerPrefix + "decision -->\n"

// writeDecision writes d, when there is one, as a short block for a
// person: the outcome, the facts, and one line per condition evaluated.
// Every value is put on one line and loses its "--" (decisionText), so
// nothing in it (a capability name a peer chose, a schema error quoting
// its parameters) starts a line of its own or holds a marker: each line
// starts with text of this function's.
func writeDecision(b *bytes.Buffer, d *Decision) {
	if d == nil {
		return
	}
	b.WriteString("\n" + decisionMarker)
	fmt.Fprintf(b, "Decision: %s %s", decisionText(d.Outcome), decisionText(d.Capability))
	if d.Code != "" {
		fmt.Fprintf(b, " (%s)", decisionText(d.Code))
	}
	b.WriteByte('\n')
	f := d.Facts
	level := "none"
	if f.Level >= 0 {
		level = fmt.Sprint(f.Level)
	}
	if f.LevelHow != "" {
		level += " (" + decisionText(f.LevelHow) + ")"
	}
	fmt.Fprintf(b, "Facts: level %s; tier %s; temperature %s; persona %s\n", level, orNone(f.Tier), orNone(f.Temperature), orNone(f.Persona))
	if d.Note != "" {
		fmt.Fprintf(b, "Note: %s\n", decisionText(d.Note))
	}
	if len(d.Conditions) == 0 {
		b.WriteString("- no condition evaluated\n")
	}
	for _, c := range d.Conditions {
		met := "unmet"
		if c.Met {
			met = "met"
		}
		fmt.Fprintf(b, "- %s %s: %s\n", met, decisionText(c.Condition), decisionText(c.Detail))
	}
}

// orNone is decisionText(s), or "none" for an empty s.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return decisionText(s)
}

// decisionText is s on one line, with no "--" that could open or close
// an HTML comment (a marker) in it.
func decisionText(s string) string { return commentSafe(oneLine(s)) }
