package gossip

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ifaced/ifaced/gossip/auditproof"
	"github.com/ifaced/ifaced/identity"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Verifying a home's audit log offline (`ifaced audit verify`): every
// day's tree is rebuilt from the records its leaves point at, in leaf
// order, and checked against the stored hashes and every signed
// checkpoint; the days are checked against the chain their open records
// form and the record of what policies pruned; and received messages
// against their senders' signatures. It reads, never writes, so it also
// runs beside a running daemon. Memory is bounded by a day's files (one
// small state each) and the tree's height, never by the number of
// records: records are read one at a time, through at most
// verifyOpenFiles descriptors.

// ErrAuditTampered: the audit log holds something its tree, checkpoints
// or chain of days does not account for. A *VerifyFailure names it.
var ErrAuditTampered = errors.New("the audit log does not verify")

// VerifyFailure is the first record that does not verify.
type VerifyFailure struct {
	Day  string `json:"day"`
	File string `json:"file,omitempty"` // the record file, relative to the audit directory
	Line int64  `json:"line,omitempty"` // its line, from 1 (0: not about one line)
	Leaf int64  `json:"leaf"`           // the leaf in the day's tree, -1 when none
	What string `json:"what"`
}

func (f *VerifyFailure) Error() string {
	var b strings.Builder
	switch {
	case f.File != "" && f.Line > 0:
		fmt.Fprintf(&b, "%s line %d", f.File, f.Line)
	case f.File != "":
		b.WriteString(f.File)
	default:
		b.WriteString(f.Day)
	}
	if f.Leaf >= 0 {
		fmt.Fprintf(&b, " (leaf %d of %s's tree)", f.Leaf, f.Day)
	}
	return b.String() + ": " + f.What
}

func (f *VerifyFailure) Unwrap() error { return ErrAuditTampered }

// VerifyOptions say what a verification trusts.
type VerifyOptions struct {
	// Trusted says whether a did:key is one of the daemon's keys, whose
	// checkpoints count (the home's key and its retired keys, or keys the
	// person verifying names).
	Trusted func(did string) bool
}

// VerifyReport is what a verification found.
type VerifyReport struct {
	Days        int            `json:"days"`        // days with a tree, verified
	Records     int64          `json:"records"`     // leaves whose record was read and matched
	Checkpoints int            `json:"checkpoints"` // checkpoints verified
	Signers     []string       `json:"signers"`     // the keys that signed them
	Received    int64          `json:"received"`    // received messages whose sender's signature verified
	Unsigned    int64          `json:"unsigned"`    // received messages that carry no signature (anonymous HTTP callers)
	Unchecked   int64          `json:"unchecked"`   // received messages whose sender's key cannot be known offline
	Pruned      int64          `json:"pruned"`      // leaves whose records a policy pruned, as recorded
	PrunedNotes []string       `json:"pruned_notes,omitempty"`
	PrunedDays  []string       `json:"pruned_days,omitempty"` // days deleted by retention or the quota, as recorded
	Untracked   []string       `json:"untracked,omitempty"`   // days recorded before the log was tamper-evident
	Adopted     int64          `json:"adopted_bytes"`         // bytes recorded before the log was tamper-evident, pinned by hash
	Recovered   int64          `json:"recovered"`             // leaves appended again after a crash
	Open        bool           `json:"open"`                  // the log is open (a daemon runs) or did not close
	Pending     int64          `json:"pending"`               // records not yet in a checkpoint (only while Open)
	Failure     *VerifyFailure `json:"failure,omitempty"`
}

// verifyOpenFiles bounds the record files a verification holds open.
const verifyOpenFiles = 32

// maxRecordLine bounds a line read to explain a mismatch.
const maxRecordLine = 4 << 20

