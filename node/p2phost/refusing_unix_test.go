//go:build unix

package p2phost

import (
	"fmt"
	"syscall"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

// refusingTarget is an address nothing listens on: the kernel answers
// every SYN to it with a reset, as an answering router does. The port is
// held by a socket bound to it that never listens, until the test ends:
// a port merely freed (listened on, then closed) may be taken meanwhile
// by any process on the machine, and was (a libp2p host of a test beside
// it answered "peer id mismatch"; a connection on it made the dial's
// 4-tuple taken, "cannot assign requested address").
func refusingTarget(t *testing.T) ma.Multiaddr {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("making a refusing port: %v", err)
	}
	syscall.CloseOnExec(fd)
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("making a refusing port: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("making a refusing port: %v", err)
	}
	return ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", sa.(*syscall.SockaddrInet4).Port))
}
