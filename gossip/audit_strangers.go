package gossip

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Strangers' share of the audit log. A stranger — a peer the owner has not
// made known, or an anonymous HTTP caller — costs nothing to be, so what
// strangers' conversations write is bounded apart from what the owner's
// peers' conversations write, and is the first to go:
//
//   - A peer's file of a day (its .jsonl and .md) is a strangers' file
//     once an entry recorded while the peer was a stranger (AuditEntry.
//     Stranger) went into it. It is listed, when that happens, in the
//     day's index, <day>/_strangers.jsonl: one line {"file", "peer"} per
//     file, so that a restart finds the strangers' files again.
//   - Strangers' files take at most MaxBytes/StrangerShare across the
//     whole log (whole 4 KiB blocks, as the quota counts).
//   - When a stranger's new conversation finds that share used up
//     (StrangerRoom), strangers' files are deleted to make room — the
//     oldest day's first, and within a day the least recently written
//     first — until they take at most three quarters of the share. A file
//     whose peer the owner has made known since (WithKnown) is never
//     deleted: it leaves the strangers' files. Nothing else is ever
//     deleted for strangers: not the owner's peers' files, not the record
//     of refusals, not a day.
//   - Each such pass is written down before any file goes, in
//     <day>/_pruned.jsonl of the current day: one line {at, reason,
//     files: [{day, file, peer, bytes, tree_file}], bytes} naming every
//     file (tree_file: its number in its day's tamper-evident tree, so that
//     its records read "pruned by policy" there; audit_tree.go), within
//     MaxBytes/PrunedShare a day. When the day's record has no room left,
//     nothing is pruned (StrangerRoom refuses new strangers until the next
//     day, or until the owner raises audit.max_mb): a deletion is never
//     left unrecorded. The daemon also logs each pass (WithPruned).
//     Retention and the quota write the days they delete there too
//     (reason "retention" or "quota", days: [{day, bytes, size, root}]),
//     before deleting them.
//
// So new strangers are taken (their oldest history goes instead) while
// the record of what went has room, and strangers never push the owner's
// peers' history out of the quota.

// PrunedShare bounds the record of pruned strangers' files of one day:
// MaxBytes/PrunedShare. A file named there takes about 200 bytes, and a
// strangers' file at least two blocks (8 KiB): the record has room for
// the strangers' share to turn over about ten times a day.
const PrunedShare = 64

// The names of a day's index of strangers' files and record of pruned
// files (a peer's kept name never starts with '_').
const (
	strangersIndexName = "_strangers"
	prunedName         = "_pruned"
)

// strangerFile is one listed strangers' file.
type strangerFile struct {
	day, name, peer string
	bytes           int64  // its .jsonl and .md, in whole blocks
	last            uint64 // usage.tick at its last write (or its order at open)
}

// PrunedFile is one strangers' file deleted to make room.
type PrunedFile struct {
	Day   string `json:"day"`
	File  string `json:"file"`
	Peer  string `json:"peer"`
	Bytes int64  `json:"bytes"`
	// TreeFile is the file's number in its day's tree (the generation
	// pruned), when the log is tamper-evident and the file had a leaf.
	TreeFile *int `json:"tree_file,omitempty"`
}

// PrunedDay is one day deleted by retention or the quota.
type PrunedDay struct {
	Day   string `json:"day"`
	Bytes int64  `json:"bytes"`          // its directory, in whole blocks
	Size  int64  `json:"size,omitempty"` // the leaves of its tree
	Root  string `json:"root,omitempty"` // its tree's root hash then (standard base64); absent: the day had no tree
}

// Pruned is one deletion by policy: a pass of deleting strangers' files,
// or a day retention or the quota deleted. It is what the record of
// pruning holds, and what WithPruned is told (of strangers' passes).
type Pruned struct {
	At     time.Time    `json:"at"`
	Reason string       `json:"reason,omitempty"` // PrunedStrangers (also when absent, in older records), PrunedRetention or PrunedQuota
	Files  []PrunedFile `json:"files"`
	Days   []PrunedDay  `json:"days,omitempty"`
	Bytes  int64        `json:"bytes"` // all that was deleted, in whole blocks
	// Older records only: files deleted and not listed, and passes of the
	// day not written down before this one.
	More           int `json:"more,omitempty"`
	UnlistedBefore int `json:"unlisted_before,omitempty"`
}