// VerifyAuditLog verifies the audit log in dir (see the top of this
// file). A log that does not verify is a report with Failure set and an
// error wrapping ErrAuditTampered (the *VerifyFailure); an error reading
// the log is returned as it is.
func VerifyAuditLog(dir string, o VerifyOptions) (*VerifyReport, error) {
	v := &verifier{dir: dir, o: o, rep: &VerifyReport{Signers: []string{}}, signers: map[string]bool{}}
	if _, err := readAuditFormat(dir); err != nil {
		return v.rep, fmt.Errorf("verifying the audit log: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, renderingMarker)); err == nil {
		v.rep.Open = true
	}
	err := v.run()
	var f *VerifyFailure
	if errors.As(err, &f) {
		v.rep.Failure = f
	}
	return v.rep, err
}

type verifier struct {
	dir     string
	o       VerifyOptions
	rep     *VerifyReport
	signers map[string]bool

	prunedFiles map[string]string    // day/file#number (or day/file for records naming none) → when
	prunedDays  map[string]PrunedDay // day → as recorded
	prunedAt    map[string]string    // day → when
	links       []dayLink            // the open records' links to earlier days
	untracked   string               // the newest day an open record says predates the log
}

type dayLink struct {
	from string
	prev TreeLink
}

func (v *verifier) run() error {
	days, err := listDays(v.dir)
	if err != nil {
		return err
	}
	if err := v.readPruned(days); err != nil {
		return err
	}
	var noTree []string
	for _, day := range days {
		if _, err := os.Stat(filepath.Join(v.dir, day, auditproof.LeavesFile)); errors.Is(err, fs.ErrNotExist) {
			if has, err := hasRecords(filepath.Join(v.dir, day)); err != nil {
				return err
			} else if has {
				noTree = append(noTree, day)
			}
			continue
		}
		if err := v.verifyDay(day); err != nil {
			return err
		}
		v.rep.Days++
	}
	newest := ""
	for _, day := range days {
		if _, err := os.Stat(filepath.Join(v.dir, day, auditproof.LeavesFile)); err == nil {
			newest = day
		}
	}
	for _, day := range noTree {
		if v.rep.Open && day > newest && v.rep.Days > 0 {
			// A daemon stopped between a day's first record and its tree's
			// first write: pending until the next open.
			v.rep.Pending++
			continue
		}
		if v.rep.Days == 0 || day > v.untracked {
			what := "holds records but no tree: it was deleted, or the records were written outside the daemon"
			if v.rep.Days == 0 {
				what = "holds records but no tree, and no day of this log has one: it was recorded before ifaced kept a tamper-evident log, or every tree was deleted; nothing here can be verified"
			}
			return &VerifyFailure{Day: day, Leaf: -1, What: what}
		}
		v.rep.Untracked = append(v.rep.Untracked, day)
	}
	for _, l := range v.links {
		if err := v.checkLink(l, days); err != nil {
			return err
		}
	}
	for s := range v.signers {
		v.rep.Signers = append(v.rep.Signers, s)
	}
	slices.Sort(v.rep.Signers)
	return nil
}

// listDays lists the day directories of an audit log, oldest first.
func listDays(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading audit log: %w", err)
	}
	var days []string
	for _, de := range des {
		if de.IsDir() && auditDayName.MatchString(de.Name()) {
			days = append(days, de.Name())
		}
	}
	slices.Sort(days)
	return days, nil
}

// hasRecords says whether a day directory holds a record file that is not
// empty.
func hasRecords(dir string) (bool, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), auditJSONLExt) || de.Name() == strangersIndexName+auditJSONLExt {
			continue
		}
		if info, err := de.Info(); err == nil && info.Size() > 0 {
			return true, nil
		}
	}
	return false, nil
}

