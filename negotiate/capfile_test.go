package negotiate

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readmeCapability is the tutorial's cap.json, as printed in
// docs/tutorials/two-daemons.md (the README's, before the README moved its
// walkthroughs to docs/); the test below also reads it from there, so the
// two cannot drift.
func readmeCapability(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("../docs/tutorials/two-daemons.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- file: ~/two/cap.json -->\n```json\n(.*?)```").FindSubmatch(src)
	if m == nil {
		t.Fatal("docs/tutorials/two-daemons.md no longer shows cap.json after <!-- file: ~/two/cap.json -->")
	}
	return m[1]
}

func capNamesOf(caps []Capability) []string {
	var out []string
	for _, c := range caps {
		out = append(out, c.Name)
	}
	return out
}

// TestLoadCapabilitiesEveryShape: one capability (the tutorial's cap.json,
// which `caps validate` refused with "name: is not a known field"), a
// list, a whole document (which `caps add` refused with "ifp: is not a
// known field"), and [[capabilities]] tables (examples/agent/
// capabilities.toml, which neither accepted), in JSON and TOML; each is
// read and said to be what it is.
func TestLoadCapabilitiesEveryShape(t *testing.T) {
	doc, err := os.ReadFile("testdata/document.json")
	if err != nil {
		t.Fatal(err)
	}
	docTOML, err := os.ReadFile("testdata/document.toml")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := os.ReadFile("../examples/agent/capabilities.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		src    []byte
		format Format
		shape  Shape
		want   []string
		says   string
	}{
		{"README cap.json", readmeCapability(t), FormatJSON, ShapeCapability, []string{"calendar.availability"}, "one capability (JSON)"},
		{"one capability in TOML", []byte("name = \"echo\"\ndescription = \"Send the parameters back\"\n[conditions]\nmin_disclosure = \"professional\"\n"),
			FormatTOML, ShapeCapability, []string{"echo"}, "one capability (TOML)"},
		{"a list", []byte(`[{"name": "a.b", "description": "one"}, {"name": "c.d", "description": "two"}]`), FormatJSON, ShapeList,
			[]string{"a.b", "c.d"}, "a list of 2 capabilities (JSON)"},
		{"a document", doc, FormatJSON, ShapeDocument, []string{"gossip.exchange", "calendar.availability", "doc.summarize"}, "a capability document with"},
		{"a TOML document", docTOML, FormatTOML, ShapeDocument, []string{"gossip.exchange", "calendar.availability", "doc.summarize"}, "(TOML)"},
		{"examples/agent/capabilities.toml", tables, FormatTOML, ShapeTables, []string{"doc.summarize", "calendar.availability", "echo"},
			"3 capabilities in [[capabilities]] tables (TOML)"},
		{"tables in JSON", []byte(`{"capabilities": [{"name": "a.b", "description": "one"}]}`), FormatJSON, ShapeTables, []string{"a.b"},
			"1 capability in [[capabilities]] tables (JSON)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := LoadCapabilities(tc.src, tc.format, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := capNamesOf(f.Capabilities)
			if f.Shape != tc.shape || !slices.Equal(got[:min(len(got), len(tc.want))], tc.want) {
				t.Errorf("read %v %v, want %v %v", f.Shape, got, tc.shape, tc.want)
			}
			if !strings.Contains(f.Describe(), tc.says) {
				t.Errorf("says %q, want %q", f.Describe(), tc.says)
			}
			if (f.Document != nil) != (tc.shape == ShapeDocument) {
				t.Errorf("document %v for shape %v", f.Document, f.Shape)
			}
		})
	}
}

// TestLoadCapabilitiesProblems: every misspelt member at once, with the
// member meant and its line, named as it is in the file; validation
// problems named by the file's own paths.
func TestLoadCapabilitiesProblems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		format Format
		want   []string // "line|field|text" of each problem, in order
	}{
		{"single, two misspellings and a misspelt condition", "{\"name\": \"a.b\",\n \"desciption\": \"x\",\n \"advertize\": \"always\",\n \"conditions\": {\"min_disclosur\": \"public\"}}",
			FormatJSON, []string{`2|desciption|did you mean "description"?`, `3|advertize|did you mean "advertise"?`, `4|conditions.min_disclosur|did you mean "min_disclosure"?`}},
		{"list", "[{\"name\": \"a.b\", \"description\": \"x\"},\n {\"name\": \"c.d\", \"descrption\": \"y\"}]",
			FormatJSON, []string{`2|[1].descrption|did you mean "description"?`}},
		{"tables", "[[capabilities]]\nname = \"a.b\"\ndescription = \"x\"\n\n[[capabilities]]\nname = \"c.d\"\ndescripton = \"y\"\n",
			FormatTOML, []string{`7|capabilities[1].descripton|did you mean "description"?`}},
		{"a misspelt table", "[[capabilites]]\nname = \"a.b\"\ndescription = \"x\"\n", FormatTOML, []string{`1|capabilites|did you mean "capabilities"?`}},
		{"document", "{\"ifp\": 7, \"agent_id\": \"x\", \"sequ\": 3,\n \"capabilities\": [{\"name\": \"a.b\", \"description\": \"x\", \"tagz\": []}]}",
			FormatJSON, []string{`1|sequ|did you mean "seq"?`, `2|capabilities[0].tagz|did you mean "tags"?`}},
		{"validation, single", "{\"name\": \"Bad Name\",\n \"description\": \"x\"}", FormatJSON, []string{"1|name|"}},
		{"validation, list", "[{\"name\": \"a.b\", \"description\": \"x\"},\n {\"name\": \"c.d\", \"description\": \"\"}]", FormatJSON, []string{"2|[1].description|is required"}},
		{"a number", "7", FormatJSON, []string{"1|(file)|is a number; want a capability object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadCapabilities([]byte(tc.src), tc.format, nil)
			errs := Errors(err)
			if len(errs) != len(tc.want) {
				t.Fatalf("%d problems, want %d: %v", len(errs), len(tc.want), err)
			}
			for i, e := range errs {
				fe, ok := e.(*FieldError)
				parts := strings.SplitN(tc.want[i], "|", 3)
				if !ok || parts[0] != strconv.Itoa(fe.Line) || fe.Field != parts[1] || !strings.Contains(fe.Problem, parts[2]) {
					t.Errorf("problem %d: %#v, want %s", i, e, tc.want[i])
				}
			}
		})
	}
}
