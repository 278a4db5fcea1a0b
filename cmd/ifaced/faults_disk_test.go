package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// requireDiskEnv, set to "1" (as .ci/run does), turns the full-disk
// test's skip for lack of root into a failure.
const requireDiskEnv = "IFACED_REQUIRE_DISKFAULTS"

// smallDisk mounts a tmpfs of sizeMB under a new temporary directory and
// unmounts it when the test ends. It needs root.
func smallDisk(t *testing.T, sizeMB int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv(requireDiskEnv) == "1" {
			t.Fatalf("this test mounts a small tmpfs to fill, which needs root, and %s=1 requires it", requireDiskEnv)
		}
		t.Skipf("this test mounts a small tmpfs to fill, which needs root (set %s=1 to fail instead)", requireDiskEnv)
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMB), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a filler file into dir until the disk is full (ENOSPC), and
// returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
				t.Fatal(err)
			}
			break
		}
	}
	for _, n := range []int{4096, 512, 1} { // the last partial blocks
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// TestFaultFullDisk: daemon A (a process) runs with its home on a 48 MiB
// tmpfs and audit.min_free_mb = 0 (no watermark), and B talks with it;
// then a filler file fills the disk (ENOSPC). A stranger's greeting is
// refused, and B's message in its open conversation too, with wire code
// unavailable and a reason that says the disk is full (before the fix:
// internal_error, "could not process the message"), or, when its file
// still has room in its last block, taken; so are a pinned peer's first
// greeting and a capability request whose answers cannot be recorded
// (the refusal sent in place of the answer), B's greetings and requests
// until one is refused; A neither panics nor exits, and warns its owner
// once. Once the filler is removed, without a
// restart, the stranger's greeting and B's message are taken, and A's
// audit log verifies (ifaced audit verify).
func TestFaultFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon")
	}
	a, aID, aAddr := startOnSmallDisk(t, 48, func(ac *config.Config) {
		ac.Audit.MinFreeMB = 0
		ac.Capabilities = []map[string]any{{"name": "ping", "description": "Respond to connectivity tests"},
			{"name": "capabilities.get", "description": "This daemon's capability document for the requester"}}
		// A view of more than 8 KiB, so that a greeting's answer carrying it
		// cannot be recorded in the room one free page leaves (below).
		for i := range 40 {
			ac.Capabilities = append(ac.Capabilities, map[string]any{"name": fmt.Sprintf("report.part%02d", i),
				"description": "Part " + strings.Repeat("of a report that makes this daemon's view large ", 4)})
		}
	})
	aHome, disk, bin := a.home, filepath.Dir(a.home.Dir), buildIfaced(t)
	b := inProcess(t, quietConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := b.Connect(ctx, aAddr); err != nil {
		t.Fatal(err)
	}
	if _, err := b.QueryCapabilities(ctx, aID, negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, aID, "hello before the disk fills"); err != nil {
		t.Fatal(err)
	}
	stranger := inProcess(t, quietConfig())
	if _, err := stranger.Connect(ctx, aAddr); err != nil {
		t.Fatal(err)
	}
	// C: a peer A's owner pinned, which has not greeted A yet.
	c := inProcess(t, quietConfig())
	mustRun(t, aHome.Dir, "trust", c.ID().PeerID().String(), "--verify", c.ID().Fingerprint())
	if _, err := c.Connect(ctx, aAddr); err != nil {
		t.Fatal(err)
	}

	filler := fill(t, disk)
	refusedFull := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, wire.ErrUnavailable) || !strings.Contains(err.Error(), "disk is full") {
			t.Errorf("%s on a full disk: %v; want wire code unavailable saying the disk is full", what, err)
		} else {
			t.Logf("%s on a full disk: %v", what, err)
		}
	}
	_, err := stranger.QueryCapabilities(ctx, aID, negotiate.Proposal{})
	refusedFull("a stranger's greeting", err)
	freePage := func() {
		t.Helper()
		if st, err := os.Stat(filler); err != nil {
			t.Fatal(err)
		} else if err := os.Truncate(filler, st.Size()-4096); err != nil {
			t.Fatal(err)
		}
	}
	// C's greeting, with one page free: its entry (of less than 4 KiB)
	// fits, and the answer's, carrying A's view (more than 8 KiB), does
	// not; or C's view cannot be kept in the store. Either way C is told
	// unavailable, its disk is full (before the fix: a reset stream, or
	// internal_error).
	freePage()
	_, err = c.QueryCapabilities(ctx, aID, negotiate.Proposal{})
	refusedFull("a pinned peer's first greeting", err)
	// What B, a peer A has greeted, sends next is recorded in B's audit
	// file on A, and an entry fits while the file's last block (a 4 KiB
	// tmpfs page) has room. So each exchange below is either taken and
	// answered, or refused with wire code unavailable for the full disk:
	// at the door, when the received message's entry does not fit (not
	// acted on), or, when it fits and the answer's entry does not, by the
	// refusal sent in place of the answer (before the fix: a greeting got
	// a reset stream, a capability request no answer at all). An exchange
	// records two entries of more than 512 bytes each, so the fifth at the
	// latest cannot fit; one page is freed before each series (filler cut
	// by 4 KiB), so that each meets the end of the disk afresh.
	until := func(what string, exchange func(context.Context) error) {
		t.Helper()
		for i := 1; ; i++ {
			ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			err := exchange(ctx)
			cancel()
			if err != nil {
				refusedFull(fmt.Sprintf("%s %d", what, i), err)
				return
			}
			if i == 5 {
				t.Fatalf("5 of %s answered on a full disk: their entries cannot all fit in a page", what)
			}
			t.Logf("%s %d on a full disk: answered (its entries fit in the file's last page)", what, i)
		}
	}
	freePage()
	until("a known peer's greeting", func(ctx context.Context) error {
		_, err := b.QueryCapabilities(ctx, aID, negotiate.Proposal{})
		return err
	})
	if _, err := b.Connect(ctx, aAddr); err != nil {
		t.Fatal(err)
	}
	// B asks for capabilities.get in its open conversation, with one page
	// free: the request's entry fits, and the answer's, carrying A's
	// document (more than 8 KiB), does not. B is told so in reply to its
	// request (before the fix: no answer, and B waited).
	freePage()
	ictx, icancel := context.WithTimeout(ctx, 60*time.Second)
	_, err = b.Invoke(ictx, aID, "capabilities.get", nil)
	icancel()
	refusedFull("a capability request whose answer cannot be recorded", err)
	if err == nil || !strings.Contains(err.Error(), admit.ErrAnswerUnrecorded.Error()) {
		t.Errorf("a capability request whose answer cannot be recorded: %v; want %q", err, admit.ErrAnswerUnrecorded)
	}
	freePage()
	until("capability request", func(ctx context.Context) error {
		_, err := b.Invoke(ctx, aID, "ping", nil)
		return err
	})
	// B's conversation file may still have room in its last block (a
	// tmpfs page): then the message is recorded and taken, else refused.
	if _, err = b.Send(ctx, aID, "hello on a full disk"); err != nil {
		refusedFull("a message in an open conversation", err)
	} else {
		t.Logf("a message in an open conversation on a full disk: taken (its file had room in its last block)")
	}
	select {
	case <-a.exited:
		t.Fatalf("A exited on a full disk: %v\n%s", a.err, a.logTail())
	default:
	}
	if log := a.logTail(); !strings.Contains(log, "the disk holding the audit log is full") || strings.Contains(log, "panic") {
		t.Errorf("A's log on a full disk has no warning, or a panic:\n%s", log)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.QueryCapabilities(ctx, aID, negotiate.Proposal{}); err != nil {
		t.Errorf("a stranger's greeting once there is room again: %v", err)
	}
	if _, err := b.Send(ctx, aID, "hello once there is room"); err != nil {
		t.Errorf("a message once there is room again: %v", err)
	}
	if _, err := b.Invoke(ctx, aID, "ping", nil); err != nil {
		t.Errorf("a capability request once there is room again: %v", err)
	}
	if _, err := c.QueryCapabilities(ctx, aID, negotiate.Proposal{}); err != nil {
		t.Errorf("the pinned peer's greeting once there is room again: %v", err)
	}
	if log := a.logTail(); !strings.Contains(log, "the audit log's disk has room again") {
		t.Errorf("A's log does not say the disk has room again:\n%s", log)
	}
	a.kill(t)
	out := mustRunBin(t, bin, "audit", "verify", "--home", aHome.Dir)
	t.Logf("ifaced audit verify:\n%s", out)
}

