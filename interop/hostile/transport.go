package hostile

import "github.com/libp2p/go-libp2p/p2p/transport/tcp"

// tcpTransport: the suite's peers speak TCP only, as the target listens.
var tcpTransport = tcp.NewTCPTransport