// readPruned reads every record of pruning (they are verified with their
// day; a forged one fails there).
func (v *verifier) readPruned(days []string) error {
	v.prunedFiles, v.prunedDays, v.prunedAt = map[string]string{}, map[string]PrunedDay{}, map[string]string{}
	for _, day := range days {
		f, err := os.Open(filepath.Join(v.dir, day, prunedName+auditJSONLExt))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, maxRecordLine)
		for sc.Scan() {
			var p Pruned
			if json.Unmarshal(sc.Bytes(), &p) != nil {
				continue
			}
			at := p.At.UTC().Format("2006-01-02T15:04:05Z")
			for _, pf := range p.Files {
				key := pf.Day + "/" + pf.File
				if pf.TreeFile != nil {
					key += fmt.Sprintf("#%d", *pf.TreeFile)
				}
				v.prunedFiles[key] = at
			}
			for _, pd := range p.Days {
				v.prunedDays[pd.Day] = pd
				v.prunedAt[pd.Day] = at + " (" + orDash(p.Reason) + ")"
			}
		}
		f.Close()
	}
	return nil
}

// checkLink checks an open record's link to an earlier day.
func (v *verifier) checkLink(l dayLink, days []string) error {
	fail := func(what string) error {
		return &VerifyFailure{Day: l.from, File: filepath.Join(l.from, logName+auditJSONLExt), Line: 1, Leaf: 0, What: what}
	}
	if !slices.Contains(days, l.prev.Day) {
		if at, ok := v.prunedAt[l.prev.Day]; ok {
			v.rep.PrunedDays = append(v.rep.PrunedDays, l.prev.Day+" pruned by policy at "+at)
			return nil
		}
		return fail(fmt.Sprintf("names day %s (a tree of %d leaves) before it, and that day is missing with no record of pruning: it was deleted", l.prev.Day, l.prev.Size))
	}
	r, err := auditproof.OpenReader(filepath.Join(v.dir, l.prev.Day))
	if err != nil {
		return fail(fmt.Sprintf("names day %s's tree of %d leaves before it, and that day has no tree", l.prev.Day, l.prev.Size))
	}
	defer r.Close()
	if l.prev.Size > r.Size() {
		return fail(fmt.Sprintf("names day %s's tree at %d leaves, and it has only %d: leaves were removed", l.prev.Day, l.prev.Size, r.Size()))
	}
	root, err := r.TreeHash(l.prev.Size)
	if err != nil {
		return err
	}
	if base64.StdEncoding.EncodeToString(root[:]) != l.prev.Root {
		return fail(fmt.Sprintf("names day %s's tree at %d leaves with root %s, and it has root %s there: that day was rewritten",
			l.prev.Day, l.prev.Size, l.prev.Root, base64.StdEncoding.EncodeToString(root[:])))
	}
	return nil
}

// fileState is what a day's verification keeps per file generation.
type fileState struct {
	num    int
	name   string
	expect int64 // where its next leaf starts
	line   int64 // lines of it read
	pruned string
	fd     *os.File
	used   uint64
}

// dayVerifier verifies one day.
type dayVerifier struct {
	v       *verifier
	day     string
	dir     string
	r       *auditproof.Reader
	names   []string
	current map[string]int
	files   map[int]*fileState
	open    int
	tick    uint64
	adopts  map[string]LogRecord // by file name: pinned content waiting for its file's first leaf
	leaves  *os.File
	hashes  *bufio.Reader
	edge    []edgeNode
}

type edgeNode struct {
	index int64
	hash  auditproof.Hash
}

func (d *dayVerifier) ReadHashes(indexes []int64) ([]auditproof.Hash, error) {
	out := make([]auditproof.Hash, len(indexes))
	for i, idx := range indexes {
		j := slices.IndexFunc(d.edge, func(n edgeNode) bool { return n.index == idx })
		if j < 0 {
			return nil, fmt.Errorf("stored hash %d is not on the tree's edge", idx)
		}
		out[i] = d.edge[j].hash
	}
	return out, nil
}

func (d *dayVerifier) fail(leaf int64, st *fileState, what string) error {
	f := &VerifyFailure{Day: d.day, Leaf: leaf, What: what}
	if st != nil {
		f.File = filepath.Join(d.day, st.name+auditJSONLExt)
		f.Line = st.line + 1
	}
	return f
}

