//go:build unix

package jsdeps

import (
	"os"
	"syscall"
)

// lockDir takes an exclusive lock on the file at path (made if missing),
// waiting for any other process that holds it; unlock releases it. The
// kernel releases it too when the process ends, so a test binary killed
// mid-install leaves no stale lock.
func lockDir(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
