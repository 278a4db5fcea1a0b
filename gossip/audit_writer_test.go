package gossip

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// crashChildEnv names the audit directory a child process of
// TestAuditMDCompletedAfterACrash records into before it kills itself.
const crashChildEnv = "IFACED_TEST_AUDIT_CRASH_DIR"

// writerEntries are the entries the crash test records: two peers, replies
// between them (so the rendering numbers reply-tos), in a fixed order and
// with fixed signatures (the identities and times are fixed).
func writerEntries(t *testing.T) []AuditEntry {
	alice, bob, carol := testIdentity(t, 1), testIdentity(t, 2), testIdentity(t, 3)
	var out []AuditEntry
	prev := ""
	for i := int64(1); i <= 6; i++ {
		from, to, peer, dir := alice, bob, bob.PeerID().String(), Sent
		if i%2 == 0 {
			from, to, dir = bob, alice, Received
		}
		m := auditMessage(t, from, to, auditConvID, i, prev)
		prev = m.Headers.MessageID
		out = append(out, AuditEntry{At: testNow.Add(time.Duration(i) * time.Second), Direction: dir, Peer: peer, Transport: "libp2p", Message: m})
	}
	m := auditMessage(t, alice, carol, "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCF", 1, "")
	out = append(out, AuditEntry{At: testNow.Add(7 * time.Second), Direction: Sent, Peer: carol.PeerID().String(), Transport: "relay", Message: m})
	return out
}

// TestAuditCrashChild is the child of TestAuditMDCompletedAfterACrash: it
// records the first two entries and waits for their rendering, then holds
// the .md writer, records the rest (each in its .jsonl, Record returning)
// and kills itself with SIGKILL. Run alone it does nothing.
func TestAuditCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("the child of TestAuditMDCompletedAfterACrash")
	}
	a, err := OpenAuditLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries := writerEntries(t)
	for i, e := range entries {
		if i == 2 {
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
			a.md.mu.Lock()
			a.md.hold = true
			a.md.mu.Unlock()
		}
		if err := a.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal ends the process
}

// A process killed with entries recorded in the .jsonl but not yet in the
// .md loses none of them: the next OpenAuditLog renders them, and the .md
// files are byte for byte what a run that closed cleanly writes.
func TestAuditMDCompletedAfterACrash(t *testing.T) {
	clean := t.TempDir()
	a, err := OpenAuditLog(clean)
	if err != nil {
		t.Fatal(err)
	}
	entries := writerEntries(t)
	for _, e := range entries {
		if err := a.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(clean, renderingMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the marker is left after a clean Close: %v", err)
	}

	crashed := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestAuditCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+crashed)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child did not die of SIGKILL: %v\n%s", err, out)
	}
	bob, carol := testIdentity(t, 2).PeerID().String(), testIdentity(t, 3).PeerID().String()
	// What the crash left: every entry in the .jsonl files, the .md
	// short of what the held writer had not rendered.
	if n := countLines(t, peerFile(crashed, testDay, bob, auditJSONLExt)); n != 6 {
		t.Fatalf("the crashed run's .jsonl holds %d entries, want 6", n)
	}
	if n, err := countMarkers(peerFile(crashed, testDay, bob, auditMDExt)); err != nil || n != 2 {
		t.Fatalf("the crashed run's .md holds %d entries (%v), want the 2 rendered before the writer was held", n, err)
	}
	if _, err := os.Stat(filepath.Join(crashed, renderingMarker)); err != nil {
		t.Fatalf("no marker after the crash: %v", err)
	}

	b, err := OpenAuditLog(crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, peer := range []string{bob, carol} {
		for _, ext := range []string{auditJSONLExt, auditMDExt} {
			want, _ := os.ReadFile(peerFile(clean, testDay, peer, ext))
			got, err := os.ReadFile(peerFile(crashed, testDay, peer, ext))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s%s after the crash and reopening differs from a clean run's (%v):\n%s\n--- want ---\n%s", peer, ext, err, got, want)
			}
		}
	}
	// Reopening again finds the marker of the open log b, not a crash:
	// nothing is rendered twice.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := OpenAuditLog(crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, _ := countMarkers(peerFile(crashed, testDay, bob, auditMDExt)); n != 6 {
		t.Errorf("after a clean reopening the .md holds %d entries, want 6", n)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte{'\n'})
}

