package jsdeps

import (
	"os"
	"path/filepath"
	"testing"
)

// installed follows the packages, not file times: a lock file that names
// a package node_modules lacks, or another version, is not installed.
func TestInstalledComparesPackages(t *testing.T) {
	dir := t.TempDir()
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lock := filepath.Join(dir, "package-lock.json")
	hidden := filepath.Join(dir, "node_modules", ".package-lock.json")
	write(lock, `{"packages": {"": {"name": "x"}, "node_modules/a": {"version": "1.0.0"}}}`)
	if installed(dir) {
		t.Error("installed with no node_modules")
	}
	write(hidden, `{"packages": {"node_modules/a": {"version": "1.0.0"}}}`)
	if !installed(dir) {
		t.Error("not installed though node_modules holds the lock's packages")
	}
	write(lock, `{"packages": {"": {"name": "x"}, "node_modules/a": {"version": "1.0.0"}, "node_modules/b": {"version": "2.0.0"}}}`)
	if installed(dir) {
		t.Error("installed though the lock names a package node_modules lacks")
	}
	write(hidden, `{"packages": {"node_modules/a": {"version": "1.0.1"}, "node_modules/b": {"version": "2.0.0"}}}`)
	if installed(dir) {
		t.Error("installed though node_modules holds another version")
	}
}