// TestFaultDiskWatermark: daemon A (a process) runs with its home on a
// 64 MiB tmpfs and audit.min_free_mb = 32; B opens a conversation with
// it; then a filler file leaves 16 MiB free, so the watermark trips long
// before the disk is full. A stranger's greeting is refused with wire code
// unavailable and a message naming audit.min_free_mb, while B's message
// in its open conversation is taken; A warns its owner. Once the filler
// is removed, without a restart, the stranger's greeting is taken and A
// says it has room again.
func TestFaultDiskWatermark(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon")
	}
	a, aID, aAddr := startOnSmallDisk(t, 64, func(ac *config.Config) { ac.Audit.MinFreeMB = 32 })
	disk := filepath.Dir(a.home.Dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := inProcess(t, quietConfig())
	if _, err := b.Connect(ctx, aAddr); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, aID, "hello before the disk fills"); err != nil {
		t.Fatal(err)
	}
	stranger := inProcess(t, quietConfig())
	if _, err := stranger.Connect(ctx, aAddr); err != nil {
		t.Fatal(err)
	}

	var fs syscall.Statfs_t
	if err := syscall.Statfs(disk, &fs); err != nil {
		t.Fatal(err)
	}
	free := int64(fs.Bavail) * int64(fs.Bsize)
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, free-16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Statfs(disk, &fs); err != nil {
		t.Fatal(err)
	}
	t.Logf("free on A's disk: %d MiB, audit.min_free_mb 32", int64(fs.Bavail)*int64(fs.Bsize)>>20)
	// A asks the file system at most every gossip.FreeSpaceEvery and uses
	// the figure in between (a documented staleness): past it, the next
	// greeting is judged on the free space now.
	time.Sleep(gossip.FreeSpaceEvery)
	_, err := stranger.QueryCapabilities(ctx, aID, negotiate.Proposal{})
	if !errors.Is(err, wire.ErrUnavailable) || !strings.Contains(err.Error(), "below audit.min_free_mb (32 MiB)") {
		t.Errorf("a stranger's greeting below the watermark: %v; want wire code unavailable naming audit.min_free_mb", err)
	} else {
		t.Logf("a stranger's greeting below the watermark: %v", err)
	}
	if _, err := b.Send(ctx, aID, "hello below the watermark"); err != nil {
		t.Errorf("a message in an open conversation below the watermark: %v; want it taken (open conversations go on)", err)
	}
	if log := a.logTail(); !strings.Contains(log, "refusing new conversations until the audit log has room") || !strings.Contains(log, "audit.min_free_mb") {
		t.Errorf("A's log below the watermark does not warn naming audit.min_free_mb:\n%s", log)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	time.Sleep(gossip.FreeSpaceEvery) // the figure asked while the filler was there is stale by now
	if _, err := stranger.QueryCapabilities(ctx, aID, negotiate.Proposal{}); err != nil {
		t.Errorf("a stranger's greeting once there is room again: %v", err)
	}
	if log := a.logTail(); !strings.Contains(log, "the audit log has room again") {
		t.Errorf("A's log does not say there is room again:\n%s", log)
	}
	select {
	case <-a.exited:
		t.Fatalf("A exited: %v\n%s", a.err, a.logTail())
	default:
	}
}

