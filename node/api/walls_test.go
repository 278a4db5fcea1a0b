package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyTheWiringHoldsTheNode: each route group declares the small
// interfaces it uses; only Listen (server.go) and groupsFor (groups.go)
// name the daemon's *node.Node, and no type keeps it in a field. A handler
// that reached for the node again fails here.
func TestOnlyTheWiringHoldsTheNode(t *testing.T) {
	var files []string
	for _, u := range usesOf(t, ".", "github.com/ifaced/ifaced/node", "Node") {
		files = append(files, u.file)
		if u.field {
			t.Errorf("%s keeps a node.Node in a struct field: give the type the interface it uses instead (groups.go)", u.file)
		}
		if u.file != "server.go" && u.file != "groups.go" {
			t.Errorf("%s names node.Node: declare the interface its routes use and let groupsFor (groups.go) hand it over", u.file)
		}
	}
	if !slices.Contains(files, "groups.go") {
		t.Errorf("groups.go does not name node.Node (files naming it: %v): this test no longer looks at the wiring", files)
	}
}

// use is one reference to an exported name of another package.
type use struct {
	file  string // base name
	field bool   // in the type of a struct field
}

// usesOf lists the references in dir's non-test Go files to the exported
// name sel of the package at path.
func usesOf(t *testing.T, dir, path, sel string) []use {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []use
	for _, pkg := range pkgs {
		for name, f := range pkg.Files {
			local := ""
			for _, im := range f.Imports {
				if p, _ := strconv.Unquote(im.Path.Value); p == path {
					local = path[strings.LastIndex(path, "/")+1:]
					if im.Name != nil {
						local = im.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			names := func(n ast.Node) bool {
				s, ok := n.(*ast.SelectorExpr)
				if !ok || s.Sel.Name != sel {
					return false
				}
				id, ok := s.X.(*ast.Ident)
				return ok && id.Name == local
			}
			base := name[strings.LastIndex(name, "/")+1:]
			ast.Inspect(f, func(n ast.Node) bool {
				if st, ok := n.(*ast.StructType); ok {
					for _, fl := range st.Fields.List {
						ast.Inspect(fl.Type, func(n ast.Node) bool {
							if names(n) {
								out = append(out, use{file: base, field: true})
							}
							return true
						})
					}
					return false
				}
				if names(n) {
					out = append(out, use{file: base})
				}
				return true
			})
		}
	}
	return out
}
