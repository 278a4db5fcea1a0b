package node

// dhtState is the Kademlia DHT (placeholder until implemented).
type dhtState struct{}

func (n *Node) startDHT() error { return nil }

func (n *Node) reprovide() {}
