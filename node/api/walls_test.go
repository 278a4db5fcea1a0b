package api

import (
	"slices"
	"testing"

	"github.com/ifaced/ifaced/node/internal/testkit"
)

// TestOnlyTheWiringHoldsTheNode: each route group declares the small
// interfaces it uses; only Listen (server.go) and groupsFor (groups.go)
// name the daemon's *node.Node, and no type keeps it in a field. A handler
// that reached for the node again fails here.
func TestOnlyTheWiringHoldsTheNode(t *testing.T) {
	var files []string
	for _, u := range testkit.UsesOf(t, ".", "github.com/ifaced/ifaced/node", "Node") {
		files = append(files, u.File)
		if u.Field {
			t.Errorf("%s keeps a node.Node in a struct field: give the type the interface it uses instead (groups.go)", u.File)
		}
		if u.File != "server.go" && u.File != "groups.go" {
			t.Errorf("%s names node.Node: declare the interface its routes use and let groupsFor (groups.go) hand it over", u.File)
		}
	}
	if !slices.Contains(files, "groups.go") {
		t.Errorf("groups.go does not name node.Node (files naming it: %v): this test no longer looks at the wiring", files)
	}
}
