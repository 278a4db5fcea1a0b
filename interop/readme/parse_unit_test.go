package readme

import (
	"os"
	"path/filepath"
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
	b := block{line: 10, lines: strings.Split(`# terminal 1: R
ifaced init --home ~/relay        # its own home
ifaced send --home ~/alice "$B" --text "a # b"
#   sent msg:… in conv:…
ifaced invoke bob calendar.availability
# refused
# (exit status 1)
cat > ~/cap.json <<'EOF'
{"name": "x",
 "description": "# not a comment"}
EOF
curl -s 127.0.0.1:4819/a2a \
  -d '{}'     # two lines

# stop it (Ctrl-C in terminal 2), then:`, "\n")}
	steps := parseSteps(b)
	want := []step{
		{line: 10, comment: "terminal 1: R"},
		{line: 11, cmd: "ifaced init --home ~/relay", comment: "its own home"},
		{line: 12, cmd: `ifaced send --home ~/alice "$B" --text "a # b"`, expect: []string{"sent msg:… in conv:…"}},
		{line: 14, cmd: "ifaced invoke bob calendar.availability", expect: []string{"refused"}, exit: 1},
		{line: 17, cmd: "cat > ~/cap.json <<'EOF'\n{\"name\": \"x\",\n \"description\": \"# not a comment\"}\nEOF"},
		{line: 21, cmd: "curl -s 127.0.0.1:4819/a2a \\\n-d '{}'", comment: "two lines"},
		{line: 24, comment: "stop it (Ctrl-C in terminal 2), then:"},
	}
	if len(steps) != len(want) {
		t.Fatalf("got %d steps, want %d: %+v", len(steps), len(want), steps)
	}
	for i, w := range want {
		g := steps[i]
		if g.line != w.line || g.cmd != w.cmd || g.comment != w.comment || strings.Join(g.expect, "|") != strings.Join(w.expect, "|") || g.exit != w.exit {
			t.Errorf("step %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestReadDoc: what a document's markers and fences may be, and what is
// refused.
func TestReadDoc(t *testing.T) {
	doc := "# Title\n\n" +
		"<!-- not run: it needs the network -->\n```sh\ngo install x@latest\n```\n\n" +
		"```sh\nifaced version\n```\n\n" +
		"<!-- file: ~/cap.json -->\n```json\n{}\n```\n\n" +
		"```\nno language\n```\n\n" +
		"```python\nprint()\n```\n\n" +
		"<!-- example: old -->\n```sh\nx\n```\n\n" +
		"<!-- not run: -->\n```sh\nx\n```\n\n" +
		"<!-- not run: data is never run -->\n```json\n{}\n```\n\n" +
		"<!-- file: ~/x -->\n\nnot a fence\n\n" +
		"```text\nwhat it prints\n$ ifaced status\n```\n\n" +
		"```text\nifaced trust: storing trust record: no space left on device\n```\n\n" +
		"~~~sh\nifaced status\n~~~\n"
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	blocks, problems, err := readDoc(path, "doc.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 10 || blocks[0].notRun != "it needs the network" || blocks[1].notRun != "" || blocks[2].file != "~/cap.json" {
		t.Errorf("blocks: %+v", blocks)
	}
	for _, want := range []string{"doc.md:17: a fence without a language", `doc.md:21: a fence of "python"`, "doc.md:25: <!-- example: old -->",
		"doc.md:30: <!-- not run: -->", "doc.md:35: <!-- not run --> stands before a json block", "doc.md:40: the marker <!-- file: ~/x --> is not followed",
		`doc.md:46: a text block holding a command ("$ ifaced status")`, "doc.md:53: a ~~~ fence"} {
		found := false
		for _, p := range problems {
			found = found || strings.HasPrefix(p, want)
		}
		if !found {
			t.Errorf("no problem %q in %q", want, problems)
		}
	}
	// A command's error output ("ifaced trust: …") is output, not a command.
	for _, p := range problems {
		if strings.Contains(p, "ifaced trust:") {
			t.Errorf("an error line taken for a command: %s", p)
		}
	}
}