func (v *verifier) verifyDay(day string) error {
	dir := filepath.Join(v.dir, day)
	r, err := auditproof.OpenReader(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	d := &dayVerifier{v: v, day: day, dir: dir, r: r, names: r.Names(), current: auditproof.Current(r.Names()),
		files: map[int]*fileState{}, adopts: map[string]LogRecord{}}
	defer func() {
		for _, fs := range d.files {
			if fs.fd != nil {
				fs.fd.Close()
			}
		}
	}()
	cps, err := openCheckpoints(dir, day, v)
	if err != nil {
		return err
	}
	defer cps.close()
	leaves, err := os.Open(filepath.Join(dir, auditproof.LeavesFile))
	if err != nil {
		return err
	}
	defer leaves.Close()
	hf, err := os.Open(filepath.Join(dir, auditproof.HashesFile))
	if err != nil {
		return err
	}
	defer hf.Close()
	lr := bufio.NewReaderSize(leaves, 64<<10)
	d.hashes = bufio.NewReaderSize(hf, 64<<10)
	next, err := cps.next()
	if err != nil {
		return err
	}
	n := r.Size()
	var raw [auditproof.LeafSize]byte
	for i := int64(0); i < n; i++ {
		if _, err := io.ReadFull(lr, raw[:]); err != nil {
			return fmt.Errorf("reading %s's leaves: %w", day, err)
		}
		if err := d.leaf(i, auditproof.DecodeLeaf(raw[:])); err != nil {
			return err
		}
		size := i + 1
		for next != nil && next.c.Size <= size {
			if next.c.Size == size {
				root, err := auditproof.TreeHash(size, d)
				if err != nil {
					return err
				}
				if root != next.c.Root {
					return &VerifyFailure{Day: day, File: filepath.Join(day, auditproof.CheckpointsFile), Line: next.line, Leaf: -1,
						What: fmt.Sprintf("checkpoint of %d leaves has root %s, and the records give %s: records or the tree were changed after it was signed",
							size, base64.StdEncoding.EncodeToString(next.c.Root[:]), base64.StdEncoding.EncodeToString(root[:]))}
				}
				v.rep.Checkpoints++
			}
			if next, err = cps.next(); err != nil {
				return err
			}
		}
	}
	if next != nil {
		return &VerifyFailure{Day: day, File: filepath.Join(day, auditproof.CheckpointsFile), Line: next.line, Leaf: -1,
			What: fmt.Sprintf("checkpoint says the tree has %d leaves, and it has %d: leaves were removed", next.c.Size, n)}
	}
	if n == 0 {
		if !v.rep.Open {
			return &VerifyFailure{Day: day, Leaf: -1, What: "has a tree with no leaves (a tree always opens with its day's open record)"}
		}
		// A daemon stopped before it first wrote this tree: its records
		// are pending until the next open appends them.
	}
	if cps.last < n {
		if !v.rep.Open {
			return &VerifyFailure{Day: day, Leaf: cps.last, What: fmt.Sprintf("leaves %d to %d are in no signed checkpoint, and the log was closed (its last checkpoint covers everything)", cps.last, n-1)}
		}
		v.rep.Pending += n - cps.last
	}
	return d.coverage()
}

// leaf verifies leaf i.
func (d *dayVerifier) leaf(i int64, l auditproof.Leaf) error {
	if l.File >= len(d.names) || strings.HasPrefix(d.names[l.File], auditproof.RetiredPrefix) {
		return d.fail(i, nil, fmt.Sprintf("names file number %d, which the day's file table does not hold", l.File))
	}
	st := d.files[l.File]
	if st == nil {
		st = &fileState{num: l.File, name: d.names[l.File]}
		d.files[l.File] = st
		key := d.day + "/" + st.name
		cur, isCur := d.current[st.name]
		isCur = isCur && cur == l.File
		_, err := os.Stat(filepath.Join(d.dir, st.name+auditJSONLExt))
		exists := err == nil
		if !isCur || !exists {
			at := d.v.prunedFiles[fmt.Sprintf("%s#%d", key, l.File)]
			if at == "" && !exists {
				at = d.v.prunedFiles[key] // a record that names no number
			}
			switch {
			case at == "" && !exists:
				return d.fail(i, st, "the file is missing, and no record of pruning names it: it was deleted")
			case at == "":
				return d.fail(i, st, "the records of an earlier file of this name are gone, and no record of pruning names it: they were deleted")
			}
			st.pruned = at
			d.v.rep.PrunedNotes = appendNote(d.v.rep.PrunedNotes, fmt.Sprintf("%s/%s%s pruned by policy at %s", d.day, st.name, auditJSONLExt, at))
		}
	}
	stored, err := d.readStored(i)
	if err != nil {
		return err
	}
	var h auditproof.Hash
	if st.pruned != "" {
		h = stored[0] // the record is gone, by policy: its leaf stays
		d.v.rep.Pruned++
		st.line++
	} else {
		if ad, ok := d.adopts[st.name]; ok && st.expect == ad.From {
			if err := d.checkAdopt(st, ad); err != nil {
				return err
			}
			delete(d.adopts, st.name)
		}
		rec, err := d.readRecord(i, st, l, stored[0])
		if err != nil {
			return err
		}
		h = auditproof.LeafHash(rec)
		if err := d.record(i, st, rec); err != nil {
			return err
		}
		st.expect = l.Offset + int64(l.Length) + 1
		st.line++
		d.v.rep.Records++
	}
	want, err := auditproof.StoredHashes(i, h, d)
	if err != nil {
		return err
	}
	if len(want) != len(stored) || !slices.Equal(want, stored) {
		return d.fail(i, nil, "the tree's stored hashes do not follow from the records: the tree file was changed")
	}
	m := len(want) - 1
	d.edge = append(d.edge[:len(d.edge)-m], edgeNode{auditproof.StoredHashIndex(m, i>>m), want[m]})
	return nil
}

func appendNote(notes []string, n string) []string {
	if len(notes) < 100 && !slices.Contains(notes, n) {
		notes = append(notes, n)
	}
	return notes
}

// readStored reads the hashes stored with leaf i: as many as appending it
// stores (1 + the subtrees it completes).
func (d *dayVerifier) readStored(i int64) ([]auditproof.Hash, error) {
	count := auditproof.StoredHashCount(i+1) - auditproof.StoredHashIndex(0, i)
	out := make([]auditproof.Hash, count)
	for k := range out {
		if _, err := io.ReadFull(d.hashes, out[k][:]); err != nil {
			return nil, fmt.Errorf("reading %s's stored hashes: %w", d.day, err)
		}
	}
	return out, nil
}

// file returns an open descriptor of a file state, closing the least
// recently used beyond verifyOpenFiles.
func (d *dayVerifier) file(st *fileState) (*os.File, error) {
	d.tick++
	st.used = d.tick
	if st.fd != nil {
		return st.fd, nil
	}
	if d.open >= verifyOpenFiles {
		var lru *fileState
		for _, o := range d.files {
			if o.fd != nil && (lru == nil || o.used < lru.used) {
				lru = o
			}
		}
		lru.fd.Close()
		lru.fd = nil
		d.open--
	}
	fd, err := os.Open(filepath.Join(d.dir, st.name+auditJSONLExt))
	if err != nil {
		return nil, err
	}
	st.fd = fd
	d.open++
	return fd, nil
}

// readRecord reads leaf i's record and checks it against the leaf's hash,
// explaining a mismatch.
func (d *dayVerifier) readRecord(i int64, st *fileState, l auditproof.Leaf, want auditproof.Hash) ([]byte, error) {
	fd, err := d.file(st)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, d.fail(i, st, "the file is missing, and no record of pruning names it: it was deleted")
	}
	if err != nil {
		return nil, err
	}
	if l.Offset != st.expect {
		return nil, d.explain(i, st, fd, want, l, fmt.Sprintf("the tree has the record at byte %d, where the line before it ends at %d", l.Offset, st.expect))
	}
	buf := make([]byte, l.Length+1)
	n, err := fd.ReadAt(buf, st.expect)
	if err != nil && err != io.EOF {
		return nil, err
	}
	if n < l.Length {
		info, _ := fd.Stat()
		return nil, d.fail(i, st, fmt.Sprintf("the file ends at byte %d, inside or before this record (%d bytes from byte %d): it was truncated", info.Size(), l.Length, l.Offset))
	}
	rec := buf[:l.Length]
	if (n == l.Length+1 && buf[l.Length] != '\n') || auditproof.LeafHash(rec) != want {
		return nil, d.explain(i, st, fd, want, l, "")
	}
	return rec, nil
}

