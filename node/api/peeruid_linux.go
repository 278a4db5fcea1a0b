//go:build linux

package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ownerCheck: this system lists sockets with their owners.
const ownerCheck = true

// procTCP are the kernel's tables of this network namespace's TCP
// sockets, IPv4 then IPv6 (variables, for a test).
var procTCP = [2]string{"/proc/net/tcp", "/proc/net/tcp6"}

// socketOwner is the uid owning the TCP socket whose local address is
// remote and whose remote address is local: the client's end of a
// connection this listener accepted on local from remote. It asks the
// kernel for that one socket (sock_diag over netlink); where that cannot
// answer, it reads the kernel's tables (procOwner).
func socketOwner(local, remote netip.AddrPort) (uint32, error) {
	l, r := unmapPort(local), unmapPort(remote)
	uid, err := diagOwner(l, r)
	switch {
	case err == nil:
		diagWorks.Store(true)
		return uid, nil
	case errors.Is(err, unix.ENOENT) && diagWorks.Load():
		// sock_diag answers here, so the socket is gone (its client
		// closed it): no need to read the tables to say so.
		return 0, fmt.Errorf("%w: no socket %s → %s (%v)", errOwnerUnknown, r, l, err)
	}
	// No netlink here, or no TCP handler for sock_diag in this kernel
	// (also ENOENT): the tables say.
	return procOwner(l, r)
}

// diagWorks: sock_diag has found a socket in this process.
var diagWorks atomic.Bool

// procOwner finds the client's socket in /proc/net/tcp and tcp6.
func procOwner(l, r netip.AddrPort) (uint32, error) {
	var tried []string
	for i, path := range procTCP {
		var needle string
		if i == 0 {
			if !l.Addr().Is4() || !r.Addr().Is4() {
				continue // an IPv6 connection is in tcp6 only
			}
			needle = procAddr4(r) + " " + procAddr4(l) + " "
		} else {
			needle = procAddr6(r) + " " + procAddr6(l) + " "
		}
		table, err := os.ReadFile(path)
		if err != nil {
			return 0, fmt.Errorf("%w: reading %s: %v", errOwnerUnknown, path, err)
		}
		tried = append(tried, path)
		if uid, ok := ownerIn(table, needle); ok {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("%w: no socket %s → %s in %v", errOwnerUnknown, r, l, tried)
}

// diagOwner asks the kernel, over a NETLINK_SOCK_DIAG socket, for the
// TCP socket whose local address is r and remote address l (an exact
// lookup, as `ss` makes for one socket: no table is walked), and returns
// its owner's uid. The messages (linux/inet_diag.h): a request
// SOCK_DIAG_BY_FAMILY with an inet_diag_req_v2, its socket ID in network
// byte order and no cookie; the answer an inet_diag_msg, or an error.
func diagOwner(l, r netip.AddrPort) (uint32, error) {
	family := uint8(unix.AF_INET6)
	if l.Addr().Is4() && r.Addr().Is4() {
		family = unix.AF_INET // finds dual-stack sockets' IPv4 connections too
	}
	const (
		hdrLen  = 16 // nlmsghdr
		reqLen  = 56 // inet_diag_req_v2
		idLen   = 48 // inet_diag_sockid
		msgLen  = 72 // inet_diag_msg
		uidAt   = 4 + idLen + 12
		noState = 0xffffffff
	)
	req := make([]byte, hdrLen+reqLen)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(req[8:], 1) // seq
	b := req[hdrLen:]
	b[0], b[1] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(b[4:], noState) // every state
	id := b[8:]
	putID(id, family, r, l)
	binary.NativeEndian.PutUint32(id[40:], noState) // INET_DIAG_NOCOOKIE
	binary.NativeEndian.PutUint32(id[44:], noState)

	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("%w: opening a sock_diag socket: %v", errOwnerUnknown, err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 2}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("%w: asking sock_diag: %v", errOwnerUnknown, err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return 0, fmt.Errorf("%w: reading sock_diag's answer: %v", errOwnerUnknown, err)
		}
		for m := buf[:n]; len(m) >= hdrLen; {
			size := int(binary.NativeEndian.Uint32(m[0:]))
			if size < hdrLen || size > len(m) {
				return 0, fmt.Errorf("%w: a sock_diag answer of %d bytes in %d", errOwnerUnknown, size, len(m))
			}
			typ, body := binary.NativeEndian.Uint16(m[4:]), m[hdrLen:size]
			m = m[(size+3)&^3:]
			switch {
			case typ == unix.NLMSG_ERROR && len(body) >= 4:
				if errno := -int32(binary.NativeEndian.Uint32(body)); errno != 0 {
					return 0, fmt.Errorf("%w: sock_diag: %w", errOwnerUnknown, unix.Errno(errno))
				}
			case typ == unix.SOCK_DIAG_BY_FAMILY && len(body) >= msgLen:
				want := make([]byte, idLen)
				putID(want, family, r, l)
				// The socket found must be the one asked for (not a
				// listener the lookup fell back to).
				if string(body[4:4+40]) != string(want[:40]) {
					return 0, fmt.Errorf("%w: sock_diag answered for another socket", errOwnerUnknown)
				}
				return binary.NativeEndian.Uint32(body[uidAt:]), nil
			case typ == unix.NLMSG_DONE:
				return 0, fmt.Errorf("%w: sock_diag found no socket %s → %s", errOwnerUnknown, r, l)
			}
			if len(m) < hdrLen {
				break
			}
		}
	}
}

// putID writes an inet_diag_sockid's ports and addresses: the socket's
// local address src and remote address dst, ports big-endian, addresses
// in network order (an IPv4 address in the first four bytes).
func putID(id []byte, family uint8, src, dst netip.AddrPort) {
	binary.BigEndian.PutUint16(id[0:], src.Port())
	binary.BigEndian.PutUint16(id[2:], dst.Port())
	if family == unix.AF_INET {
		s, d := src.Addr().As4(), dst.Addr().As4()
		copy(id[4:], s[:])
		copy(id[20:], d[:])
		return
	}
	s, d := src.Addr().As16(), dst.Addr().As16()
	copy(id[4:], s[:])
	copy(id[20:], d[:])
}

func unmapPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// procAddr4 writes an IPv4 address and port as /proc/net/tcp does: the
// address as the 32-bit number its bytes make in this machine's byte
// order, in 8 hex digits, then the port in 4.
func procAddr4(ap netip.AddrPort) string {
	a := ap.Addr().As4()
	return fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a[:]), ap.Port())
}

