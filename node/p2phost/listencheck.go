package p2phost

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/multiformats/go-multiaddr"
)

// ErrAddressInUse: a configured listen address is held by another
// process; the daemon does not start.
var ErrAddressInUse = errors.New("listen address in use")

// Listen addresses are claimed before the host starts. go-libp2p's TCP
// transport listens with SO_REUSEPORT (so that it can dial from its
// listen port: a NAT then maps outbound connections to the port peers are
// told, and TCP hole punching can open simultaneously), and so a second
// daemon listening on a taken TCP port shares it silently, the kernel
// spreading connections between the two (a dial then fails with "peer id
// mismatch"). go-libp2p also starts when only some of its addresses could
// be bound. Turning reuseport off (tcp.DisableReuseport) would make the
// port exclusive but give up both NAT properties, so ifaced keeps it and
// instead binds each configured address with a plain socket first, which
// fails on a port another process holds, reuseport or not; the socket is
// closed at once and the host listens right after. The window between the
// two is the only one in which another process could take the port.
//
// An address with port 0, or a name rather than an IP, is not checked.

// claimListenAddrs refuses, naming the address (and the process holding
// it, when it can tell), when any configured listen address is taken.
func claimListenAddrs(addrs []string) error {
	for _, s := range addrs {
		network, hostport, ok := BoundAddr(s)
		if !ok {
			continue
		}
		var err error
		if network == "tcp" {
			var l net.Listener
			if l, err = net.Listen(network, hostport); err == nil {
				l.Close()
			}
		} else {
			var c net.PacketConn
			if c, err = net.ListenPacket(network, hostport); err == nil {
				c.Close()
			}
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			holder := portHolder(network, hostport, 200*time.Millisecond)
			if holder != "" {
				holder = " by " + holder
			}
			return fmt.Errorf("listen.addresses: %s: %w%s (another ifaced on this port? give each daemon its own port, or port 0 for any free one)",
				s, ErrAddressInUse, holder)
		}
	}
	return nil
}

// BoundAddr reads the socket address a listen multiaddr binds: tcp or udp,
// and host:port, for an IP address and a port other than 0.
func BoundAddr(s string) (network, hostport string, ok bool) {
	ma, err := multiaddr.NewMultiaddr(s)
	if err != nil || len(ma) < 2 {
		return "", "", false
	}
	ip := ma[0]
	if ip.Code() != multiaddr.P_IP4 && ip.Code() != multiaddr.P_IP6 {
		return "", "", false
	}
	switch ma[1].Code() {
	case multiaddr.P_TCP:
		network = "tcp"
	case multiaddr.P_UDP:
		network = "udp"
	default:
		return "", "", false
	}
	if ma[1].Value() == "0" {
		return "", "", false
	}
	return network, net.JoinHostPort(ip.Value(), ma[1].Value()), true
}

// portHolder names the process that holds a local port, on Linux, where
// /proc tells: the socket's inode from /proc/net/{tcp,udp}[6], then the
// process with that socket among its descriptors ("pid 1234 (ifaced)").
// Only processes this user may inspect are found; the search stops after
// budget. "" when it cannot tell.
func portHolder(network, hostport string, budget time.Duration) string {
	_, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return ""
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return ""
	}
	inodes := map[string]bool{}
	for _, f := range []string{network, network + "6"} {
		socketInodes(filepath.Join("/proc/net", f), uint16(port), network == "tcp", inodes)
	}
	if len(inodes) == 0 {
		return ""
	}
	deadline := time.Now().Add(budget)
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if time.Now().After(deadline) {
			return ""
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
				comm, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
				return fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm)))
			}
		}
	}
	return ""
}

// socketInodes adds the inodes of the sockets bound to port in a
// /proc/net table; for TCP, only listening ones.
func socketInodes(table string, port uint16, listening bool, into map[string]bool) {
	f, err := os.Open(table)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	want := fmt.Sprintf(":%04X", port)
	for n := 0; sc.Scan() && n < 1<<16; n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || !strings.HasSuffix(fields[1], want) {
			continue
		}
		if listening && fields[3] != "0A" {
			continue
		}
		if fields[9] != "0" {
			into[fields[9]] = true
		}
	}
}
