package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Who a request comes from.
//
// A request's client is its direct peer's address, as the limiter counts
// clients (clientOf: an IPv4 address or an IPv6 /64). Behind a reverse
// proxy every request comes from the proxy, so every caller would be one
// client: one caller's flood would spend everyone's per-client budget and
// invocation slots, and the audit log would name the proxy for all. So a
// request whose direct peer is in http.trusted_proxies has its client
// read from X-Forwarded-For: the addresses in it (every such header, in
// order, comma-separated) are read from the right, the way each proxy
// appended them, and the first one that is not itself a trusted proxy is
// the client. A hop that is not an address (a name, "unknown", garbage)
// ends the walk: the client is then the last trusted proxy that forwarded
// it, so a malformed header never makes a request anyone's but the
// proxy's. From a peer that is not a trusted proxy the header is ignored,
// whatever it says: anyone can write one, and trusting it from anyone
// would let each request name itself a new client. The RFC 7239
// Forwarded header is not read (the common proxies send X-Forwarded-For;
// reading two headers that may disagree would be a choice made for the
// caller).

// caller is who a request comes from, as this binding counts and
// records it.
type caller struct {
	// remote is host:port as clientOf reads it: the direct peer's
	// address, or the forwarded client's with port 0.
	remote string
	// audit names the caller in the audit log: the direct peer, or the
	// forwarded client and the proxy that forwarded it.
	audit string
}

// forwardedFor is the header trusted proxies name the client in.
const forwardedFor = "X-Forwarded-For"

// callerOf is who r comes from: its direct peer, unless that is a trusted
// proxy (see above).
func (s *Binding) callerOf(r *http.Request) caller {
	direct := caller{remote: r.RemoteAddr, audit: r.RemoteAddr}
	if len(s.proxies) == 0 {
		return direct
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !s.trusted(ap.Addr().Unmap()) {
		return direct
	}
	client, hops := forwardedClient(ap.Addr().Unmap(), r.Header.Values(forwardedFor), s.trusted)
	if hops == 0 {
		return direct // a trusted proxy's own request, or one it did not say the client of
	}
	return caller{remote: netip.AddrPortFrom(client, 0).String(), audit: fmt.Sprintf("%s (forwarded by %s)", client, r.RemoteAddr)}
}

// trusted reports whether a is in http.trusted_proxies.
func (s *Binding) trusted(a netip.Addr) bool {
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// maxForwardedHops bounds how many X-Forwarded-For entries are read: a
// chain of proxies is short, and a header of thousands of entries must
// not cost a walk over each.
const maxForwardedHops = 16

// forwardedClient walks the X-Forwarded-For values right to left from
// remote, the direct peer (a trusted proxy), and returns the client: the
// first address not trusted, or the last trusted hop when the walk ends
// on a hop that is not an address, runs out, or passes maxForwardedHops.
// hops is how many entries it took (0: the client is remote itself).
func forwardedClient(remote netip.Addr, values []string, trusted func(netip.Addr) bool) (client netip.Addr, hops int) {
	var entries []string
	for _, v := range values {
		entries = append(entries, strings.Split(v, ",")...)
	}
	client = remote
	for i := len(entries) - 1; i >= 0 && trusted(client) && hops < maxForwardedHops; i-- {
		a, ok := parseHop(entries[i])
		if !ok {
			break
		}
		client, hops = a, hops+1
	}
	return client, hops
}

// parseHop reads one X-Forwarded-For entry: an IP address, possibly with
// a port ("192.0.2.7:5000", "[2001:db8::1]:443"), brackets or quotes.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
