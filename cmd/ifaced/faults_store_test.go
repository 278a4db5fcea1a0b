package main

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"
)

// runExit runs the binary with args until it exits (within a minute) and
// returns its exit code and combined output.
func runExit(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ifaced %q did not exit within a minute:\n%s", args, out)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("ifaced %q: %v", args, err)
	}
	return 0, string(out)
}

// viewStore reads the store file at path (a stopped daemon's) read-only.
func viewStore(t *testing.T, path string, read func(*bolt.Tx)) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		read(tx)
		return nil
	})
}

// bucketRootPage is the number and size of the page that holds the root of
// the store's bucket name (a bucket too large to be inline in its parent).
func bucketRootPage(t *testing.T, path, name string) (pgid int64, pageSize int) {
	t.Helper()
	viewStore(t, path, func(tx *bolt.Tx) {
		if b := tx.Bucket([]byte(name)); b != nil {
			pgid = int64(b.Root())
		}
		pageSize = tx.DB().Info().PageSize
	})
	if pgid == 0 {
		t.Fatalf("bucket %s of %s has no page of its own", name, path)
	}
	return pgid, pageSize
}

// indexedSize is how many bytes of the store file at path its index
// (the meta page's high-water mark) says are in use.
func indexedSize(t *testing.T, path string) (size int64) {
	t.Helper()
	viewStore(t, path, func(tx *bolt.Tx) { size = tx.Size() })
	return size
}

// TestFaultDamagedStore: daemon A (a process) caches B's view and pins
// B's key; then, with A stopped, its store file is damaged: first the page
// holding the peer cache is overwritten with garbage, later the file is
// cut to half the length its index uses. Each time `ifaced run` exits (no
// panic) with an error that names the file, says it is damaged and how,
// and names the repair (`ifaced store salvage`); the salvage keeps the damaged file,
// reports what it could not read, and A starts again with the rest: after
// the garbage page, B's key is still pinned (B's next greeting is granted
// level 2), and only B's cached view is gone (B's greeting caches it
// again).
func TestFaultDamagedStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon")
	}
	bin := buildIfaced(t)
	aHome := config.Home{Dir: filepath.Join(t.TempDir(), "a")}
	if _, err := aHome.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, aHome, quietConfig())
	a := startProc(t, bin, aHome)
	st := a.waitAPI(t)
	aID, err := peer.Decode(st.PeerID)
	if err != nil {
		t.Fatal(err)
	}
	b := inProcess(t, quietConfig())
	bID := b.ID().PeerID()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	greet := func() conditions.Level {
		t.Helper()
		if _, err := b.Connect(ctx, st.Addrs[0]); err != nil {
			t.Fatal(err)
		}
		res, err := b.QueryCapabilities(ctx, aID, negotiate.Proposal{})
		if err != nil {
			t.Fatal(err)
		}
		return res.GrantedToUs.AuthLevel
	}
	greet()
	wantLines(t, "trust --verify", mustRun(t, aHome.Dir, "trust", bID.String(), "--verify", b.ID().Fingerprint()), "is now at level 2 (verified)")
	greet() // a pinned peer's view is kept on disk (a stranger's only in memory)
	a.kill(t)

	db := filepath.Join(aHome.Dir, "ifaced.db")
	pgid, pageSize := bucketRootPage(t, db, "peers")
	garbage := make([]byte, pageSize)
	rand.Read(garbage)
	f, err := os.OpenFile(db, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(garbage, pgid*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	refused := func(what, how string) {
		t.Helper()
		code, out := runExit(t, bin, "run", "--home", aHome.Dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--no-mdns")
		if code == 0 || strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
			t.Fatalf("ifaced run on a store with %s: exit %d, want an error and no panic:\n%s", what, code, out)
		}
		wantLines(t, "ifaced run on a store with "+what, out, db, "store file is damaged", how, "ifaced store salvage --home "+aHome.Dir, "move ifaced.db aside")
		t.Logf("ifaced run on a store with %s (exit %d):\n%s", what, code, out[max(0, strings.LastIndex(out, "\nerror")):])
	}
	refused("a page of garbage", "a page does not hold what the file's index says it does")
	out := mustRunBin(t, bin, "store", "salvage", "--home", aHome.Dir)
	t.Logf("ifaced store salvage:\n%s", out)
	wantLines(t, "store salvage", out, "salvaged "+db, "could not read:", "bucket peers", "the damaged file is kept as "+db+".damaged-")
	kept, _ := filepath.Glob(db + ".damaged-*")
	if len(kept) != 1 {
		t.Fatalf("the damaged file is not kept beside the store: %v", kept)
	}

	a = startProc(t, bin, aHome)
	st = a.waitAPI(t)
	if level := greet(); level != conditions.Verified {
		t.Errorf("B's greeting after the salvage was granted level %d; want 2 (verified): B's pinned key was readable", level)
	}
	wantLines(t, "peers after the salvage", mustRun(t, aHome.Dir, "peers"), bID.String())
	a.kill(t)

	// Cut short: the half that is gone cannot be read back. Half of what
	// the file's index uses, not of the file's length: bbolt grows the
	// file ahead of its pages, so half the length can cut only pages no
	// record is on yet, and such a file is not damaged.
	if err := os.Truncate(db, indexedSize(t, db)/2); err != nil {
		t.Fatal(err)
	}
	refused("its second half cut off", "it was cut short")
	out = mustRunBin(t, bin, "store", "salvage", "--home", aHome.Dir)
	t.Logf("ifaced store salvage:\n%s", out)
	wantLines(t, "store salvage of a cut file", out, "salvaged "+db, "the damaged file is kept as ")
	a = startProc(t, bin, aHome)
	st = a.waitAPI(t)
	greet()
	if kept, _ := filepath.Glob(db + ".damaged-*"); len(kept) != 2 {
		t.Errorf("the two damaged files are not both kept: %v", kept)
	}
}

// mustRunBin runs the binary until it exits and fails the test unless it
// exits 0; it returns the output.
func mustRunBin(t *testing.T, bin string, args ...string) string {
	t.Helper()
	code, out := runExit(t, bin, args...)
	if code != 0 {
		t.Fatalf("ifaced %q: exit %d\n%s", args, code, out)
	}
	return out
}
