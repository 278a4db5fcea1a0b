package gossip

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/ifaced/ifaced/gossip/auditproof"
)

// The tamper-evident log (docs/audit.md says it for a second
// implementation). With WithSigner, every record the audit log writes is
// a leaf of an append-only Merkle tree (RFC 9162 hashing, package
// gossip/auditproof), one tree per day directory: a peer's entry
// (sent or received, the decision with it), a refusal summary, a record
// of what a policy pruned, and the log's own records (<day>/_log.jsonl).
// A leaf's data is the record's line as written, without its newline.
//
//   - Record (and RecordRefusal, and the records below) append the line
//     first, then its leaf. The tree's appends are buffered and written
//     with each checkpoint: every CheckpointEvery while records arrive,
//     and at Close, the daemon flushes the tree, makes the lines and the
//     tree durable, and appends a checkpoint signed with its key to
//     <day>/_checkpoints.jsonl. A crash loses the tree's unwritten tail,
//     never a signed leaf; at the next open the records past what the
//     tree covers are appended anew ("recovered" record).
//   - A day's first leaf is an "open" record naming the newest earlier
//     day's tree (its size and root: the days form a chain, so a day
//     deleted without a record breaks it) and the newest earlier day
//     directory that has no tree (recorded before this log existed).
//   - Content a file holds that no leaf covers when a record is appended
//     to it (a file from before the log existed) is pinned by an "adopt"
//     record: its byte range and SHA-256.
//   - Deletions by policy leave a record first (_pruned.jsonl, a leaf of
//     the current day): a strangers' file pruned names its day, name and
//     number in the day's file table, so its leaves read "pruned by policy
//     at …"; a day deleted by retention or the quota names its tree's size
//     and root. When today's record of pruning has no room left, no
//     stranger's file is pruned (new strangers wait): a deletion is never
//     unrecorded.
//
// VerifyAuditLog (audit_verify.go) checks a home's log offline; the
// bundles of audit_bundle.go carry records with their proofs.

// CheckpointEvery is how often the daemon signs a checkpoint of each
// day's tree that grew.
const CheckpointEvery = 2 * time.Second

// logName is the file (without extension) of the log's own records.
const logName = "_log"

// WithSigner turns the tamper-evident log on: every record is a leaf of
// its day's tree, and s signs the checkpoints (the daemon's identity).
func WithSigner(s auditproof.Signer) AuditOption {
	return func(a *AuditLog) { a.signer = s }
}

