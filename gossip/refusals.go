package gossip

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// The record of refusals. A message the daemon did not admit is not part of
// any conversation, whatever conversation it names: it is recorded once,
// here, and never in the conversation it claims. Its entry is a bounded
// summary whoever sent it, so that a flood of refused messages costs a
// small, fixed amount of disk per message:
//
//	<day>/_refused.jsonl  one Refusal per line, for programs
//	<day>/_refused.md     the same for people: a marker line and a fenced
//	                      JSON block per refusal
//
// The leading underscore keeps these names apart from every peer's files
// (a peer's kept name never holds one).
//
// A summary holds what the daemon established (transport, the peer it
// established, the wire code and reason of the refusal, whether the
// signature verified), the message's claimed headers as given, its size and
// SHA-256 (of the bytes as received, when the transport kept them), and an
// excerpt of at most RefusalExcerpt bytes (SummariseRefusal says of what) —
// enough to recognise it, never enough to grow the disk by what a stranger
// sends. Making a summary costs memory in proportion to the summary too,
// never to the message.
//
// How many summaries are written is the caller's to bound (the daemon
// limits them per connection and per address before recording): a record
// with LeftOut set says how many refusals of the same kind of source were
// counted but not written before it.

// RefusalExcerpt bounds the part of a refused message a summary keeps.
const RefusalExcerpt = 2 << 10

// refusedName is the file name (without extension) of a day's refusals.
const refusedName = "_refused"

// Refusal is one refused message, as summarised in the record of refusals.
type Refusal struct {
	At        time.Time `json:"at"`
	Transport string    `json:"transport"`      // how it came: libp2p, https, a2a, ifp-8-mailbox, …
	Peer      string    `json:"peer,omitempty"` // the peer the daemon established (the stream's, or the verified signer); "" when none
	Code      string    `json:"code"`           // the wire code of the refusal
	Reason    string    `json:"reason"`         // the error, as the daemon said it
	Verified  bool      `json:"verified"`       // the message's signature verified under Peer's key
	MessageID string    `json:"message_id,omitempty"`
	Claimed   string    `json:"conversation_id,omitempty"` // the conversation it named (not where it is recorded)
	Phase     string    `json:"phase,omitempty"`
	From      string    `json:"from,omitempty"` // headers.from as claimed
	Size      int       `json:"size"`           // bytes as received (0 when unknown)
	SHA256    string    `json:"sha256,omitempty"`
	Excerpt   string    `json:"excerpt,omitempty"` // at most RefusalExcerpt bytes: see SummariseRefusal
	// LeftOut is how many refusals were counted but not written (over a
	// budget, or with the audit log out of room) since the last one written.
	// A record that only carries this count has transport "-" and no code.
	LeftOut int64 `json:"left_out,omitempty"`
}

// SummariseRefusal fills r's message fields from m (nil when the message did
// not decode) and raw (the bytes as received, nil when unknown). Claimed
// strings are cut to a bounded length: they come from whoever sent them.
//
// Its cost is bounded by the summary, not by the message: Size, SHA256
// and the excerpt come from raw when the transport kept the bytes (one
// pass of SHA-256 over them, nothing copied beyond the excerpt); a
// message known only decoded is never encoded whole, and its excerpt is
// the JSON of a bounded copy (summaryOf: the headers that identify it,
// the start of body.text, each part's name and type without its content),
// with Size and SHA256 left out, since only the sender's bytes could say
// them truthfully.
func SummariseRefusal(r *Refusal, m *Message, raw []byte) {
	if len(raw) > 0 {
		sum := sha256.Sum256(raw)
		r.SHA256 = hex.EncodeToString(sum[:])
		if r.Size == 0 {
			r.Size = len(raw)
		}
		r.Excerpt = excerptOf(raw)
	}
	if m == nil {
		return
	}
	h := &m.Headers
	r.MessageID, r.Claimed, r.Phase, r.From = clip(h.MessageID, 200), clip(h.ConversationID, 200), clip(string(h.Phase), 32), clip(h.From.Agent, 200)
	if r.Excerpt != "" {
		return
	}
	if js, err := jsonv1.Marshal(summaryOf(m)); err == nil {
		r.Excerpt = clip(string(js), RefusalExcerpt)
	}
}

// excerptOf is the start of raw as text when it is UTF-8 (JSON as an
// HTTP body brings it), else in hex (a CBOR frame).
func excerptOf(raw []byte) string {
	s := string(raw[:min(len(raw), RefusalExcerpt)])
	for i := 0; i < utf8.UTFMax-1 && len(s) > 0 && !utf8.ValidString(s); i++ {
		s = s[:len(s)-1] // a rune cut at the end
	}
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		if len(s) < len(raw) {
			s += "…"
		}
		return s
	}
	n := RefusalExcerpt/2 - 4
	s = "hex:" + hex.EncodeToString(raw[:min(len(raw), n)])
	if len(raw) > n {
		s += "…"
	}
	return s
}

// The bounds of summaryOf: what a stranger can make a summary hold.
const (
	summaryField = 256 // bytes of any one header string
	summaryTo    = 4   // recipients
	summaryText  = 512 // bytes of body.text
	summaryParts = 8   // parts (name and content type only)
)

