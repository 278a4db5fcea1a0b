package gossip

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// How the audit log spends its time, and why it is split in two.
//
// Recording a message used to open, stat, write and close two files and
// render the message in IFP-3 form (YAML) before Record returned: about
// half of a warm greeting's audit cost was the rendering, and a fifth the
// opening and closing (CPU profiles of 20,000 greetings, issue 16). Now:
//
//   - The .jsonl, the authoritative file, is written by Record itself,
//     before it returns, through a handle the log keeps open: the
//     handles of the heldJSONL most recently written files, the least
//     recently used closed when a new one is needed.
//   - The .md, a rendering of the .jsonl for people, is written by one
//     background writer per log (mdWriter), in the order Record queued the
//     entries, within milliseconds under load (Flush waits for it). The
//     queue is bounded by the bytes of the entries it holds
//     (mdQueueBytes): a Record that finds it full waits for room, so a
//     burst cannot grow the daemon's memory through the audit log.
//   - A crash (kill -9 included) can leave entries recorded in a .jsonl
//     and not yet rendered into its .md. The log knows a run ended
//     cleanly by the marker file it keeps while open (renderingMarker,
//     which only the previous run can have left: one process opens a
//     home's log, since the daemon holds its store's lock before it opens
//     the log; Close removes it once every entry is rendered). When
//     OpenAuditLog finds the marker, it renders, before it returns, what
//     each .md written since that run began lacks: the entries of its
//     .jsonl past the .md's count of marker lines. Nothing recorded is
//     lost from either file; a .md is complete within the writer's delay
//     while the daemon runs, and at the next start after a crash.

const (
	// heldJSONL is how many .jsonl handles the log keeps open (the .md
	// writer keeps as many of its own): a daemon talking with thousands
	// of peers holds at most twice this many audit descriptors.
	heldJSONL = 64
	// mdQueueBytes bounds the memory of the entries waiting to be
	// rendered: each is counted as mdEntryFactor times the length of its
	// .jsonl line, which is what a queued entry holds — the decoded
	// message it renders (maps and slices of every part's content: about
	// twice the line, measured on a 900 KiB view) and the line's worth of
	// rendering being built — not the line alone.
	mdQueueBytes  = 16 << 20
	mdEntryFactor = 3
	// mdReserve is the room at the end of the disk the .md writer leaves
	// to the .jsonl once the disk was found full (see mdWriter.full).
	mdReserve = 1 << 20
	// renderingMarker exists while a log is open; found at open, it says
	// the last run did not close and its .md files may lack entries.
	renderingMarker = ".rendering"
)

// mdJob is one entry waiting to be rendered.
type mdJob struct {
	f    *auditFile
	e    AuditEntry
	cost int64
	// dropDay, in a job of its own: close the handles of that day's
	// files, which the quota or retention deleted; dropFiles: close the
	// handles of those .md files, pruned (strangers' files).
	dropDay   string
	dropFiles []string
}

// mdFile is an open .md handle of the writer.
type mdFile struct {
	fd   *os.File
	size int64
	torn bool // the file does not end with a newline (a crash cut a write)
	used uint64
}

