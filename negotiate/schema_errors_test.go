package negotiate

import (
	"strings"
	"testing"
)

// A mistyped keyword in a capability's parameters is told as the keyword
// and where it is, not as the draft 2020-12 metaschema's allOf/anyOf tree.
func TestBadSchemaSaysKeywordAndLocation(t *testing.T) {
	cases := []struct {
		name   string
		schema map[string]any
		says   []string // one problem each, in this order
	}{
		{"mistyped type", map[string]any{"type": "object", "properties": map[string]any{"days": map[string]any{"type": "intger"}}},
			[]string{`properties.days.type: must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string' (did you mean "integer"?)`}},
		{"required as a string", map[string]any{"type": "object", "required": "days"},
			[]string{"required: is a string; want an array"}},
		{"two mistakes", map[string]any{"type": "object", "additionalProperties": 5, "properties": map[string]any{"days": map[string]any{"minimum": "3"}}},
			[]string{"additionalProperties: is a number; want a boolean or an object", "properties.days.minimum: is a string; want a number"}},
		{"bad pattern", map[string]any{"type": "string", "pattern": "("},
			[]string{"pattern: '(' is not valid regex"}},
		{"outside reference", map[string]any{"$ref": "other.json"},
			[]string{`refers to "other.json": schemas may not load anything`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &Document{IFP: 7, AgentID: "a", Capabilities: []Capability{{Name: "x.y", Description: "x", Parameters: tc.schema}}}
			fes := fieldErrors(d.Validate(nil))
			if len(fes) != len(tc.says) {
				t.Fatalf("%d problems, want %d: %v", len(fes), len(tc.says), fes)
			}
			for i, fe := range fes {
				if fe.Field != "capabilities[0].parameters" {
					t.Errorf("field %q, want capabilities[0].parameters", fe.Field)
				}
				if !strings.HasPrefix(fe.Problem, "is not valid JSON Schema: ") || !strings.Contains(fe.Problem, tc.says[i]) {
					t.Errorf("problem %q does not say %q", fe.Problem, tc.says[i])
				}
				for _, noise := range []string{"allOf", "anyOf", "metaschema", "json-schema.org", "schema.ifaced.invalid", "\n"} {
					if strings.Contains(fe.Problem, noise) {
						t.Errorf("problem %q shows %q", fe.Problem, noise)
					}
				}
			}
		})
	}
}

// Parameters that fail an anyOf are told what the alternative of their
// type wants, not that they are not of the other alternatives' types.
func TestParamsFailureKeepsTheRelevantAlternative(t *testing.T) {
	d := &Document{IFP: 7, AgentID: "a", Capabilities: []Capability{{Name: "x.y", Description: "x", Parameters: map[string]any{
		"type": "object", "properties": map[string]any{"when": map[string]any{
			"anyOf": []any{map[string]any{"type": "string", "format": "date"}, map[string]any{"type": "integer", "minimum": 1}}}}}}}}
	if err := d.Validate(nil); err != nil {
		t.Fatal(err)
	}
	s, err := NewSchemas(d)
	if err != nil {
		t.Fatal(err)
	}
	err = s.CheckParams("x.y", map[string]any{"when": 0})
	if err == nil {
		t.Fatal("0 accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "at /when: minimum: got 0, want 1") || strings.Contains(msg, "string") || strings.Contains(msg, "anyOf") {
		t.Errorf("%q: want only the integer alternative's minimum", msg)
	}
	err = s.CheckParams("x.y", map[string]any{"when": true})
	if msg := err.Error(); !strings.Contains(msg, "at /when: is a boolean; want a string") || !strings.Contains(msg, "want an integer") {
		t.Errorf("%q: a value of neither type hears both", msg)
	}
}
