package trust

import (
	"net/netip"
)

// Which addresses an identity document may be fetched from: only those
// that are globally routable. A peer names the URL, so a fetch is a
// request a stranger makes the daemon send; it must not reach this
// machine, its network, its provider's network (carrier-grade NAT, where
// cloud metadata services live) or anything routed specially.
//
// The table below is the IANA IPv4 and IPv6 Special-Purpose Address
// Registries (RFC 6890 and its updates), every block whose "Globally
// Reachable" is False or N/A, plus blocks that exist only to carry another
// address (IPv4-compatible, 6to4, NAT64, Teredo) and IPv6 outside the
// global unicast allocation 2000::/3. A block IANA marks globally reachable
// but that no web server lives on (the 192.0.0.0/24 and 2001::/23
// anycast assignments) is denied whole: a false refusal costs a level-3
// check on an address no identity document is served from, a false
// acceptance a probe of someone's network.
//
// Embedded IPv4: an IPv6 address that carries an IPv4 address (mapped,
// NAT64 well-known prefix, 6to4) is judged by the IPv4 address it reaches,
// so 64:ff9b::a9fe:a9fe is refused like 169.254.169.254 while a NAT64
// gateway on an IPv6-only network still reaches public IPv4 servers.
// The local-use NAT64 prefix (RFC 8215) and Teredo are refused outright:
// what they reach is not readable from the address.

// specialBlock is one special-purpose block and the RFC that sets it apart.
type specialBlock struct {
	prefix netip.Prefix
	rfc    string
}

func block(p, rfc string) specialBlock { return specialBlock{netip.MustParsePrefix(p), rfc} }

// special4 lists the IPv4 blocks that are not globally routable.
var special4 = []specialBlock{
	block("0.0.0.0/8", "RFC 791: this network"),
	block("10.0.0.0/8", "RFC 1918: private use"),
	block("100.64.0.0/10", "RFC 6598: shared address space (carrier-grade NAT)"),
	block("127.0.0.0/8", "RFC 1122: loopback"),
	block("169.254.0.0/16", "RFC 3927: link local"),
	block("172.16.0.0/12", "RFC 1918: private use"),
	block("192.0.0.0/24", "RFC 6890: IETF protocol assignments"),
	block("192.0.2.0/24", "RFC 5737: documentation (TEST-NET-1)"),
	block("192.88.99.0/24", "RFC 7526: deprecated 6to4 relay anycast"),
	block("192.168.0.0/16", "RFC 1918: private use"),
	block("198.18.0.0/15", "RFC 2544: benchmarking"),
	block("198.51.100.0/24", "RFC 5737: documentation (TEST-NET-2)"),
	block("203.0.113.0/24", "RFC 5737: documentation (TEST-NET-3)"),
	block("224.0.0.0/4", "RFC 5771: multicast"),
	block("240.0.0.0/4", "RFC 1112: reserved (255.255.255.255 limited broadcast, RFC 919, included)"),
}

// special6 lists the IPv6 blocks inside 2000::/3 that are not globally
// routable, or carry an address that is not readable from them. IPv6
// outside 2000::/3 is refused by the check itself (loopback, unspecified,
// IPv4-compatible, discard-only 100::/64, SRv6 5f00::/16, unique local
// fc00::/7, link local fe80::/10, site local fec0::/10, multicast ff00::/8),
// except the carriers of IPv4 handled in globallyRoutable.
var special6 = []specialBlock{
	block("2001::/23", "RFC 2928: IETF protocol assignments (Teredo 2001::/32 RFC 4380, benchmarking 2001:2::/48 RFC 5180, ORCHID RFC 7343, anycast services)"),
	block("2001:db8::/32", "RFC 3849: documentation"),
	block("3fff::/20", "RFC 9637: documentation"),
}

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")     // RFC 4291 §2.4: global unicast allocation
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: IPv4 in the last 32 bits
	sixToFour      = netip.MustParsePrefix("2002::/16")    // RFC 3056: IPv4 in bits 16–48
)

// notRoutable returns why ip is not globally routable (the block and its
// RFC, and for an IPv6 address carrying IPv4 the address it carries), or
// "" when it is.
func notRoutable(ip netip.Addr) string {
	ip = ip.WithZone("")
	if ip.Is4In6() {
		return notRoutable4(ip.Unmap(), "IPv4-mapped (RFC 4291) ")
	}
	if ip.Is4() {
		return notRoutable4(ip, "")
	}
	b := ip.As16()
	switch {
	case nat64WellKnown.Contains(ip):
		return notRoutable4(netip.AddrFrom4([4]byte(b[12:16])), "NAT64 (RFC 6052) of ")
	case sixToFour.Contains(ip):
		return notRoutable4(netip.AddrFrom4([4]byte(b[2:6])), "6to4 (RFC 3056) of ")
	case !globalUnicast6.Contains(ip):
		return "outside the IPv6 global unicast allocation 2000::/3 (RFC 4291)"
	}
	for _, s := range special6 {
		if s.prefix.Contains(ip) {
			return "in " + s.prefix.String() + " (" + s.rfc + ")"
		}
	}
	return ""
}

func notRoutable4(ip netip.Addr, carrier string) string {
	for _, s := range special4 {
		if s.prefix.Contains(ip) {
			in := "in " + s.prefix.String() + " (" + s.rfc + ")"
			if carrier == "" {
				return in
			}
			return carrier + ip.String() + ", " + in
		}
	}
	return ""
}