// mdWriter renders queued entries into the .md files, one at a time, in
// queue order.
type mdWriter struct {
	a *AuditLog

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []mdJob
	pending  int64  // bytes queued
	limit    int64  // mdQueueBytes, smaller in tests
	queued   uint64 // jobs ever queued
	written  uint64 // jobs ever taken off the queue and written (or given up)
	waiting  int    // Records waiting for room
	hold     bool   // tests: leave the queue alone until released
	closing  bool
	err      error // the first write that failed since the last Flush
	failed   bool  // some entry never reached its .md in this run: keep the marker
	finished chan struct{}

	// full counts the writes to the log's disk that found it full (ENOSPC
	// or EDQUOT), by Record or by the writer; cleared is full as the
	// writer last found room again (owned by its goroutine). The .md is a
	// rendering of the .jsonl, which is the record: while full has moved
	// past cleared, the writer asks the free space before each entry (not
	// the figure cached for FreeSpaceEvery, which can be from before the
	// disk filled) and renders nothing while less than mdReserve is free,
	// so that the room a full disk gets back goes to the entries the door
	// records before it acts, not to renderings of older ones. An .md that
	// so misses an entry is behind, and is completed at the next start
	// (the marker stays, as for any entry that did not reach its .md). A
	// count rather than a flag: a write that finds the disk full while the
	// writer is finding room is not forgotten.
	full    atomic.Uint64
	cleared uint64

	// Owned by the writer's goroutine.
	files map[string]*mdFile
	tick  uint64
	// behind holds the .md files that lack an entry of this run (skipped
	// while yielding, or a write that failed): nothing more is rendered
	// into them in this run, so that each stays a prefix of its .jsonl,
	// which is what the next start's repair completes (it renders the
	// entries past the .md's count).
	behind map[string]struct{}
}

func newMDWriter(a *AuditLog) *mdWriter {
	w := &mdWriter{a: a, limit: mdQueueBytes, files: map[string]*mdFile{}, behind: map[string]struct{}{}, finished: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	go w.run()
	return w
}

// enqueue queues e for rendering, first waiting while the queue is full
// (an entry larger than the whole bound goes in alone).
func (w *mdWriter) enqueue(f *auditFile, e AuditEntry, cost int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.pending > 0 && w.pending+cost > w.limit && !w.closing {
		w.waiting++
		w.cond.Wait()
		w.waiting--
	}
	w.queue = append(w.queue, mdJob{f: f, e: e, cost: cost})
	w.pending += cost
	w.queued++
	w.cond.Broadcast()
}

// dropDay has the writer close its handles of day's files, without
// waiting for room in the queue.
func (w *mdWriter) dropDay(day string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, mdJob{dropDay: day})
	w.queued++
	w.cond.Broadcast()
}

// dropFiles has the writer close its handles of the .md files at paths,
// without waiting for room in the queue, and waits until it has: every
// entry queued before is then written or given up (those of a file
// retired as deleted are given up), so nothing writes into those .md
// files any more, by handle or path, until a new Record queues an entry
// for one, and what they take on disk is what was counted. A pass
// deleting strangers' files (removeFiles) drops them all in one job: the
// wait is for whatever the writer has queued, and when a pass waited
// once a file, a pass of thousands of files under load took some 25 s,
// with the strangers' greetings that asked for room waiting behind it
// (docs/soak.md). The writer never waits for the caller, and is not
// closed while it waits: removeFiles runs under pruneMu, which Close
// takes before it closes the writer.
func (w *mdWriter) dropFiles(paths []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, mdJob{dropFiles: paths})
	w.queued++
	target := w.queued
	w.cond.Broadcast()
	for w.written < target {
		w.cond.Wait()
	}
}

// flush waits until every entry queued before it was called is in its
// .md, and returns the first write error since the last flush.
func (w *mdWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	target := w.queued
	for w.written < target {
		w.cond.Wait()
	}
	err := w.err
	w.err = nil
	return err
}

// close renders what is queued, stops the writer and closes its files. It
// reports whether every entry of this run reached its .md.
func (w *mdWriter) close() bool {
	w.mu.Lock()
	w.closing = true
	w.hold = false
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.finished
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.failed
}

