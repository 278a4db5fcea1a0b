package gossip

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// The audit log (IFP-3 §5): every message sent and received, stored before
// the daemon acts on it, readable by a person in a text editor. One
// conversation is two files in the audit directory:
//
//	<name>.md     the human-readable log. It opens with "# Conversation <id>"
//	              and a sentence naming the peer; then, per message, a marker
//	              line, the message's IFP-3 rendering (RenderIFP3) and a
//	              blank line:
//
//	              <!-- ifaced audit: received 2026-03-04T23:58:12Z peer 12D3KooW… via libp2p — refused: … -->
//	              ---
//	              ifp: 3
//	              …
//
//	              When a message has no IFP-3 rendering, or its rendering
//	              contains the text of a marker (a body could otherwise forge
//	              entries for a reader), a fenced JSON block of the message
//	              follows the marker instead: JSON strings hold no raw line
//	              breaks, so nothing in a message can start a line of its own.
//	<name>.jsonl  the same entries for programs: one JSON AuditEntry per line.
//	              This file is the authoritative one; Entries reads it.
//
// <name> is the conversation_id with ':' replaced by '_' when the result
// matches [A-Za-z0-9._-]{1,128}, the id itself holds no '_' (so "con:1" and
// "con_1" cannot meet), and the result starts with neither '.' nor '-'.
// Anything else is named "conv-" + the first 32 hex digits of the SHA-256 of
// the id; a kept name never has that shape. A file that already belongs to
// another conversation (as on a case-insensitive file system) also sends the
// id to its hashed name. A hostile id therefore never leaves the directory
// and never writes into another conversation's files.
//
// Record appends to the .jsonl, then to the .md, before it returns, so a
// crash of the process (kill -9 included) loses nothing Record reported as
// recorded: the kernel holds the writes. When they reach the disk depends
// on the sync policy. By default (OpenAuditLog) Record also fsyncs the
// .jsonl (and the directory when it created a file) before it returns, so
// a power loss loses nothing either; with SyncEvery, a background task
// fsyncs the files written since its last pass at that interval (and at
// Sync and Close), so a power loss can lose the entries of the last
// interval, and Record costs no disk flush. The .md, a rendering of the
// .jsonl, is not fsynced: after a power loss its tail may be missing. A crash in the middle of a write can
// leave a torn line: the first Record of that conversation after OpenAuditLog
// ends it with a newline before appending, and Entries skips torn lines and
// reports them with ErrTornAuditLine. Files are opened for each Record rather
// than held open, so thousands of conversations cost no file descriptors.
//
// Entries decodes messages without validating them: the log also holds
// messages the daemon refused. As with DecodeJSON, numbers inside parts and
// extensions come back as float64; signatures, which cover the canonical JSON
// form, still verify.

// Direction says whether this daemon sent or received a message.
type Direction string

// The two directions of an audit entry.
const (
	Sent     Direction = "sent"
	Received Direction = "received"
)

// AuditEntry is one recorded message.
type AuditEntry struct {
	At        time.Time `json:"at"`             // when this daemon recorded it (UTC); Record fills it in when zero
	Direction Direction `json:"direction"`      // Sent or Received
	Peer      string    `json:"peer"`           // the remote peer ID (or HTTP caller) as established by the daemon
	Transport string    `json:"transport"`      // e.g. "libp2p", "https", "relay"
	Note      string    `json:"note,omitempty"` // e.g. "refused: signature does not verify"
	Message   *Message  `json:"message"`        // the full IFP-4 message with signatures
}

