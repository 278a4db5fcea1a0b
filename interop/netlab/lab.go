package netlab

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Lab is one test's set of network namespaces. Every namespace it makes
// carries the lab's prefix, unique to the test run, and is deleted in the
// test's cleanup (which also deletes every veth and bridge inside it);
// processes started in them are stopped first (see Daemon).
type Lab struct {
	t      testing.TB
	Prefix string

	mu  sync.Mutex
	nss []string
}

// OptIn skips t unless the lab was asked for: IFACED_LAB=1 (the short
// form) or IFACED_LAB_LONG=1 (the long form). `go test ./...` as root would
// otherwise start a hundred daemons in a hundred namespaces unasked.
func OptIn(t testing.TB) {
	t.Helper()
	if os.Getenv("IFACED_LAB") != "1" && !Long() {
		t.Skip("netlab: set IFACED_LAB=1 to run the network lab (root, iproute2 and nftables; a few minutes), IFACED_LAB_LONG=1 for its long form")
	}
}

// Require skips t unless the lab was asked for (OptIn) and can run here:
// root, ip (iproute2) and nft (nftables) installed, network namespaces
// available.
func Require(t testing.TB) {
	t.Helper()
	OptIn(t)
	if os.Geteuid() != 0 {
		t.Skip("netlab: needs root to create network namespaces (CI runs as root)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("netlab: %s is not installed (apt-get install iproute2 nftables)", tool)
		}
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		t.Skip("netlab: this kernel has no network namespaces")
	}
}

// NewLab starts an empty lab for t (skipping t where the lab cannot run).
func NewLab(t testing.TB) *Lab {
	Require(t)
	var b [3]byte
	rand.Read(b[:])
	l := &Lab{t: t, Prefix: "nl" + hex.EncodeToString(b[:]) + "-"}
	t.Cleanup(l.close)
	return l
}

func (l *Lab) close() {
	l.mu.Lock()
	nss := l.nss
	l.nss = nil
	l.mu.Unlock()
	var batch strings.Builder
	for _, ns := range nss {
		fmt.Fprintf(&batch, "netns del %s\n", ns)
	}
	if batch.Len() == 0 {
		return
	}
	if out, err := runIn("", batch.String(), "ip", "-force", "-batch", "-"); err != nil {
		l.t.Errorf("netlab: deleting namespaces: %v: %s", err, out)
	}
}

// NS creates namespaces named prefix+name, each with its loopback up, and
// returns their full names.
func (l *Lab) NS(names ...string) []string {
	l.t.Helper()
	var add strings.Builder
	full := make([]string, len(names))
	for i, n := range names {
		full[i] = l.Prefix + n
		fmt.Fprintf(&add, "netns add %s\n", full[i])
	}
	l.mu.Lock()
	l.nss = append(l.nss, full...) // registered first: a half-made namespace is deleted too
	l.mu.Unlock()
	l.IP("", add.String())
	for _, ns := range full {
		l.IP(ns, "link set lo up\n")
	}
	return full
}

// IP runs a batch of ip commands (one a line, as `ip -batch` reads them) in
// namespace ns ("" for none: only for netns commands), failing the test on
// error.
func (l *Lab) IP(ns, batch string) {
	l.t.Helper()
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	if out, err := runIn("", batch, "ip", args...); err != nil {
		l.t.Fatalf("netlab: ip %s: %v: %s\n%s", ns, err, out, batch)
	}
}

// Exec runs a command inside namespace ns and returns its output, failing
// the test on error.
func (l *Lab) Exec(ns string, name string, args ...string) string {
	l.t.Helper()
	out, err := runIn(ns, "", name, args...)
	if err != nil {
		l.t.Fatalf("netlab: %s %s in %s: %v: %s", name, strings.Join(args, " "), ns, err, out)
	}
	return out
}

// NFT loads an nftables ruleset into namespace ns.
func (l *Lab) NFT(ns, ruleset string) {
	l.t.Helper()
	if out, err := runIn(ns, ruleset, "nft", "-f", "-"); err != nil {
		l.t.Fatalf("netlab: nft in %s: %v: %s\n%s", ns, err, out, ruleset)
	}
}