// procAddr6 writes an address and port as /proc/net/tcp6 does: the 16
// bytes as four such 32-bit numbers; an IPv4 address as its IPv4-mapped
// form (a dual-stack socket's view of it).
func procAddr6(ap netip.AddrPort) string {
	a := ap.Addr().As16()
	var b []byte
	for i := 0; i < 16; i += 4 {
		b = fmt.Appendf(b, "%08X", binary.NativeEndian.Uint32(a[i:i+4]))
	}
	return fmt.Sprintf("%s:%04X", b, ap.Port())
}

// ownerIn finds the line of table whose local and remote addresses are
// needle ("LOCAL REMOTE ") and returns its uid column.
//
//	sl  local_address rem_address   st tx_queue:rx_queue tr:tm->when retrnsmt   uid  timeout inode
//	 0: 0100007F:A5F0 0100007F:12D2 01 00000000:00000000 00:00000000 00000000     0        0 123456 …
func ownerIn(table []byte, needle string) (uint32, bool) {
	n := []byte(needle)
	for off := 0; ; {
		i := bytes.Index(table[off:], n)
		if i < 0 {
			return 0, false
		}
		i += off
		off = i + len(n)
		// The match must be the line's address columns, right after "sl:".
		start := bytes.LastIndexByte(table[:i], '\n') + 1
		if head := bytes.TrimSpace(table[start:i]); len(head) < 2 || head[len(head)-1] != ':' {
			continue
		}
		line := table[i:]
		if end := bytes.IndexByte(line, '\n'); end >= 0 {
			line = line[:end]
		}
		// local, remote, st, tx:rx, tr:when, retrnsmt, uid
		f := bytes.Fields(line)
		if len(f) < 7 {
			continue
		}
		if uid, err := strconv.ParseUint(string(f[6]), 10, 32); err == nil {
			return uint32(uid), true
		}
	}
}
