package node

// gossipState is the GossipSub announcement topic (placeholder until implemented).
type gossipState struct{}

func (n *Node) startGossip() error { return nil }

func (n *Node) announce() {}