// explain names what happened at a record that does not match its leaf:
// a line changed, removed, inserted or reordered, by what the lines there
// now hold.
func (d *dayVerifier) explain(i int64, st *fileState, fd *os.File, want auditproof.Hash, l auditproof.Leaf, why string) error {
	at := st.expect
	line, err := readLineAt(fd, at)
	if err != nil {
		return d.fail(i, st, fmt.Sprintf("the record is not there (%v): the file was truncated", err))
	}
	got := auditproof.LeafHash(line)
	after, _ := readLineAt(fd, at+int64(len(line))+1)
	afterHash := auditproof.LeafHash(after)
	laterHash, later := d.nextLeafOf(i, l.File)
	switch {
	case later && got == laterHash && afterHash == want:
		return d.fail(i, st, "the record here is the next one of this file, and this one follows it: the two lines were reordered")
	case later && got == laterHash:
		return d.fail(i, st, "the record here is the one recorded after it: this record was removed")
	case after != nil && afterHash == want:
		return d.fail(i, st, "this line is in no leaf, and the record after it is the one recorded here: a line was inserted")
	case len(line) == l.Length:
		return d.fail(i, st, fmt.Sprintf("the record differs from what was recorded (%d bytes, as recorded, but not the same bytes): it was changed", l.Length))
	case why != "":
		return d.fail(i, st, why+": a record before it was changed, removed or inserted")
	default:
		return d.fail(i, st, fmt.Sprintf("the record differs from what was recorded (%d bytes where %d were): it was changed", len(line), l.Length))
	}
}

