package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/nodetest"
)

// TestVersion: --version and `version` print the version; --json too.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		if r := ifaced(t, t.TempDir(), args...); r.code != 0 || r.stdout != "ifaced dev\n" || r.stderr != "" {
			t.Errorf("%q: %d %q %q", args, r.code, r.stdout, r.stderr)
		}
	}
	r := ifaced(t, t.TempDir(), "version", "--json")
	var v struct{ Version, Go string }
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 || v.Version != "dev" || v.Go == "" {
		t.Errorf("version --json: %d %q %v", r.code, r.stdout, err)
	}
}

// TestHelpOnStdout: help asked for, in every form, is on standard output
// with exit 0, and names the flags of the verb asked about.
func TestHelpOnStdout(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "Commands:"},
		{[]string{"--help"}, "Commands:"},
		{[]string{"help"}, "Commands:"},
		{[]string{"help", "greet"}, "Usage: ifaced greet [flags] PEER"},
		{[]string{"help", "caps", "validate"}, "Usage: ifaced caps validate [flags] FILE"},
		{[]string{"caps", "validate", "-h"}, "-json"},
		{[]string{"run", "--help"}, "-log-level"},
		{[]string{"conversations", "-h"}, "-peer"},
	} {
		r := ifaced(t, t.TempDir(), c.args...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) || r.stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q on stdout", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// TestDidYouMean: a mistyped verb, flag or subcommand is a usage error
// naming the nearest right one.
func TestDidYouMean(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, `unknown command "stauts"; did you mean "status"?`},
		{[]string{"conv"}, `did you mean "conversations"?`},
		{[]string{"peers", "--jsno"}, "unknown flag --jsno; did you mean --json?"},
		{[]string{"greet", "bob", "--temprature", "warm"}, "did you mean --temperature?"},
		{[]string{"caps", "valdate", "x.json"}, "did you mean `caps validate`?"},
		{[]string{"config", "sett", "log.level", "debug"}, `did you mean "set"?`},
		{[]string{"config", "set", "log.levl", "debug"}, `did you mean "log.level"?`},
		{[]string{"conversations", "clsoe", "conv:x"}, `did you mean "close"?`},
		{[]string{"help", "invok"}, `did you mean "invoke"?`},
		{[]string{"completion", "bsh"}, `did you mean "bash"?`},
	} {
		r := ifaced(t, filepath.Join(t.TempDir(), "home"), c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: exit %d %q, want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if s := suggest("frobnicate", commandNames()); s != "" {
		t.Errorf("frobnicate is near %q", s)
	}
}

// TestJSONErrors: with --json, a failure is one JSON object on standard
// error, whatever failed: the flags, the arguments, or the work.
func TestJSONErrors(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	for _, c := range []struct {
		args []string
		exit int
		code string
	}{
		{[]string{"peers", "--bogus", "--json"}, 2, codeUsage},
		{[]string{"frobnicate", "--json"}, 2, codeUsage},
		{[]string{"caps", "validate", "--json"}, 2, codeUsage},
		{[]string{"status", "--json"}, 1, codeFailed},
		{[]string{"caps", "validate", filepath.Join(home, "missing.json"), "--json"}, 1, codeFailed},
	} {
		r := ifaced(t, home, c.args...)
		var e cliError
		if err := json.Unmarshal([]byte(r.stderr), &e); err != nil {
			t.Errorf("%q: stderr is not JSON (%v): %q", c.args, err, r.stderr)
			continue
		}
		if r.code != c.exit || e.ExitCode != c.exit || e.Code != c.code || e.Message == "" {
			t.Errorf("%q: exit %d, %+v; want exit and exit_code %d, code %s", c.args, r.code, e, c.exit, c.code)
		}
	}
	// A file with problems lists each one, with its line.
	typo := filepath.Join(t.TempDir(), "typo.json")
	os.WriteFile(typo, []byte("{\n  \"name\": \"x\",\n  \"descripton\": \"typo\"\n}\n"), 0o600)
	r := ifaced(t, home, "caps", "add", typo, "--json")
	var pe cliError
	if err := json.Unmarshal([]byte(r.stderr), &pe); err != nil || r.code != 1 || len(pe.Problems) != 1 || !strings.HasPrefix(pe.Problems[0], typo+":3: descripton") {
		t.Errorf("caps add --json with a typo: %d %q (%v)", r.code, r.stderr, err)
	}
	// A config with problems lists each one.
	bad := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(bad, []byte("version = 1\n[log]\nlevel = 3\n"), 0o600)
	cfgHome := filepath.Dir(bad)
	r = ifaced(t, cfgHome, "config", "--json")
	var e cliError
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || r.code != 1 || len(e.Problems) != 1 || !strings.Contains(e.Problems[0], "log.level") {
		t.Errorf("config --json on a bad file: %d %q (%v)", r.code, r.stderr, err)
	}
}

// TestFlagsAnywhere: flags may follow the arguments for every verb,
// including the ones that never talk to a daemon.
func TestFlagsAnywhere(t *testing.T) {
	home := t.TempDir()
	r := ifaced(t, home, "caps", "validate", "../../negotiate/testdata/document.json", "--json")
	var rep capsReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.Valid {
		t.Fatalf("caps validate FILE --json: %d %q %q (%v)", r.code, r.stdout, r.stderr, err)
	}
	other := filepath.Join(t.TempDir(), "other")
	if r := ifaced(t, home, "init", "--json", "--home", other); r.code != 0 || !strings.Contains(r.stdout, `"home": "`+other) {
		t.Fatalf("init --json --home: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// "--" ends the flags: what follows is an argument.
	if r := ifaced(t, home, "caps", "validate", "--", "--json"); r.code != 1 || !strings.Contains(r.stderr, "--json") {
		t.Errorf("caps validate -- --json: %d %q", r.code, r.stderr)
	}
}

// TestRunLogLevel: --log-level overrides log.level, and a wrong one is a
// usage error before anything is created.
func TestRunLogLevel(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if r := ifaced(t, home, "run", "--log-level", "loud"); r.code != 2 || !strings.Contains(r.stderr, `--log-level "loud": want debug, info, warn or error`) {
		t.Errorf("run --log-level loud: %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("a bad --log-level created the data directory")
	}
	// With its context already done the daemon starts and stops at once;
	// at debug it says more than at the default info.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	logs := func(level string) string {
		var out, errb strings.Builder
		e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		args := []string{"run", "--home", home, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--no-mdns"}
		if level != "" {
			args = append(args, "--log-level", level)
		}
		if code := run(ctx, e, args); code != 0 {
			t.Fatalf("run %s: %d %s", level, code, errb.String())
		}
		return errb.String()
	}
	info, debug := logs(""), logs("debug")
	if strings.Contains(info, "level=DEBUG") || !strings.Contains(debug, "level=DEBUG") {
		t.Errorf("--log-level debug did not turn on debug logs:\ninfo:\n%s\ndebug:\n%s", info, debug)
	}
	if quiet := logs("error"); strings.Contains(quiet, "level=INFO") {
		t.Errorf("--log-level error still logs at info:\n%s", quiet)
	}
}

// TestCompletion: the scripts name every verb; bash's completion function
// completes verbs, subcommands, flags of the verb at hand (after its
// arguments too) and config keys.
func TestCompletion(t *testing.T) {
	// Every verb hands over its flags before doing anything: the scripts
	// are built from what the verbs declare.
	for _, v := range completionSpec() {
		if v.name == "help" || v.name == "completion" {
			continue
		}
		for _, sub := range append([]string{""}, v.subs...) {
			if !slices.ContainsFunc(v.flags[sub], func(f flagSpec) bool { return f.name == "home" }) {
				t.Errorf("%s %s: no flags read (%v)", v.name, sub, v.flags[sub])
			}
		}
	}
	for _, sh := range completionShells {
		out := mustRun(t, t.TempDir(), "completion", sh)
		for _, c := range commands() {
			if !strings.Contains(out, c.name) {
				t.Errorf("the %s script does not name %s", sh, c.name)
			}
		}
		if bin, err := exec.LookPath(sh); err == nil {
			script := filepath.Join(t.TempDir(), "ifaced."+sh)
			os.WriteFile(script, []byte(out), 0o600)
			if out, err := exec.Command(bin, "-n", script).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", sh, err, out)
			}
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the completion function in")
	}
	script := filepath.Join(t.TempDir(), "ifaced.bash")
	os.WriteFile(script, []byte(mustRun(t, t.TempDir(), "completion", "bash")), 0o600)
	complete := func(line string) []string {
		t.Helper()
		// COMP_WORDS as bash builds it: the words, and an empty one when
		// the line ends in a space.
		prog := `source "$1"; read -ra COMP_WORDS <<< "$2"; [[ $2 == *" " ]] && COMP_WORDS+=(""); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _ifaced; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command(bash, "-c", prog, "bash", script, line).CombinedOutput()
		if err != nil {
			t.Fatalf("completing %q: %v\n%s", line, err, out)
		}
		return strings.Fields(string(out))
	}
	for _, c := range []struct {
		line string
		want []string
		not  []string
	}{
		{"ifaced sta", []string{"status"}, nil},
		{"ifaced conv", []string{"conversations"}, nil},
		{"ifaced caps ", []string{"add", "remove", "validate", "--refresh"}, nil},
		{"ifaced caps validate x.json --j", []string{"--json"}, nil},
		{"ifaced caps validate --", []string{"--home", "--json"}, []string{"--refresh"}},
		{"ifaced run --log", []string{"--log-level"}, nil},
		{"ifaced greet --persona work --temp", []string{"--temperature"}, nil},
		{"ifaced config set log.", []string{"log.level", "log.format"}, nil},
		{"ifaced completion ", []string{"bash", "zsh", "fish"}, nil},
		{"ifaced help inv", []string{"invoke"}, nil},
		{"ifaced audit --w", []string{"--why"}, nil},
		{"ifaced audit --why ", nil, []string{"--why", "--json"}}, // a MESSAGE_ID follows, not a flag
	} {
		got := complete(c.line)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q completes to %q, missing %q", c.line, got, w)
			}
		}
		for _, w := range c.not {
			if slices.Contains(got, w) {
				t.Errorf("%q completes to %q, with %q", c.line, got, w)
			}
		}
	}
}

// TestConfigVerb: config shows the effective configuration; config set
// changes one key through the daemon's loader, keeping the file's
// comments, and refuses what the loader refuses without writing.
func TestConfigVerb(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "config.toml")
	src := "# my daemon\nversion = 1\n\n[log]\n# how much to say\nlevel = \"info\" # for now\n\n[[capabilities]]\nname = \"ping\"\ndescription = \"Respond to connectivity tests\"\n"
	os.WriteFile(path, []byte(src), 0o600)

	out := mustRun(t, home, "config")
	wantLines(t, "config", out, "[log]", "level = 'info'", "[rates]", "the effective configuration: "+path)

	wantLines(t, "config set", mustRun(t, home, "config", "set", "log.level", "debug"), `set log.level = "debug" (was "info")`)
	got, _ := os.ReadFile(path)
	want := strings.Replace(src, `level = "info" # for now`, `level = "debug" # for now`, 1)
	if string(got) != want {
		t.Errorf("config set rewrote more than the value:\n%s\nwant\n%s", got, want)
	}
	// A key not in the file: added to its table, or in a new table.
	mustRun(t, home, "config", "set", "log.format", "json")
	mustRun(t, home, "config", "set", "rates.warm", "120")
	mustRun(t, home, "config", "set", "discovery.bootstrap", "/ip4/127.0.0.1/tcp/4817/p2p/12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp")
	cfg, err := config.LoadConfig(path)
	if err != nil {
		t.Fatalf("the edited config does not load: %v", err)
	}
	if cfg.Log.Level != "debug" || cfg.Log.Format != "json" || cfg.Rates.Warm != 120 || len(cfg.Discovery.Bootstrap) != 1 {
		t.Errorf("after config set: log %+v, rates %+v, bootstrap %v", cfg.Log, cfg.Rates, cfg.Discovery.Bootstrap)
	}
	got, _ = os.ReadFile(path)
	for _, c := range []string{"# my daemon", "# how much to say", "# for now"} {
		if !strings.Contains(string(got), c) {
			t.Errorf("comment %q lost:\n%s", c, got)
		}
	}
	if !regexp.MustCompile(`(?s)\[log\]\n.*format = "json"\n.*\[\[capabilities\]\]`).Match(got) {
		t.Errorf("log.format is not in [log]:\n%s", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after config set", st.Mode().Perm())
	}

	// Refusals: nothing is written.
	before, _ := os.ReadFile(path)
	for _, c := range []struct {
		args []string
		exit int
		want string
	}{
		{[]string{"config", "set", "log.level", "loud"}, 2, "log.level"}, // a mistake in the command line (issue 29: exit 2)
		{[]string{"config", "set", "rates.cool", "many"}, 2, `rates.cool: "many" is not an integer`},
		{[]string{"config", "set", "capabilities", "x"}, 2, "not a key config set takes"},
	} {
		r := ifaced(t, home, c.args...)
		if r.code != c.exit || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: %d %q, want exit %d and %q", c.args, r.code, r.stderr, c.exit, c.want)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused config set changed the file:\n%s", after)
	}
	wantLines(t, "config keys", mustRun(t, home, "config", "keys"), "log.level", "temperature.peers.<NAME>", "duration")
}

// TestAliasesAndDisplayNames: every verb that takes a PEER takes an alias
// or a display name one known peer uses; output names peers by alias;
// conversations are listed, shown and closed; policy prints words.
func TestAliasesAndDisplayNames(t *testing.T) {
	aliceHome, alice := startDaemon(t, nodetest.AliceConfig())
	bobHome, bob := startDaemon(t, nil)
	a, b := aliceHome.Dir, bobHome.Dir
	aliceID, bobID := alice.ID().PeerID().String(), bob.ID().PeerID().String()
	mustRun(t, b, "connect", alice.Addrs()[0].String())

	// Before bob has greeted alice, her display name is unknown to him.
	if r := ifaced(t, b, "greet", "Alice's agent"); r.code != 1 || !strings.Contains(r.stderr, `unknown peer "Alice's agent"`) {
		t.Errorf("greet by an unknown display name: %d %q", r.code, r.stderr)
	}
	out := mustRun(t, b, "greet", aliceID)
	conv := conversationLine.FindStringSubmatch(out)[1]
	// Now it is known: caps by display name.
	wantLines(t, "caps DISPLAY", mustRun(t, b, "caps", "Alice's agent"), "Alice's agent ("+aliceID+"): seq 1")

	// An alias, set by display name, pins the peer ID.
	wantLines(t, "alias", mustRun(t, b, "alias", "alice", "Alice's agent"), "alice is now "+aliceID)
	st, err := os.Stat(filepath.Join(b, "aliases.toml"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("aliases.toml: %v %v", st, err)
	}
	wantLines(t, "alias list", mustRun(t, b, "alias"), "ALIAS", "alice  "+aliceID)
	wantLines(t, "caps ALIAS", mustRun(t, b, "caps", "alice"), aliceID+"): seq 1")
	wantLines(t, "trust ALIAS", mustRun(t, b, "trust", "alice"), "peer         "+aliceID)
	wantLines(t, "audit --peer ALIAS", mustRun(t, b, "audit", "--peer", "alice"), conv)
	wantLines(t, "greet ALIAS", mustRun(t, b, "greet", "alice"), "peer          "+aliceID)

	// A grant takes an alias or an ID, not a display name.
	mustRun(t, a, "alias", "bob", bobID)
	// peers names bob by the owner's alias (beside his display, or instead
	// of none: many daemons leave it unset).
	if out := mustRun(t, a, "peers"); !strings.Contains(out, "alias bob") {
		t.Errorf("peers does not name bob by his alias:\n%s", out)
	}
	wantLines(t, "policy disclosure ALIAS", mustRun(t, a, "policy", "disclosure", "bob", "professional"),
		"tiers                    public < professional < ", "default  bob ("+bobID+")  professional")
	if strings.Contains(mustRun(t, a, "policy"), "[") {
		t.Error("policy prints Go slice syntax")
	}
	if r := ifaced(t, b, "policy", "temperature", "Alice's agent", "warm"); r.code != 2 || !strings.Contains(r.stderr, "a display name is the peer's own claim") {
		t.Errorf("a grant by display name: %d %q", r.code, r.stderr)
	}
	if r := ifaced(t, b, "caps", "alicee"); r.code != 1 || !strings.Contains(r.stderr, `did you mean "alice"?`) {
		t.Errorf("a mistyped alias: %d %q", r.code, r.stderr)
	}

	// Conversations: listed with the alias, shown, closed.
	out = mustRun(t, b, "conversations")
	wantLines(t, "conversations", out, "CONVERSATION", conv, "alice ("+aliceID+")")
	var list api.ConversationList
	if err := json.Unmarshal([]byte(mustRun(t, b, "conversations", "list", "--json", "--peer", "alice")), &list); err != nil || len(list.Conversations) != 2 {
		t.Fatalf("conversations --json --peer alice: %+v %v", list, err)
	}
	wantLines(t, "conversations show", mustRun(t, b, "conversations", "show", conv), "state         open", "peer          alice ("+aliceID+")",
		" sent "+aliceID+" greeting 1: ")
	wantLines(t, "conversations close", mustRun(t, b, "conversations", "close", conv), "closed "+conv+" (sent close #")
	if r := ifaced(t, b, "conversations", "close", "conv:nope"); r.code != 1 || !strings.Contains(r.stderr, `no open conversation "conv:nope"`) {
		t.Errorf("closing an unknown conversation: %d %q", r.code, r.stderr)
	}
	out = mustRun(t, b, "conversations", "close", "--peer", "alice")
	if n := strings.Count(out, "closed "); n != 1 {
		t.Errorf("close --peer alice closed %d conversations, want the 1 left:\n%s", n, out)
	}
	if r := ifaced(t, b, "alias", "--remove", "alice"); r.code != 0 {
		t.Errorf("alias --remove: %d %q", r.code, r.stderr)
	}
	if r := ifaced(t, b, "alias", "--remove", "alice"); r.code != 1 || !strings.Contains(r.stderr, `no alias "alice"`) {
		t.Errorf("alias --remove twice: %d %q", r.code, r.stderr)
	}
}

// TestImportListAligned: the capabilities of every import listed share
// one column for their descriptions.
func TestImportListAligned(t *testing.T) {
	home, _ := startDaemon(t, nil)
	// Orchestrator /capabilities answers, as TestImportCommand serves.
	serve := func(names ...string) *httptest.Server {
		var actions []string
		for _, n := range names {
			actions = append(actions, `{"name": "`+n+`", "description": "Does `+n+`", "input_schema": {"type": "object"}, "output_schema": {"type": "object"}}`)
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"message": "hi", "actions": [` + strings.Join(actions, ",") + `]}`))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	one := serve("summarize", "x")
	two := serve("translate.text.long")
	mustRun(t, home.Dir, "import", one.URL+"/capabilities")
	mustRun(t, home.Dir, "import", two.URL+"/capabilities")
	out := mustRun(t, home.Dir, "import", "--list")
	col := -1
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "    note:") {
			continue
		}
		fields := strings.Fields(line)
		at := strings.Index(line, " "+fields[1]) + 1
		if col < 0 {
			col = at
		} else if at != col {
			t.Errorf("descriptions start at column %d and %d:\n%s", col, at, out)
			break
		}
	}
	if col < 0 {
		t.Fatalf("no capabilities listed:\n%s", out)
	}
}

// TestREADMECommandsListEveryVerb: the command-line reference
// (docs/reference/cli.md, where the README's Commands section went) has a
// section for every verb of the table, so a new verb cannot go
// undocumented.
func TestREADMECommandsListEveryVerb(t *testing.T) {
	ref, err := os.ReadFile("../../docs/reference/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands() {
		if !strings.Contains(string(ref), "\n## ifaced "+c.name+"\n") {
			t.Errorf("docs/reference/cli.md has no section for `ifaced %s`", c.name)
		}
	}
}
