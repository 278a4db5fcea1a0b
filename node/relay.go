package node

// reachState is the relay service and reservations (placeholder until implemented).
type reachState struct{}

func (n *Node) startReach() error { return nil }
