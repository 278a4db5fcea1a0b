//go:build linux

package netlab

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// dialInNS opens a TCP connection from inside the network namespace name
// (as `ip netns` names it, /run/netns/name). A socket belongs to the
// namespace of the thread that created it, so a goroutine locks itself to
// a fresh OS thread, enters the namespace there and dials. It never unlocks
// that thread: the Go runtime then ends the thread with the goroutine, and
// no other goroutine ever runs in the lab's namespace.
func dialInNS(ctx context.Context, name, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + name)
		if err != nil {
			ch <- result{nil, fmt.Errorf("opening namespace %s: %w", name, err)}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("entering namespace %s: %w", name, err)}
			return
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