// Counter reads a named nftables counter in namespace ns (family ip).
func (l *Lab) Counter(ns, table, name string) (packets, bytes uint64) {
	l.t.Helper()
	out := l.Exec(ns, "nft", "-j", "list", "counter", "ip", table, name)
	var doc struct {
		Nftables []struct {
			Counter *struct {
				Packets uint64 `json:"packets"`
				Bytes   uint64 `json:"bytes"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		l.t.Fatalf("netlab: reading counter %s in %s: %v: %s", name, ns, err, out)
	}
	for _, o := range doc.Nftables {
		if o.Counter != nil {
			return o.Counter.Packets, o.Counter.Bytes
		}
	}
	l.t.Fatalf("netlab: no counter %s in %s: %s", name, ns, out)
	return 0, 0
}

// Bridge creates a bridge named br in namespace ns. Multicast snooping is
// off: with no multicast querier on the segment, a snooping bridge soon
// stops flooding the solicited-node multicast of IPv6 neighbour discovery
// (dials then time out, "i/o timeout", once a hundred ports are on it),
// and mDNS needs its multicast flooded too.
func (l *Lab) Bridge(ns, br string) {
	l.t.Helper()
	l.IP(ns, fmt.Sprintf("link add %s type bridge mcast_snooping 0\nlink set %s up\n", br, br))
}

// Plug joins namespace ns to the bridge br in namespace swNS by a veth
// pair: dev inside ns (given addrs in CIDR form and brought up), port on
// the bridge side (at most 15 bytes). gateway, when not empty, becomes ns's
// default route.
func (l *Lab) Plug(swNS, br, port, ns, dev string, addrs []string, gateway string) {
	l.t.Helper()
	l.IP(swNS, fmt.Sprintf("link add %s type veth peer name %s netns %s\nlink set %s master %s up\n", port, dev, ns, port, br))
	l.IP(ns, configureDev(dev, addrs, gateway))
}

// Wire joins two namespaces by a veth pair.
func (l *Lab) Wire(nsA, devA string, addrsA []string, nsB, devB string, addrsB []string) {
	l.t.Helper()
	l.IP(nsA, fmt.Sprintf("link add %s type veth peer name %s netns %s\n", devA, devB, nsB))
	l.IP(nsA, configureDev(devA, addrsA, ""))
	l.IP(nsB, configureDev(devB, addrsB, ""))
}

func configureDev(dev string, addrs []string, gateway string) string {
	var b strings.Builder
	for _, a := range addrs {
		if strings.Contains(a, ":") {
			// No duplicate address detection: the lab assigns addresses
			// itself, and DAD would hold them tentative for a second.
			fmt.Fprintf(&b, "addr add %s dev %s nodad\n", a, dev)
		} else {
			fmt.Fprintf(&b, "addr add %s dev %s\n", a, dev)
		}
	}
	fmt.Fprintf(&b, "link set %s up\n", dev)
	if gateway != "" {
		fmt.Fprintf(&b, "route add default via %s\n", gateway)
	}
	return b.String()
}

// Sysctl sets a sysctl inside namespace ns (net.* keys are per namespace).
func (l *Lab) Sysctl(ns, key, value string) {
	l.t.Helper()
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	l.Exec(ns, "sh", "-c", fmt.Sprintf("echo %s > %s", value, path))
}

// runIn runs name with args, inside namespace ns unless it is empty, with
// stdin, and returns the combined output.
func runIn(ns, stdin, name string, args ...string) (string, error) {
	if ns != "" {
		args = append([]string{"netns", "exec", ns, name}, args...)
		name = "ip"
	}
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// NATType is how a lab router maps a LAN socket to public ports (RFC 4787
// §4.1's mapping behaviour).
type NATType string

const (
	// NATEndpointIndependent: nftables masquerade, which keeps the source
	// port when it is free, so every connection from one socket leaves from
	// the same public address and port, whatever its destination (a home
	// router's "full cone" or "port-restricted cone" mapping).
	NATEndpointIndependent NATType = "eim"
	// NATAddressDependent: one public port per socket and destination
	// address (snat to a port set per destination): the port a relay saw is
	// not the one a connection to the peer leaves from.
	NATAddressDependent NATType = "adm"
	// NATSymmetric: masquerade fully-random, a new random public port for
	// every connection (address-and-port-dependent mapping).
	NATSymmetric NATType = "sym"
)

// RouterBehaviour is what a lab router does with an unsolicited packet
// from the public side: one that belongs to no connection the LAN side
// opened (conntrack state new or invalid), to the router itself or to the
// LAN.
type RouterBehaviour string

const (
	// RouterDrop drops it silently (a firewall's "drop" policy).
	RouterDrop RouterBehaviour = "drop"
	// RouterReject answers it as the router's own stack, and OpenWrt's
	// default `reject` on the wan zone, do: a TCP segment with a reset, any
	// other packet with ICMP port unreachable. The reset to the first SYN
	// of a TCP hole punch, when it arrives before the peer's own SYN opened
	// the peer's mapping, ends that connect at once ("connection refused").
	RouterReject RouterBehaviour = "reject"
)

// NATRouter is one lab router between the LANs of its households
// (devices "lan0", "lan1", …) and the public segment (device "wan"): a
// NAT of a type, a stateful filter that lets in from the public side only
// packets of connections a LAN side opened (ct state
// established,related), and a behaviour for everything else.
type NATRouter struct {
	NS        string // the router's namespace
	NAT       NATType
	Behaviour RouterBehaviour
	// Peer is the public addresses of the other router's households: the
	// packets from them that reach a LAN are counted
	// (counter direct_in), and per LAN port of a household and transport
	// (direct_<port>_tcp, direct_<port>_udp). They are the traffic of a
	// direct connection, which never passes a relay.
	Peer []string
	// Destinations get a public port each per LAN port of a household
	// under NATAddressDependent (the port plus 100, 200, … in their
	// order, the household's Peer last); everything else of a household
	// leaves from its address as masquerade would map it. Nothing but the
	// households' traffic is mapped.
	Destinations []string
	Households   []Household
}

// Household is one LAN behind a NATRouter, as one home is behind its
// router: every connection from it (any port, any transport) leaves from
// its own public address. A relay limits new connections per address
// (go-libp2p's resource manager: 0.2 a second after a burst of 16), so
// many daemons behind one address would be refused there as no two homes
// are.
type Household struct {
	LAN    string // its subnet, as "10.1.3.0/24"
	Public string // the address on wan its connections leave from
	Peer   string // the other router's household its ports pair with
	Ports  []int  // the listen ports of its daemons (counted, and mapped per destination)
}

// Router loads r's ruleset into its namespace, replacing what was there
// (the counters start from zero; the NAT bindings of open connections
// stay, in conntrack).
func (l *Lab) Router(r NATRouter) {
	l.t.Helper()
	var counters, snat, count strings.Builder
	counters.WriteString("\tcounter direct_in { }\n")
	peers := "{ " + strings.Join(r.Peer, ", ") + " }"
	random := ""
	if r.NAT == NATSymmetric {
		random = " fully-random"
	}
	for _, h := range r.Households {
		for _, p := range h.Ports {
			for _, tr := range []string{"tcp", "udp"} {
				fmt.Fprintf(&counters, "\tcounter direct_%d_%s { }\n", p, tr)
				fmt.Fprintf(&count, "\t\tiifname \"wan\" oifname \"lan*\" ct state established,related ip saddr %s %s dport %d counter name direct_%d_%s\n",
					peers, tr, p, p, tr)
			}
			if r.NAT == NATAddressDependent {
				for i, d := range append(slices.Clone(r.Destinations), h.Peer) {
					fmt.Fprintf(&snat, "\t\toifname \"wan\" ip saddr %s ip daddr %s meta l4proto { tcp, udp } th sport %d snat ip to %s:%d\n",
						h.LAN, d, p, h.Public, p+100*(i+1))
				}
			}
		}
		// The household's own address, mapped as masquerade maps to the
		// router's: the source port kept (endpoint-independent and,
		// beyond its destinations, address-dependent), or a random one
		// per connection (symmetric).
		fmt.Fprintf(&snat, "\t\toifname \"wan\" ip saddr %s snat ip to %s%s\n", h.LAN, h.Public, random)
	}
	// After the per-port counters: this rule accepts.
	if len(r.Peer) > 0 { // none before the first household
		fmt.Fprintf(&count, "\t\tiifname \"wan\" oifname \"lan*\" ct state established,related ip saddr %s counter name direct_in accept\n", peers)
	}
	unsolicited := "\t\tiifname \"wan\" drop\n"
	if r.Behaviour == RouterReject {
		unsolicited = "\t\tiifname \"wan\" meta l4proto tcp reject with tcp reset\n\t\tiifname \"wan\" reject with icmp type port-unreachable\n"
	}
	l.NFT(r.NS, fmt.Sprintf(`flush ruleset
table ip lab {
%s	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
%s	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "wan" ct state established,related accept
%s	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		iifname "lan*" oifname "wan" accept
%s		iifname "wan" oifname "lan*" ct state established,related accept
%s	}
}
`, counters.String(), snat.String(), unsolicited, count.String(), unsolicited))
}
