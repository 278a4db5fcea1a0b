package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
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
// still has room in its last block, taken; A neither panics nor
// exits, and warns its owner once. Once the filler is removed, without a
// restart, the stranger's greeting and B's message are taken, and A's
// audit log verifies (ifaced audit verify).
func TestFaultFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon")
	}
	disk := smallDisk(t, 48)
	bin := buildIfaced(t)
	aHome := config.Home{Dir: filepath.Join(disk, "a")}
	if _, err := aHome.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	ac := quietConfig()
	ac.Audit.MinFreeMB = 0
	writeConfig(t, aHome, ac)
	a := startProc(t, bin, aHome)
	st := a.waitAPI(t)
	aID, err := peer.Decode(st.Addrs[0][strings.LastIndex(st.Addrs[0], "/")+1:])
	if err != nil {
		t.Fatal(err)
	}
	b := inProcess(t, quietConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := b.Connect(ctx, st.Addrs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.QueryCapabilities(ctx, aID, negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(ctx, aID, "hello before the disk fills"); err != nil {
		t.Fatal(err)
	}
	stranger := inProcess(t, quietConfig())
	if _, err := stranger.Connect(ctx, st.Addrs[0]); err != nil {
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
	_, err = stranger.QueryCapabilities(ctx, aID, negotiate.Proposal{})
	refusedFull("a stranger's greeting", err)
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
	if log := a.logTail(); !strings.Contains(log, "the audit log's disk has room again") {
		t.Errorf("A's log does not say the disk has room again:\n%s", log)
	}
	a.kill(t)
	out := mustRunBin(t, bin, "audit", "verify", "--home", aHome.Dir)
	t.Logf("ifaced audit verify:\n%s", out)
}
