package gossip

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// RefusalExcerpt bounds the part of a refused message a summary keeps:
// the excerpt as the record of refusals holds it — a JSON string, its
// quotes, escapes and the "…" that marks a cut included — is at most
// this many bytes.
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
		r.Excerpt = clipQuoted(string(js), false, RefusalExcerpt)
	}
}

// excerptOf is the start of raw as text when it is UTF-8 (JSON as an
// HTTP body brings it), else in hex (a CBOR frame), within RefusalExcerpt
// as written (clipQuoted).
func excerptOf(raw []byte) string {
	s := string(raw[:min(len(raw), RefusalExcerpt)])
	for i := 0; i < utf8.UTFMax-1 && len(s) > 0 && !utf8.ValidString(s); i++ {
		s = s[:len(s)-1] // a rune cut at the end
	}
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return clipQuoted(s, len(s) < len(raw), RefusalExcerpt)
	}
	n := RefusalExcerpt / 2
	return clipQuoted("hex:"+hex.EncodeToString(raw[:min(len(raw), n)]), len(raw) > n, RefusalExcerpt)
}

// quotedLen is the length of s as a JSON string in the record of
// refusals: its quotes, and each rune as the record's encoder writes it
// (HTML characters unescaped; \n \r \t \" \\ two bytes; other control
// characters, U+2028 and U+2029 at most six).
func quotedLen(s string) int {
	n := 2
	for _, r := range s {
		n += quotedRuneLen(r)
	}
	return n
}

func quotedRuneLen(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029':
		return 6
	case r == utf8.RuneError:
		return 3
	}
	return utf8.RuneLen(r)
}

// clipQuoted is s cut on a rune boundary so that, as a JSON string (quotes
// and escapes included) and with "…" after it when cut (or when more,
// already cut off, followed), it takes at most n bytes.
func clipQuoted(s string, more bool, n int) string {
	if !more && quotedLen(s) <= n {
		return s
	}
	budget := n - quotedLen("…")
	used := 0
	for i, r := range s {
		if used+quotedRuneLen(r) > budget {
			return s[:i] + "…"
		}
		used += quotedRuneLen(r)
	}
	return s + "…"
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
	day := r.At.Format(auditDayLayout)
	if err := a.refusalRoom(day, 0); err != nil {
		return fmt.Errorf("recording a refusal: %w", err)
	}
	r.Reason = clip(r.Reason, 1<<10)
	r.Transport, r.Peer, r.Code = clip(r.Transport, 64), clip(r.Peer, 200), clip(r.Code, 64)
	r.MessageID, r.Claimed, r.Phase, r.From = clip(r.MessageID, 200), clip(r.Claimed, 200), clip(r.Phase, 32), clip(r.From, 200)
	r.SHA256, r.Excerpt = clip(r.SHA256, 64), clipQuoted(r.Excerpt, false, RefusalExcerpt)
	line := getBuffer()
	defer putBuffer(line)
	enc := jsonv1.NewEncoder(line)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&r); err != nil {
		return fmt.Errorf("recording a refusal: %w", err)
	}
	f, err := a.file(day, refusedName)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b := getBuffer()
	defer putBuffer(b)
	fmt.Fprintf(b, "%srefused %s via %s peer %s code %s -->\n", auditMarkerPrefix, r.At.Format(time.RFC3339Nano),
		markerField(r.Transport), markerField(orDash(r.Peer)), markerField(r.Code))
	b.WriteString("```json\n")
	b.Write(line.Bytes())
	b.WriteString("```\n\n")
	title := fmt.Sprintf("# Refused messages, %s (UTC)\n\nEach entry is a summary; none of these messages is part of a conversation.\n\n", day)
	// The day's record stays within its share with this summary in it:
	// the most the two files can grow by is checked, under the record's
	// lock, before either is written.
	if err := a.refusalRoom(day, roundBlock(int64(line.Len()))+roundBlock(int64(len(title)+b.Len()))); err != nil {
		return fmt.Errorf("recording a refusal: %w", err)
	}
	jsonl := f.path(a.dir, auditJSONLExt)
	if !f.loaded {
		// A line a crash cut is ended before the next (its leaf, when the
		// log is tamper-evident, is the line as it was cut).
		torn, err := endsTorn(jsonl)
		if err != nil {
			return fmt.Errorf("recording a refusal in %s: %w", jsonl, err)
		}
		f.jsonlTorn, f.loaded = torn, true
	}
	created := false
	var off int64
	if err := a.appendTo(jsonl, func(size int64) []byte {
		created, off = size == 0, size
		if f.jsonlTorn && size > 0 {
			off++
			return append([]byte{'\n'}, line.Bytes()...)
		}
		return line.Bytes()
	}); err != nil {
		f.loaded = false
		return fmt.Errorf("recording a refusal in %s: %w", jsonl, err)
	}
	f.jsonlTorn = false
	md := f.path(a.dir, auditMDExt)
	if err := a.appendTo(md, func(size int64) []byte {
		if size == 0 {
			return append([]byte(title), b.Bytes()...)
		}
		return b.Bytes()
	}); err != nil {
		return fmt.Errorf("recording a refusal in %s: %w", md, err)
	}
	var dirs []string
	if created {
		dirs = append(dirs, filepath.Join(a.dir, day))
	}
	if err := a.durable(jsonl, true, dirs...); err != nil {
		return err
	}
	return a.appendLeaf(day, refusedName, off, line.Bytes()[:line.Len()-1])
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

// leftOutName is the file, in the log's directory, that carries the count
// of refusals left out of the record (counted, not written) from one run
// of the daemon to the next: KeepLeftOut writes it, OpenAuditLog reads it.
const leftOutName = ".refusals-left-out"

// LeftOut is the count of refusals left out of the record that the
// previous run kept (KeepLeftOut) and that no record has said yet; the
// caller adds it to its own count, so that the next record written says
// it.
func (a *AuditLog) LeftOut() int64 { return a.leftOut }

// KeepLeftOut keeps n, the count of refusals left out of the record and
// not yet said by a record written, for the next run (LeftOut); 0 keeps
// nothing.
func (a *AuditLog) KeepLeftOut(n int64) error {
	path := filepath.Join(a.dir, leftOutName)
	if n <= 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("keeping the count of refusals left out: %w", err)
		}
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(n, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("keeping the count of refusals left out: %w", err)
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("keeping the count of refusals left out: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("keeping the count of refusals left out: %w", err)
	}
	return syncDir(a.dir)
}

// readLeftOut reads what KeepLeftOut kept (at open).
func (a *AuditLog) readLeftOut() {
	raw, err := os.ReadFile(filepath.Join(a.dir, leftOutName))
	if err != nil {
		return
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err == nil && n > 0 {
		a.leftOut = n
	}
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
