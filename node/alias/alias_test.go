package alias

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func newPeer(t *testing.T) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestBookSetLookupRemove(t *testing.T) {
	dir := t.TempDir()
	b := Open(dir)
	if all, err := b.All(); err != nil || len(all) != 0 {
		t.Fatalf("a missing file: %v %v, want an empty book", all, err)
	}
	bob, carol := newPeer(t), newPeer(t)
	if before, err := b.Set("bob", bob); err != nil || before != "" {
		t.Fatalf("set bob: %v %v", before, err)
	}
	if _, err := b.Set("alice.work", carol); err != nil {
		t.Fatalf("set a dotted name: %v", err)
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v %v, want mode 0600", st, err)
	}
	// A second reader (a new process) sees what was written.
	if pid, ok, err := Open(dir).Lookup("alice.work"); err != nil || !ok || pid != carol {
		t.Fatalf("lookup alice.work: %v %v %v", pid, ok, err)
	}
	if before, err := b.Set("bob", carol); err != nil || before != bob {
		t.Fatalf("re-pointing bob: before %v %v", before, err)
	}
	if pid, err := b.Remove("bob"); err != nil || pid != carol {
		t.Fatalf("remove: %v %v", pid, err)
	}
	if _, ok, _ := b.Lookup("bob"); ok {
		t.Fatal("bob is still there")
	}
	if _, err := b.Remove("bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing twice: %v", err)
	}
}

func TestBookRefusals(t *testing.T) {
	dir := t.TempDir()
	b := Open(dir)
	pid := newPeer(t)
	for _, name := range []string{"", "9lives", "has space", "add", "close", pid.String(), "a:b"} {
		if _, err := b.Set(name, pid); !errors.Is(err, ErrBadName) {
			t.Errorf("alias %q: %v, want ErrBadName", name, err)
		}
	}
	path := filepath.Join(dir, FileName)
	os.WriteFile(path, []byte(`bob = "not a peer"`+"\n"), 0o600)
	if _, err := b.All(); err == nil {
		t.Error("a value that is not a peer ID was read")
	}
	os.WriteFile(path, []byte(`bob = "`+pid.String()+`"`+"\n"), 0o600)
	os.Chmod(path, 0o666)
	if _, err := b.All(); err == nil {
		t.Error("a file others may write was read")
	}
}
