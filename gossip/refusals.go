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
// SHA-256, and the first RefusalExcerpt bytes of its JSON form — enough to
// recognise it, never enough to grow the disk by what a stranger sends.

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
	Excerpt   string    `json:"excerpt,omitempty"` // the first RefusalExcerpt bytes of the message's JSON form
}

// SummariseRefusal fills r's message fields from m (nil when the message did
// not decode) and raw (the bytes as received, nil when unknown). Claimed
// strings are cut to a bounded length: they come from whoever sent them.
func SummariseRefusal(r *Refusal, m *Message, raw []byte) {
	if len(raw) > 0 {
		sum := sha256.Sum256(raw)
		r.SHA256 = hex.EncodeToString(sum[:])
		if r.Size == 0 {
			r.Size = len(raw)
		}
	}
	if m == nil {
		return
	}
	h := &m.Headers
	r.MessageID, r.Claimed, r.Phase, r.From = clip(h.MessageID, 200), clip(h.ConversationID, 200), clip(string(h.Phase), 32), clip(h.From.Agent, 200)
	js, err := jsonv1.Marshal(m)
	if err != nil {
		return
	}
	if r.SHA256 == "" {
		sum := sha256.Sum256(js)
		r.SHA256 = hex.EncodeToString(sum[:])
		if r.Size == 0 {
			r.Size = len(js)
		}
	}
	r.Excerpt = clip(string(js), RefusalExcerpt)
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
// then .md) before returning.
func (a *AuditLog) RecordRefusal(r Refusal) error {
	if r.At.IsZero() {
		r.At = time.Now()
	}
	r.At = r.At.UTC()
	r.Reason = clip(r.Reason, 1<<10)
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
	if err := a.appendTo(jsonl, func(size int64) []byte { created = size == 0; return line.Bytes() }); err != nil {
		return fmt.Errorf("recording a refusal in %s: %w", jsonl, err)
	}
	md := f.path(a.dir, auditMDExt)
	b := getBuffer()
	defer putBuffer(b)
	if err := a.appendTo(md, func(size int64) []byte {
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
