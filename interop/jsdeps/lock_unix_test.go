//go:build unix

package jsdeps

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The install lock excludes every other holder (another process's open
// of the file, as another test binary's) until it is released.
func TestInstallLockIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".install.lock")
	unlock, err := lockDir(path)
	if err != nil {
		t.Fatal(err)
	}
	try := func() error {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err := try(); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("a second holder took the lock while it was held: %v", err)
	}
	unlock()
	if err := try(); err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
}