// summaryOf is a copy of m bounded in every direction: a message's
// recognisable shape, never its content. Headers beyond the identifying
// ones (thread, languages, capabilities, extensions), part contents, the
// trace and the signatures are left out (Refusal.Verified says what the
// signature came to).
func summaryOf(m *Message) *Message {
	h := &m.Headers
	c := &Message{IFP: m.IFP, Headers: Headers{
		MessageID: clip(h.MessageID, summaryField), Date: clip(h.Date, summaryField),
		From:           Agent{Agent: clip(h.From.Agent, summaryField), Display: clip(h.From.Display, summaryField)},
		ConversationID: clip(h.ConversationID, summaryField), Sequence: h.Sequence, Phase: Phase(clip(string(h.Phase), summaryField)),
		ContentType: clip(h.ContentType, summaryField), Subject: clip(h.Subject, summaryField),
		Disclosure: clip(h.Disclosure, summaryField), Persona: clip(h.Persona, summaryField),
	}, Body: Body{Text: clip(m.Body.Text, summaryText)}}
	for _, to := range h.To[:min(len(h.To), summaryTo)] {
		c.Headers.To = append(c.Headers.To, Agent{Agent: clip(to.Agent, summaryField)})
	}
	for _, p := range m.Body.Parts[:min(len(m.Body.Parts), summaryParts)] {
		c.Body.Parts = append(c.Body.Parts, Part{ContentType: clip(p.ContentType, summaryField), Name: clip(p.Name, summaryField)})
	}
	return c
}

// Clip cuts s to at most n bytes on a rune boundary, marking the cut with
// "…": for strings a stranger chose that are written to the audit log.
func Clip(s string, n int) string { return clip(s, n) }

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// RecordRefusal appends r to the day's record of refusals (.jsonl first,
// then .md) before returning. With limits (WithLimits), a refusal finds
// no room first: when the current day alone is over the quota, the day's
// refusals have their share of it, or the disk is below its watermark,
// nothing is written and the error wraps ErrNoRoom (the caller counts the
// refusal as left out). The strings of r are cut to bounded lengths.
func (a *AuditLog) RecordRefusal(r Refusal) error {
	if r.At.IsZero() {
		r.At = time.Now()
	}
	r.At = r.At.UTC()
	if err := a.refusalRoom(r.At.Format(auditDayLayout)); err != nil {
		return fmt.Errorf("recording a refusal: %w", err)
	}
	r.Reason = clip(r.Reason, 1<<10)
	r.Transport, r.Peer, r.Code = clip(r.Transport, 64), clip(r.Peer, 200), clip(r.Code, 64)
	r.MessageID, r.Claimed, r.Phase, r.From = clip(r.MessageID, 200), clip(r.Claimed, 200), clip(r.Phase, 32), clip(r.From, 200)
	r.SHA256, r.Excerpt = clip(r.SHA256, 64), clip(r.Excerpt, RefusalExcerpt)
	line := getBuffer()
	defer putBuffer(line)
	enc := jsonv1.NewEncoder(line)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&r); err != nil {
		return fmt.Errorf("recording a refusal: %w", err)
	}
	day := r.At.Format(auditDayLayout)
	f, err := a.file(day, refusedName)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	jsonl := f.path(a.dir, auditJSONLExt)
	created := false
	if err := a.appendTo(jsonl, false, func(size int64) []byte { created = size == 0; return line.Bytes() }); err != nil {
		return fmt.Errorf("recording a refusal in %s: %w", jsonl, err)
	}
	md := f.path(a.dir, auditMDExt)
	b := getBuffer()
	defer putBuffer(b)
	if err := a.appendTo(md, false, func(size int64) []byte {
		if size == 0 {
			fmt.Fprintf(b, "# Refused messages, %s (UTC)\n\nEach entry is a summary; none of these messages is part of a conversation.\n\n", day)
		}
		fmt.Fprintf(b, "%srefused %s via %s peer %s code %s -->\n", auditMarkerPrefix, r.At.Format(time.RFC3339Nano),
			markerField(r.Transport), markerField(orDash(r.Peer)), markerField(r.Code))
		b.WriteString("```json\n")
		b.Write(line.Bytes())
		b.WriteString("```\n\n")
		return b.Bytes()
	}); err != nil {
		return fmt.Errorf("recording a refusal in %s: %w", md, err)
	}
	var dirs []string
	if created {
		dirs = append(dirs, filepath.Join(a.dir, day))
	}
	return a.durable(jsonl, true, dirs...)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Refusals returns the refusals recorded on day (YYYY-MM-DD), oldest first.
// Torn lines are skipped and reported with an error wrapping
// ErrTornAuditLine, together with the refusals that did decode.
func (a *AuditLog) Refusals(day string) ([]Refusal, error) {
	if !auditDayName.MatchString(day) {
		return nil, fmt.Errorf("reading refusals: %q is not a day (YYYY-MM-DD)", day)
	}
	raw, err := os.ReadFile(filepath.Join(a.dir, day, refusedName+auditJSONLExt))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading refusals: %w", err)
	}
	var out []Refusal
	torn := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" {
			continue
		}
		var r Refusal
		if err := jsonv1.Unmarshal([]byte(line), &r); err != nil {
			torn++
			continue
		}
		out = append(out, r)
	}
	if torn > 0 {
		return out, fmt.Errorf("reading refusals of %s: %w (%d lines)", day, ErrTornAuditLine, torn)
	}
	return out, nil
}

// RefusalDays lists the days (YYYY-MM-DD) whose record of refusals holds
// anything, newest first.
func (a *AuditLog) RefusalDays() ([]string, error) {
	days, err := a.days()
	if err != nil {
		return nil, fmt.Errorf("listing the days of refusals: %w", err)
	}
	var out []string
	for i := len(days) - 1; i >= 0; i-- {
		if fi, err := os.Stat(filepath.Join(a.dir, days[i], refusedName+auditJSONLExt)); err == nil && fi.Size() > 0 {
			out = append(out, days[i])
		}
	}
	return out, nil
}
