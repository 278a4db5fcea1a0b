// Package p2phost builds the daemon's libp2p host: its transports (TCP and
// QUIC), security (Noise and TLS), muxer, a resource manager scaled to the
// configured memory and stream limits and to the process's file
// descriptors, and the connection manager; and hole punching (Punch:
// go-libp2p's DCUtR with QUIC first, refused TCP punches retried, and
// relayed connections punched again when the host's own addresses or
// reachability change), bounded against the peers that trigger it: the
// connects a refused punch retries go only to the address the punch was
// given, at most 1,036 per dial, three dials' worth per peer in 10 minutes
// and, across all peers, six dials' worth then 16 a second; a peer is
// punched at most 10 tries in 10 minutes, and nothing the peer does (its
// protocols) starts a new count; whoever begins them, a peer's DCUtR
// rounds are at most 60 in 10 minutes, each dialling at most 16 of the
// addresses the peer named. The per-peer counts live in tables of at most
// 1,024 peers that outlive a peer's connections until its window ends. It
// owns the check that every configured listen address is free before the
// host binds it (a daemon never shares a port with another, and says which
// process holds one). The components that use the host (the door, the
// conversations, the reachability and discovery components) get it from
// the assembly in package node; none of them builds one.
package p2phost
