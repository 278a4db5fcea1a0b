package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/nodetest"
)

// runDaemonIn runs a daemon and its control API in home (initialized
// when new) until the returned stop, or the end of the test.
func runDaemonIn(t *testing.T, h config.Home, cfg *config.Config) (stop func()) {
	t.Helper()
	id, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		if id, err = h.Init(time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.New(cfg, id, h, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.Listen(n, h, cfg.API.Listen, log)
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			srv.Close()
			n.Close()
		}
	}
	t.Cleanup(stop)
	return stop
}

// readmeCapFile writes the tutorial's cap.json, as
// docs/tutorials/two-daemons.md prints it.
func readmeCapFile(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile("../../docs/tutorials/two-daemons.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- file: ~/two/cap.json -->\n```json\n(.*?)```").FindSubmatch(src)
	if m == nil {
		t.Fatal("docs/tutorials/two-daemons.md no longer shows cap.json")
	}
	file := filepath.Join(dir, "cap.json")
	if err := os.WriteFile(file, m[1], 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestCapsFiles: caps validate and caps add read the tutorial's cap.json
// (refused before: "name: is not a known field"), a whole document
// (refused by caps add before: "ifp: is not a known field"),
// examples/agent/capabilities.toml (refused by both) and a list, and say
// what they read.
func TestCapsFiles(t *testing.T) {
	dir := t.TempDir()
	capJSON := readmeCapFile(t, dir)
	example := "../../examples/agent/capabilities.toml"
	document := "../../negotiate/testdata/document.json"
	list := filepath.Join(dir, "list.json")
	os.WriteFile(list, []byte(`[{"name": "news.headlines", "description": "Headlines"}, {"name": "news.search", "description": "Search the news"}]`), 0o600)

	for file, want := range map[string]string{
		capJSON:  "valid, read as one capability (JSON): calendar.availability",
		example:  "valid, read as 3 capabilities in [[capabilities]] tables (TOML): doc.summarize, calendar.availability, echo",
		document: "valid, read as a capability document with 4 capabilities (JSON): gossip.exchange, calendar.availability, doc.summarize",
		list:     "valid, read as a list of 2 capabilities (JSON): news.headlines, news.search",
	} {
		wantLines(t, "caps validate "+file, mustRun(t, dir, "caps", "validate", file), file+": "+want)
	}
	var rep capsReport
	if err := json.Unmarshal([]byte(mustRun(t, dir, "caps", "validate", example, "--json")), &rep); err != nil || rep.Kind != "tables" ||
		rep.Read != "3 capabilities in [[capabilities]] tables (TOML)" || len(rep.Capabilities) != 3 {
		t.Errorf("caps validate --json: %+v %v", rep, err)
	}

	// Every misspelt member at once, with the one meant.
	typo := filepath.Join(dir, "typo.toml")
	os.WriteFile(typo, []byte("name = \"x.y\"\ndesciption = \"d\"\n[conditions]\nmin_disclosur = \"public\"\n"), 0o600)
	r := ifaced(t, dir, "caps", "validate", typo)
	wantLines(t, "caps validate with misspellings", r.stderr, typo+": read as one capability (TOML)",
		typo+`:2: desciption: is not a known member of a capability; did you mean "description"?`,
		typo+`:4: conditions.min_disclosur: is not a known condition; did you mean "min_disclosure"?`)

	home := filepath.Join(t.TempDir(), "alice")
	cfg := nodetest.LoopbackConfig()
	cfg.Capabilities = []map[string]any{{"name": "ping", "description": "Respond to connectivity tests"}}
	runDaemonIn(t, config.Home{Dir: home}, cfg)
	wantLines(t, "caps add a document", mustRun(t, home, "caps", "add", document),
		document+": read as a capability document with 4 capabilities (JSON)",
		"added gossip.exchange, calendar.availability, doc.summarize, ", "the document is now seq 2 with 5 capabilities")
	r = ifaced(t, home, "caps", "add", capJSON)
	if r.code != 1 || !strings.Contains(r.stderr, `adding capability "calendar.availability": a capability of that name is already in the document`) {
		t.Errorf("cap.json over a name in use: %d %q", r.code, r.stderr)
	}
	mustRun(t, home, "caps", "remove", "calendar.availability")
	wantLines(t, "caps add cap.json", mustRun(t, home, "caps", "add", capJSON), capJSON+": read as one capability (JSON)",
		"added calendar.availability: the document is now seq 4 with 5 capabilities")
	wantLines(t, "caps add a list", mustRun(t, home, "caps", "add", list), "added news.headlines, news.search: the document is now seq 5 with 7 capabilities")
	// A name in use is named with its line in the file.
	r = ifaced(t, home, "caps", "add", example)
	if r.code != 1 || !strings.Contains(r.stderr, example+`:7: adding capability "doc.summarize": a capability of that name is already in the document`) {
		t.Errorf("tables over a name in use: %d %q", r.code, r.stderr)
	}

	bob := filepath.Join(t.TempDir(), "bob")
	runDaemonIn(t, config.Home{Dir: bob}, nodetest.LoopbackConfig())
	wantLines(t, "caps add examples/agent/capabilities.toml", mustRun(t, bob, "caps", "add", example),
		"read as 3 capabilities in [[capabilities]] tables (TOML)", "added doc.summarize, calendar.availability, echo: the document is now seq 2 with 9 capabilities")
}

// TestCapsKeptAcrossRestart: caps add and caps remove are there after the
// daemon restarts, under the same seq, and caps says where each
// capability comes from (before: the added capability was gone after a
// restart and the removed one back, the seq one higher, nothing said so).
func TestCapsKeptAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	capJSON := readmeCapFile(t, dir)
	h := config.Home{Dir: filepath.Join(dir, "alice")}
	stop := runDaemonIn(t, h, nodetest.LoopbackConfig())
	a := h.Dir
	mustRun(t, a, "caps", "add", capJSON)
	mustRun(t, a, "caps", "remove", "capabilities.get")
	lines := []string{"seq 3, 6 capabilities",
		"NAME                   CONDITIONS                   FROM",
		"ping                   -                            config",
		"calendar.availability  min_disclosure=professional  caps add",
		"removed with caps remove (config.toml has them; kept removed): capabilities.get"}
	wantLines(t, "caps", mustRun(t, a, "caps"), lines...)

	// The tutorial's example of this listing is what caps prints (… in
	// it stands for anything: the column widths follow the names).
	tutorial, err := os.ReadFile("../../docs/tutorials/two-daemons.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\nifaced caps --home ~/two/alice [^\n]*\n((?:# [^\n]*\n)+)").FindSubmatch(tutorial)
	if m == nil {
		t.Fatal("docs/tutorials/two-daemons.md no longer shows the caps listing")
	}
	listed := mustRun(t, a, "caps")
	var shown int
	for _, l := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		l = strings.TrimPrefix(l, "# ")
		if strings.HasPrefix(l, "seq ") {
			continue
		}
		parts := strings.Split(l, "…")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		if !regexp.MustCompile("(?m)^" + strings.Join(parts, ".*?") + "$").MatchString(listed) {
			t.Errorf("the tutorial's caps listing shows %q; caps prints:\n%s", l, listed)
		}
		shown++
	}
	if shown < 2 {
		t.Errorf("the tutorial's caps listing shows %d lines besides the seq", shown)
	}

	stop()
	stop = runDaemonIn(t, h, nodetest.LoopbackConfig())
	wantLines(t, "caps after a restart", mustRun(t, a, "caps"), lines...)
	wantLines(t, "status after a restart", mustRun(t, a, "status"), "document       seq 3, 6 capabilities")
	// Removing what was added is kept too.
	mustRun(t, a, "caps", "remove", "calendar.availability")
	stop()
	runDaemonIn(t, h, nodetest.LoopbackConfig())
	if out := mustRun(t, a, "caps"); strings.Contains(out, "calendar.availability") || !strings.Contains(out, "seq 4, 5 capabilities") {
		t.Errorf("after removing and a restart:\n%s", out)
	}
}
