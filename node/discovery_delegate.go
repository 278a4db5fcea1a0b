package node

import (
	"time"
)

// The Node's side of discovery: its test option and its accessor. The
// components are built by newDiscovery (discovery_new.go) and never hold
// the Node.

// WithImportTimeout shortens the fetch timeout of imports (tests).
func WithImportTimeout(d time.Duration) Option { return func(n *Node) { n.importTimeout = d } }

// Discovery is the daemon's discovery: Find, and the imports of outside
// agents.
func (n *Node) Discovery() *Discovery { return n.discovery }
