// Package netlab is ifaced's network lab: real `ifaced run` processes in
// Linux network namespaces, joined by veth pairs and bridges, behind NAT
// routers made of nftables (below), driven through their control APIs.
// Its tests (run as root, as CI does; skipped with a message elsewhere)
// show NAT traversal (relay reservations, hole punching, relay and mailbox
// fallbacks) and discovery at scale (DHT find, GossipSub propagation,
// churn, late joiners, mDNS across a bridge). Where full daemons are too
// heavy for the count (500 of them need some 25 GB), the DHT lab runs one
// dhtnode process per namespace instead (interop/netlab/dhtnode: the
// daemon's DHT component, capdht.DHT, alone on a TCP-only host),
// driven over its stdin and stdout.
//
// Addresses. go-libp2p starts hole punching only once a host has an
// address manet.IsPublicAddr calls public, and AutoNAT (which moves a
// daemon's DHT from client to server in "auto" mode) dials back only such
// addresses. go-multiaddr/net classes every documentation range
// (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) and the
// benchmarking range 198.18.0.0/15 as unroutable, not public, so a lab on
// them behaves like a LAN, never like the internet. The lab's "public"
// segments therefore use special-purpose ranges that IANA marks not
// globally reachable (RFC 6890) but go-multiaddr does not list:
//
//   - the NAT lab's public segment is 192.0.0.128/25, inside 192.0.0.0/24
//     (IETF protocol assignments), of which go-multiaddr excludes only
//     192.0.0.0/26;
//   - the discovery lab's segment is 2001:1ff::/32, inside 2001::/23 (IETF
//     protocol assignments, not globally reachable; outside each of its
//     registered sub-blocks), which is global unicast to go-multiaddr.
//     Each daemon has a /48 of its own (routed, see scale_test.go): go-libp2p's
//     resource manager admits at most 8 concurrent connections from one
//     IPv6 /56 and 64 from one /48, so daemons sharing a /64 (the
//     benchmarking range 2001:2::/48 was tried first) refuse each other's
//     connections after the eighth ("failed to negotiate security
//     protocol: EOF") and the DHT never forms. Real daemons sharing one
//     /56 (a data centre, a campus) would meet the same wall.
//
// Neither range is routed anywhere outside the lab, and nothing leaves it:
// no namespace of the lab has a link to the machine's own namespace or a
// route out, so every packet stays on the lab's veths, bridges and router
// namespaces. The
// NATed LANs use 10.0.0.0/8, private as in real homes.
//
// NAT routers (Lab.Router). A lab router NATs its LAN with nftables:
// endpoint-independent mapping (masquerade, which keeps the source port
// when it is free), address-dependent mapping (a public port per socket
// and destination address, snat by destination), or symmetric
// (masquerade fully-random, a new random port per connection). Its
// filter lets in from the public side only packets of connections the
// LAN side opened (ct state established,related). Every other packet
// from the public side, new or invalid, to the router or to the LAN, it
// either drops (behaviour "drop") or answers as a real router does
// (behaviour "reject", OpenWrt's default on the wan zone): a TCP segment
// with `reject with tcp reset`, anything else with `reject with icmp type
// port-unreachable`. Before routers that answer, the lab's routers
// dropped unsolicited packets to themselves only when conntrack called
// them new, so an invalid one (a SYN for a flow a reset had closed) still
// reached the router's own stack, which answered it with a reset.
//
// Answering routers are the hard case for a TCP hole punch: the first SYN
// to reach the far router before the peer's own SYN opened the mapping
// there is answered with a reset, and the connect fails at once
// ("connection refused"). On real paths the two SYNs cross in flight when
// the DCUtR timing is within the one-way delay; in the lab the routers
// share a bridge and the delay is some microseconds, so a single connect
// from each side never meets (tried: 0 of 5), and the daemon's retries
// (node/p2phost, punchTCP: a refused connect made again after a random
// wait below 200 µs, at most 1,024 times a dial, then a few spaced) are
// what make TCP punches succeed here; the two sides met after 30 to 862
// retries each in 10 attempts, so the lab, not a real path, sets that
// bound.
// QUIC punches are not hurt: the ICMP errors do not end them.
//
// Reaching the control APIs. A daemon's control API must listen on
// loopback, and inside a namespace that is the namespace's own loopback.
// The test runs the unchanged node/api client against a forwarder on its
// own loopback; the forwarder opens each connection from a thread that has
// entered the daemon's namespace (setns), so no veth to the machine's
// namespace is needed and nothing of the lab is reachable from outside.
// This is simpler than running a client per call through `ip netns exec`
// and keeps one client per daemon with kept-alive connections.
//
// Latency. tc netem is missing from the kernels of the CI machines
// ("Specified qdisc kind is unknown"). Where it exists the lab could add
// delay on the veths; where it does not, the latency scenario (GossipSub
// propagation over 20 ms links) runs in process on go-libp2p's mocknet
// with link latency, with the daemon's GossipSub options. The DHT lab
// tries netem on its links first and says in its output and figures that
// it ran without added latency when the kernel refuses it.
package netlab
