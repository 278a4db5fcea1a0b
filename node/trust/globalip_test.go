package trust

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// TestFetchDialerRefusesEverySpecialBlock: the identity-document dialer's
// control hook refuses an address in every special-purpose block (IANA
// IPv4 and IPv6 registries), IPv4 carried in IPv6 by what it carries, and
// lets globally routable addresses through.
func TestFetchDialerRefusesEverySpecialBlock(t *testing.T) {
	refused := []struct{ addr, why string }{
		{"0.0.0.0", "0.0.0.0/8"},
		{"0.1.2.3", "0.0.0.0/8"},
		{"10.0.0.1", "10.0.0.0/8"},
		{"100.64.0.1", "100.64.0.0/10"},
		{"100.100.100.200", "100.64.0.0/10"}, // a cloud metadata service
		{"100.127.255.254", "100.64.0.0/10"},
		{"127.0.0.1", "127.0.0.0/8"},
		{"127.255.0.9", "127.0.0.0/8"},
		{"169.254.169.254", "169.254.0.0/16"},
		{"172.16.0.1", "172.16.0.0/12"},
		{"172.31.255.1", "172.16.0.0/12"},
		{"192.0.0.8", "192.0.0.0/24"},
		{"192.0.2.1", "192.0.2.0/24"},
		{"192.88.99.1", "192.88.99.0/24"},
		{"192.168.1.1", "192.168.0.0/16"},
		{"198.18.0.1", "198.18.0.0/15"},
		{"198.19.255.1", "198.18.0.0/15"},
		{"198.51.100.7", "198.51.100.0/24"},
		{"203.0.113.7", "203.0.113.0/24"},
		{"224.0.0.1", "224.0.0.0/4"},
		{"239.255.255.250", "224.0.0.0/4"},
		{"240.0.0.1", "240.0.0.0/4"},
		{"255.255.255.255", "240.0.0.0/4"},

		{"::", "outside the IPv6 global unicast"},
		{"::1", "outside the IPv6 global unicast"},
		{"::a9fe:a9fe", "outside the IPv6 global unicast"}, // IPv4-compatible (deprecated)
		{"::ffff:127.0.0.1", "IPv4-mapped"},
		{"::ffff:169.254.169.254", "169.254.0.0/16"},
		{"::ffff:100.64.0.1", "100.64.0.0/10"},
		{"64:ff9b::a9fe:a9fe", "NAT64"},        // 169.254.169.254
		{"64:ff9b::7f00:1", "127.0.0.0/8"},     // 127.0.0.1
		{"64:ff9b::a40:1", "10.0.0.0/8"},       // 10.64.0.1
		{"64:ff9b:1::a9fe:a9fe", "outside"},    // local-use NAT64, RFC 8215
		{"2002:a9fe:a9fe::1", "6to4"},          // 169.254.169.254
		{"2002:c0a8:101::1", "192.168.0.0/16"}, // 192.168.1.1
		{"2002:6440:1::", "100.64.0.0/10"},     // 100.64.0.1
		{"100::1", "outside"},                  // discard-only, RFC 6666
		{"5f00::1", "outside"},                 // SRv6 SIDs, RFC 9602
		{"fc00::1", "outside"},
		{"fd12:3456::1", "outside"},
		{"fe80::1", "outside"},
		{"fe80::1%eth0", "outside"},
		{"fec0::1", "outside"},
		{"ff02::1", "outside"},
		{"2001::1", "2001::/23"},    // Teredo
		{"2001:2::1", "2001::/23"},  // benchmarking
		{"2001:10::1", "2001::/23"}, // ORCHID
		{"2001:db8::1", "2001:db8::/32"},
		{"3fff::1", "3fff::/20"},
	}
	for _, tc := range refused {
		err := publicOnly("tcp", net.JoinHostPort(tc.addr, "443"), nil)
		if !errors.Is(err, errPrivateAddress) {
			t.Errorf("%s: got %v, want a refusal", tc.addr, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %q does not say %q", tc.addr, err, tc.why)
		}
	}
	for _, addr := range []string{"1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.1", "172.32.0.1", "198.17.255.255",
		"198.20.0.1", "223.255.255.254", "2606:4700:4700::1111", "2a00:1450:4001::200e", "2001:200::1",
		"64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"} {
		if err := publicOnly("tcp", net.JoinHostPort(addr, "443"), nil); err != nil {
			t.Errorf("%s is globally routable, refused: %v", addr, err)
		}
	}
	for _, addr := range []string{"example.org:443", "1.1.1.1"} {
		if err := publicOnly("tcp", addr, nil); !errors.Is(err, errPrivateAddress) {
			t.Errorf("%q: got %v, want a refusal (the hook sees resolved host:port only)", addr, err)
		}
	}
}

// TestSpecialBlocksAreWellFormed: every block of the table is its own
// network address (a typo such as 100.64.0.0/8 would deny far more, or a
// host bit set far less, than its RFC says).
func TestSpecialBlocksAreWellFormed(t *testing.T) {
	for _, s := range append(append([]specialBlock{}, special4...), special6...) {
		if s.prefix != s.prefix.Masked() {
			t.Errorf("%s is not a network address (%s)", s.prefix, s.prefix.Masked())
		}
		if !strings.HasPrefix(s.rfc, "RFC ") {
			t.Errorf("%s names no RFC: %q", s.prefix, s.rfc)
		}
		if notRoutable(s.prefix.Addr()) == "" {
			t.Errorf("%s's first address is not refused", s.prefix)
		}
	}
	if notRoutable(netip.MustParseAddr("9.9.9.9")) != "" {
		t.Error("a public address was refused")
	}
}

// TestFetchDialerRefusesLoopbackServer: a real dial through the hook to a
// listener on loopback fails before connecting, unless the explicit
// trust.fetch_private leaves the hook out.
func TestFetchDialerRefusesLoopbackServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := newDocFetcher("", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.client.Get("https://" + ln.Addr().String() + "/identity.json")
	if !errors.Is(err, errPrivateAddress) {
		t.Fatalf("fetching from loopback: %v, want %v", err, errPrivateAddress)
	}
}