// The reasons of a Pruned.
const (
	PrunedStrangers = "strangers"
	PrunedRetention = "retention"
	PrunedQuota     = "quota"
)

// WithKnown tells the log which peers the owner has made known now: their
// files are never deleted to make room for strangers.
func WithKnown(known func(peer string) bool) AuditOption {
	return func(a *AuditLog) { a.known = known }
}

// WithPruned has the log tell f of each pass of deleting strangers' files
// (the daemon logs it).
func WithPruned(f func(Pruned)) AuditOption {
	return func(a *AuditLog) { a.pruned = f }
}

type strangerIndexLine struct {
	File string `json:"file"`
	Peer string `json:"peer"`
}

// loadStrangers reads the day's index of strangers' files (at open,
// within measure; the caller holds nothing).
func (a *AuditLog) loadStrangers(day string, sizes map[string]int64) {
	raw, err := os.ReadFile(filepath.Join(a.dir, day, strangersIndexName+auditJSONLExt))
	if err != nil {
		return
	}
	u := &a.usage
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var l strangerIndexLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.File == "" || strings.ContainsAny(l.File, `/\`) {
			continue
		}
		key := day + "/" + l.File
		if _, ok := u.strangerFiles[key]; ok {
			continue
		}
		n, ok := sizes[l.File]
		if !ok {
			continue // pruned, or never written
		}
		u.tick++
		u.strangerFiles[key] = &strangerFile{day: day, name: l.File, peer: l.Peer, bytes: n, last: u.tick}
		u.strangers += n
	}
}

// listStranger lists f, into which an entry recorded while its peer was a
// stranger goes, among the strangers' files (once a day). The caller
// holds f.mu.
func (a *AuditLog) listStranger(f *auditFile) error {
	if a.usage.days == nil {
		return nil // no limits
	}
	key := f.day + "/" + f.name
	u := &a.usage
	u.mu.Lock()
	_, listed := u.strangerFiles[key]
	u.mu.Unlock()
	if listed {
		return nil
	}
	line, err := json.Marshal(strangerIndexLine{File: f.name, Peer: f.peer})
	if err != nil {
		return err
	}
	a.indexMu.Lock()
	defer a.indexMu.Unlock()
	if err := a.appendTo(filepath.Join(a.dir, f.day, strangersIndexName+auditJSONLExt), func(int64) []byte { return append(line, '\n') }); err != nil {
		return fmt.Errorf("listing a stranger's audit file: %w", err)
	}
	var n int64
	for _, ext := range []string{auditJSONLExt, auditMDExt} {
		if st, err := os.Stat(f.path(a.dir, ext)); err == nil {
			n += roundBlock(st.Size())
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, listed := u.strangerFiles[key]; !listed {
		u.tick++
		u.strangerFiles[key] = &strangerFile{day: f.day, name: f.name, peer: f.peer, bytes: n, last: u.tick}
		u.strangers += n
	}
	return nil
}

// makeStrangersRoom deletes strangers' files, the oldest first, until they
// take at most three quarters of their share (see the top of this file).
// It reports whether they are within their share afterwards, or some room
// was made (conversations admitted meanwhile may be writing past it: the
// next write prunes again).
func (a *AuditLog) makeStrangersRoom() bool {
	max := a.limits.MaxBytes / StrangerShare
	target := max / 4 * 3
	a.pruneMu.Lock()
	defer a.pruneMu.Unlock()
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return false
	}
	u := &a.usage
	u.mu.Lock()
	if u.strangers <= max {
		u.mu.Unlock()
		return true
	}
	queue := make([]strangerFile, 0, len(u.strangerFiles))
	for _, sf := range u.strangerFiles {
		queue = append(queue, *sf)
	}
	u.mu.Unlock()
	slices.SortFunc(queue, func(x, y strangerFile) int {
		if c := strings.Compare(x.day, y.day); c != 0 {
			return c
		}
		return int(x.last) - int(y.last)
	})
	// The plan first: which files go. Then the record of them, and only
	// then the files.
	pass := Pruned{At: a.now().UTC(), Reason: PrunedStrangers, Files: []PrunedFile{}}
	touched := map[string]bool{}
	u.mu.Lock()
	projected := u.strangers
	u.mu.Unlock()
	var plan []strangerFile
	for _, sf := range queue {
		if projected <= target {
			break
		}
		touched[sf.day] = true
		projected -= sf.bytes
		if a.known != nil && a.known(sf.peer) {
			a.unlistStranger(sf.day, sf.name) // an established peer's now
			continue
		}
		plan = append(plan, sf)
		pass.Files = append(pass.Files, PrunedFile{Day: sf.day, File: sf.name, Peer: sf.peer, Bytes: sf.bytes,
			TreeFile: a.treeNumber(sf.day, sf.name)})
		pass.Bytes += sf.bytes
	}
	if len(plan) > 0 && a.recordPruned(pass, false) {
		if a.pruned != nil {
			a.pruned(pass)
		}
		// A file that could not be deleted is taken off the count all the
		// same (removeFiles): the pass is recorded and reported already,
		// and a file that stayed counted would be planned first, and fail,
		// in every later pass.
		_ = a.removeFiles(plan)
	} else {
		pass.Bytes = 0
	}
	for day := range touched {
		a.rewriteStrangersIndex(day)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.strangers <= max || pass.Bytes > 0
}

// unlistStranger takes a file out of the strangers' files.
func (a *AuditLog) unlistStranger(day, name string) {
	u := &a.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	if sf, ok := u.strangerFiles[day+"/"+name]; ok {
		u.strangers -= sf.bytes
		delete(u.strangerFiles, day+"/"+name)
	}
}

// removeFiles deletes peers' files of a day (strangers' files) and
// forgets their state, after any Record writing into them is done and
// the .md writer has rendered or given up every entry queued for them.
// Until the files are gone and taken off the count, a Record for one of
// their names waits (file): what is written into a file is what is
// counted, and what goes is what was counted. The files go together,
// with one wait for the .md writer (mdWriter.dropFiles).
func (a *AuditLog) removeFiles(files []strangerFile) error {
	if len(files) == 0 {
		return nil
	}
	var dropped []*auditFile
	keys := make([]string, len(files))
	dones := make([]chan struct{}, len(files))
	mds := make([]string, len(files))
	going := make(map[string]bool, len(files)) // day + "/" + name
	for i, sf := range files {
		keys[i] = sf.day + "/" + strings.ToLower(sf.name)
		dones[i] = make(chan struct{})
		mds[i] = filepath.Join(a.dir, sf.day, sf.name) + auditMDExt
		going[sf.day+"/"+sf.name] = true
	}
	a.mu.Lock()
	if a.removing == nil {
		a.removing = map[string]chan struct{}{}
	}
	for k, f := range a.files {
		if going[f.day+"/"+f.name] {
			delete(a.files, k)
			dropped = append(dropped, f)
		}
	}
	for i, key := range keys {
		delete(a.names, key)
		a.removing[key] = dones[i]
	}
	a.mu.Unlock()
	// Each name is free again as soon as its file is gone and counted (a
	// Record for it waits until then, not for the whole pass).
	released := 0
	release := func(upTo int) {
		a.mu.Lock()
		for _, key := range keys[released:upTo] {
			delete(a.removing, key)
		}
		a.mu.Unlock()
		for _, done := range dones[released:upTo] {
			close(done)
		}
		released = upTo
	}
	defer func() { release(len(files)) }()
	a.retire(dropped, true, true)
	for _, sf := range files {
		a.retireFile(sf.day, sf.name) // a file of that name written later is another generation in the tree
	}
	if a.md != nil {
		a.md.dropFiles(mds)
	}
	var errs []error
	for i, sf := range files {
		base := filepath.Join(a.dir, sf.day, sf.name)
		if a.interval > 0 {
			a.dirtyMu.Lock()
			delete(a.dirty, base+auditJSONLExt) // the log removes it: nothing left to sync
			a.dirtyMu.Unlock()
		}
		var freed int64
		for _, ext := range []string{auditJSONLExt, auditMDExt} {
			st, err := os.Stat(base + ext)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil {
				err = os.Remove(base + ext)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("pruning a stranger's audit file %s: %w", base, err))
				continue
			}
			freed += roundBlock(st.Size())
		}
		u := &a.usage
		u.mu.Lock()
		u.days[sf.day] -= freed
		u.total -= freed
		if listed, ok := u.strangerFiles[sf.day+"/"+sf.name]; ok {
			u.strangers -= listed.bytes
			delete(u.strangerFiles, sf.day+"/"+sf.name)
		}
		u.mu.Unlock()
		release(i + 1)
	}
	return errors.Join(errs...)
}

// rewriteStrangersIndex writes the day's index anew with the files still
// listed (or removes it when none is), so that it does not grow with the
// files pruned.
func (a *AuditLog) rewriteStrangersIndex(day string) {
	a.indexMu.Lock()
	defer a.indexMu.Unlock()
	u := &a.usage
	u.mu.Lock()
	var lines []strangerFile
	for _, sf := range u.strangerFiles {
		if sf.day == day {
			lines = append(lines, *sf)
		}
	}
	u.mu.Unlock()
	slices.SortFunc(lines, func(x, y strangerFile) int { return int(x.last) - int(y.last) })
	path := filepath.Join(a.dir, day, strangersIndexName+auditJSONLExt)
	old, _ := os.Stat(path)
	if len(lines) == 0 {
		if os.Remove(path) == nil && old != nil {
			a.shrink(day, roundBlock(old.Size()))
		}
		return
	}
	var b bytes.Buffer
	for _, sf := range lines {
		l, _ := json.Marshal(strangerIndexLine{File: sf.name, Peer: sf.peer})
		b.Write(l)
		b.WriteByte('\n')
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		os.Remove(tmp)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return
	}
	if err := a.durable(path, true, filepath.Join(a.dir, day)); err != nil {
		return
	}
	var was int64
	if old != nil {
		was = roundBlock(old.Size())
	}
	a.shrink(day, was-roundBlock(int64(b.Len())))
}

// shrink takes n bytes off the count of day (a file rewritten smaller).
func (a *AuditLog) shrink(day string, n int64) {
	u := &a.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.days[day]; ok {
		u.days[day] -= n
		u.total -= n
	}
}

// recordPruned writes a deletion by policy to the current day's record of
// pruning, and reports whether it did: a pass of strangers' files only
// within the day's share, a day always (force).
func (a *AuditLog) recordPruned(p Pruned, force bool) bool {
	day := a.currentDay()
	line, err := encodeLine(&p)
	if err != nil {
		return false
	}
	a.prunedMu.Lock()
	defer a.prunedMu.Unlock()
	u := &a.usage
	u.mu.Lock()
	if u.prunedDay != day {
		u.prunedDay, u.prunedBytes = day, 0
	}
	full := a.limits.MaxBytes > 0 && u.prunedBytes+int64(len(line)) > a.limits.MaxBytes/PrunedShare
	u.mu.Unlock()
	if full && !force {
		return false
	}
	dayDir := filepath.Join(a.dir, day)
	if err := os.MkdirAll(dayDir, 0o700); err != nil {
		return false
	}
	path := filepath.Join(dayDir, prunedName+auditJSONLExt)
	off, err := a.appendRecordLine(path, line)
	if err != nil {
		return false
	}
	u.mu.Lock()
	u.prunedBytes += int64(len(line))
	u.mu.Unlock()
	if err := a.appendLeaf(day, prunedName, off, line[:len(line)-1]); err != nil {
		return false
	}
	return true
}

// PrunedOn returns the passes of deleting strangers' files recorded on
// day (YYYY-MM-DD), oldest first.
func (a *AuditLog) PrunedOn(day string) ([]Pruned, error) {
	if !auditDayName.MatchString(day) {
		return nil, fmt.Errorf("reading pruned files: %q is not a day (YYYY-MM-DD)", day)
	}
	raw, err := os.ReadFile(filepath.Join(a.dir, day, prunedName+auditJSONLExt))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading pruned files: %w", err)
	}
	var out []Pruned
	for _, l := range bytes.Split(raw, []byte{'\n'}) {
		var p Pruned
		if len(l) > 0 && jsonv1.Unmarshal(l, &p) == nil {
			out = append(out, p)
		}
	}
	return out, nil
}
