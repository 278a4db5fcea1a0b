package node

// mdnsState is LAN discovery (placeholder until implemented).
type mdnsState struct{}

func (n *Node) startMDNS() error { return nil }
