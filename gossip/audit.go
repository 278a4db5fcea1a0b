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
	"sync/atomic"
	"time"
	"unicode"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/ifaced/ifaced/gossip/auditproof"
	"github.com/oklog/ulid/v2"
)

// The audit log (IFP-3 §5): every message sent and received, stored before
// the daemon acts on it, readable by a person in a text editor. The log is
// kept per peer and per UTC day, in a directory per day:
//
//	<day>/<peer>.md     the human-readable log of everything exchanged with
//	                    one peer that day. It opens with a "# " title naming
//	                    the peer and the day; then, per message, a marker
//	                    line naming the conversation, the message's IFP-3
//	                    rendering (RenderIFP3) and a blank line:
//
//	                    <!-- ifaced audit: received 2026-03-04T23:58:12Z peer 12D3KooW… via libp2p conversation conv:01J… — refused: … -->
//	                    ---
//	                    ifp: 3
//	                    …
//
//	                    When a message has no IFP-3 rendering, or its
//	                    rendering contains the text of a marker (a body could
//	                    otherwise forge entries for a reader), a fenced JSON
//	                    block of the message follows the marker instead: JSON
//	                    strings hold no raw line breaks, so nothing in a
//	                    message can start a line of its own.
//
//	                    The answer or refusal of a capability request is
//	                    followed by its decision (AuditEntry.Decision): a
//	                    blank line, the line "<!-- ifaced audit: decision -->"
//	                    (which no rendering holds, as above), then the
//	                    outcome, the facts, and one line per condition:
//
//	                    <!-- ifaced audit: decision -->
//	                    Decision: refused calendar.availability (conditions_not_met)
//	                    Facts: level 1 (signed only); tier public; temperature cool; persona default
//	                    - unmet min_disclosure: required professional, have public; ask the owner …
//	                    - met min_auth_level: required 1 (signed), have 1 (signed)
//	<day>/<peer>.jsonl  the same entries for programs: one JSON AuditEntry
//	                    per line. This file is the authoritative one;
//	                    Entries and Conversations read it.
//	<day>/_tree.*, _checkpoints.jsonl, _log.jsonl
//	                    with WithSigner, the day's tamper-evident tree, its
//	                    signed checkpoints and the log's own records
//	                    (audit_tree.go; docs/audit.md)
//	_format.json        absent: the layout is format 1, this one; a later
//	                    layout writes {"format": N} there, and a format
//	                    newer than AuditFormat is refused (audit_format.go)
//
// Why per peer and day rather than per conversation: a capabilities query
// is a conversation of two messages, and a daemon that finds peers by
// capability holds thousands a day. A file pair each meant thousands of
// files a day, and creating a file is the dearest step of recording a
// message (0.5–0.8 ms of kernel time on the ext4 disks measured, against
// 10 µs to append). Per peer and day, only the first message with a peer
// each day creates files; the day directories are what retention works on.
//
// <day> is YYYY-MM-DD of the entry's time (UTC). <peer> is the peer as
// recorded when it matches [A-Za-z0-9._-]{1,128}, holds no '_', does not
// start with '.' or '-', and is no name Windows reserves; anything else is
// "peer-" + the first 32 hex digits of its SHA-256 (a kept name never has
// that shape). A file that already belongs to another peer (as two peer
// IDs differing only in case meet on a case-insensitive file system) sends
// the peer to its hashed name. No peer or conversation ID, however
// hostile, names a file outside its day directory or writes into another
// peer's files.
//
// Record appends to the .jsonl before it returns, so a crash of the
// process (kill -9 included) loses nothing Record reported as recorded:
// the kernel holds the write. The .md is written by a background writer
// within milliseconds, and after a crash the next OpenAuditLog renders
// what a .md lacks from its .jsonl before it returns (audit_writer.go says
// why and how). When the .jsonl reaches the disk depends on the sync
// policy. By default (OpenAuditLog) Record also fsyncs the .jsonl (and
// the directories when it created a file) before it returns, so a power
// loss loses nothing either; with SyncEvery, a background task fsyncs the
// files written since its last pass at that interval (and at Sync and
// Close), so a power loss can lose the entries of the last interval, and
// Record costs no disk flush. The .md, a rendering of the .jsonl, is not
// fsynced: after a power loss its tail may be missing. A crash in the
// middle of a write can leave a torn line: the first Record into that
// file after OpenAuditLog ends it with a newline before appending, and
// Entries skips torn lines and reports them with ErrTornAuditLine. The
// handles of the most recently written files are held open (a bounded
// number; audit_writer.go), so thousands of peers cost no more file
// descriptors than a few.
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
	// Decision: on the entry of an answer or refusal this daemon sent to
	// a capability request, why it decided so. Only in the owner's log:
	// the message itself carries none of it.
	Decision *Decision `json:"decision,omitempty"`
	// Stranger: the peer is one the owner has not made known; the file
	// the entry goes into is then a strangers' file, within the
	// strangers' share of the log (StrangerShare, audit_strangers.go).
	// Not written: whether a peer is known is the owner's current
	// standing, not a fact of the message.
	Stranger bool `json:"-"`
}

