package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageSaysWhatItOwns fails when a package of this module has
// no package comment, or more than one: each package states the one idea
// it owns, in one place.
func TestEveryPackageSaysWhatItOwns(t *testing.T) {
	root := "../.."
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		pkgs, err := parser.ParseDir(token.NewFileSet(), path, func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		for name, pkg := range pkgs {
			var docs []string
			for file, f := range pkg.Files {
				if f.Doc != nil {
					docs = append(docs, filepath.Base(file))
				}
			}
			switch len(docs) {
			case 0:
				t.Errorf("package %s (%s) has no package comment", name, path)
			case 1:
			default:
				t.Errorf("package %s (%s) has package comments in %v; keep one", name, path, docs)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