// Once a write finds the audit disk full, the .md writer leaves the room
// that comes back to the .jsonl: with less than mdReserve free it renders
// nothing, and an .md that so misses an entry stays behind (a prefix of
// its .jsonl) for the rest of the run, while one that missed nothing is
// rendered again once there is room. The next start completes what is
// behind, byte for byte what a run with room writes. (The process test
// TestFaultFullDisk meets the same through a tmpfs it fills.)
func TestAuditMDYieldsAFullDisk(t *testing.T) {
	entries := writerEntries(t)
	bob, carol := entries[0].Peer, entries[6].Peer
	clean := t.TempDir()
	c, err := OpenAuditLog(clean)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := c.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	var free atomic.Uint64
	free.Store(1 << 30)
	a, err := OpenAuditLog(dir, WithFreeSpace(func() (uint64, error) { return free.Load(), nil }))
	if err != nil {
		t.Fatal(err)
	}
	record := func(es ...AuditEntry) {
		t.Helper()
		for _, e := range es {
			if err := a.Record(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	markers := func(peer string) int {
		t.Helper()
		n, err := countMarkers(peerFile(dir, testDay, peer, auditMDExt))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return n
	}
	record(entries[:2]...)
	flushAudit(t, a)
	// As Record or the writer do when a write meets ENOSPC or EDQUOT.
	a.md.diskFull()
	free.Store(4 << 10)
	record(entries[2])
	if err := a.Flush(); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("rendering with 4 KiB free on a disk found full: %v; want ErrNoRoom", err)
	}
	if n := markers(bob); n != 2 {
		t.Fatalf("bob's .md holds %d entries with 4 KiB free on a disk found full, want the 2 rendered before", n)
	}
	free.Store(mdReserve)
	record(entries[3:]...)
	flushAudit(t, a)
	if a.md.full.Load() != a.md.cleared {
		t.Errorf("the writer still yields with %d KiB free", mdReserve>>10)
	}
	if n := markers(bob); n != 2 {
		t.Errorf("bob's .md, behind, holds %d entries, want still 2 (a prefix of its .jsonl)", n)
	}
	if n := markers(carol); n != 1 {
		t.Errorf("carol's .md holds %d entries once there is room, want 1", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, renderingMarker)); err != nil {
		t.Fatalf("no marker after a run with an .md behind: %v", err)
	}
	b, err := OpenAuditLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, peer := range []string{bob, carol} {
		want, _ := os.ReadFile(peerFile(clean, testDay, peer, auditMDExt))
		got, err := os.ReadFile(peerFile(dir, testDay, peer, auditMDExt))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s.md after reopening differs from a run with room (%v):\n%s\n--- want ---\n%s", peer, err, got, want)
		}
	}
}

// The entries waiting for the .md writer are bounded by their bytes: a
// Record that finds the queue full waits until the writer makes room, and
// then everything is rendered in order.
func TestAuditMDQueueIsBounded(t *testing.T) {
	a := openAudit(t, t.TempDir())
	a.md.mu.Lock()
	a.md.hold = true
	a.md.limit = 1 // every entry is over it: one at a time
	a.md.mu.Unlock()
	entries := writerEntries(t)
	if err := a.Record(entries[0]); err != nil {
		t.Fatal(err) // an empty queue takes an entry of any size
	}
	done := make(chan error, 1)
	go func() { done <- a.Record(entries[1]) }()
	waitFor(t, "the second Record to wait for room", func() bool {
		a.md.mu.Lock()
		defer a.md.mu.Unlock()
		return a.md.waiting == 1 && len(a.md.queue) == 1
	})
	select {
	case err := <-done:
		t.Fatalf("Record returned (%v) while the queue was full", err)
	default:
	}
	a.md.mu.Lock()
	a.md.hold = false
	a.md.cond.Broadcast()
	a.md.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	flushAudit(t, a)
	_, got := splitAuditMD(t, peerFile(a.dir, testDay, entries[0].Peer, auditMDExt))
	if len(got) != 2 || got[0].direction != string(entries[0].Direction) || got[1].direction != string(entries[1].Direction) {
		t.Fatalf("the .md holds %d entries, want the 2 in order", len(got))
	}
}

// auditDescriptors lists this process's open descriptors of files under
// dir, marking those of deleted files.
func auditDescriptors(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd here: %v", err)
	}
	var out []string
	for _, de := range des {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", de.Name()))
		// The spares (made by a goroutine, each open for a moment) are not
		// what the log holds.
		if err == nil && strings.HasPrefix(target, dir) && !strings.Contains(target, spareDir) {
			out = append(out, target)
		}
	}
	return out
}