func (w *mdWriter) run() {
	defer close(w.finished)
	defer func() {
		for _, mf := range w.files {
			mf.fd.Close()
		}
	}()
	for {
		w.mu.Lock()
		for (len(w.queue) == 0 || w.hold) && !w.closing {
			w.cond.Wait()
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return // closing, and nothing left
		}
		job := w.queue[0]
		w.queue[0] = mdJob{}
		w.queue = w.queue[1:]
		w.mu.Unlock()

		err := w.write(job)

		w.mu.Lock()
		w.pending -= job.cost
		w.written++
		if err != nil {
			w.failed = true
			if w.err == nil {
				w.err = err
			}
		}
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// write renders one entry and appends it to its peer's .md of the day.
func (w *mdWriter) write(job mdJob) error {
	if job.dropDay != "" {
		for path, mf := range w.files {
			if filepath.Base(filepath.Dir(path)) == job.dropDay {
				mf.fd.Close()
				delete(w.files, path)
			}
		}
		for path := range w.behind {
			if filepath.Base(filepath.Dir(path)) == job.dropDay {
				delete(w.behind, path)
			}
		}
		return nil
	}
	if job.dropFiles != nil {
		for _, path := range job.dropFiles {
			if mf := w.files[path]; mf != nil {
				mf.fd.Close()
				delete(w.files, path)
			}
			delete(w.behind, path)
		}
		return nil
	}
	if job.f.deleted.Load() {
		return nil // its day was deleted (retention or the quota) after it was recorded
	}
	path := job.f.path(w.a.dir, auditMDExt)
	if _, ok := w.behind[path]; ok {
		return nil // given up until the next start (behind); failed is already set
	}
	if err := w.room(); err != nil {
		w.behind[path] = struct{}{}
		return fmt.Errorf("rendering audit entry into %s: %w", path, err)
	}
	mf, err := w.open(path)
	if err != nil {
		w.behind[path] = struct{}{}
		if noSpace(err) {
			w.diskFull()
		}
		return fmt.Errorf("rendering audit entry into %s: %w", path, err)
	}
	b := getBuffer()
	defer putBuffer(b)
	if mf.size == 0 {
		job.f.writeTitle(b)
	}
	if mf.torn {
		b.WriteString("\n\n(The entry above was cut short by an interrupted write; " + job.f.name + auditJSONLExt + " holds what was recorded.)\n\n")
	}
	job.f.writeEntry(b, job.e)
	n, err := mf.fd.Write(b.Bytes())
	if n > 0 {
		w.a.account(path, mf.size, int64(n))
		mf.size += int64(n)
		mf.torn = false
	}
	if err != nil {
		// The file is in an unknown state: look at it again next time.
		mf.fd.Close()
		delete(w.files, path)
		w.behind[path] = struct{}{}
		if noSpace(err) {
			w.diskFull()
		}
		return fmt.Errorf("rendering audit entry into %s: %w", path, err)
	}
	return nil
}

// diskFull notes a write to the log's disk that found it full (full).
func (w *mdWriter) diskFull() { w.full.Add(1) }

// room says whether the writer may render an entry now: always, unless a
// write found the disk full since it last found room (full), until
// mdReserve is free. Called on the writer's goroutine.
func (w *mdWriter) room() error {
	seen := w.full.Load()
	if seen == w.cleared || w.a.freeNow == nil {
		return nil
	}
	free, err := w.a.freeNow()
	if err != nil || free >= mdReserve {
		// Room again, or a file system that cannot say: the writes will
		// tell. Only what was seen before asking is cleared.
		w.cleared = seen
		return nil
	}
	return fmt.Errorf("%w: the disk holding the audit log was found full and has %d KiB free, less than the %d KiB the .md leaves to the .jsonl; the next start renders this entry",
		ErrNoRoom, free>>10, mdReserve>>10)
}

// noSpace reports whether err is the file system saying it has no room.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// open returns the writer's handle of an .md file, opening it (from a
// spare when it does not exist yet) and closing the least recently used
// one beyond heldJSONL.
func (w *mdWriter) open(path string) (*mdFile, error) {
	w.tick++
	if mf := w.files[path]; mf != nil {
		mf.used = w.tick
		return mf, nil
	}
	if len(w.files) >= heldJSONL {
		var oldest string
		for p, mf := range w.files {
			if oldest == "" || mf.used < w.files[oldest].used {
				oldest = p
			}
		}
		w.files[oldest].fd.Close()
		delete(w.files, oldest)
	}
	fd, size, torn, err := w.a.openForAppend(path)
	if err != nil {
		return nil, err
	}
	mf := &mdFile{fd: fd, size: size, torn: torn, used: w.tick}
	w.files[path] = mf
	return mf, nil
}

// openForAppend opens path for appending, putting a spare file in its
// place when it does not exist, and returns its size and whether its last
// byte is not a newline.
func (a *AuditLog) openForAppend(path string) (fd *os.File, size int64, torn bool, err error) {
	fd, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		a.spares.place(path)
		fd, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	}
	if err != nil {
		return nil, 0, false, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, 0, false, err
	}
	if size = st.Size(); size > 0 {
		torn, err = endsTorn(path)
		if err != nil {
			fd.Close()
			return nil, 0, false, err
		}
	}
	return fd, size, torn, nil
}

// jsonlHandle returns f's open .jsonl handle, opening it when needed and
// closing the least recently used other handle beyond heldJSONL. The
// caller holds f.mu.
func (a *AuditLog) jsonlHandle(f *auditFile) (*os.File, bool, error) {
	if f.jsonl != nil {
		return f.jsonl, f.jsonlSize == 0, nil
	}
	fd, size, _, err := a.openForAppend(f.path(a.dir, auditJSONLExt))
	if err != nil {
		return nil, false, err
	}
	f.jsonl, f.jsonlSize = fd, size
	a.mu.Lock()
	for len(a.held) >= heldJSONL {
		if !a.evictOne(f) {
			break // every other holder is busy writing: go over for now
		}
	}
	a.held[f] = struct{}{}
	a.mu.Unlock()
	return fd, size == 0, nil
}

// evictOne closes the .jsonl handle of the least recently used file other
// than keep whose lock is free. The caller holds a.mu.
func (a *AuditLog) evictOne(keep *auditFile) bool {
	var victim *auditFile
	for f := range a.held {
		if f != keep && (victim == nil || f.used < victim.used) && f.mu.TryLock() {
			if victim != nil {
				victim.mu.Unlock()
			}
			victim = f
		}
	}
	if victim == nil {
		return false
	}
	victim.closeJSONL()
	delete(a.held, victim)
	victim.mu.Unlock()
	return true
}

// closeJSONL closes f's .jsonl handle. The caller holds f.mu.
func (f *auditFile) closeJSONL() {
	if f.jsonl != nil {
		f.jsonl.Close()
		f.jsonl, f.jsonlSize = nil, 0
	}
}

// retire marks files whose state the log dropped (the log closed, their
// day is too old to keep, or deleted: then their queued renderings are
// dropped too) as gone, so that a Record looks again, and closes their
// .jsonl handles. With wait it takes each file's lock, waiting for a
// Record in progress (Close does, so that every Record that got a file
// has queued its rendering); without, a file being written is closed by
// its Record on the way out, for retire may run inside a Record (the
// quota deleting a day) or in the .md writer, which a Record may be
// waiting for. The caller must not hold a.mu.
func (a *AuditLog) retire(files []*auditFile, deleted, wait bool) {
	for _, f := range files {
		f.gone.Store(true)
		if deleted {
			f.deleted.Store(true)
		}
		if wait {
			f.mu.Lock()
		} else if !f.mu.TryLock() {
			continue
		}
		f.closeJSONL()
		f.mu.Unlock()
	}
	a.mu.Lock()
	for _, f := range files {
		delete(a.held, f)
	}
	a.mu.Unlock()
}

// Flush waits until every entry recorded before it was called is rendered
// into its .md, and returns the first error the writer met since the last
// Flush. The .jsonl needs no flush: Record wrote it before it returned.
func (a *AuditLog) Flush() error {
	return a.md.flush()
}

// beginRun repairs the .md files of a run that did not close (see the top
// of this file), then marks this run as open.
func (a *AuditLog) beginRun() error {
	marker := filepath.Join(a.dir, renderingMarker)
	if st, err := os.Stat(marker); err == nil {
		// Files written since that run began; a second of slack for
		// file systems with coarse timestamps.
		if err := a.repairSince(st.ModTime().Add(-time.Second)); err != nil {
			return err
		}
		if a.proofsOn() {
			if err := a.recoverTrees(st.ModTime().Add(-time.Second)); err != nil {
				return err
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return err
	}
	now := time.Now()
	return os.Chtimes(marker, now, now)
}

// endRun removes the marker: every entry of this run is in its .md.
func (a *AuditLog) endRun() error {
	err := os.Remove(filepath.Join(a.dir, renderingMarker))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// repairSince renders into each .md modified since then what its .jsonl
// holds beyond the .md's entries.
func (a *AuditLog) repairSince(since time.Time) error {
	days, err := a.days()
	if err != nil {
		return err
	}
	var errs []error
	for _, day := range days {
		paths, err := a.entryFiles(day)
		if err != nil {
			return err
		}
		for _, jsonl := range paths {
			info, err := os.Stat(jsonl)
			if err != nil || info.ModTime().Before(since) {
				continue
			}
			if err := a.repairMD(day, jsonl); err != nil {
				errs = append(errs, fmt.Errorf("completing %s after a crash: %w", strings.TrimSuffix(jsonl, auditJSONLExt)+auditMDExt, err))
			}
		}
	}
	return errors.Join(errs...)
}

// repairMD appends to the .md beside jsonl the renderings of the entries
// past the ones it has.
func (a *AuditLog) repairMD(day, jsonl string) error {
	md := strings.TrimSuffix(jsonl, auditJSONLExt) + auditMDExt
	have, err := countMarkers(md)
	if err != nil {
		return err
	}
	f := &auditFile{day: day, name: strings.TrimSuffix(filepath.Base(jsonl), auditJSONLExt), seqOf: map[string]int64{}}
	var fd *os.File
	var size int64
	var torn bool
	var werr error
	n := 0
	err = readAuditFile(jsonl, true, func(e AuditEntry) {
		n++
		if f.peer == "" {
			f.peer = e.Peer
		}
		if n > have && werr == nil {
			if fd == nil {
				if fd, size, torn, werr = a.openForAppend(md); werr != nil {
					return
				}
			}
			b := getBuffer()
			if size == 0 {
				f.writeTitle(b)
			}
			if torn {
				b.WriteString("\n\n(The entry above was cut short by an interrupted write; " + f.name + auditJSONLExt + " holds what was recorded.)\n\n")
				torn = false
			}
			f.writeEntry(b, e)
			w, err := fd.Write(b.Bytes())
			size += int64(w)
			werr = err
			putBuffer(b)
		}
		if _, ok := f.seqOf[e.Message.Headers.MessageID]; !ok {
			f.seqOf[e.Message.Headers.MessageID] = e.Message.Headers.Sequence
		}
	})
	if fd != nil {
		if cerr := fd.Close(); werr == nil {
			werr = cerr
		}
	}
	if err != nil && !errors.Is(err, ErrTornAuditLine) {
		return err
	}
	return werr
}

// The marker lines that start entries (a decision's marker line,
// decisionMarker, is within one).
var (
	sentMarker     = []byte(auditMarkerPrefix + string(Sent) + " ")
	receivedMarker = []byte(auditMarkerPrefix + string(Received) + " ")
)

// countMarkers counts the entries of an .md file: its lines that start
// with an entry's marker (every entry starts with one; nothing else can,
// see writeEntry and writeDecision). A missing file has none.
func countMarkers(path string) (int, error) {
	file, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer file.Close()
	r := bufio.NewReaderSize(file, 64<<10)
	n, atStart := 0, true
	for {
		line, err := r.ReadSlice('\n')
		if atStart && (bytes.HasPrefix(line, sentMarker) || bytes.HasPrefix(line, receivedMarker)) {
			n++
		}
		switch {
		case err == nil:
			atStart = true
		case errors.Is(err, bufio.ErrBufferFull):
			atStart = false // the rest of a long line
		case err == io.EOF:
			return n, nil
		default:
			return 0, err
		}
	}
}