// AuditConversation summarizes one recorded conversation.
type AuditConversation struct {
	ID       string    `json:"conversation_id"`
	Peers    []string  `json:"peers"` // in order of first appearance
	Messages int       `json:"messages"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	File     string    `json:"file"` // path of the .md file
}

var (
	// ErrTornAuditLine: a line of a .jsonl audit file was cut short by a
	// crash in the middle of a write. Entries skips such lines and returns
	// the entries that did decode together with an error wrapping this one.
	ErrTornAuditLine = errors.New("audit log has a partial line (a write was interrupted)")
	// ErrAuditLogClosed: Record was called after Close.
	ErrAuditLogClosed = errors.New("audit log is closed")
)

const (
	auditMarkerPrefix = "<!-- ifaced audit: "
	auditMDExt        = ".md"
	auditJSONLExt     = ".jsonl"
)

// AuditLog writes the audit log of IFP-3 §5 into one directory. It is safe
// for concurrent use; Records of one conversation are serialized, Records of
// different conversations are not.
type AuditLog struct {
	dir string

	mu     sync.Mutex
	closed bool
	convs  map[string]*auditConv // by conversation_id
	names  map[string]string     // lower-cased file name → conversation_id

	// With SyncEvery: the files written and not yet fsynced, and whether
	// a file was created since the directory was last fsynced.
	interval time.Duration
	dirtyMu  sync.Mutex
	dirty    map[string]bool
	dirDirty bool
	syncMu   sync.Mutex // one pass at a time
	stop     chan struct{}
	stopped  chan struct{}

	spares *spareFiles // empty files made ahead, so a new conversation costs no file creation
}

// AuditOption adjusts how an audit log is written.
type AuditOption func(*AuditLog)

// SyncEvery makes Record write without fsyncing, and fsyncs what was
// written every interval instead (see the comment at the top of this file).
func SyncEvery(interval time.Duration) AuditOption {
	return func(a *AuditLog) { a.interval = interval }
}

// auditConv is the in-memory state of one conversation's files.
type auditConv struct {
	id   string
	name string

	mu        sync.Mutex
	loaded    bool             // the fields below reflect the files on disk
	seqOf     map[string]int64 // message_id → sequence, first recorded wins
	jsonlTorn bool             // the .jsonl does not end with a newline
	mdTorn    bool             // the .md does not end with a newline
}

// OpenAuditLog opens (creating with mode 0700 when needed) the audit log in
// dir.
func OpenAuditLog(dir string, opts ...AuditOption) (*AuditLog, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, fmt.Errorf("opening audit log: %w", err)
		}
	}
	a := &AuditLog{dir: dir, convs: map[string]*auditConv{}, names: map[string]string{}}
	for _, o := range opts {
		o(a)
	}
	spares, err := openSpareFiles(filepath.Join(dir, spareDir), spareTarget)
	if err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	a.spares = spares
	if a.interval > 0 {
		a.dirty = map[string]bool{}
		a.stop, a.stopped = make(chan struct{}), make(chan struct{})
		go a.syncLoop()
	}
	return a, nil
}

// Close ends the log: later Records fail with ErrAuditLogClosed, and what
// was written is fsynced. Nothing is held open between Records.
func (a *AuditLog) Close() error {
	a.mu.Lock()
	already := a.closed
	a.closed = true
	a.mu.Unlock()
	if already {
		return nil
	}
	a.spares.close()
	if a.stop == nil {
		return nil
	}
	close(a.stop)
	<-a.stopped
	return a.Sync()
}

func (a *AuditLog) syncLoop() {
	defer close(a.stopped)
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			// A failure is kept in the set and reported by the next Sync
			// or Close; the loop goes on.
			_ = a.Sync()
		}
	}
}

// Sync fsyncs every file written since the last pass (and the directory
// when files were created). Without SyncEvery, Record has done it already.
func (a *AuditLog) Sync() error {
	if a.dirty == nil {
		return nil
	}
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	a.dirtyMu.Lock()
	files, dir := a.dirty, a.dirDirty
	a.dirty, a.dirDirty = map[string]bool{}, false
	a.dirtyMu.Unlock()
	var errs []error
	failed := map[string]bool{}
	for path := range files {
		if err := syncFile(path); err != nil {
			errs = append(errs, fmt.Errorf("syncing audit log %s: %w", path, err))
			// A file someone removed has nothing left to sync; retry the rest.
			failed[path] = !errors.Is(err, fs.ErrNotExist)
		}
	}
	if dir {
		if err := syncDir(a.dir); err != nil {
			errs = append(errs, fmt.Errorf("syncing audit log directory: %w", err))
		}
	}
	if len(errs) > 0 {
		a.dirtyMu.Lock()
		for path, retry := range failed {
			if retry {
				a.dirty[path] = true
			}
		}
		a.dirDirty = a.dirDirty || dir
		a.dirtyMu.Unlock()
	}
	return errors.Join(errs...)
}

// written notes a file Record wrote without fsyncing.
func (a *AuditLog) written(path string, created bool) {
	a.dirtyMu.Lock()
	a.dirty[path] = true
	a.dirDirty = a.dirDirty || created
	a.dirtyMu.Unlock()
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Record appends e to its conversation's files (.jsonl first, fsynced,
// then .md) before returning. It refuses a nil message, an empty
// conversation_id and a direction other than Sent or Received, and
// otherwise records the message as it is, valid or not. The reply-to numbers
// of the rendering come from the conversation's earlier entries.
func (a *AuditLog) Record(e AuditEntry) error {
	if e.Message == nil {
		return errors.New("recording audit entry: no message")
	}
	id := e.Message.Headers.ConversationID
	if id == "" {
		return errors.New("recording audit entry: message has no conversation_id")
	}
	if e.Direction != Sent && e.Direction != Received {
		return fmt.Errorf("recording audit entry: direction %q is neither %q nor %q", e.Direction, Sent, Received)
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.At = e.At.UTC()
	var line bytes.Buffer
	// encoding/json's semantics on the faster v2 engine: a greeting's view
	// is large, and every message is encoded here.
	enc := jsonv1.NewEncoder(&line)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&e); err != nil { // Encode ends the line with '\n'
		return fmt.Errorf("recording audit entry for conversation %q: %w", id, err)
	}

	c, err := a.conv(id, true)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded {
		if err := c.load(a.dir); err != nil {
			return err
		}
	}
	if err := c.append(a, e, line.Bytes()); err != nil {
		c.loaded = false // the files are in an unknown state: look again next time
		return err
	}
	if _, ok := c.seqOf[e.Message.Headers.MessageID]; !ok {
		c.seqOf[e.Message.Headers.MessageID] = e.Message.Headers.Sequence
	}
	return nil
}

// Entries returns one conversation's entries in recorded order. Torn lines
// are skipped; if there were any, the entries that did decode come with an
// error wrapping ErrTornAuditLine that names the file and lines. Any other
// undecodable line is an error naming the file and line, with no entries. An
// unknown conversation is an error wrapping fs.ErrNotExist.
func (a *AuditLog) Entries(conversationID string) ([]AuditEntry, error) {
	c, err := a.conv(conversationID, false)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []AuditEntry
	err = readAuditFile(filepath.Join(a.dir, c.name+auditJSONLExt), false, func(e AuditEntry) { out = append(out, e) })
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("audit log has no conversation %q: %w", conversationID, fs.ErrNotExist)
	}
	if err != nil && !errors.Is(err, ErrTornAuditLine) {
		return nil, err
	}
	return out, err
}

// Conversations lists the recorded conversations, newest activity first.
// Torn lines are left out of the counts. A file that cannot be read is
// named in the returned error; the list holds every other conversation.
func (a *AuditLog) Conversations() ([]AuditConversation, error) {
	des, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, fmt.Errorf("listing audit log: %w", err)
	}
	var out []AuditConversation
	var errs []error
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), auditJSONLExt)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		sum := AuditConversation{File: filepath.Join(a.dir, name+auditMDExt)}
		seen := map[string]bool{}
		err := readAuditFile(filepath.Join(a.dir, de.Name()), false, func(e AuditEntry) {
			if sum.ID == "" {
				sum.ID = e.Message.Headers.ConversationID
			}
			if e.Peer != "" && !seen[e.Peer] {
				seen[e.Peer] = true
				sum.Peers = append(sum.Peers, e.Peer)
			}
			if sum.Messages == 0 || e.At.Before(sum.First) {
				sum.First = e.At
			}
			if sum.Messages == 0 || e.At.After(sum.Last) {
				sum.Last = e.At
			}
			sum.Messages++
		})
		if err != nil && !errors.Is(err, ErrTornAuditLine) {
			errs = append(errs, err)
			continue
		}
		if sum.Messages == 0 {
			continue // created, but nothing recorded before a crash
		}
		if sum.Peers == nil {
			sum.Peers = []string{}
		}
		out = append(out, sum)
	}
	slices.SortFunc(out, func(x, y AuditConversation) int {
		if c := y.Last.Compare(x.Last); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return out, errors.Join(errs...)
}

// conv returns the state of conversation id, choosing its file name on
// first use. Only Records (record true) are refused after Close.
func (a *AuditLog) conv(id string, record bool) (*auditConv, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if record && a.closed {
		return nil, ErrAuditLogClosed
	}
	if c := a.convs[id]; c != nil {
		return c, nil
	}
	name := a.chooseName(id)
	c := &auditConv{id: id, name: name}
	a.convs[id] = c
	a.names[strings.ToLower(name)] = id
	return c, nil
}

// chooseName picks the file name of conversation id (see the comment at the
// top of this file). It is stable across restarts: once a conversation was
// sent to its hashed name, that file exists and is found again.
func (a *AuditLog) chooseName(id string) string {
	kept, hashed := auditNames(id)
	if kept == "" {
		return hashed
	}
	if other, ok := a.names[strings.ToLower(kept)]; ok && other != id {
		return hashed // another conversation of this process has it (or its case-folded twin)
	}
	owner, err := auditFileOwner(filepath.Join(a.dir, kept+auditJSONLExt))
	switch {
	case err == nil && owner == id:
		return kept
	case err == nil && owner != "":
		return hashed
	case err == nil: // present, but its first line says nothing: take it as ours
		return kept
	}
	if _, err := os.Stat(filepath.Join(a.dir, hashed+auditJSONLExt)); err == nil {
		return hashed
	}
	return kept
}

var (
	auditKeptName   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	auditHashedName = regexp.MustCompile(`(?i)^conv-[0-9a-f]{32}$`)
	// Names Windows reserves in any directory, with any extension.
	auditReservedName = regexp.MustCompile(`(?i)^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)`)
)

// auditNames returns the kept name of conversation id ("" when it has none)
// and its hashed name.
func auditNames(id string) (kept, hashed string) {
	sum := sha256.Sum256([]byte(id))
	hashed = "conv-" + hex.EncodeToString(sum[:16])
	if strings.Contains(id, "_") {
		return "", hashed
	}
	n := strings.ReplaceAll(id, ":", "_")
	if !auditKeptName.MatchString(n) || auditHashedName.MatchString(n) || auditReservedName.MatchString(n) ||
		n[0] == '.' || n[0] == '-' {
		return "", hashed
	}
	return n, hashed
}

// auditFileOwner returns the conversation_id of the first entry in a .jsonl
// file, or "" when the file is empty or its first line does not decode.
func auditFileOwner(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil && err != io.EOF {
		return "", err
	}
	var e AuditEntry
	if json.Unmarshal(line, &e) != nil || e.Message == nil {
		return "", nil
	}
	return e.Message.Headers.ConversationID, nil
}

// load reads the conversation's files: the .jsonl for the reply-to map, and
// the last byte of each for a torn line left by a crash. Lines that do not
// decode are passed over: they cost a reply-to number at worst, and must not
// stop the daemon from recording.
func (c *auditConv) load(dir string) error {
	c.seqOf = map[string]int64{}
	jsonl := filepath.Join(dir, c.name+auditJSONLExt)
	err := readAuditFile(jsonl, true, func(e AuditEntry) {
		if _, ok := c.seqOf[e.Message.Headers.MessageID]; !ok {
			c.seqOf[e.Message.Headers.MessageID] = e.Message.Headers.Sequence
		}
	})
	if err != nil && !errors.Is(err, ErrTornAuditLine) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("recording audit entry: %w", err)
	}
	if c.jsonlTorn, err = endsTorn(jsonl); err != nil {
		return fmt.Errorf("recording audit entry: %w", err)
	}
	if c.mdTorn, err = endsTorn(filepath.Join(dir, c.name+auditMDExt)); err != nil {
		return fmt.Errorf("recording audit entry: %w", err)
	}
	c.loaded = true
	return nil
}

// endsTorn reports whether a file exists, is not empty and does not end
// with a newline.
func endsTorn(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false, err
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
		return false, err
	}
	return last[0] != '\n', nil
}

// append writes one entry to both files.
func (c *auditConv) append(a *AuditLog, e AuditEntry, line []byte) error {
	var created bool
	dir := a.dir
	jsonl := filepath.Join(dir, c.name+auditJSONLExt)
	if c.jsonlTorn {
		line = append([]byte{'\n'}, line...)
	}
	if err := a.appendTo(jsonl, func(size int64) []byte {
		created = created || size == 0
		return line
	}, a.dirty == nil); err != nil {
		return fmt.Errorf("recording audit entry in %s: %w", jsonl, err)
	}
	c.jsonlTorn = false

	md := filepath.Join(dir, c.name+auditMDExt)
	// The .md is a rendering of the .jsonl, which is fsynced above: it is
	// written but not synced, so a record costs one fsync, not two. After
	// a process crash it is complete (the kernel holds the write); after a
	// power loss its tail may be missing or torn, and the .jsonl still
	// holds every entry.
	if err := a.appendTo(md, func(size int64) []byte {
		var b bytes.Buffer
		if size == 0 {
			created = true
			c.writeTitle(&b, e)
		}
		if c.mdTorn {
			b.WriteString("\n\n(The entry above was cut short by an interrupted write; " + c.name + auditJSONLExt + " holds what was recorded.)\n\n")
		}
		c.writeEntry(&b, e)
		return b.Bytes()
	}, false); err != nil {
		return fmt.Errorf("recording audit entry in %s: %w", md, err)
	}
	c.mdTorn = false
	if a.dirty != nil {
		a.written(jsonl, created)
		return nil
	}
	if created {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("recording audit entry: %w", err)
		}
	}
	return nil
}

// appendTo opens path for appending (putting a spare file in its place
// when it does not exist), writes what content returns for the file's
// current size, and fsyncs when sync.
func (a *AuditLog) appendTo(path string, content func(size int64) []byte, sync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		a.spares.place(path)
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	}
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err == nil {
		_, err = f.Write(content(st.Size()))
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (c *auditConv) writeTitle(b *bytes.Buffer, e AuditEntry) {
	fmt.Fprintf(b, "# Conversation %s\n\n", oneLine(c.id))
	fmt.Fprintf(b, "With peer %s (via %s). Every message this daemon sent or received in this conversation, "+
		"in the order it recorded them: each starts with an `<!-- ifaced audit: … -->` line and is followed "+
		"by the message in IFP-3 form. %s beside this file holds the same entries for programs.\n\n",
		markerField(e.Peer), markerField(e.Transport), c.name+auditJSONLExt)
}

// writeEntry writes the marker line, the message and a blank line.
func (c *auditConv) writeEntry(b *bytes.Buffer, e AuditEntry) {
	fmt.Fprintf(b, "%s%s %s peer %s via %s", auditMarkerPrefix, e.Direction, e.At.Format(time.RFC3339),
		markerField(e.Peer), markerField(e.Transport))
	if e.Note != "" {
		b.WriteString(" — " + commentSafe(oneLine(e.Note)))
	}
	b.WriteString(" -->\n")
	r, err := RenderIFP3(e.Message, func(id string) (int64, bool) { s, ok := c.seqOf[id]; return s, ok })
	if err == nil && !bytes.Contains(r, []byte(auditMarkerPrefix)) {
		b.Write(r)
		b.WriteByte('\n')
		return
	}
	j, jerr := json.MarshalIndent(e.Message, "", "  ")
	if jerr != nil { // cannot happen: the same message was just encoded for the .jsonl
		j = []byte(strconv.Quote(jerr.Error()))
	}
	if err != nil {
		fmt.Fprintf(b, "(No IFP-3 rendering: %s. The message as JSON:)\n\n", commentSafe(oneLine(err.Error())))
	} else {
		b.WriteString("(The IFP-3 rendering would contain an audit marker line, so the message is shown as JSON:)\n\n")
	}
	b.WriteString("```json\n")
	b.Write(j)
	b.WriteString("\n```\n\n")
}

