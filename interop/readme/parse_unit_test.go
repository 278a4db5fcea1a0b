package readme

import (
	"strings"
	"testing"
)

func TestMatchOutput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		out    string
		expect []string
		ok     bool
	}{
		{"lines in order, … for anything", "queued msg:1 for B's relays (x)\nB is unreachable (dial\n  * NO_RESERVATION (204)); queued\n",
			[]string{"queued msg:… for B's relays", "B is unreachable (… NO_RESERVATION …); queued"}, true},
		{"lines out of order", "b\na\n", []string{"a", "b"}, false},
		{"a line not shown", "sent msg:1 in conv:2\n", []string{"sent msg:… in conversation:…"}, false},
		{"JSON without white space", "{\n  \"action\": \"ping\",\n  \"output\": \"pong\"\n}\n", []string{`{"action": "ping", "output": "pong"}`}, true},
		{"JSON must be the whole output", `{"status": "error", "code": "agent_timeout"}`, []string{`{"status": "error"}`}, false},
		{"JSON with elisions", `{"a":1,"items":[{"n":"x"},{"n":"y"},{"n":"ping","d":"p"}],"z":2}`, []string{`{"a": 1, "items": [{"n": "x"}, …,`, `{"n": "ping", "d": "p"}], …}`}, true},
		{"nothing shown", "anything", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := matchOutput(tc.out, tc.expect); (err == nil) != tc.ok {
				t.Errorf("matchOutput = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestParseSteps(t *testing.T) {
	b := block{line: 10, lines: strings.Split(`go build ./cmd/ifaced

# terminal 1: R
./ifaced init --home ~/relay      # then, in ~/relay/config.toml:
                                  #   [relay] service = true
./ifaced send --home ~/alice <B> --text "a # b"
#   sent msg:… in conv:…

# stop B (Ctrl-C in terminal 2), then:`, "\n")}
	steps := parseSteps(b)
	want := []step{
		{line: 10, cmd: "go build ./cmd/ifaced"},
		{line: 12, comment: "terminal 1: R"},
		{line: 13, cmd: "./ifaced init --home ~/relay", comment: "then, in ~/relay/config.toml:"},
		{line: 14, edit: &edit{file: "~/relay/config.toml", section: "relay", key: "service", value: "true"}},
		{line: 15, cmd: `./ifaced send --home ~/alice <B> --text "a # b"`, expect: []string{"sent msg:… in conv:…"}},
		{line: 18, comment: "stop B (Ctrl-C in terminal 2), then:"},
	}
	if len(steps) != len(want) {
		t.Fatalf("got %d steps, want %d: %+v", len(steps), len(want), steps)
	}
	for i, w := range want {
		g := steps[i]
		if g.line != w.line || g.cmd != w.cmd || g.comment != w.comment || strings.Join(g.expect, "|") != strings.Join(w.expect, "|") ||
			(g.edit == nil) != (w.edit == nil) || (g.edit != nil && *g.edit != *w.edit) {
			t.Errorf("step %d = %+v (edit %+v), want %+v (edit %+v)", i, g, g.edit, w, w.edit)
		}
	}
}