// LogRecord is one of the records the tamper-evident log writes about
// itself, in <day>/_log.jsonl (see the top of this file).
type LogRecord struct {
	Record string    `json:"record"` // "open", "adopt" or "recovered"
	At     time.Time `json:"at"`
	// open
	Day              string    `json:"day,omitempty"`
	Previous         *TreeLink `json:"previous,omitempty"`
	UntrackedThrough string    `json:"untracked_through,omitempty"`
	// adopt
	File   string `json:"file,omitempty"`
	From   int64  `json:"from,omitempty"`
	To     int64  `json:"to,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// recovered
	Leaves int64 `json:"leaves,omitempty"`
	Files  int   `json:"files,omitempty"`
}

// The kinds of LogRecord.
const (
	LogOpen      = "open"
	LogAdopt     = "adopt"
	LogRecovered = "recovered"
)

// TreeLink names a day's tree at a size: its root hash then, in standard
// base64.
type TreeLink struct {
	Day  string `json:"day"`
	Size int64  `json:"size"`
	Root string `json:"root,omitempty"`
}

// dayTree is the open tree of one day.
type dayTree struct {
	day  string
	once sync.Once
	err  error
	t    *auditproof.Tree

	// mu orders the day's own records (_log.jsonl) with the leaves:
	// lock order auditFile.mu → dayTree.mu → the Tree's.
	mu   sync.Mutex
	gone bool // closed or deleted: look again

	cpMu   sync.Mutex
	signed int64 // the size of its last checkpoint
}

// proofsOn says whether the log is tamper-evident.
func (a *AuditLog) proofsOn() bool { return a.signer != nil }

// dayTree returns the open tree of day, opening it (and writing its open
// record when it is new) on first use.
func (a *AuditLog) dayTree(day string) (*dayTree, error) {
	a.treesMu.Lock()
	dt := a.trees[day]
	if dt == nil {
		dt = &dayTree{day: day}
		a.trees[day] = dt
	}
	a.treesMu.Unlock()
	dt.once.Do(func() { dt.err = a.openDayTree(dt) })
	if dt.err != nil {
		a.treesMu.Lock()
		if a.trees[day] == dt {
			delete(a.trees, day)
		}
		a.treesMu.Unlock()
		return nil, dt.err
	}
	return dt, nil
}

func (a *AuditLog) openDayTree(dt *dayTree) error {
	dir := filepath.Join(a.dir, dt.day)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("opening the audit tree of %s: %w", dt.day, err)
	}
	t, err := auditproof.OpenTree(dir, func(path string, size, n int64) { a.accountQuiet(path, size, n) })
	if err != nil {
		return err
	}
	dt.t = t
	dt.signed = lastCheckpointSize(dir)
	if t.Size() > 0 {
		return nil
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	if st, err := os.Stat(filepath.Join(dir, logName+auditJSONLExt)); err == nil && st.Size() > 0 {
		// The day's open record was written and the tree lost before its
		// first write (a crash): the record is the file's first line, and
		// becomes leaf 0 again.
		if _, _, err := a.recoverFiles(dt, []string{logName}); err != nil {
			t.Close()
			return err
		}
		return nil
	}
	rec := LogRecord{Record: LogOpen, At: a.now().UTC(), Day: dt.day}
	rec.Previous, rec.UntrackedThrough = a.previousTree(dt.day)
	if err := a.writeLogRecord(dt, rec); err != nil {
		t.Close()
		return err
	}
	return nil
}

// previousTree names the newest tree of a day before day, and the newest
// day directory before day that has none.
func (a *AuditLog) previousTree(day string) (*TreeLink, string) {
	days, err := a.days()
	if err != nil {
		return nil, ""
	}
	var link *TreeLink
	untracked := ""
	for i := len(days) - 1; i >= 0; i-- {
		d := days[i]
		if d >= day {
			continue
		}
		if _, err := os.Stat(filepath.Join(a.dir, d, auditproof.LeavesFile)); err != nil {
			if untracked == "" {
				untracked = d
			}
			continue
		}
		if link == nil {
			link = a.treeLink(d)
		}
		if untracked != "" {
			break
		}
	}
	return link, untracked
}

// treeLink is day's tree as it is now: from the open tree when there is
// one, else from its files.
func (a *AuditLog) treeLink(day string) *TreeLink {
	a.treesMu.Lock()
	dt := a.trees[day]
	a.treesMu.Unlock()
	if dt != nil && dt.t != nil && dt.err == nil {
		size, root := dt.t.Root()
		return &TreeLink{Day: day, Size: size, Root: base64.StdEncoding.EncodeToString(root[:])}
	}
	r, err := auditproof.OpenReader(filepath.Join(a.dir, day))
	if err != nil {
		return &TreeLink{Day: day}
	}
	defer r.Close()
	root, err := r.TreeHash(r.Size())
	if err != nil {
		return &TreeLink{Day: day}
	}
	return &TreeLink{Day: day, Size: r.Size(), Root: base64.StdEncoding.EncodeToString(root[:])}
}

// lastCheckpointSize is the size of the last checkpoint in dir, 0 when
// there is none (it is not verified: it only saves signing the same size
// twice).
func lastCheckpointSize(dir string) int64 {
	raw, err := os.ReadFile(filepath.Join(dir, auditproof.CheckpointsFile))
	if err != nil {
		return 0
	}
	lines := bytes.Split(bytes.TrimRight(raw, "\n"), []byte{'\n'})
	for i := len(lines) - 1; i >= 0; i-- {
		var note string
		if json.Unmarshal(lines[i], &note) != nil {
			continue
		}
		text, _, _ := strings.Cut(note, "\n\n")
		if c, err := auditproof.ParseCheckpoint(text + "\n"); err == nil {
			return c.Size
		}
	}
	return 0
}

// appendLeaf adds the leaf of a record just written to file name of day
// at offset (record is the line without its newline). Content of the
// file before offset that no leaf covers is adopted first.
func (a *AuditLog) appendLeaf(day, name string, offset int64, record []byte) error {
	if !a.proofsOn() {
		return nil
	}
	h := auditproof.LeafHash(record)
	for {
		dt, err := a.dayTree(day)
		if err != nil {
			return fmt.Errorf("recording audit entry: %w", err)
		}
		dt.mu.Lock()
		if dt.gone {
			dt.mu.Unlock()
			continue // closed meanwhile (an old day dropped): open it again
		}
		err = a.appendLeafLocked(dt, name, offset, len(record), h)
		dt.mu.Unlock()
		return err
	}
}

func (a *AuditLog) appendLeafLocked(dt *dayTree, name string, offset int64, length int, h auditproof.Hash) error {
	end, _ := dt.t.End(name)
	if offset > end {
		if err := a.adopt(dt, name, end, offset); err != nil {
			return err
		}
	}
	if _, err := dt.t.Append(name, offset, length, h); err != nil {
		return fmt.Errorf("recording audit entry: %w", err)
	}
	return nil
}

// adopt pins bytes [from, to) of a file, which no leaf covers, with an
// adopt record.
func (a *AuditLog) adopt(dt *dayTree, name string, from, to int64) error {
	f, err := os.Open(filepath.Join(a.dir, dt.day, name+auditJSONLExt))
	if err != nil {
		return fmt.Errorf("recording audit entry: adopting %s: %w", name, err)
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(f, from, to-from)); err != nil {
		return fmt.Errorf("recording audit entry: adopting %s: %w", name, err)
	}
	return a.writeLogRecord(dt, LogRecord{Record: LogAdopt, At: a.now().UTC(), File: name, From: from, To: to,
		SHA256: hex.EncodeToString(sum.Sum(nil))})
}

// writeLogRecord appends one of the log's own records to the day's
// _log.jsonl, and its leaf. The caller holds dt.mu.
func (a *AuditLog) writeLogRecord(dt *dayTree, rec LogRecord) error {
	line, err := encodeLine(&rec)
	if err != nil {
		return err
	}
	path := filepath.Join(a.dir, dt.day, logName+auditJSONLExt)
	off, err := a.appendRecordLine(path, line)
	if err != nil {
		return fmt.Errorf("writing the audit log's %s record: %w", rec.Record, err)
	}
	if _, err := dt.t.Append(logName, off, len(line)-1, auditproof.LeafHash(line[:len(line)-1])); err != nil {
		return fmt.Errorf("writing the audit log's %s record: %w", rec.Record, err)
	}
	return nil
}

// encodeLine is v as one JSON line, as Record writes entries.
func encodeLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := jsonv1.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// appendRecordLine appends line (ending with a newline) to the record
// file at path, after a newline when a crash left its last line torn,
// makes it durable as the sync policy says, and returns the offset of the
// line.
func (a *AuditLog) appendRecordLine(path string, line []byte) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	size, off := st.Size(), st.Size()
	if size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil {
			f.Close()
			return 0, err
		}
		if last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
			off++
		}
	}
	n, err := f.Write(line)
	if n > 0 {
		a.accountQuiet(path, size, int64(n))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	var created []string
	if size == 0 {
		created = append(created, filepath.Dir(path))
	}
	return off, a.durable(path, true, created...)
}

// Checkpoint signs a checkpoint of each day's tree that grew since its
// last one (the daemon does it every CheckpointEvery, and Close), and
// lets go of the trees of days before yesterday. Without WithSigner it
// does nothing.
func (a *AuditLog) Checkpoint() error {
	if !a.proofsOn() {
		return nil
	}
	a.treesMu.Lock()
	trees := make([]*dayTree, 0, len(a.trees))
	for _, dt := range a.trees {
		trees = append(trees, dt)
	}
	a.treesMu.Unlock()
	var errs []error
	cutoff := dayBefore(a.currentDay())
	for _, dt := range trees {
		if dt.err != nil || dt.t == nil {
			continue
		}
		if err := a.checkpoint(dt); err != nil {
			errs = append(errs, err)
			continue
		}
		if dt.day < cutoff {
			a.dropTree(dt, true)
		}
	}
	return errors.Join(errs...)
}

// checkpoint signs a checkpoint of dt when it grew.
func (a *AuditLog) checkpoint(dt *dayTree) error {
	dt.cpMu.Lock()
	defer dt.cpMu.Unlock()
	size, root, err := dt.t.Flush()
	if err != nil || size == dt.signed {
		return err
	}
	// The records of the leaves signed reach the disk first (Record
	// fsynced its own unless the sync policy is SyncEvery), then the tree.
	if err := a.Sync(); err != nil {
		return fmt.Errorf("checkpointing the audit log of %s: %w", dt.day, err)
	}
	if err := dt.t.Sync(); err != nil {
		return fmt.Errorf("checkpointing the audit log of %s: %w", dt.day, err)
	}
	note, err := auditproof.Sign(auditproof.Checkpoint{Origin: auditproof.Origin(dt.day), Size: size, Root: root, Time: a.now()}, a.signer)
	if err != nil {
		return fmt.Errorf("checkpointing the audit log of %s: %w", dt.day, err)
	}
	if err := dt.t.AppendCheckpoint(note); err != nil {
		return fmt.Errorf("checkpointing the audit log of %s: %w", dt.day, err)
	}
	dt.signed = size
	return nil
}

// dropTree closes dt and forgets it: its day is old (sign: a leaf a
// record appended since its last checkpoint gets one first), or deleted.
func (a *AuditLog) dropTree(dt *dayTree, sign bool) {
	a.treesMu.Lock()
	if a.trees[dt.day] == dt {
		delete(a.trees, dt.day)
	}
	a.treesMu.Unlock()
	dt.mu.Lock()
	dt.gone = true // no leaf is appended to it from now on
	dt.mu.Unlock()
	if dt.t == nil {
		return
	}
	if sign {
		_ = a.checkpoint(dt) // a failure leaves the leaves to the next open's recovery
	}
	// A deleted day's flush may fail: nothing of it is kept anyway.
	dt.t.Close()
}

func (a *AuditLog) checkpointLoop() {
	defer close(a.cpDone)
	t := time.NewTicker(CheckpointEvery)
	defer t.Stop()
	for {
		select {
		case <-a.cpStop:
			return
		case <-t.C:
			// A failure is tried again at the next tick; Close reports it.
			_ = a.Checkpoint()
		}
	}
}

// closeTrees signs the last checkpoints and closes every tree (Close).
func (a *AuditLog) closeTrees() error {
	if !a.proofsOn() {
		return nil
	}
	close(a.cpStop)
	<-a.cpDone
	err := a.Checkpoint()
	a.treesMu.Lock()
	trees := make([]*dayTree, 0, len(a.trees))
	for _, dt := range a.trees {
		trees = append(trees, dt)
	}
	a.treesMu.Unlock()
	for _, dt := range trees {
		if dt.t != nil {
			a.dropTree(dt, true)
		}
	}
	return err
}

// recoverTrees appends the leaves a crash lost: in each day with a tree
// written since since, the records of each file past what its leaves
// cover, in file order (a line cut by the crash is a leaf as it is).
func (a *AuditLog) recoverTrees(since time.Time) error {
	days, err := a.days()
	if err != nil {
		return err
	}
	var errs []error
	for _, day := range days {
		dir := filepath.Join(a.dir, day)
		st, err := os.Stat(filepath.Join(dir, auditproof.LeavesFile))
		if err != nil {
			continue // no tree: the day predates the log
		}
		des, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		recent := !st.ModTime().Before(since)
		var files []string
		for _, de := range des {
			name, ok := strings.CutSuffix(de.Name(), auditJSONLExt)
			if !ok || !de.Type().IsRegular() || name == strangersIndexName || de.Name() == auditproof.CheckpointsFile {
				continue
			}
			if info, err := de.Info(); err == nil && !info.ModTime().Before(since) {
				files = append(files, name)
				recent = true
			}
		}
		if !recent || len(files) == 0 {
			continue
		}
		dt, err := a.dayTree(day)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		dt.mu.Lock()
		leaves, touched, err := a.recoverFiles(dt, files)
		if err == nil && leaves > 0 {
			err = a.writeLogRecord(dt, LogRecord{Record: LogRecovered, At: a.now().UTC(), Leaves: leaves, Files: touched})
		}
		dt.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("recovering the audit tree of %s: %w", day, err))
		}
	}
	return errors.Join(errs...)
}

// recoverFiles appends the leaves of the records past each file's
// covered end. The caller holds dt.mu.
func (a *AuditLog) recoverFiles(dt *dayTree, names []string) (leaves int64, touched int, err error) {
	// The log's own records first: a day's open record is its leaf 0.
	slices.SortFunc(names, func(x, y string) int {
		switch {
		case x == y:
			return 0
		case x == logName:
			return -1
		case y == logName:
			return 1
		}
		return strings.Compare(x, y)
	})
	for _, name := range names {
		end, _ := dt.t.End(name)
		f, err := os.Open(filepath.Join(a.dir, dt.day, name+auditJSONLExt))
		if err != nil {
			return leaves, touched, err
		}
		n, err := func() (int64, error) {
			defer f.Close()
			st, err := f.Stat()
			if err != nil || st.Size() <= end {
				return 0, err
			}
			r := bufio.NewReaderSize(io.NewSectionReader(f, end, st.Size()-end), 64<<10)
			off, count := end, int64(0)
			for {
				line, rerr := r.ReadBytes('\n')
				if len(line) > 0 {
					rec := bytes.TrimSuffix(line, []byte{'\n'})
					if _, err := dt.t.Append(name, off, len(rec), auditproof.LeafHash(rec)); err != nil {
						return count, err
					}
					count++
					off += int64(len(line))
				}
				if rerr == io.EOF {
					return count, nil
				}
				if rerr != nil {
					return count, rerr
				}
			}
		}()
		leaves += n
		if n > 0 {
			touched++
		}
		if err != nil {
			return leaves, touched, err
		}
	}
	return leaves, touched, nil
}

// treeNumber is the number of a file of day in its tree's table, when the
// day has a tree and the file a leaf.
func (a *AuditLog) treeNumber(day, name string) *int {
	if !a.proofsOn() {
		return nil
	}
	a.treesMu.Lock()
	dt := a.trees[day]
	a.treesMu.Unlock()
	if dt != nil && dt.t != nil && dt.err == nil {
		if n, ok := dt.t.Number(name); ok {
			return &n
		}
		return nil
	}
	r, err := auditproof.OpenReader(filepath.Join(a.dir, day))
	if err != nil {
		return nil
	}
	defer r.Close()
	if n, ok := auditproof.Current(r.Names())[name]; ok {
		return &n
	}
	return nil
}

// retireFile ends the current generation of a pruned file in its day's
// tree.
func (a *AuditLog) retireFile(day, name string) {
	if !a.proofsOn() {
		return
	}
	if _, err := os.Stat(filepath.Join(a.dir, day, auditproof.LeavesFile)); err != nil {
		return
	}
	dt, err := a.dayTree(day)
	if err != nil {
		return
	}
	dt.mu.Lock()
	defer dt.mu.Unlock()
	if !dt.gone {
		dt.t.Retire(name)
	}
}

// forgetTree drops a day's tree before its directory is deleted, and
// returns what it was: its size and root.
func (a *AuditLog) forgetTree(day string) *TreeLink {
	if !a.proofsOn() {
		return nil
	}
	link := a.treeLink(day)
	a.treesMu.Lock()
	dt := a.trees[day]
	a.treesMu.Unlock()
	if dt != nil && dt.t != nil {
		a.dropTree(dt, false)
	}
	if link.Root == "" {
		return &TreeLink{Day: day}
	}
	return link
}
