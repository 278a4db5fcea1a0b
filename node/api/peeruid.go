package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
)

// Which local user connected. A loopback port is open to every user of
// the machine, and a browser sends the console's session cookie to every
// port of 127.0.0.1 (cookies are not kept apart by port): a page served
// by another local user's web server on another port can receive it, and
// that user could replay it, or a leaked token, from their own process.
// So on Linux the TCP listener looks up, for each connection, which user
// owns the client's end of it: the kernel keeps each socket's owner, and
// the client's socket is the one whose local address is the connection's
// remote address and whose remote address is the listener's (tailscale's
// LocalAPI identifies its local peers the same way). A request on a
// connection owned by another user than the daemon's (root excepted: it
// can read the daemon's memory anyway) is refused with 403 before
// anything else, the console's pages and login included; so is one whose
// owner cannot be found, so the check fails closed. The Unix socket needs
// none of this: its mode (0600) and its directory already admit only the
// owner.
//
// How the owner is found, and what it costs: the listener asks the
// kernel for that one socket over netlink (sock_diag, an exact lookup as
// `ss` makes), and reads the tables /proc/net/tcp and /proc/net/tcp6 only
// where that cannot answer. The tables list every TCP socket of the
// network namespace, the daemon's libp2p connections and every other
// process's among them, so reading them grows with the machine's load.
// Measured by BenchmarkConnOwner on a 2-core machine with about 3,000
// other sockets in the namespace: sock_diag 13 µs, the tables 1 ms; with
// 5,000 sockets more, sock_diag 23 µs, the tables 20 ms. The lookup is
// made once per connection (keep-alive connections are looked up once),
// when its first request arrives, never in the accept loop.
//
// The session cookie is bound to the port as well (its name is
// ifaced_ui_PORT), HttpOnly, SameSite=Strict and for /ui/ only; binding it
// further (to the browser's address or user agent) would add nothing the
// owner check does not give, since every connection that reaches a
// session is the owner's.
//
// Other systems are not asked (neither sock_diag nor /proc/net/tcp
// exists there): the check is not made, a log line says so at start, and
// the control API is as safe as its token and the console as its cookie,
// which reaches another local user's server only when the owner's browser
// visits that server's /ui/ on 127.0.0.1, and which that user can then
// replay.

// errOwnerUnknown: the listener could not find the owner of a connection.
var errOwnerUnknown = errors.New("the owner of the connection was not found")

// connOwner is the owner of one TCP connection, looked up once, when
// first asked.
type connOwner struct {
	local, remote netip.AddrPort
	once          sync.Once
	uid           uint32
	err           error
}

type connOwnerKey struct{}

// withConnOwner is the server's ConnContext for TCP connections: it
// notes the connection's addresses for the owner check.
func withConnOwner(ctx context.Context, c net.Conn) context.Context {
	l, lok := c.LocalAddr().(*net.TCPAddr)
	r, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return ctx
	}
	return context.WithValue(ctx, connOwnerKey{}, &connOwner{local: l.AddrPort(), remote: r.AddrPort()})
}

// owner is the uid owning the client's end of the connection.
func (o *connOwner) owner() (uint32, error) {
	o.once.Do(func() { o.uid, o.err = socketOwner(o.local, o.remote) })
	return o.uid, o.err
}

// checkOwner refuses, on TCP, a request from another user's process (see
// above); it reports whether the request may go on.
func (s *Server) checkOwner(w http.ResponseWriter, r *http.Request) bool {
	if !ownerCheck {
		return true
	}
	o, _ := r.Context().Value(connOwnerKey{}).(*connOwner)
	if o == nil {
		return true // the Unix socket
	}
	uid, err := o.owner()
	if err != nil {
		s.log.Warn("refused a control API connection whose owner is unknown", "remote", r.RemoteAddr, "err", err)
		writeError(w, &Error{Status: http.StatusForbidden, Code: CodeForbidden,
			Message: fmt.Sprintf("could not tell which user's process opened this connection (%v): the control API and its console answer only processes of the user the daemon runs as (uid %d); use the Unix socket %s", err, s.uid, s.sock)})
		return false
	}
	if uid != s.uid && uid != 0 {
		s.log.Warn("refused a control API connection from another user", "remote", r.RemoteAddr, "uid", uid, "path", r.URL.Path)
		writeError(w, &Error{Status: http.StatusForbidden, Code: CodeForbidden,
			Message: fmt.Sprintf("this connection comes from a process of user %d, and the control API and its console answer only processes of the user the daemon runs as (uid %d): nothing was read or changed", uid, s.uid)})
		return false
	}
	return true
}

// daemonUID is the user the daemon runs as, whose processes may connect.
func daemonUID() uint32 { return uint32(os.Geteuid()) }
