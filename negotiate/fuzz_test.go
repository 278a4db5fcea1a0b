package negotiate

import (
	"os"
	"testing"
)

// FuzzLoadDocument feeds the owner's-file loader arbitrary bytes in both
// formats: it must return a document or an error, never panic or hang, and
// whatever it accepts must validate and canonicalize.
func FuzzLoadDocument(f *testing.F) {
	for _, name := range []string{"document.json", "document.toml"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, name == "document.toml")
	}
	f.Add([]byte(`{"ifp":7,"agent_id":"a","capabilities":[{"name":"x","description":"y","parameters":{"$ref":"#"}}]}`), false)
	f.Add([]byte("ifp = 7\n[[capabilities]]\nname = 1\n"), true)
	f.Fuzz(func(t *testing.T, src []byte, isTOML bool) {
		format := FormatJSON
		if isTOML {
			format = FormatTOML
		}
		d, err := LoadDocument(src, format, nil)
		if err != nil {
			if fes := fieldErrors(err); len(fes) == 0 {
				t.Fatalf("error without a FieldError: %v", err)
			}
			return
		}
		if err := d.Validate(nil); err != nil {
			t.Fatalf("loaded document does not validate: %v", err)
		}
		if _, err := d.Canonical(); err != nil {
			t.Fatalf("loaded document does not canonicalize: %v", err)
		}
	})
}