// Decision is why this daemon answered or refused one capability
// request: the facts it established about the requester and each
// condition it evaluated on them, in the order it evaluated them (the
// capability's conditions, then the parameters against their schema,
// then the agent's result against output_schema). A condition it did not
// reach (the parameters of a request whose conditions failed) is not
// listed. It is written on the audit entry of the answer or refusal, in
// the same Record, and rendered under that message in the .md.
type Decision struct {
	Capability string              `json:"capability"`
	Outcome    string              `json:"outcome"`        // DecisionAnswered or DecisionRefused
	Code       string              `json:"code,omitempty"` // the wire code of a refusal
	Note       string              `json:"note,omitempty"` // e.g. why a capability that exists was refused as unknown
	Facts      DecisionFacts       `json:"facts"`
	Conditions []DecisionCondition `json:"conditions"`
}

// The outcomes of a Decision.
const (
	DecisionAnswered = "answered"
	DecisionRefused  = "refused"
)

// DecisionFacts are what the daemon established about a requester,
// never what the requester claimed.
type DecisionFacts struct {
	Level       int    `json:"level"`       // IFP-5 authentication level 0–3; -1: none (an unsigned caller, a revoked key)
	LevelHow    string `json:"level_how"`   // how the level was established
	Tier        string `json:"tier"`        // the disclosure tier granted
	Temperature string `json:"temperature"` // the temperature negotiated
	Persona     string `json:"persona"`     // the owner's persona in the conversation ("default" for none)
}

// DecisionCondition is one condition evaluated.
type DecisionCondition struct {
	Condition string `json:"condition"` // a conditions field (min_disclosure, …), "parameters" or "output_schema"
	Met       bool   `json:"met"`
	Detail    string `json:"detail"` // what was required and what was found; for an unmet one, how to meet it
}