// oneLine replaces line breaks and other control characters with spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\u0085' {
			return ' '
		}
		return r
	}, s)
}

// commentSafe keeps s from closing the HTML comment of a marker line.
func commentSafe(s string) string {
	for strings.Contains(s, "--") {
		s = strings.ReplaceAll(s, "--", "- -")
	}
	return s
}

// markerField makes a one-word field of a marker line.
func markerField(s string) string {
	if s == "" {
		return "-"
	}
	return commentSafe(strings.Join(strings.Fields(oneLine(s)), "_"))
}

// readAuditFile calls fn for each entry of a .jsonl file in order. Torn
// lines (cut off inside the JSON, holding NUL bytes from a crash, or a last
// line without its newline that does not decode) are skipped and reported
// with ErrTornAuditLine; any other bad line stops the reading, or is skipped
// silently when lenient.
func readAuditFile(path string, lenient bool, fn func(AuditEntry)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var torn []string
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		unterminated := err == io.EOF
		if len(bytes.TrimSpace(line)) > 0 {
			var e AuditEntry
			// Without its newline, a line cut short ends inside the JSON value.
			dec := json.NewDecoder(bytes.NewReader(bytes.TrimSuffix(line, []byte{'\n'})))
			derr := dec.Decode(&e)
			if derr == nil {
				if _, extra := dec.Token(); extra != io.EOF {
					derr = errors.New("more than one JSON value on the line")
				}
			}
			if derr == nil && e.Message == nil {
				derr = errors.New("entry has no message")
			}
			switch {
			case derr == nil:
				fn(e)
			case errors.Is(derr, io.ErrUnexpectedEOF) || bytes.IndexByte(line, 0) >= 0 || unterminated:
				torn = append(torn, strconv.Itoa(n))
			case lenient:
			default:
				return fmt.Errorf("%s: line %d: %v", path, n, derr)
			}
		}
		if unterminated {
			break
		}
	}
	if len(torn) > 0 {
		return fmt.Errorf("%s: line %s: %w; skipped", path, strings.Join(torn, ", "), ErrTornAuditLine)
	}
	return nil
}

// ReceivedSince calls fn for each received entry recorded at or after
// since, reading only the .jsonl files modified since then: after a crash,
// what was derived from messages as they arrived (the replay seen-set) is
// rebuilt from the log that recorded them first. Torn and undecodable
// lines are passed over.
func (a *AuditLog) ReceivedSince(since time.Time, fn func(AuditEntry)) error {
	des, err := os.ReadDir(a.dir)
	if err != nil {
		return fmt.Errorf("reading audit log: %w", err)
	}
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), auditJSONLExt) || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil || info.ModTime().Before(since) {
			continue
		}
		err = readAuditFile(filepath.Join(a.dir, de.Name()), true, func(e AuditEntry) {
			if e.Direction == Received && !e.At.Before(since) {
				fn(e)
			}
		})
		if err != nil && !errors.Is(err, ErrTornAuditLine) {
			return fmt.Errorf("reading audit log: %w", err)
		}
	}
	return nil
}
