package auditproof

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
)

func testKey(t testing.TB, b byte) *identity.Identity {
	t.Helper()
	id, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A tree reopened after a crash tore its files is its longest whole
// prefix, and goes on from there; a retired file name keeps its new
// generation apart across a reopen.
func TestTreeTornTailAndGenerations(t *testing.T) {
	dir := t.TempDir()
	tr, err := OpenTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := tr.Append("a", int64(i*3), 2, LeafHash([]byte{byte(i), byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	tr.Retire("a")
	size, root, err := tr.Flush()
	if err != nil || size != 5 {
		t.Fatal(size, err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn leaf and half a hash past the whole tree.
	for _, f := range []string{LeavesFile, HashesFile} {
		fd, _ := os.OpenFile(filepath.Join(dir, f), os.O_WRONLY|os.O_APPEND, 0)
		fd.Write([]byte{1, 2, 3, 4, 5, 6, 7})
		fd.Close()
	}
	tr, err = OpenTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, r := tr.Root(); s != 5 || r != root {
		t.Fatalf("reopened: %d %v, want 5 %v", s, r, root)
	}
	if _, ok := tr.Number("a"); ok {
		t.Error("a retired name has a number after a reopen")
	}
	if _, err := tr.Append("a", 0, 1, LeafHash([]byte{9})); err != nil {
		t.Fatal(err)
	}
	if n, _ := tr.Number("a"); n != 2 {
		t.Errorf("the new generation of a is file %d, want 2 (after a and its retiring line)", n)
	}
	tr.Close()
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != 6 || strings.Join(r.Names(), ",") != "a,-a,a" {
		t.Errorf("reader: %d leaves, table %q", r.Size(), r.Names())
	}
	p, err := r.Prove(3, 6)
	if err != nil {
		t.Fatal(err)
	}
	root6, _ := r.TreeHash(6)
	if err := CheckInclusion(p, 6, root6, 3, LeafHash([]byte{3, 3})); err != nil {
		t.Errorf("inclusion of leaf 3: %v", err)
	}
}

// A checkpoint signed by a key opens under that key, and is refused,
// naming the signer, under any other; a changed text does not verify.
func TestCheckpointSignatures(t *testing.T) {
	owner, other := testKey(t, 1), testKey(t, 2)
	c := Checkpoint{Origin: Origin("2026-03-04"), Size: 7, Root: LeafHash([]byte("x")), Time: time.Date(2026, 3, 4, 1, 2, 3, 0, time.UTC)}
	note, err := Sign(c, owner)
	if err != nil {
		t.Fatal(err)
	}
	got, signer, err := Open(note, func(d string) bool { return d == owner.DID() })
	if err != nil || got != c || signer != owner.DID() {
		t.Fatalf("open: %+v %s %v", got, signer, err)
	}
	if _, _, err := Open(note, func(d string) bool { return d == other.DID() }); !errors.Is(err, ErrUntrustedSigner) || !strings.Contains(err.Error(), owner.DID()) {
		t.Errorf("under another key: %v", err)
	}
	changed := bytes.Replace(note, []byte("\n7\n"), []byte("\n8\n"), 1)
	if _, _, err := Open(changed, func(string) bool { return true }); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("a changed size: %v", err)
	}
	if _, err := owner.SignCheckpoint([]byte("ifp/5/message-signature/v1\n{}")); !errors.Is(err, identity.ErrNotCheckpoint) {
		t.Errorf("the key signed a text that is no checkpoint: %v", err)
	}
	if DayOf(c.Origin) != "2026-03-04" || DayOf("ifaced-audit/x") != "" {
		t.Error("DayOf")
	}
}

// FuzzOpenCheckpoint: no input makes opening a checkpoint panic, and
// what opens formats back to a text that parses.
func FuzzOpenCheckpoint(f *testing.F) {
	owner := testKey(f, 1)
	note, _ := Sign(Checkpoint{Origin: Origin("2026-03-04"), Size: 3, Root: LeafHash(nil)}, owner)
	f.Add(note)
	f.Add([]byte("ifaced-audit/2026-03-04\n1\nAAAA\n\n— x y\n"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		c, _, err := Open(msg, func(string) bool { return true })
		if err != nil {
			return
		}
		if _, err := ParseCheckpoint(c.Text()); err != nil {
			t.Fatalf("an opened checkpoint does not parse back: %v", err)
		}
	})
}
