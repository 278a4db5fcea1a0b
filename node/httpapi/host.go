package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// hostGuard keeps web pages from reaching a loopback binding by DNS
// rebinding. A page at attacker.example whose name is made to resolve to
// 127.0.0.1 is same-origin with the binding in the browser's eyes, so the
// browser lets it read answers and send any request; what it cannot change
// is the Host header, which names attacker.example. So on a loopback
// binding every request must name the binding in Host (else 421
// Misdirected Request), and a POST that carries an Origin must come from a
// page of the binding too (else 403): a cross-site POST runs a capability
// or delivers a message even when the page cannot read the answer.
//
// The names: localhost, 127.0.0.1 and ::1, the listen host, http.url's
// host, and http.allowed_hosts. The port is not compared: DNS rebinding
// changes the name, never the port, and a reverse proxy may pass on its
// own port. A request without Origin (curl, any agent that is not a
// browser) is not a browser's, so only Host applies to it. A GET, HEAD or
// OPTIONS (a CORS preflight) changes nothing, so it may come from a page
// of any origin: whether the page may read the answer is CORS's business
// (cors.go), which allows it only for the read-only views. A binding on
// a non-loopback address (always TLS) is public, and answers any Host.
type hostGuard struct {
	names []string // lower case, no trailing dot, IPv6 without brackets
}

// newHostGuard is the guard of a binding listening on listen (host:port),
// or nil when listen is not loopback.
func newHostGuard(listen, publicURL string, extra []string) *hostGuard {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || !isLoopback(host) {
		return nil
	}
	g := &hostGuard{}
	for _, n := range append([]string{"localhost", "127.0.0.1", "::1", host}, extra...) {
		g.add(n)
	}
	if u, err := url.Parse(publicURL); err == nil && u.Host != "" {
		g.add(u.Hostname())
	}
	return g
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

func (g *hostGuard) add(name string) {
	if n := normalizeHost(name); n != "" && !slices.Contains(g.names, n) {
		g.names = append(g.names, n)
	}
}

// allows reports whether a Host header (or an Origin's host), with or
// without a port, names the binding.
func (g *hostGuard) allows(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return slices.Contains(g.names, normalizeHost(host))
}

// list is the names, for error messages.
func (g *hostGuard) list() string {
	out := make([]string, len(g.names))
	for i, n := range g.names {
		if strings.Contains(n, ":") {
			n = "[" + n + "]"
		}
		out[i] = n
	}
	return strings.Join(out, ", ")
}

// guard answers 421 to a request whose Host is not the binding's, and 403
// to a POST from a web page of another origin. A nil guard lets all
// through.
func (g *hostGuard) guard(next http.Handler) http.Handler {
	if g == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.allows(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, CodeMisdirected,
				fmt.Sprintf("Host %q is not a name of this binding; it answers to %s (add a name to http.allowed_hosts)", r.Host, g.list()))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
			if origin := r.Header.Get("Origin"); origin != "" {
				u, err := url.Parse(origin)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !g.allows(u.Host) {
					writeError(w, http.StatusForbidden, CodeForbiddenOrigin,
						fmt.Sprintf("a %s from a web page at %q is refused: only pages of %s may send one (add a name to http.allowed_hosts)", r.Method, origin, g.list()))
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}