// AuditConversation summarizes one recorded conversation.
type AuditConversation struct {
	ID       string    `json:"conversation_id"`
	Peers    []string  `json:"peers"` // in order of first appearance
	Messages int       `json:"messages"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	File     string    `json:"file"` // path of the .md file holding its first entry
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
	auditDayLayout    = "2006-01-02"
)

// AuditLog writes the audit log of IFP-3 §5 into one directory. It is safe
// for concurrent use; Records into one file are serialized, Records into
// different files are not.
type AuditLog struct {
	dir string

	mu     sync.Mutex
	closed bool
	files  map[string]*auditFile // by day + "/" + name
	names  map[string]string     // day + "/" + lower-cased name → the peer it belongs to
	today  string                // the newest day recorded; older days' state is dropped
	// Files being deleted (audit_strangers.go removeFiles), by day + "/" +
	// lower-cased name: closed once they are gone. A Record for that name
	// waits, then starts a new file.
	removing map[string]chan struct{}

	// With SyncEvery: the files and directories written and not yet fsynced.
	interval  time.Duration
	dirtyMu   sync.Mutex
	dirty     map[string]bool
	dirtyDirs map[string]bool
	syncMu    sync.Mutex // one pass at a time
	stop      chan struct{}
	stopped   chan struct{}

	spares *spareFiles // empty files made ahead, so a new peer's first message costs no file creation

	// audit_writer.go: the .jsonl handles held open (under mu) and the
	// background writer of the .md files.
	held map[*auditFile]struct{}
	tick uint64
	md   *mdWriter

	// The room on disk (audit_quota.go).
	limits    AuditLimits
	freeSpace func() (uint64, error) // asked at most every FreeSpaceEvery
	freeNow   func() (uint64, error) // asked each time: the .md writer's, while it yields to the .jsonl (audit_writer.go)
	now       func() time.Time
	usage     usage

	// Strangers' share (audit_strangers.go).
	known   func(peer string) bool // the peers the owner made known now; nil: none
	pruned  func(Pruned)           // told of each pass of pruning
	pruneMu sync.Mutex             // one pass at a time
	pruning atomic.Bool            // a pass started by a write is under way
	// pruneStuck: the last pass could make no room in the strangers'
	// share (StrangerRoom takes no slack then).
	pruneStuck atomic.Bool
	indexMu    sync.Mutex // the days' indexes of strangers' files: appended and rewritten one at a time

	leftOut int64 // refusals left out of the record, carried from the previous run (refusals.go)

	// The tamper-evident log (audit_tree.go): on with a signer.
	signer   auditproof.Signer
	former   []string // the signer's earlier keys (did:keys)
	treesMu  sync.Mutex
	trees    map[string]*dayTree // by day
	prunedMu sync.Mutex          // appends to the record of pruning, one at a time
	cpStop   chan struct{}
	cpDone   chan struct{}
}

// AuditOption adjusts how an audit log is written.
type AuditOption func(*AuditLog)

// SyncEvery makes Record write without fsyncing, and fsyncs what was
// written every interval instead (see the comment at the top of this file).
func SyncEvery(interval time.Duration) AuditOption {
	return func(a *AuditLog) { a.interval = interval }
}

// auditFile is the in-memory state of one peer's files of one day.
type auditFile struct {
	day, name, peer string

	mu        sync.Mutex
	loaded    bool     // the fields below reflect the files on disk
	jsonlTorn bool     // the .jsonl does not end with a newline
	jsonl     *os.File // held open (audit_writer.go); nil when closed
	jsonlSize int64
	used      uint64      // the log's use counter at this file's last Record (under AuditLog.mu)
	gone      atomic.Bool // the log dropped this state (closed, its day deleted or too old): look again
	deleted   atomic.Bool // its day was deleted: entries still queued for the .md are dropped

	// seqOf is read by the .md writer while Records go on.
	seqMu sync.Mutex
	seqOf map[string]int64 // message_id → sequence, first recorded wins
}

// seq is the sequence number recorded for a message ID of this file.
func (f *auditFile) seq(id string) (int64, bool) {
	f.seqMu.Lock()
	defer f.seqMu.Unlock()
	s, ok := f.seqOf[id]
	return s, ok
}

func (f *auditFile) path(dir, ext string) string { return filepath.Join(dir, f.day, f.name+ext) }

// OpenAuditLog opens (creating with mode 0700 when needed) the audit log in
// dir.
func OpenAuditLog(dir string, opts ...AuditOption) (*AuditLog, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	if _, err := readAuditFormat(dir); err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, fmt.Errorf("opening audit log: %w", err)
		}
	}
	a := &AuditLog{dir: dir, files: map[string]*auditFile{}, names: map[string]string{}, now: time.Now,
		held: map[*auditFile]struct{}{}, freeSpace: recentFree(func() (uint64, error) { return freeBytes(dir) }, FreeSpaceEvery, time.Now),
		freeNow: func() (uint64, error) { return freeBytes(dir) }, trees: map[string]*dayTree{}}
	for _, o := range opts {
		o(a)
	}
	limited := a.limits.MaxBytes > 0 || a.limits.Retention > 0
	if limited {
		if err := a.measure(); err != nil {
			return nil, fmt.Errorf("opening audit log: %w", err)
		}
	}
	a.readLeftOut()
	if a.interval > 0 {
		// Before beginRun: repairing a run that crashed writes records.
		a.dirty, a.dirtyDirs = map[string]bool{}, map[string]bool{}
	}
	spares, err := openSpareFiles(filepath.Join(dir, spareDir), spareTarget)
	if err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	a.spares = spares
	if err := a.beginRun(); err != nil {
		spares.close()
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	a.md = newMDWriter(a)
	if a.interval > 0 {
		a.stop, a.stopped = make(chan struct{}), make(chan struct{})
		go a.syncLoop()
	}
	if limited {
		// After the tree is ready: what retention and the quota delete
		// is recorded first (audit_tree.go).
		a.enforce()
	}
	if a.proofsOn() {
		a.cpStop, a.cpDone = make(chan struct{}), make(chan struct{})
		go a.checkpointLoop()
	}
	return a, nil
}

// Close ends the log: later Records fail with ErrAuditLogClosed, every
// entry recorded is rendered into its .md, what was written is fsynced,
// and the files held open are closed.
func (a *AuditLog) Close() error {
	a.mu.Lock()
	already := a.closed
	a.closed = true
	a.mu.Unlock()
	if already {
		return nil
	}
	// A pass pruning strangers' files finishes; none starts now.
	a.pruneMu.Lock()
	defer a.pruneMu.Unlock()
	// Records that hold a file finish (and queue their rendering); later
	// ones find it gone and the log closed.
	a.mu.Lock()
	files := make([]*auditFile, 0, len(a.files)+len(a.held))
	for _, f := range a.files {
		files = append(files, f)
	}
	for f := range a.held {
		files = append(files, f)
	}
	a.mu.Unlock()
	a.retire(files, false, true)
	rendered := a.md.close()
	var errs []error
	a.spares.close()
	if a.stop != nil {
		close(a.stop)
		<-a.stopped
		errs = append(errs, a.Sync())
	}
	// The last checkpoints; should they fail, the marker stays, and the
	// next open appends again what the tree lacks.
	treeErr := a.closeTrees()
	errs = append(errs, treeErr)
	if rendered && treeErr == nil {
		errs = append(errs, a.endRun())
	}
	return errors.Join(errs...)
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
			// A failure stays in the set and is reported by the next Sync
			// or Close; the loop goes on.
			_ = a.Sync()
		}
	}
}

// Sync fsyncs every file and directory written since the last pass.
// Without SyncEvery, Record has done it already.
func (a *AuditLog) Sync() error {
	if a.interval == 0 { // set once at open; the dirty maps are swapped under dirtyMu
		return nil
	}
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	a.dirtyMu.Lock()
	files, dirs := a.dirty, a.dirtyDirs
	a.dirty, a.dirtyDirs = map[string]bool{}, map[string]bool{}
	a.dirtyMu.Unlock()
	var errs []error
	retry := map[string]bool{}
	for path := range files {
		if err := syncFile(path); err != nil {
			errs = append(errs, fmt.Errorf("syncing audit log %s: %w", path, err))
			// A file someone removed has nothing left to sync.
			retry[path] = !errors.Is(err, fs.ErrNotExist)
		}
	}
	retryDirs := map[string]bool{}
	for dir := range dirs {
		if err := syncDir(dir); err != nil {
			errs = append(errs, fmt.Errorf("syncing audit log directory %s: %w", dir, err))
			retryDirs[dir] = !errors.Is(err, fs.ErrNotExist)
		}
	}
	if len(errs) > 0 {
		a.dirtyMu.Lock()
		for path, again := range retry {
			if again {
				a.dirty[path] = true
			}
		}
		for dir, again := range retryDirs {
			if again {
				a.dirtyDirs[dir] = true
			}
		}
		a.dirtyMu.Unlock()
	}
	return errors.Join(errs...)
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

// durable makes what Record wrote to path survive a power loss: at once
// (fsync) without SyncEvery, at the next pass with it. created lists the
// directories that gained an entry.
func (a *AuditLog) durable(path string, fsyncNow bool, created ...string) error {
	if a.interval > 0 {
		a.dirtyMu.Lock()
		if path != "" {
			a.dirty[path] = true
		}
		for _, d := range created {
			a.dirtyDirs[d] = true
		}
		a.dirtyMu.Unlock()
		return nil
	}
	if path != "" && fsyncNow {
		if err := syncFile(path); err != nil {
			return err
		}
	}
	for _, d := range created {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// Record appends e to its peer's files of the day of e.At (.jsonl first,
// then .md) before returning. It refuses a nil message, an empty
// conversation_id and a direction other than Sent or Received, and
// otherwise records the message as it is, valid or not. The reply-to
// numbers of the rendering come from the file's earlier entries.
func (a *AuditLog) Record(e AuditEntry) (err error) {
	defer func() {
		if noSpace(err) {
			a.md.diskFull() // its .md leaves the disk's returning room to the record
		}
	}()
	if e.Message == nil {
		return errors.New("recording audit entry: no message")
	}
	id := e.Message.Headers.ConversationID
	if id == "" {
		return errors.New("recording audit entry: message has no conversation_id")
	}
	if e.Peer == refusedName {
		return fmt.Errorf("recording audit entry: %q names the record of refusals, not a peer", e.Peer)
	}
	if e.Direction != Sent && e.Direction != Received {
		return fmt.Errorf("recording audit entry: direction %q is neither %q nor %q", e.Direction, Sent, Received)
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.At = e.At.UTC()
	line := getBuffer()
	defer putBuffer(line)
	// encoding/json's semantics on the faster v2 engine: a greeting's view
	// is large, and every message is encoded here.
	enc := jsonv1.NewEncoder(line)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&e); err != nil { // Encode ends the line with '\n'
		return fmt.Errorf("recording audit entry for conversation %q: %w", id, err)
	}

	f, err := a.lockedFile(e.At.Format(auditDayLayout), e.Peer)
	if err != nil {
		return err
	}
	defer f.mu.Unlock()
	if !f.loaded {
		if err := f.load(a.dir); err != nil {
			return err
		}
	}
	if e.Stranger {
		if err := a.listStranger(f); err != nil {
			return err
		}
	}
	off, err := f.append(a, e, line.Bytes())
	if err != nil {
		f.loaded = false // the files are in an unknown state: look again next time
		f.closeJSONL()
		return err
	}
	if err := a.appendLeaf(f.day, f.name, off, line.Bytes()[:line.Len()-1]); err != nil {
		return err
	}
	if f.gone.Load() {
		f.closeJSONL() // dropped while this Record wrote (audit_writer.go retire)
	}
	f.seqMu.Lock()
	if _, ok := f.seqOf[e.Message.Headers.MessageID]; !ok {
		f.seqOf[e.Message.Headers.MessageID] = e.Message.Headers.Sequence
	}
	f.seqMu.Unlock()
	// The message is rendered from e by the writer: the caller must not
	// change it after Record (what was sent or received does not change).
	a.md.enqueue(f, e, mdEntryFactor*int64(line.Len()))
	return nil
}

// lockedFile is file with f.mu held, looking again when the state it got
// was dropped before it could lock it.
func (a *AuditLog) lockedFile(day, peer string) (*auditFile, error) {
	for {
		f, err := a.file(day, peer)
		if err != nil {
			return nil, err
		}
		f.mu.Lock()
		if !f.gone.Load() {
			return f, nil
		}
		f.mu.Unlock()
	}
}

// file returns the state of peer's files of day, choosing their name on
// first use and creating the day's directory. While files of the name
// it chooses are being deleted, it waits until they are gone: a new file
// of that name is never opened before then, so no write goes into the
// files being deleted by way of their path.
func (a *AuditLog) file(day, peer string) (*auditFile, error) {
	for {
		f, removing, err := a.fileOnce(day, peer)
		if removing == nil {
			return f, err
		}
		<-removing
	}
}

// fileOnce is file, or the channel to wait on while the files of the
// name it chose are being deleted.
func (a *AuditLog) fileOnce(day, peer string) (*auditFile, <-chan struct{}, error) {
	var dropped []*auditFile
	defer func() {
		if len(dropped) > 0 {
			a.retire(dropped, false, false)
		}
	}()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, nil, ErrAuditLogClosed
	}
	a.tick++
	if day > a.today {
		// Yesterday's files may still get a late entry; older ones rarely
		// do, and their state is reloaded if they ever do.
		cutoff := dayBefore(day)
		for k, f := range a.files {
			if f.day < cutoff {
				delete(a.files, k)
				dropped = append(dropped, f)
			}
		}
		for k := range a.names {
			if k[:len(auditDayLayout)] < cutoff {
				delete(a.names, k)
			}
		}
		a.today = day
	}
	dayDir := filepath.Join(a.dir, day)
	key := day + "/" + peer
	if f := a.files[key]; f != nil {
		f.used = a.tick
		return f, nil, nil
	}
	if _, err := os.Stat(dayDir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dayDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, nil, fmt.Errorf("recording audit entry: %w", err)
		}
		if err := a.durable("", false, a.dir); err != nil {
			return nil, nil, fmt.Errorf("recording audit entry: %w", err)
		}
	}
	name := refusedName // not a name any peer's file can have (auditNames)
	if peer != refusedName {
		name = a.chooseName(day, peer)
	}
	if removing := a.removing[day+"/"+strings.ToLower(name)]; removing != nil {
		return nil, removing, nil
	}
	f := &auditFile{day: day, name: name, peer: peer, used: a.tick}
	a.files[key] = f
	a.names[day+"/"+strings.ToLower(name)] = peer
	return f, nil, nil
}

func dayBefore(day string) string {
	t, err := time.Parse(auditDayLayout, day)
	if err != nil {
		return day
	}
	return t.AddDate(0, 0, -1).Format(auditDayLayout)
}

// chooseName picks the file name of peer on day (see the comment at the
// top of this file). It is stable across restarts: once a peer was sent
// to its hashed name, that file exists and is found again.
func (a *AuditLog) chooseName(day, peer string) string {
	kept, hashed := auditNames(peer)
	if kept == "" {
		return hashed
	}
	if other, ok := a.names[day+"/"+strings.ToLower(kept)]; ok && other != peer {
		return hashed // another peer of this process has it (or its case-folded twin)
	}
	owner, err := auditFileOwner(filepath.Join(a.dir, day, kept+auditJSONLExt))
	switch {
	case err == nil && owner == peer:
		return kept
	case err == nil && owner != "":
		return hashed
	case err == nil: // present, but its first line says nothing: take it as ours
		return kept
	}
	if _, err := os.Stat(filepath.Join(a.dir, day, hashed+auditJSONLExt)); err == nil {
		return hashed
	}
	return kept
}

var (
	auditKeptName   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	auditHashedName = regexp.MustCompile(`(?i)^peer-[0-9a-f]{32}$`)
	auditDayName    = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	// Names Windows reserves in any directory, with any extension.
	auditReservedName = regexp.MustCompile(`(?i)^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)`)
)

// auditNames returns the kept name of a peer ("" when it has none) and its
// hashed name.
func auditNames(peer string) (kept, hashed string) {
	sum := sha256.Sum256([]byte(peer))
	hashed = "peer-" + hex.EncodeToString(sum[:16])
	if !auditKeptName.MatchString(peer) || strings.Contains(peer, "_") || auditHashedName.MatchString(peer) ||
		auditReservedName.MatchString(peer) || peer[0] == '.' || peer[0] == '-' {
		return "", hashed
	}
	return peer, hashed
}

// auditFileOwner returns the peer of the first entry in a .jsonl file, or
// "" when the file is empty or its first line does not decode.
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
	return e.Peer, nil
}

// Entries returns one conversation's entries in recorded order. Torn lines
// are skipped; if there were any, the entries that did decode come with an
// error wrapping ErrTornAuditLine that names the files and lines. Any other
// undecodable line is an error naming the file and line, with no entries. An
// unknown conversation is an error wrapping fs.ErrNotExist.
//
// A conversation ID holding a ULID (as ifaced's "conv:01J…" do) is looked
// for from the day before the ULID's time on; anything else, or a ULID
// whose time lies, is looked for everywhere.
func (a *AuditLog) Entries(conversationID string) ([]AuditEntry, error) {
	days, err := a.days()
	if err != nil {
		return nil, err
	}
	if from, ok := ulidDay(conversationID); ok {
		i, _ := slices.BinarySearch(days, dayBefore(from))
		if out, err := a.entriesIn(days[i:], conversationID); len(out) > 0 || err != nil {
			return out, err
		}
		days = days[:i]
	}
	out, err := a.entriesIn(days, conversationID)
	if len(out) == 0 && err == nil {
		return nil, fmt.Errorf("audit log has no conversation %q: %w", conversationID, fs.ErrNotExist)
	}
	return out, err
}

// entriesIn reads a conversation's entries from the files of days.
func (a *AuditLog) entriesIn(days []string, conversationID string) ([]AuditEntry, error) {
	// The ID as Record wrote it into each line: the same encoder, the same escapes.
	var q bytes.Buffer
	enc := jsonv1.NewEncoder(&q)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(conversationID); err != nil {
		return nil, err
	}
	quoted := bytes.TrimSuffix(q.Bytes(), []byte{'\n'})
	var out []AuditEntry
	var torn []error
	files := 0
	for _, day := range days {
		paths, err := a.entryFiles(day)
		if err != nil {
			return nil, err
		}
		for _, path := range paths {
			before := len(out)
			err := readAuditLines(path, false, func(line []byte) bool { return bytes.Contains(line, quoted) }, func(e AuditEntry) {
				if e.Message.Headers.ConversationID == conversationID {
					out = append(out, e)
				}
			})
			if errors.Is(err, ErrTornAuditLine) {
				torn = append(torn, err)
			} else if err != nil {
				return nil, err
			}
			if len(out) > before {
				files++
			}
		}
	}
	if files > 1 {
		// One file keeps recorded order; across files (days, or peers of
		// one conversation) time does.
		slices.SortStableFunc(out, func(x, y AuditEntry) int { return x.At.Compare(y.At) })
	}
	return out, errors.Join(torn...)
}

// Decided returns the entry that holds the decision on a capability
// request: the answer or refusal this daemon sent, found by its own
// message ID or by the ID of the request it answers (in_reply_to). The
// newest such entry wins. It reads the day files newest first with the
// reader Entries uses (a line is decoded only when it holds the ID) and
// stops at the first day that has the decision. An ID holding a ULID (as
// this daemon's "msg:01J…" do) is looked for from the day before the
// ULID's time on, and then, as with Entries, everywhere else. An ID with
// no decision is an error wrapping fs.ErrNotExist that says whether the
// log holds the message at all.
func (a *AuditLog) Decided(messageID string) (AuditEntry, error) {
	if messageID == "" {
		return AuditEntry{}, errors.New("looking up a decision: no message ID")
	}
	days, err := a.days()
	if err != nil {
		return AuditEntry{}, err
	}
	slices.Reverse(days)
	first, rest := days, []string(nil)
	if from, ok := ulidDay(messageID); ok {
		i := slices.IndexFunc(days, func(d string) bool { return d < dayBefore(from) })
		if i >= 0 {
			first, rest = days[:i], days[i:]
		}
	}
	seen := false
	for _, part := range [][]string{first, rest} {
		e, found, err := a.decidedIn(part, messageID, &seen)
		if found || err != nil {
			return e, err
		}
	}
	if seen {
		return AuditEntry{}, fmt.Errorf("audit log holds message %q but no decision on it (only the answer or refusal of a capability request, and the request it answers, have one): %w", messageID, fs.ErrNotExist)
	}
	return AuditEntry{}, fmt.Errorf("audit log has no message %q: %w", messageID, fs.ErrNotExist)
}

// decidedIn looks for the decision on messageID in the files of days,
// newest day first; seen is set when some entry has that message ID.
// Torn and undecodable lines are passed over: a decision is looked up,
// not audited.
func (a *AuditLog) decidedIn(days []string, messageID string, seen *bool) (AuditEntry, bool, error) {
	var q bytes.Buffer
	enc := jsonv1.NewEncoder(&q)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(messageID); err != nil {
		return AuditEntry{}, false, err
	}
	quoted := bytes.TrimSuffix(q.Bytes(), []byte{'\n'})
	for _, day := range days {
		paths, err := a.entryFiles(day)
		if err != nil {
			return AuditEntry{}, false, err
		}
		var best AuditEntry
		found := false
		for _, path := range paths {
			err := readAuditLines(path, true, func(line []byte) bool { return bytes.Contains(line, quoted) }, func(e AuditEntry) {
				h := &e.Message.Headers
				if h.MessageID == messageID {
					*seen = true
				}
				answers := h.Thread != nil && h.Thread.InReplyTo == messageID
				if e.Decision != nil && (h.MessageID == messageID || answers) && (!found || e.At.After(best.At)) {
					best, found = e, true
				}
			})
			if err != nil && !errors.Is(err, ErrTornAuditLine) {
				return AuditEntry{}, false, err
			}
		}
		if found {
			return best, true, nil
		}
	}
	return AuditEntry{}, false, nil
}

// ulidDay is the day of the ULID inside a conversation ID ("conv:01J…").
func ulidDay(id string) (string, bool) {
	_, rest, found := strings.Cut(id, ":")
	if !found {
		rest = id
	}
	u, err := ulid.ParseStrict(rest)
	if err != nil {
		return "", false
	}
	return ulid.Time(u.Time()).UTC().Format(auditDayLayout), true
}

// entryFiles lists the .jsonl files of day that hold conversations' entries:
// every peer's, not the record of refusals (refusals.go).
func (a *AuditLog) entryFiles(day string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(a.dir, day, "*"+auditJSONLExt))
	// The record of refusals, the index of strangers' files and the
	// record of pruned files start with '_', which no peer's name does.
	return slices.DeleteFunc(paths, func(p string) bool { return strings.HasPrefix(filepath.Base(p), "_") }), err
}

// days lists the day directories, oldest first.
func (a *AuditLog) days() ([]string, error) { return listDays(a.dir) }

// Conversations lists the recorded conversations, newest activity first.
// Torn lines are left out of the counts. A file that cannot be read is
// named in the returned error; the list holds every other conversation.
func (a *AuditLog) Conversations() ([]AuditConversation, error) {
	days, err := a.days()
	if err != nil {
		return nil, err
	}
	byID := map[string]*AuditConversation{}
	seenPeer := map[string]map[string]bool{}
	var errs []error
	for _, day := range days {
		paths, err := a.entryFiles(day)
		if err != nil {
			return nil, err
		}
		slices.Sort(paths)
		for _, path := range paths {
			md := strings.TrimSuffix(path, auditJSONLExt) + auditMDExt
			err := readAuditFile(path, false, func(e AuditEntry) {
				id := e.Message.Headers.ConversationID
				sum := byID[id]
				if sum == nil {
					sum = &AuditConversation{ID: id, Peers: []string{}, File: md, First: e.At, Last: e.At}
					byID[id] = sum
					seenPeer[id] = map[string]bool{}
				}
				if e.Peer != "" && !seenPeer[id][e.Peer] {
					seenPeer[id][e.Peer] = true
					sum.Peers = append(sum.Peers, e.Peer)
				}
				if e.At.Before(sum.First) {
					sum.First, sum.File = e.At, md
				}
				if e.At.After(sum.Last) {
					sum.Last = e.At
				}
				sum.Messages++
			})
			if err != nil && !errors.Is(err, ErrTornAuditLine) {
				errs = append(errs, err)
			}
		}
	}
	out := make([]AuditConversation, 0, len(byID))
	for _, c := range byID {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(x, y AuditConversation) int {
		if c := y.Last.Compare(x.Last); c != 0 {
			return c
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return out, errors.Join(errs...)
}

// ReceivedSince calls fn for each received entry recorded at or after
// since, reading only the files modified since then: after a crash, what
// was derived from messages as they arrived (the replay seen-set) is
// rebuilt from the log that recorded them first. Torn and undecodable
// lines are passed over. since is on the log's clock (WithClock), as the
// entries' dates are; a file's modification time is on the system's, so
// it is compared with since moved by the difference between the two.
func (a *AuditLog) ReceivedSince(since time.Time, fn func(AuditEntry)) error {
	days, err := a.days()
	if err != nil {
		return err
	}
	modifiedSince := since.Add(time.Now().Sub(a.now()))
	i, _ := slices.BinarySearch(days, dayBefore(since.UTC().Format(auditDayLayout)))
	for _, day := range days[i:] {
		paths, err := a.entryFiles(day)
		if err != nil {
			return err
		}
		for _, path := range paths {
			info, err := os.Stat(path)
			if err != nil || info.ModTime().Before(modifiedSince) {
				continue
			}
			err = readAuditFile(path, true, func(e AuditEntry) {
				if e.Direction == Received && !e.At.Before(since) {
					fn(e)
				}
			})
			if err != nil && !errors.Is(err, ErrTornAuditLine) {
				return fmt.Errorf("reading audit log: %w", err)
			}
		}
	}
	return nil
}

// load reads the file's .jsonl for the reply-to map, and the last byte of
// each file for a torn line left by a crash. Lines that do not decode are
// passed over: they cost a reply-to number at worst, and must not stop the
// daemon from recording.
func (f *auditFile) load(dir string) error {
	seqOf := map[string]int64{}
	jsonl := f.path(dir, auditJSONLExt)
	err := readAuditFile(jsonl, true, func(e AuditEntry) {
		if _, ok := seqOf[e.Message.Headers.MessageID]; !ok {
			seqOf[e.Message.Headers.MessageID] = e.Message.Headers.Sequence
		}
	})
	f.seqMu.Lock()
	f.seqOf = seqOf
	f.seqMu.Unlock()
	if err != nil && !errors.Is(err, ErrTornAuditLine) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("recording audit entry: %w", err)
	}
	if f.jsonlTorn, err = endsTorn(jsonl); err != nil {
		return fmt.Errorf("recording audit entry: %w", err)
	}
	f.loaded = true
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

// append writes one entry to the .jsonl through the handle f holds, and
// makes it durable as the sync policy says; it returns the offset of the
// line. The .md is the writer's (audit_writer.go).
func (f *auditFile) append(a *AuditLog, e AuditEntry, line []byte) (int64, error) {
	jsonl := f.path(a.dir, auditJSONLExt)
	fd, created, err := a.jsonlHandle(f)
	if err != nil {
		return 0, fmt.Errorf("recording audit entry in %s: %w", jsonl, err)
	}
	off := f.jsonlSize
	if f.jsonlTorn {
		line = append([]byte{'\n'}, line...)
		off++
	}
	n, err := fd.Write(line)
	if n > 0 {
		a.account(jsonl, f.jsonlSize, int64(n))
		f.jsonlSize += int64(n)
	}
	if err != nil {
		return 0, fmt.Errorf("recording audit entry in %s: %w", jsonl, err)
	}
	f.jsonlTorn = false
	var dirs []string
	if created {
		dirs = append(dirs, filepath.Join(a.dir, f.day))
	}
	if a.interval == 0 {
		if err := fd.Sync(); err != nil {
			return 0, fmt.Errorf("recording audit entry: syncing %s: %w", jsonl, err)
		}
	}
	if err := a.durable(jsonl, false, dirs...); err != nil {
		return 0, fmt.Errorf("recording audit entry: %w", err)
	}
	return off, nil
}

// appendTo opens path for appending (putting a spare file in its place
// when it does not exist) and writes what content returns for the file's
// current size.
func (a *AuditLog) appendTo(path string, content func(size int64) []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		a.spares.place(path)
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	}
	if err != nil {
		return err
	}
	st, err := f.Stat()
	var n int
	if err == nil {
		n, err = f.Write(content(st.Size()))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if n > 0 {
		a.account(path, st.Size(), int64(n))
	}
	return err
}

// Record's buffers are reused: a greeting's entry is tens of KB, rendered
// twice (JSON line, IFP-3), and growing fresh buffers for each was half of
// what the daemon allocated per greeting.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer {
	b := buffers.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuffer(b *bytes.Buffer) {
	// Only buffers of the usual size go back: a large one (a greeting
	// carrying a view of hundreds of KiB) kept in the pool would be
	// memory no budget counts, held a collection or two after its
	// message, for each Record that ran at once.
	if b.Cap() <= maxPooledBuffer {
		buffers.Put(b)
	}
}

// maxPooledBuffer is the largest buffer Record keeps for the next one.
const maxPooledBuffer = 256 << 10

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

func (f *auditFile) writeTitle(b *bytes.Buffer) {
	fmt.Fprintf(b, "# Peer %s, %s\n\n", markerField(f.peer), f.day)
	fmt.Fprintf(b, "Every message this daemon sent to or received from this peer on %s (UTC), in the order it "+
		"recorded them: each starts with an `<!-- ifaced audit: … -->` line naming its conversation, and is "+
		"followed by the message in IFP-3 form. %s beside this file holds the same entries for programs.\n\n",
		f.day, f.name+auditJSONLExt)
}

// writeEntry writes the marker line, the message, its decision (when it
// has one) and a blank line.
func (f *auditFile) writeEntry(b *bytes.Buffer, e AuditEntry) {
	fmt.Fprintf(b, "%s%s %s peer %s via %s conversation %s", auditMarkerPrefix, e.Direction, e.At.Format(time.RFC3339),
		markerField(e.Peer), markerField(e.Transport), markerField(e.Message.Headers.ConversationID))
	if e.Note != "" {
		b.WriteString(" — " + commentSafe(oneLine(e.Note)))
	}
	b.WriteString(" -->\n")
	start := b.Len()
	err := renderIFP3(b, e.Message, f.seq)
	if err == nil && !bytes.Contains(b.Bytes()[start:], []byte(auditMarkerPrefix)) {
		writeDecision(b, e.Decision)
		b.WriteByte('\n')
		return
	}
	b.Truncate(start)
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
	b.WriteString("\n```\n")
	writeDecision(b, e.Decision)
	b.WriteByte('\n')
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
	return readAuditLines(path, lenient, nil, fn)
}

// readAuditLines is readAuditFile decoding only the lines keep accepts (all
// when keep is nil); a line it passes over is still reported when torn.
func readAuditLines(path string, lenient bool, keep func(line []byte) bool, fn func(AuditEntry)) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted since it was listed (the quota, retention, or a pruned strangers' file)
	}
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
		if keep != nil && len(bytes.TrimSpace(line)) > 0 && !keep(line) {
			if unterminated || bytes.IndexByte(line, 0) >= 0 {
				torn = append(torn, strconv.Itoa(n))
			}
			line = nil
		}
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
