package conditions_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
)

// FuzzConditionsJSON: decoding never panics, and whatever decodes re-encodes
// to a value that decodes equal, so a document passed on by a daemon keeps
// its conditions exactly.
func FuzzConditionsJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`null`,
		`{"min_disclosure": "professional", "min_auth_level": 1}`,
		`{"min_auth_level": 0}`,
		`{"persona": "researcher"}`,
		`{"persona": ["researcher", "writer"], "peers": ["12D3KooWA"], "max_concurrent": 3}`,
		`{"temperature": "warm", "persona": null, "peers": []}`,
		`{"min_trust": 3}`,
		`{"persona": 7}`,
		`{"persona": [null, "a"]}`,
		`{"min_auth_level": 1.5}`,
		`{"min_auth_level": -1, "max_concurrent": -2, "min_disclosure": "\u0000"}`,
		`{"MIN_DISCLOSURE": "close"}`,
		`{"persona": "a", "persona": ["b"]}`,
		`[]`,
		`{"peers": ["\xff"]}`,
		`{} {}`,
		`{"min_disclosure":`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c conditions.Conditions
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", c, err)
		}
		var back conditions.Conditions
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip changed the conditions:\n in %s\n got %+v\n  -> %s\n -> %+v", data, c, out, back)
		}
		// Whatever decoded, validating and evaluating it must not panic either.
		_ = c.Validate(nil)
		d := conditions.Evaluate(c, conditions.Facts{AuthLevel: conditions.NoLevel}, nil, time.Second)
		if !c.IsZero() && d.Met() && (c.MinAuthLevel != nil || len(c.Peers) > 0) {
			t.Fatalf("an anonymous unauthenticated caller met %+v", c)
		}
	})
}