// nextLeafOf is the stored leaf hash of the next leaf of file num after
// leaf i, looked for among the next few thousand leaves.
func (d *dayVerifier) nextLeafOf(i int64, num int) (auditproof.Hash, bool) {
	for m := i + 1; m < d.r.Size() && m < i+4096; m++ {
		l, err := d.r.Leaf(m)
		if err != nil {
			break
		}
		if l.File == num {
			h, err := d.r.LeafHash(m)
			return h, err == nil
		}
	}
	return auditproof.Hash{}, false
}

// readLineAt reads the line starting at off, without its newline.
func readLineAt(fd *os.File, off int64) ([]byte, error) {
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if off >= st.Size() {
		return nil, io.EOF
	}
	r := bufio.NewReader(io.NewSectionReader(fd, off, min(st.Size()-off, maxRecordLine)))
	line, err := r.ReadBytes('\n')
	if err != nil && err != io.EOF {
		return nil, err
	}
	return bytes.TrimSuffix(line, []byte{'\n'}), nil
}

// checkAdopt checks the content an adopt record pinned.
func (d *dayVerifier) checkAdopt(st *fileState, ad LogRecord) error {
	fd, err := d.file(st)
	if err != nil {
		return d.fail(-1, st, fmt.Sprintf("the file is missing (%v), and an adopt record pinned its first %d bytes", err, ad.To))
	}
	sum := sha256.New()
	n, err := io.Copy(sum, io.NewSectionReader(fd, ad.From, ad.To-ad.From))
	if err != nil {
		return err
	}
	if n != ad.To-ad.From || hex.EncodeToString(sum.Sum(nil)) != ad.SHA256 {
		f := d.fail(-1, st, fmt.Sprintf("bytes %d to %d, recorded before the log was tamper-evident and pinned by an adopt record, were changed", ad.From, ad.To)).(*VerifyFailure)
		f.Line = 0
		return f
	}
	st.expect = ad.To
	d.v.rep.Adopted += ad.To - ad.From
	return nil
}

