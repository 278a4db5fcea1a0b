package httpapi

import (
	"slices"
	"testing"

	"github.com/ifaced/ifaced/node/internal/testkit"
)

// TestOnlyListenTakesTheNode: the binding keeps the small interfaces it
// declares beside Binding; only Listen (server.go) names the daemon's
// *node.Node, and no type keeps it in a field. A handler that reached for
// the node again fails here.
func TestOnlyListenTakesTheNode(t *testing.T) {
	var files []string
	for _, u := range testkit.UsesOf(t, ".", "github.com/ifaced/ifaced/node", "Node") {
		files = append(files, u.File)
		if u.Field {
			t.Errorf("%s keeps a node.Node in a struct field: give the type the interface it uses instead", u.File)
		}
	}
	if !slices.Equal(files, []string{"server.go"}) {
		t.Errorf("node.Node named in %v, want once, in server.go (Listen)", files)
	}
}
