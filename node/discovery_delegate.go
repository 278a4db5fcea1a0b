package node

import (
	"time"
)

// The Node's side of discovery: the one place that reaches into the Node
// to build the discovery components from its fields, and the few methods
// New and UpdateDocument call. The components themselves never hold the
// Node.

// WithImportTimeout shortens the fetch timeout of imports (tests).
func WithImportTimeout(d time.Duration) Option { return func(n *Node) { n.importTimeout = d } }

// Discovery is the daemon's discovery: Find, and the imports of outside
// agents.
func (n *Node) Discovery() *Discovery { return n.discovery }