// record checks what a record says, beyond its hash: the log's own
// records, and the signatures of received messages.
func (d *dayVerifier) record(i int64, st *fileState, rec []byte) error {
	switch {
	case st.name == logName:
		var lr LogRecord
		if err := json.Unmarshal(rec, &lr); err != nil {
			return d.fail(i, st, fmt.Sprintf("the log's record does not decode: %v", err))
		}
		if i == 0 {
			if lr.Record != LogOpen || lr.Day != d.day {
				return d.fail(i, st, fmt.Sprintf("the day's first record is not its open record for %s (found a %q record for %q): the day was moved or its tree replaced", d.day, lr.Record, lr.Day))
			}
			if lr.Previous != nil {
				d.v.links = append(d.v.links, dayLink{from: d.day, prev: *lr.Previous})
			}
			if lr.UntrackedThrough > d.v.untracked {
				d.v.untracked = lr.UntrackedThrough
			}
			return nil
		}
		switch lr.Record {
		case LogAdopt:
			d.adopts[lr.File] = lr
		case LogRecovered:
			d.v.rep.Recovered += lr.Leaves
		case LogOpen:
			return d.fail(i, st, "a second open record: two days' trees were spliced")
		}
	case strings.HasPrefix(st.name, "_"):
		// A refusal summary or a record of pruning: its hash is all there
		// is to check (pruning records were read first).
	default:
		if i == 0 {
			return d.fail(i, st, "the day's first record is not its open record")
		}
		var e AuditEntry
		if err := json.Unmarshal(rec, &e); err != nil || e.Message == nil {
			// A line a crash cut short is a leaf as it was cut.
			return nil
		}
		if e.Direction != Received {
			return nil
		}
		switch err := verifyReceived(&e); {
		case err == nil:
			d.v.rep.Received++
		case errors.Is(err, ErrUnsigned):
			d.v.rep.Unsigned++
		case errors.Is(err, errKeyUnknown):
			d.v.rep.Unchecked++
		default:
			return d.fail(i, st, fmt.Sprintf("the sender's signature on message %q does not verify: %v", Clip(e.Message.Headers.MessageID, 100), err))
		}
	}
	return nil
}

// errKeyUnknown: the key of a received message's sender cannot be known
// offline (an HTTP caller's key named by a did:web, say).
var errKeyUnknown = errors.New("the sender's key cannot be known offline")

// senderKey is the key of the peer an entry names: from its peer ID, or
// its did:key.
func senderKey(p string) (ed25519.PublicKey, bool) {
	if strings.HasPrefix(p, "did:key:") {
		pub, err := identity.PublicKeyFromDID(p)
		return pub, err == nil
	}
	pid, err := peer.Decode(p)
	if err != nil {
		return nil, false
	}
	pub, err := identity.PublicKeyFromPeerID(pid)
	return pub, err == nil
}

// verifyReceived checks the sender's signature on a received entry's
// message: under the key of the peer the daemon established, or, when the
// message names another did:key (a peer's earlier key, during its
// transition), under that key.
func verifyReceived(e *AuditEntry) error {
	pub, ok := senderKey(e.Peer)
	if !ok {
		for _, s := range signaturesOf(e.Message) {
			if named, err := identity.PublicKeyFromKeyID(s); err == nil {
				return e.Message.Verify(named)
			}
		}
		if len(signaturesOf(e.Message)) == 0 {
			return ErrUnsigned
		}
		return errKeyUnknown
	}
	err := e.Message.Verify(pub)
	if errors.Is(err, ErrWrongKey) {
		for _, s := range signaturesOf(e.Message) {
			if named, kerr := identity.PublicKeyFromKeyID(s); kerr == nil {
				return e.Message.Verify(named)
			}
		}
	}
	return err
}

// signaturesOf lists the key_ids of a message's Ed25519 signatures.
func signaturesOf(m *Message) []string {
	var out []string
	if m.Security != nil {
		for _, s := range m.Security.Signatures {
			if s.Alg == identity.AlgEd25519 {
				out = append(out, s.KeyID)
			}
		}
	}
	return out
}

