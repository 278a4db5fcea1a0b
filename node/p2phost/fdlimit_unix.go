//go:build unix

package p2phost

import "syscall"

// processFDLimit is the soft limit on open files of this process.
func processFDLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 4096
	}
	return l.Cur
}
