//go:build unix

package gossip

import "golang.org/x/sys/unix"

// freeBytes is the space on dir's file system that an unprivileged
// process may still write (f_bavail).
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
