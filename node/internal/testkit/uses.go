package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"strings"
	"testing"
)

// Use is one reference to an exported name of another package.
type Use struct {
	File  string // base name
	Field bool   // in the type of a struct field
}

// UsesOf lists the references in dir's non-test Go files to the exported
// name sel of the package at path: the walls tests of the packages that
// must not hold the daemon's *node.Node use it to say where it may be
// named.
func UsesOf(t testing.TB, dir, path, sel string) []Use {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []Use
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
								out = append(out, Use{File: base, Field: true})
							}
							return true
						})
					}
					return false
				}
				if names(n) {
					out = append(out, Use{File: base})
				}
				return true
			})
		}
	}
	return out
}