// coverage checks that every record file of the day holds nothing past
// its last leaf (while the log is open, what is past it is pending).
func (d *dayVerifier) coverage() error {
	des, err := os.ReadDir(d.dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), auditJSONLExt)
		if !ok || name == strangersIndexName || de.Name() == auditproof.CheckpointsFile || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		var st *fileState
		if num, ok := d.current[name]; ok {
			st = d.files[num]
		}
		if st == nil {
			st = &fileState{name: name}
		}
		if ad, ok := d.adopts[name]; ok && st.expect == ad.From {
			if err := d.checkAdopt(st, ad); err != nil {
				return err
			}
		}
		extra := info.Size() - st.expect
		if st.expect > 0 && info.Size() == st.expect-1 {
			extra = 0 // its last line was cut by a crash, and is a leaf as it is
		}
		if extra <= 0 {
			continue
		}
		if d.v.rep.Open {
			d.v.rep.Pending++
			continue
		}
		return d.fail(-1, st, fmt.Sprintf("%d bytes after its last record are in no leaf: records were added outside the daemon", extra))
	}
	return nil
}

// checkpointReader reads a day's checkpoints in order.
type checkpointReader struct {
	v    *verifier
	day  string
	f    *os.File
	sc   *bufio.Scanner
	line int64
	last int64 // the size of the last checkpoint read
}

type readCheckpoint struct {
	c    auditproof.Checkpoint
	line int64
}

func openCheckpoints(dir, day string, v *verifier) (*checkpointReader, error) {
	cr := &checkpointReader{v: v, day: day}
	f, err := os.Open(filepath.Join(dir, auditproof.CheckpointsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return cr, nil
	}
	if err != nil {
		return nil, err
	}
	cr.f, cr.sc = f, bufio.NewScanner(f)
	cr.sc.Buffer(nil, 1<<20)
	return cr, nil
}

func (cr *checkpointReader) close() {
	if cr.f != nil {
		cr.f.Close()
	}
}

// next reads the next checkpoint, nil at the end.
func (cr *checkpointReader) next() (*readCheckpoint, error) {
	if cr.sc == nil || !cr.sc.Scan() {
		if cr.sc != nil && cr.sc.Err() != nil {
			return nil, cr.sc.Err()
		}
		return nil, nil
	}
	cr.line++
	fail := func(what string) error {
		return &VerifyFailure{Day: cr.day, File: filepath.Join(cr.day, auditproof.CheckpointsFile), Line: cr.line, Leaf: -1, What: what}
	}
	var note string
	if err := json.Unmarshal(cr.sc.Bytes(), &note); err != nil {
		if cr.v.rep.Open && !bytes.HasSuffix(cr.sc.Bytes(), []byte(`"`)) {
			return nil, nil // being written
		}
		return nil, fail(fmt.Sprintf("is not a JSON string holding a signed checkpoint: %v", err))
	}
	trusted := cr.v.o.Trusted
	if trusted == nil {
		trusted = func(string) bool { return false }
	}
	c, signer, err := auditproof.Open([]byte(note), trusted)
	switch {
	case errors.Is(err, auditproof.ErrUntrustedSigner):
		return nil, fail(fmt.Sprintf("is signed by %s, which is not a key of this daemon: the checkpoint was re-signed by another key",
			strings.Join(auditproof.Signers([]byte(note)), ", ")))
	case err != nil:
		return nil, fail(err.Error())
	}
	if c.Origin != auditproof.Origin(cr.day) {
		return nil, fail(fmt.Sprintf("is the checkpoint of %q, not of this day's tree: it was moved", c.Origin))
	}
	if c.Size < cr.last {
		return nil, fail(fmt.Sprintf("says the tree has %d leaves, after a checkpoint of %d: the tree went back", c.Size, cr.last))
	}
	cr.last = c.Size
	cr.v.signers[signer] = true
	return &readCheckpoint{c: c, line: cr.line}, nil
}
