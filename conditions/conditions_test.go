package conditions_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/conditions"
)

func level(l conditions.Level) *conditions.Level { return &l }

func TestConditionsJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want conditions.Conditions
		out  string // MarshalJSON of want
	}{
		{
			name: "zero conditions are an empty object",
			in:   `{}`,
			want: conditions.Conditions{},
			out:  `{}`,
		},
		{
			name: "the IFP-7 example",
			in:   `{"min_disclosure": "professional", "min_auth_level": 1}`,
			want: conditions.Conditions{MinDisclosure: "professional", MinAuthLevel: level(conditions.Signed)},
			out:  `{"min_disclosure":"professional","min_auth_level":1}`,
		},
		{
			name: "min_auth_level 0 is a requirement and is kept",
			in:   `{"min_auth_level": 0}`,
			want: conditions.Conditions{MinAuthLevel: level(conditions.Introduced)},
			out:  `{"min_auth_level":0}`,
		},
		{
			name: "persona as a single string, as IFP-12 writes it, is written back as an array",
			in:   `{"persona": "researcher"}`,
			want: conditions.Conditions{Persona: []string{"researcher"}},
			out:  `{"persona":["researcher"]}`,
		},
		{
			name: "persona as an array",
			in:   `{"persona": ["researcher", "writer"]}`,
			want: conditions.Conditions{Persona: []string{"researcher", "writer"}},
			out:  `{"persona":["researcher","writer"]}`,
		},
		{
			name: "persona null is no persona",
			in:   `{"persona": null}`,
			want: conditions.Conditions{},
			out:  `{}`,
		},
		{
			name: "empty arrays are no condition",
			in:   `{"persona": [], "peers": []}`,
			want: conditions.Conditions{},
			out:  `{}`,
		},
		{
			name: "every field",
			in: `{"min_disclosure": "personal", "min_auth_level": 3, "temperature": "warm",
				"persona": "researcher", "peers": ["12D3KooWA", "https://bob.example/agent"], "max_concurrent": 2}`,
			want: conditions.Conditions{
				MinDisclosure: "personal",
				MinAuthLevel:  level(conditions.Bound),
				Temperature:   "warm",
				Persona:       []string{"researcher"},
				Peers:         []string{"12D3KooWA", "https://bob.example/agent"},
				MaxConcurrent: 2,
			},
			out: `{"min_disclosure":"personal","min_auth_level":3,"temperature":"warm","persona":["researcher"],"peers":["12D3KooWA","https://bob.example/agent"],"max_concurrent":2}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got conditions.Conditions
			if err := json.Unmarshal([]byte(tc.in), &got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Unmarshal(%s) = %+v, want %+v", tc.in, got, tc.want)
			}
			out, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(out) != tc.out {
				t.Errorf("Marshal = %s, want %s", out, tc.out)
			}
			// Pointers marshal the same as values.
			if pout, _ := json.Marshal(&got); string(pout) != tc.out {
				t.Errorf("Marshal(&c) = %s, want %s", pout, tc.out)
			}
			var back conditions.Conditions
			if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("round trip: %+v, %v; want %+v", back, err, got)
			}
			if got.IsZero() != (tc.out == `{}`) {
				t.Errorf("IsZero() = %v for %s", got.IsZero(), tc.out)
			}
		})
	}
}

func TestConditionsJSONRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want string // in the message
	}{
		{"an unknown field, which would otherwise silently lift a condition", `{"min_disclosure": "public", "min_trust": 3}`, `min_trust: is not a known condition`},
		{"a misspelt field", `{"max_concurent": 1}`, `max_concurent: is not a known condition`},
		{"persona as a number", `{"persona": 7}`, "persona: must be a string or an array of strings, got a number"},
		{"persona as an object", `{"persona": {"name": "x"}}`, "persona: must be a string or an array of strings, got an object"},
		{"persona as a boolean", `{"persona": true}`, "persona: must be a string or an array of strings, got a boolean"},
		{"persona as an array of numbers", `{"persona": [1, 2]}`, "persona: must be a string or an array of strings, got an array holding a JSON number"},
		{"min_auth_level as a string", `{"min_auth_level": "2"}`, "min_auth_level: must be an integer, got a JSON string"},
		{"min_auth_level as a fraction", `{"min_auth_level": 1.5}`, "min_auth_level: must be an integer"},
		{"min_disclosure as a number", `{"min_disclosure": 2}`, "min_disclosure: must be a string, got a JSON number"},
		{"peers as a string", `{"peers": "12D3KooWA"}`, "peers: must be an array of strings, got a JSON string"},
		{"peers holding a number", `{"peers": ["12D3KooWA", 2]}`, "peers: must be an array of strings, got an array holding a JSON number"},
		{"max_concurrent as a string", `{"max_concurrent": "4"}`, "max_concurrent: must be an integer"},
		{"not an object", `["min_disclosure"]`, "invalid conditions: a conditions object must be a JSON object, got a JSON array"},
		{"a string", `"professional"`, "must be a JSON object, got a JSON string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c conditions.Conditions
			err := json.Unmarshal([]byte(tc.in), &c)
			if err == nil {
				t.Fatalf("Unmarshal(%s) succeeded: %+v", tc.in, c)
			}
			if !errors.Is(err, conditions.ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n  %s\ndoes not contain\n  %s", err, tc.want)
			}
		})
	}
}

func TestConditionsUnmarshalJSONDirect(t *testing.T) {
	var c conditions.Conditions
	if err := c.UnmarshalJSON([]byte(`{} {"min_auth_level": 0}`)); err == nil {
		t.Error("trailing data after the object was accepted")
	}
	c = conditions.Conditions{MaxConcurrent: 3}
	if err := c.UnmarshalJSON([]byte(`null`)); err != nil || c.MaxConcurrent != 3 {
		t.Errorf("null: %+v, %v; want the value left alone", c, err)
	}
	// Decoding replaces the whole value rather than merging into it.
	c = conditions.Conditions{MaxConcurrent: 3, Peers: []string{"x"}}
	if err := json.Unmarshal([]byte(`{"temperature": "hot"}`), &c); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, conditions.Conditions{Temperature: "hot"}) {
		t.Errorf("decoding merged into the old value: %+v", c)
	}
}

func TestConditionsInCapability(t *testing.T) {
	// As a field of a larger document, and absent: no conditions.
	var capability struct {
		Name       string                 `json:"name"`
		Conditions conditions.Conditions  `json:"conditions"`
		Other      *conditions.Conditions `json:"other,omitempty"`
	}
	in := `{"name": "calendar.availability", "conditions": {"min_disclosure": "professional", "persona": "work"}}`
	if err := json.Unmarshal([]byte(in), &capability); err != nil {
		t.Fatal(err)
	}
	want := conditions.Conditions{MinDisclosure: "professional", Persona: []string{"work"}}
	if !reflect.DeepEqual(capability.Conditions, want) || capability.Other != nil {
		t.Errorf("got %+v, other %v", capability.Conditions, capability.Other)
	}
}

func TestValidate(t *testing.T) {
	custom, err := conditions.NewTierOrder([]conditions.CustomTier{{Name: "colleagues", After: "professional"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		c     conditions.Conditions
		order *conditions.TierOrder
		want  []string // each in the message, in order; none: valid
	}{
		{name: "no conditions", c: conditions.Conditions{}},
		{
			name: "every field valid",
			c: conditions.Conditions{
				MinDisclosure: "community-trust", MinAuthLevel: level(conditions.Introduced), Temperature: "hot",
				Persona: []string{"work", "home"}, Peers: []string{"12D3KooWA", "12D3KooWB"}, MaxConcurrent: 1,
			},
		},
		{name: "a custom tier of the owner", c: conditions.Conditions{MinDisclosure: "colleagues"}, order: custom},
		{name: "a nil order means the standard tiers", c: conditions.Conditions{MinDisclosure: "close"}, order: nil},
		{
			name: "unknown tier",
			c:    conditions.Conditions{MinDisclosure: "profesional"},
			want: []string{`min_disclosure: "profesional" is not a known tier (known: public, professional, professional-open, community-trust, personal, close)`},
		},
		{
			name:  "a custom tier under an order that lacks it",
			c:     conditions.Conditions{MinDisclosure: "colleagues"},
			order: conditions.DefaultTierOrder(),
			want:  []string{`min_disclosure: "colleagues" is not a known tier`},
		},
		{name: "level above bound", c: conditions.Conditions{MinAuthLevel: level(4)}, want: []string{"min_auth_level: 4 is not an authentication level"}},
		{name: "level below introduced", c: conditions.Conditions{MinAuthLevel: level(conditions.NoLevel)}, want: []string{"min_auth_level: -1 is not an authentication level"}},
		{name: "unknown temperature", c: conditions.Conditions{Temperature: "tepid"}, want: []string{`temperature: "tepid" is not a temperature (cool, warm, hot)`}},
		{name: "temperature is case sensitive", c: conditions.Conditions{Temperature: "Warm"}, want: []string{`temperature: "Warm"`}},
		{name: "empty persona", c: conditions.Conditions{Persona: []string{"work", ""}}, want: []string{"persona[1]: is empty"}},
		{name: "repeated persona", c: conditions.Conditions{Persona: []string{"work", "home", "work"}}, want: []string{`persona[2]: "work" repeats persona[0]`}},
		{name: "empty peer", c: conditions.Conditions{Peers: []string{""}}, want: []string{"peers[0]: is empty"}},
		{name: "repeated peer", c: conditions.Conditions{Peers: []string{"12D3KooWA", "12D3KooWA"}}, want: []string{`peers[1]: "12D3KooWA" repeats peers[0]`}},
		{name: "negative max_concurrent", c: conditions.Conditions{MaxConcurrent: -1}, want: []string{"max_concurrent: -1 is negative"}},
		{
			name: "every problem, in field order",
			c: conditions.Conditions{
				MinDisclosure: "nope", MinAuthLevel: level(7), Temperature: "boiling",
				Persona: []string{""}, Peers: []string{"", ""}, MaxConcurrent: -3,
			},
			want: []string{"min_disclosure:", "min_auth_level:", "temperature:", "persona[0]:", "peers[0]:", "peers[1]:", "max_concurrent:"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate(tc.order)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted invalid conditions")
			}
			if !errors.Is(err, conditions.ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			msg := err.Error()
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error\n  %s\ndoes not contain, in order,\n  %q", msg, w)
				}
				rest = rest[i+len(w):]
			}
			if n := len(fieldErrors(err)); n != len(tc.want) {
				t.Errorf("%d field errors, want %d: %s", n, len(tc.want), msg)
			}
		})
	}
}

// fieldErrors flattens the errors.Join tree into its FieldErrors.
func fieldErrors(err error) []*conditions.FieldError {
	var fe *conditions.FieldError
	if errors.As(err, &fe) {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			var all []*conditions.FieldError
			for _, e := range joined.Unwrap() {
				all = append(all, fieldErrors(e)...)
			}
			return all
		}
		return []*conditions.FieldError{fe}
	}
	return nil
}