// TestFaultFullDiskOwner: the owner's own operations when the disk
// holding the store is full. Daemon A (a process) runs on a 48 MiB tmpfs,
// which a filler file fills; the owner pins one new peer after another
// (ifaced trust PEER --verify FINGERPRINT, a store write each). Each pin
// either succeeds or fails with exit status 1 and a message saying the
// disk is full, nothing was changed, and what to do; within 64 pins three
// fail (the store file cannot grow). caps add is likewise taken or
// refused so. A neither panics nor exits. Once the filler is removed, the
// failed pin succeeds without a restart; after A is killed (SIGKILL) and
// started again, every pin that was reported done is there, and no pin
// that was reported failed.
func TestFaultFullDiskOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon")
	}
	a, _, _ := startOnSmallDisk(t, 48, func(ac *config.Config) { ac.Audit.MinFreeMB = 0 })
	aHome, disk, bin := a.home, filepath.Dir(a.home.Dir), buildIfaced(t)
	filler := fill(t, disk)

	const fullMsg = "the disk holding the data directory is full, so nothing was changed; free space on it and run the command again"
	var pinned, failed []*identity.Identity
	for i := 1; len(failed) < 3; i++ {
		if i > 64 {
			t.Fatalf("%d of 64 pins taken on a full disk: the store file cannot hold them without growing", len(pinned))
		}
		id, err := identity.Generate(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		r := ifaced(t, aHome.Dir, "trust", id.PeerID().String(), "--verify", id.Fingerprint())
		switch {
		case r.code == 0:
			pinned = append(pinned, id)
		case r.code == 1 && strings.Contains(r.stderr, fullMsg):
			failed = append(failed, id)
			t.Logf("pin %d on a full disk: %s", i, strings.TrimSpace(r.stderr))
		default:
			t.Fatalf("pin %d on a full disk: status %d, %q; want success, or status 1 saying %q", i, r.code, r.stderr, fullMsg)
		}
	}
	t.Logf("pins on a full disk: %d taken, %d refused", len(pinned), len(failed))
	capFile := filepath.Join(t.TempDir(), "cap.json")
	if err := os.WriteFile(capFile, []byte(`{"name": "report.full", "description": "`+strings.Repeat("A capability added on a full disk. ", 100)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	capAdded := false
	switch r := ifaced(t, aHome.Dir, "caps", "add", capFile); {
	case r.code == 0:
		capAdded = true
		t.Logf("caps add on a full disk: taken")
	case r.code == 1 && strings.Contains(r.stderr, fullMsg):
		t.Logf("caps add on a full disk: %s", strings.TrimSpace(r.stderr))
	default:
		t.Errorf("caps add on a full disk: status %d, %q; want success, or status 1 saying %q", r.code, r.stderr, fullMsg)
	}
	select {
	case <-a.exited:
		t.Fatalf("A exited on a full disk: %v\n%s", a.err, a.logTail())
	default:
	}
	if log := a.logTail(); strings.Contains(log, "panic") {
		t.Errorf("A's log on a full disk has a panic:\n%s", log)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	again := failed[0]
	wantLines(t, "the failed pin once there is room", mustRun(t, aHome.Dir, "trust", again.PeerID().String(), "--verify", again.Fingerprint()), "is now at level 2 (verified)")
	pinned = append(pinned, again)
	a.kill(t)
	a = startProc(t, bin, aHome)
	a.waitAPI(t)
	level := func(id *identity.Identity) conditions.Level {
		t.Helper()
		var info trust.Info
		if err := json.Unmarshal([]byte(mustRun(t, aHome.Dir, "trust", id.PeerID().String(), "--json")), &info); err != nil {
			t.Fatal(err)
		}
		return info.Level
	}
	for i, id := range pinned {
		if l := level(id); l != conditions.Verified {
			t.Errorf("pin %d, reported done, after a restart: level %d, want 2 (verified)", i+1, l)
		}
	}
	for _, id := range failed[1:] {
		if l := level(id); l == conditions.Verified {
			t.Errorf("a pin reported failed is there after a restart")
		}
	}
	caps := mustRun(t, aHome.Dir, "caps")
	if strings.Contains(caps, "report.full") != capAdded {
		t.Errorf("caps after a restart: report.full listed %v, but caps add reported it added %v:\n%s", !capAdded, capAdded, caps)
	}
}

// startOnSmallDisk starts daemon A, an `ifaced run` process, with its home
// on a tmpfs of mb MiB and quietConfig changed by configure, waits for its
// control API and returns it with its peer ID and its first address.
func startOnSmallDisk(t *testing.T, mb int, configure func(*config.Config)) (*daemonProc, peer.ID, string) {
	t.Helper()
	disk := smallDisk(t, mb)
	bin := buildIfaced(t)
	home := config.Home{Dir: filepath.Join(disk, "a")}
	if _, err := home.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	c := quietConfig()
	configure(c)
	writeConfig(t, home, c)
	a := startProc(t, bin, home)
	st := a.waitAPI(t)
	id, err := peer.Decode(st.Addrs[0][strings.LastIndex(st.Addrs[0], "/")+1:])
	if err != nil {
		t.Fatal(err)
	}
	return a, id, st.Addrs[0]
}
