package gossip

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
)

// TestStrangersFilesMakeRoomOldestFirst: strangers' files take at most
// their share of the quota across the log; a new stranger finds room
// because the oldest strangers' files are deleted — yesterday's before
// today's, the least recently written first — and written down, and a
// peer that was a stranger and has been made known since keeps its
// files, as does a peer that never was one.
func TestStrangersFilesMakeRoomOldestFirst(t *testing.T) {
	c := &clock{t: testNow}
	// Read by the log's pruning passes, which may run in the background.
	var knownMu sync.Mutex
	known := map[string]bool{}
	var passes []Pruned
	a, err := OpenAuditLog(t.TempDir(), WithLimits(AuditLimits{MaxBytes: 2 << 20}), WithClock(c.now),
		WithKnown(func(p string) bool { knownMu.Lock(); defer knownMu.Unlock(); return known[p] }), WithPruned(func(p Pruned) { passes = append(passes, p) }))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	alice, _ := identity.Generate(nil)
	bob, _ := identity.Generate(nil)
	share := a.limits.MaxBytes / StrangerShare
	write := func(peer string, stranger bool, at int) {
		t.Helper()
		m := auditMessage(t, alice, bob, "conv:"+peer, 1, "")
		m.Body.Text = strings.Repeat("x", 48<<10)
		if err := m.Sign(alice, testNow); err != nil {
			t.Fatal(err)
		}
		when := testNow.AddDate(0, 0, at)
		if err := a.Record(AuditEntry{At: when, Direction: Received, Peer: peer, Transport: "libp2p", Message: m, Stranger: stranger}); err != nil {
			t.Fatal(err)
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(day int, peer string) bool {
		_, err := os.Stat(filepath.Join(a.dir, testNow.AddDate(0, 0, day).Format(auditDayLayout), peer+auditJSONLExt))
		return err == nil
	}
	// Yesterday: a stranger made known later, strangers, and the owner's
	// peer. It is made known before the strangers' files pass their share:
	// a write past the share starts a pruning pass in the background,
	// which decides on what is known when it runs (made known after it
	// ran, the peer's file from its time as a stranger is gone, which
	// is what that pass should do; the test wants the other case).
	write("made-known", true, -1)
	write("owners-peer", false, -1)
	knownMu.Lock()
	known["made-known"] = true
	knownMu.Unlock()
	for i := range 4 {
		write(fmt.Sprintf("old-%d", i), true, -1)
	}
	// Today, the flood: each new stranger asks for room first, as the door does.
	for i := range 40 {
		if err := a.StrangerRoom(); err != nil {
			t.Fatalf("stranger %d refused: %v", i, err)
		}
		write(fmt.Sprintf("new-%d", i), true, 0)
		a.usage.mu.Lock()
		used := a.usage.strangers
		a.usage.mu.Unlock()
		if used > share+256<<10 {
			t.Fatalf("after stranger %d the strangers' files take %d KiB, over their share of %d KiB and a greeting", i, used>>10, share>>10)
		}
	}
	if !exists(-1, "made-known") || !exists(-1, "owners-peer") {
		t.Fatal("a known peer's file was deleted to make room for strangers")
	}
	for i := range 4 {
		if exists(-1, fmt.Sprintf("old-%d", i)) {
			t.Errorf("yesterday's stranger old-%d is kept while today's go", i)
		}
	}
	if exists(0, "new-0") || !exists(0, "new-39") {
		t.Error("today's strangers' files did not go oldest first")
	}
	// The record, the index and the refusals are no peer's entries.
	if convs, err := a.Conversations(); err != nil {
		t.Fatalf("conversations after pruning: %v", err)
	} else {
		for _, c := range convs {
			if strings.HasPrefix(filepath.Base(c.File), "_") {
				t.Errorf("a record is read as a conversation: %+v", c)
			}
		}
	}
	// The index names only what is left; reopened, the log finds the same
	// strangers' files (counted once closed: a pass a write started has
	// finished then).
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Every pass told is recorded, and every pass recorded told (read
	// once the log is closed: a pass a write started has finished then).
	recorded, err := a.PrunedOn(testNow.Format(auditDayLayout))
	if err != nil || len(recorded) != len(passes) || len(passes) == 0 {
		t.Fatalf("%d passes told, %d recorded (%v)", len(passes), len(recorded), err)
	}
	if f := recorded[0].Files[0]; f.Peer != "old-0" || f.Bytes <= 0 {
		t.Errorf("the first file pruned is %+v, want old-0", f)
	}
	a.usage.mu.Lock()
	before := a.usage.strangers
	a.usage.mu.Unlock()
	b, err := OpenAuditLog(a.dir, WithLimits(AuditLimits{MaxBytes: 2 << 20}), WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.usage.strangers != before {
		t.Errorf("reopened, the strangers' files take %d bytes; before, %d", b.usage.strangers, before)
	}
}

// TestStrangersFilePrunedWhileWritten: a strangers' file that is pruned
// while its peer goes on writing into it (every anonymous caller writes
// into the one "anonymous" file of the day, and the pass a write starts
// runs beside the next writes) is deleted whole, and a write after the
// pass goes into a new file: the count of the log is what its day
// directory takes on disk, and the strangers' files stay within their
// share and the entries written while a pass ran. Before, a write racing
// the pass could reopen the file by its path between the pass dropping
// its state and deleting it, and went on into the deleted file (the .md
// writer likewise): counted, but never taken off the count, so the count
// of the log grew by megabytes the disk did not hold, and the disk held
// the deleted files' blocks while their handles stayed open.
func TestStrangersFilePrunedWhileWritten(t *testing.T) {
	a, err := OpenAuditLog(t.TempDir(), WithLimits(AuditLimits{MaxBytes: 1 << 20}), WithClock((&clock{t: testNow}).now))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	const writers, each = 4, 60
	share := a.limits.MaxBytes / StrangerShare
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := a.StrangerRoom(); err != nil {
					errs <- fmt.Errorf("writer %d, entry %d: %w", w, i, err)
					return
				}
				m := auditMessage(t, alice, bob, fmt.Sprintf("conv:w%d-%d", w, i), 1, "")
				m.Body.Text = strings.Repeat("x", 16<<10)
				if err := a.Record(AuditEntry{At: testNow, Direction: Received, Peer: "anonymous", Transport: "http", Message: m, Stranger: true}); err != nil {
					errs <- fmt.Errorf("writer %d, entry %d: %w", w, i, err)
					return
				}
				// StrangerRoom lets an entry in while the count is within
				// share + share/StrangerSlack, and each writer may have one
				// entry in flight past that; but the .md writer counts a
				// rendering only once it has written it, so the count a
				// writer saw may hold the .jsonl of entries whose .md is
				// still queued, and those land before the pass they start
				// deletes the file. So the file holds at most
				// (share + share/StrangerSlack)/18 KiB + writers = 20
				// entries, each 18 KiB of .jsonl and 19 KiB of .md: 732 KiB.
				// Without passes the 240 entries would take 8.7 MiB.
				a.usage.mu.Lock()
				used := a.usage.strangers
				a.usage.mu.Unlock()
				if used > 3*share {
					errs <- fmt.Errorf("writer %d, entry %d: the strangers' files take %d KiB, over three times their share (%d KiB)", w, i, used>>10, share>>10)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every entry rendered, and no pass under way (Close waits for one):
	// the count is settled.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	passes, err := a.PrunedOn(testNow.Format(auditDayLayout))
	if err != nil || len(passes) == 0 {
		t.Fatalf("no pass pruned the strangers' file (%v)", err)
	}
	day := filepath.Join(a.dir, testNow.Format(auditDayLayout))
	if counted, disk := a.Usage(), dirBytes(t, day); counted != disk {
		t.Errorf("the log counts %d KiB; its day directory takes %d KiB", counted>>10, disk>>10)
	}
	var files int64
	for _, ext := range []string{auditJSONLExt, auditMDExt} {
		if st, err := os.Stat(filepath.Join(day, "anonymous"+ext)); err == nil {
			files += roundBlock(st.Size())
		}
	}
	if a.usage.strangers != files {
		t.Errorf("the strangers' files are counted as %d KiB; on disk they take %d KiB", a.usage.strangers>>10, files>>10)
	}
}

// TestStrangersPassWaitsForTheRendererOnce: a pass deleting many
// strangers' files waits for the .md writer once, not once a file. Each
// wait is for whatever the writer has queued by then, and under load a
// pass of thousands of files waited some 25 s, with the strangers'
// greetings that asked for room waiting behind it (docs/soak.md).
func TestStrangersPassWaitsForTheRendererOnce(t *testing.T) {
	a, err := OpenAuditLog(t.TempDir(), WithLimits(AuditLimits{MaxBytes: 1 << 30}), WithClock((&clock{t: testNow}).now))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	alice, _ := identity.Generate(nil)
	bob, _ := identity.Generate(nil)
	const n = 50
	for i := range n {
		peer := fmt.Sprintf("stranger-%d", i)
		if err := a.Record(AuditEntry{At: testNow, Direction: Received, Peer: peer, Transport: "libp2p",
			Message: auditMessage(t, alice, bob, "conv:"+peer, 1, ""), Stranger: true}); err != nil {
			t.Fatal(err)
		}
	}
	flushAudit(t, a)
	var files []strangerFile
	a.usage.mu.Lock()
	for _, sf := range a.usage.strangerFiles {
		files = append(files, *sf)
	}
	total := a.usage.total
	a.usage.mu.Unlock()
	if len(files) != n {
		t.Fatalf("%d strangers' files listed, want %d", len(files), n)
	}
	a.md.mu.Lock()
	queued := a.md.queued
	a.md.mu.Unlock()
	if err := a.removeFiles(files); err != nil {
		t.Fatal(err)
	}
	a.md.mu.Lock()
	waits := a.md.queued - queued
	a.md.mu.Unlock()
	if waits != 1 {
		t.Errorf("deleting %d strangers' files queued %d jobs for the .md writer, each waited for, want 1", n, waits)
	}
	var took int64
	for _, sf := range files {
		took += sf.bytes
		for _, ext := range []string{auditJSONLExt, auditMDExt} {
			if _, err := os.Stat(filepath.Join(a.dir, sf.day, sf.name+ext)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s%s is still there after the pass: %v", sf.name, ext, err)
			}
		}
	}
	a.usage.mu.Lock()
	defer a.usage.mu.Unlock()
	if a.usage.strangers != 0 || len(a.usage.strangerFiles) != 0 {
		t.Errorf("after the pass the strangers' files are counted as %d bytes in %d files, want none", a.usage.strangers, len(a.usage.strangerFiles))
	}
	if a.usage.total != total-took {
		t.Errorf("the log counts %d bytes after the pass, want %d (%d before, less the %d the files took)", a.usage.total, total-took, total, took)
	}
}

// TestStrangerTakenWhileAPassRuns: while a pass deletes strangers' files
// (pruneMu held here), a new stranger is taken without waiting for it as
// long as the strangers' files are within share/StrangerSlack past their
// share, and a pass is started; past that, StrangerRoom makes room itself,
// and refuses when none can be made (nothing is listed here to delete),
// as it then does within the slack too.
func TestStrangerTakenWhileAPassRuns(t *testing.T) {
	a, err := OpenAuditLog(t.TempDir(), WithLimits(AuditLimits{MaxBytes: 2 << 20}), WithClock((&clock{t: testNow}).now))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	share := a.limits.MaxBytes / StrangerShare
	setUsed := func(n int64) {
		a.usage.mu.Lock()
		a.usage.strangers = n
		a.usage.mu.Unlock()
	}
	a.pruneMu.Lock() // a pass under way
	setUsed(share + share/StrangerSlack)
	done := make(chan error, 1)
	go func() { done <- a.StrangerRoom() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a stranger within the slack while a pass runs: %v", err)
		}
	case <-time.After(10 * time.Second):
		a.pruneMu.Unlock() // so that the log closes
		<-done
		t.Fatal("a stranger within the slack waits for the pass")
	}
	if !a.pruning.Load() {
		t.Error("a stranger within the slack was taken and no pass was started")
	}
	setUsed(share + share/StrangerSlack + 1)
	go func() { done <- a.StrangerRoom() }()
	a.pruneMu.Unlock()
	if err := <-done; !errors.Is(err, ErrStrangersShare) {
		t.Fatalf("a stranger past the slack with nothing to delete: %v; want ErrStrangersShare", err)
	}
	// Once a pass could make no room, the slack is not taken: the
	// strangers' files stay within their share while nothing can go.
	setUsed(share + 1)
	if err := a.StrangerRoom(); !errors.Is(err, ErrStrangersShare) {
		t.Fatalf("a stranger within the slack after a pass made no room: %v; want ErrStrangersShare", err)
	}
	setUsed(0)
}