// A daemon talking with many peers holds a bounded number of audit
// files open, none of a day the quota deleted, and none once closed.
func TestAuditLogHoldsBoundedDescriptors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	c := &clock{t: testNow.AddDate(0, 0, -2)}
	a, err := OpenAuditLog(dir, WithLimits(AuditLimits{MaxBytes: 1 << 20}), WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	record := func(at time.Time, peer int) {
		m := &Message{Headers: Headers{ConversationID: fmt.Sprintf("conv:%d", peer), MessageID: fmt.Sprintf("msg:%d", peer)}}
		if err := a.Record(AuditEntry{At: at, Direction: Sent, Peer: fmt.Sprintf("peer%03d", peer), Transport: "libp2p", Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3*heldJSONL; i++ {
		record(c.t, i)
	}
	flushAudit(t, a)
	if held := auditDescriptors(t, dir); len(held) > 2*heldJSONL {
		t.Errorf("%d audit files open for %d peers, want at most %d", len(held), 3*heldJSONL, 2*heldJSONL)
	}
	old := c.t.Format(auditDayLayout)
	// Two days later, enough today to go over the quota: the old day goes.
	c.t = testNow
	fillDay(t, a, testNow, 1<<20)
	if _, err := os.Stat(filepath.Join(dir, old)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old day is still there: %v", err)
	}
	for _, p := range auditDescriptors(t, dir) {
		if strings.Contains(p, old) || strings.HasSuffix(p, "(deleted)") {
			t.Errorf("still open after its day was deleted: %s", p)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if held := auditDescriptors(t, dir); len(held) != 0 {
		t.Errorf("open after Close: %v", held)
	}
}

// TestAuditFullDiskSetsTheMDAside: on a real file system that fills (a
// tmpfs of 4 MiB; root), a Record that meets ENOSPC marks the disk full
// for the .md writer, which then renders nothing while less than
// mdReserve is free, and renders again once the room is back.
func TestAuditFullDiskSetsTheMDAside(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("IFACED_REQUIRE_DISKFAULTS") == "1" {
			t.Fatal("this test mounts a small tmpfs to fill, which needs root, and IFACED_REQUIRE_DISKFAULTS=1 requires it")
		}
		t.Skip("this test mounts a small tmpfs to fill, which needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
	})
	a, err := OpenAuditLog(filepath.Join(dir, "audit"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	entries := writerEntries(t)
	bob, carol := entries[0].Peer, entries[6].Peer
	if err := a.Record(entries[0]); err != nil {
		t.Fatal(err)
	}
	flushAudit(t, a)
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for _, n := range []int{4096, 512, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	f.Close()
	// The entries fit while bob's .jsonl has room in its last page.
	for i := 1; ; i++ {
		err := a.Record(entries[i])
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil || i == 5 {
			t.Fatalf("recording entry %d on a full disk: %v; want ENOSPC by the fifth", i, err)
		}
	}
	if a.md.full.Load() == 0 {
		t.Fatal("after a Record met ENOSPC, the disk is not marked full for the .md writer")
	}
	// The renderings of the entries that fit may have met the full disk
	// too (bob's .md goes behind): that is not what this test is about.
	_ = a.Flush()
	// Room for the record, not for the rendering: 64 KiB back.
	if st, err := os.Stat(filler); err != nil {
		t.Fatal(err)
	} else if err := os.Truncate(filler, st.Size()-64<<10); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(entries[6]); err != nil {
		t.Fatalf("recording with 64 KiB back: %v", err)
	}
	if err := a.Flush(); !errors.Is(err, ErrNoRoom) {
		t.Fatalf("rendering with 64 KiB free on a disk found full: %v; want ErrNoRoom", err)
	}
	if _, err := os.Stat(peerFile(a.dir, testDay, carol, auditMDExt)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("carol's entry was rendered into the returning room (%v)", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	m := entries[2]
	m.Peer = "dave"
	if err := a.Record(m); err != nil {
		t.Fatal(err)
	}
	flushAudit(t, a)
	if n, err := countMarkers(peerFile(a.dir, testDay, "dave", auditMDExt)); err != nil || n != 1 {
		t.Fatalf("once the room is back, dave's .md holds %d entries (%v), want 1", n, err)
	}
	if n, _ := countMarkers(peerFile(a.dir, testDay, bob, auditMDExt)); n < 1 {
		t.Errorf("bob's .md holds %d entries, want at least the 1 rendered before the disk filled", n)
	}
}
