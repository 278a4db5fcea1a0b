package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/examples/agent"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/ifaced/ifaced/node/httpapi"
	"github.com/ifaced/ifaced/node/nodetest"
	golog "github.com/ipfs/go-log/v2"
	"golang.org/x/mod/semver"
)

// The tests of issue 29: what a newcomer met in the first hour.

// agentConfig is a loopback daemon fronting the example agent's webhook.
func agentConfig(t *testing.T) *config.Config {
	t.Helper()
	hook := httptest.NewServer(agent.Handler(nil))
	t.Cleanup(hook.Close)
	cfg, err := config.ParseConfig([]byte("version = 1\n" + agent.Capabilities))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Identity.Display = "Alice's agent"
	cfg.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Discovery.MDNS, cfg.Discovery.DHT, cfg.Discovery.Gossip = false, config.DHTOff, false
	cfg.Agent.Webhook = hook.URL
	return cfg
}

// TestSayTakesAliasesAndDisplayNames: `ifaced say` names a peer as every
// other verb does (before, an alias or a display name was passed to the
// daemon as written and refused as an unknown peer).
func TestSayTakesAliasesAndDisplayNames(t *testing.T) {
	_, alice := startDaemon(t, nodetest.AliceConfig())
	bobHome, _ := startDaemon(t, nil)
	b := bobHome.Dir
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	mustRun(t, b, "greet", alice.ID().PeerID().String())
	mustRun(t, b, "alias", "alice", alice.ID().PeerID().String())
	for _, ref := range []string{"alice", "Alice's agent"} {
		out := mustRun(t, b, "say", ref, "--phase", "context", "--text", "Hello from "+ref)
		wantLines(t, "say "+ref, out, "sent context #")
	}
}

// TestInvokeJSONRefusal: a refusal with --json is one error object on
// standard error (code peer_error, the peer's answer in peer_error, the
// exit code), and nothing on standard output (before: the peer's body on
// standard output, and code "failed" on standard error).
func TestInvokeJSONRefusal(t *testing.T) {
	_, alice := startDaemon(t, agentConfig(t))
	bobHome, _ := startDaemon(t, nil)
	b := bobHome.Dir
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	r := ifaced(t, b, "invoke", alice.ID().PeerID().String(), "calendar.availability", "--params", `{"days": 3}`, "--json")
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("refused invoke --json: exit %d, stdout %q; want exit 1 and nothing on standard output", r.code, r.stdout)
	}
	var e struct {
		cliError
		PeerError struct {
			Code  string `json:"code"`
			Unmet []struct {
				Condition string `json:"condition"`
			} `json:"unmet"`
		} `json:"peer_error"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil {
		t.Fatalf("standard error is not one JSON object: %v\n%s", err, r.stderr)
	}
	if e.Code != "peer_error" || e.ExitCode != 1 || e.Command != "invoke" || e.PeerError.Code != "conditions_not_met" ||
		len(e.PeerError.Unmet) == 0 || !strings.Contains(e.Message, "refused calendar.availability") {
		t.Errorf("the error object: %s", r.stderr)
	}
}

// TestCommandLineMistakesExit2: every mistake in the command line exits
// 2, whether the command or the daemon finds it (before, those the daemon
// found exited 1); what the daemon or a peer refuses for other reasons
// stays 1.
func TestCommandLineMistakesExit2(t *testing.T) {
	_, alice := startDaemon(t, agentConfig(t))
	bobHome, _ := startDaemon(t, nil)
	b := bobHome.Dir
	aliceID := alice.ID().PeerID().String()
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	conv := conversationLine.FindStringSubmatch(mustRun(t, b, "greet", aliceID))[1]
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"greet", aliceID, "--temperature", "tepid"}, "tepid"},
		{[]string{"connect", "notamultiaddr"}, "not a multiaddr"},
		{[]string{"policy", "disclosure", aliceID, "superclose"}, "superclose"},
		{[]string{"policy", "temperature", aliceID, "boiling"}, "boiling"},
		{[]string{"say", conv, "--phase", "bogus", "--text", "hi"}, "bogus"},
		{[]string{"introduce", "--label", "x", "--disclosure", "nope"}, "nope"},
		{[]string{"config", "set", "log.level", "loud"}, "loud"},
		{[]string{"audit", "--why", "a b"}, "white space"},
		{[]string{"import", "notaurl"}, "not an http(s) URL"},
		{[]string{"invoke", aliceID, "Bad Name!"}, "dot notation"},
		{[]string{"trust", aliceID, "--verify", "SHA256:nope"}, "SHA256:nope"},
	} {
		r := ifaced(t, b, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.says) {
			t.Errorf("%q: exit %d, want 2 saying %q\n%s", c.args, r.code, c.says, r.stderr)
		}
		if r := ifaced(t, b, append(c.args, "--json")...); !strings.Contains(r.stderr, `"exit_code": 2`) {
			t.Errorf("%q --json: %s", c.args, r.stderr)
		}
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"invoke", aliceID, "no.such"}, "unknown_capability"},                              // the peer refused
		{[]string{"invoke", aliceID, "doc.summarize", "--params", `{"text": 5}`}, "invalid_params"}, // the peer's schema
		{[]string{"caps", "remove", "no.such"}, "no capability of that name"},
		// A well-formed fingerprint of another key is a refusal, not a
		// mistake in the words (TestTrustVerbs holds its message).
		{[]string{"trust", aliceID, "--verify", bobHomeFingerprint(t, b)}, "compare again"},
	} {
		if r := ifaced(t, b, c.args...); r.code != 1 || !strings.Contains(r.stderr, c.says) {
			t.Errorf("%q: exit %d, want 1 saying %q\n%s", c.args, r.code, c.says, r.stderr)
		}
	}
}

// TestHintsKeepHome: a hint that names a command names the --home the
// command line gave (before, `ifaced status --home ~/bob` with no daemon
// said to start one with "ifaced run": the default home's).
func TestHintsKeepHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "my home")
	ifaced(t, home, "init")
	r := ifaced(t, "", "status", "--home", home)
	if want := `"ifaced run --home '` + home + `'"`; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("status with no daemon: %d %q, want %s", r.code, r.stderr, want)
	}
	r = ifaced(t, "", "status", "--home", home, "--json")
	if want := `ifaced run --home '` + home + `'`; !strings.Contains(r.stderr, want) {
		t.Errorf("status --json with no daemon: %q, want %s", r.stderr, want)
	}
	h, _ := startDaemon(t, nil)
	out := mustRun(t, "", "peers", "--home", h.Dir)
	if want := "`ifaced connect --home " + h.Dir + " MULTIADDR`"; !strings.Contains(out, want) {
		t.Errorf("peers with none: %q, want %s", out, want)
	}
	// Without --home (the default or $IFACED_HOME) hints stay as they were.
	if r := ifaced(t, home, "status"); !strings.Contains(r.stderr, `(start one with "ifaced run")`) {
		t.Errorf("status by $IFACED_HOME: %q", r.stderr)
	}
	for _, c := range []struct{ in, want string }{
		{"run `ifaced caps PEER` to see", "run `ifaced caps --home /h PEER` to see"},
		{"`ifaced key rotate --next-key F`", "`ifaced key rotate --home /h --next-key F`"},
		{"`ifaced config keys` lists them", "`ifaced config keys --home /h` lists them"},
		{"`ifaced help` or `ifaced demo`", "`ifaced help` or `ifaced demo`"},
		{"`ifaced run --home /other`", "`ifaced run --home /other`"},
		{"`ifaced greet -h` lists its flags", "`ifaced greet -h` lists its flags"},
		{"`ifaced frobnicate`", "`ifaced frobnicate`"},
	} {
		if got := withHome(c.in, "/h"); got != c.want {
			t.Errorf("withHome(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestRunAPIPortInUse: an api.listen port another process holds stops
// `ifaced run` before it starts the host, saying what to do (before: a
// raw bind error after "ifaced started").
func TestRunAPIPortInUse(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	home := filepath.Join(t.TempDir(), "home")
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code := run(context.Background(), e, []string{"run", "--home", home, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", held.Addr().String(), "--no-mdns"})
	if code != 1 || !strings.Contains(errb.String(), "the control API address "+held.Addr().String()+" (--api) is in use") ||
		!strings.Contains(errb.String(), "127.0.0.1:0 for any free one") || strings.Contains(errb.String(), "ifaced started") {
		t.Fatalf("run on a port in use: exit %d\n%s", code, errb.String())
	}
}

// TestInvokeImported: an imported orchestrator agent, which `ifaced
// find` lists by its URL, is invoked by that URL through its POST /invoke
// (before: "unknown peer"); an A2A import is refused with what to use.
func TestInvokeImported(t *testing.T) {
	// The outside agent: another daemon's HTTP binding, whose
	// /capabilities is an orchestrator document.
	cfg := agentConfig(t)
	cfg.HTTP.Listen = "127.0.0.1:0"
	_, other := startDaemon(t, cfg)
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	binding, err := httpapi.Listen(other, cfg.HTTP, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer binding.Close()
	base := "http://" + binding.Addr()
	h, _ := startDaemon(t, nil)
	b := h.Dir
	mustRun(t, b, "import", base+"/capabilities")
	wantLines(t, "find", mustRun(t, b, "find", "doc.summarize"), base+"/capabilities", "imported ag-ui")
	out := mustRun(t, b, "invoke", base+"/capabilities", "doc.summarize", "--params", `{"text": "one two three", "max_words": 2}`)
	wantLines(t, "invoke of an import", out, `"summary": "one two"`)
	var raw map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, b, "invoke", base+"/capabilities", "echo", "--params", `{"say": "hi"}`, "--json")), &raw); err != nil ||
		fmt.Sprint(raw["output"]) != "map[say:hi]" || raw["agent"] != base+"/capabilities" || raw["action"] != "echo" {
		t.Errorf("invoke --json of an import: %v %v", raw, err)
	}
	// What the agent refuses is its answer, with its status.
	r := ifaced(t, b, "invoke", base+"/capabilities", "calendar.availability", "--params", `{"days": 2}`)
	if r.code != 1 || !strings.Contains(r.stderr, "answered 403") {
		t.Errorf("an action the outside agent refuses: %d %q", r.code, r.stderr)
	}
	r = ifaced(t, b, "invoke", base+"/other", "ping")
	if r.code != 1 || !strings.Contains(r.stderr, "is not an imported agent") || !strings.Contains(r.stderr, "ifaced import") {
		t.Errorf("a URL not imported: %d %q", r.code, r.stderr)
	}
	mustRun(t, b, "import", base+"/.well-known/agent-card.json")
	r = ifaced(t, b, "invoke", base+"/.well-known/agent-card.json", "ping")
	if r.code != 1 || !strings.Contains(r.stderr, "is an A2A agent") || !strings.Contains(r.stderr, "A2A client") {
		t.Errorf("an A2A import: %d %q", r.code, r.stderr)
	}
}

// TestAuditShowsMessageIDs: `ifaced audit --conversation ID` prints each
// message's ID, which `audit --why` takes (before, only --json had them).
func TestAuditShowsMessageIDs(t *testing.T) {
	aliceHome, alice := startDaemon(t, agentConfig(t))
	bobHome, _ := startDaemon(t, nil)
	b := bobHome.Dir
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	ifaced(t, b, "invoke", alice.ID().PeerID().String(), "calendar.availability", "--params", `{"days": 3}`)
	list := mustRun(t, aliceHome.Dir, "audit")
	conv := strings.Fields(strings.Split(list, "\n")[1])[0]
	out := mustRun(t, aliceHome.Dir, "audit", "--conversation", conv)
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[1], "msg:") {
			ids = append(ids, f[1])
		}
	}
	if len(ids) < 2 {
		t.Fatalf("no message IDs in\n%s", out)
	}
	// The request's ID, as printed, is what --why takes.
	why := ""
	for _, id := range ids {
		if r := ifaced(t, aliceHome.Dir, "audit", "--why", id); r.code == 0 {
			why = r.stdout
		}
	}
	if !strings.Contains(why, "outcome       refused (conditions_not_met)") {
		t.Errorf("no ID printed opens the decision; printed:\n%s", out)
	}
}

// TestAuditOfAStoppedDaemon: `ifaced audit` reads a stopped daemon's log
// from its files, saying so, and writes nothing (before: "no ifaced is
// running").
func TestAuditOfAStoppedDaemon(t *testing.T) {
	aliceHome, alice, srv, _ := openDaemon(t, agentConfig(t))
	bobHome, _ := startDaemon(t, nil)
	b := bobHome.Dir
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	ifaced(t, b, "invoke", alice.ID().PeerID().String(), "calendar.availability", "--params", `{"days": 3}`)
	a := aliceHome.Dir
	running := map[string]string{}
	list := mustRun(t, a, "audit")
	conv := strings.Fields(strings.Split(list, "\n")[1])[0]
	running["list"] = list
	running["conversation"] = mustRun(t, a, "audit", "--conversation", conv)
	var request string
	for _, line := range strings.Split(running["conversation"], "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[2] == "received" && f[4] == "probe" {
			request = f[1]
		}
	}
	running["why"] = mustRun(t, a, "audit", "--why", request)
	srv.Close()
	alice.Close()

	before := snapshotDir(t, filepath.Join(a, "audit"))
	for name, args := range map[string][]string{
		"list":         {"audit"},
		"conversation": {"audit", "--conversation", conv},
		"why":          {"audit", "--why", request},
	} {
		r := ifaced(t, a, args...)
		if r.code != 0 || r.stdout != running[name] || !strings.Contains(r.stderr, "no ifaced is running for "+a+": reading its audit log from the files") {
			t.Errorf("%q with the daemon stopped: exit %d\n%s\nstderr %q\nwant as it ran:\n%s", args, r.code, r.stdout, r.stderr, running[name])
		}
	}
	if after := snapshotDir(t, filepath.Join(a, "audit")); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("reading a stopped daemon's log changed it:\n%v\n%v", before, after)
	}
	empty := filepath.Join(t.TempDir(), "none")
	if r := ifaced(t, empty, "audit"); r.code != 1 || !strings.Contains(r.stderr, "no ifaced is running") {
		t.Errorf("audit of a home with no log: %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Error("audit created the data directory")
	}
}

func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil {
			out[path] = fmt.Sprint(info.Size(), info.ModTime(), info.Mode())
		}
		return err
	})
	return out
}

// TestCapsPeerShowsWhatEachDoes: `ifaced caps PEER` shows each
// capability's description, parameters and price, the peer's words made
// printable and bounded (before: names and eligibility only).
func TestCapsPeerShowsWhatEachDoes(t *testing.T) {
	cfg := agentConfig(t)
	cfg.Capabilities = append(cfg.Capabilities, map[string]any{"name": "x.evil", "description": "line one\n\x1b[2Jline two" + strings.Repeat("x", 2000)})
	_, alice := startDaemon(t, cfg)
	bobHome, _ := startDaemon(t, nil)
	b := bobHome.Dir
	aliceID := alice.ID().PeerID().String()
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	mustRun(t, b, "greet", aliceID)
	out := mustRun(t, b, "caps", aliceID)
	wantLines(t, "caps PEER", out, "doc.summarize", "Summarize", "params: max_words (integer), text (string, required)",
		"price: 0.05 USDC", "calendar.availability", "params: days (integer, required)", "`ifaced invoke "+aliceID+" NAME --params JSON`")
	if strings.Contains(out, "\x1b") || strings.Contains(out, "\nline two") {
		t.Errorf("a peer's control characters or line break reached the terminal:\n%q", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if len(line) > maxTermDesc+16 {
			t.Errorf("a line of %d bytes: the description is not bounded", len(line))
		}
	}
}

// TestFindKnownPeersAndDHTFailure: `ifaced find` lists the peers already
// known whose view offers the capability (as MCP find_agents does), and
// when the DHT cannot be searched it says so instead of dropping it, with
// imports listed all the same (before: known peers ignored, and with an
// import matching, the DHT's failure silently dropped).
func TestFindKnownPeersAndDHTFailure(t *testing.T) {
	_, alice := startDaemon(t, agentConfig(t))
	bobHome, _ := startDaemon(t, nil) // the DHT off
	b := bobHome.Dir
	aliceID := alice.ID().PeerID().String()
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	mustRun(t, b, "greet", aliceID)
	out := mustRun(t, b, "find", "doc.summarize")
	wantLines(t, "find, a known peer", out, "doc.summarize: 1 provider, 1 you may use now", aliceID,
		"eligible (known peer: its view of", "the DHT was not searched: ", "the DHT is off")
	var js findOutput
	if err := json.Unmarshal([]byte(mustRun(t, b, "find", "calendar.availability", "--json")), &js); err != nil ||
		len(js.Known) != 1 || js.Known[0].PeerID != aliceID || js.Known[0].Status != discovery.FindIneligible || js.DHT == "" {
		t.Errorf("find --json: %+v %v", js, err)
	}

	// An import matching, the DHT off: listed, and the DHT's failure said.
	cfg := agentConfig(t)
	cfg.HTTP.Listen = "127.0.0.1:0"
	_, other := startDaemon(t, cfg)
	binding, err := httpapi.Listen(other, cfg.HTTP, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		t.Fatal(err)
	}
	defer binding.Close()
	h, _ := startDaemon(t, nil)
	mustRun(t, h.Dir, "import", "http://"+binding.Addr()+"/capabilities")
	out = mustRun(t, h.Dir, "find", "echo")
	wantLines(t, "find, an import with the DHT off", out, "imported ag-ui", "the DHT was not searched: ", "the DHT is off")
}

// TestLibraryLogsInOneFormat: what libraries log outside slog (go-log's
// zap loggers: kad-dht, pubsub, the relay; the standard library's log:
// zeroconf) comes out in the daemon's format, tagged with a component
// (before: zap's tab-separated lines and bare "[WARN] mdns: …" lines in
// the middle of the daemon's logfmt).
func TestLibraryLogsInOneFormat(t *testing.T) {
	var buf bytes.Buffer
	defer stdlog.SetOutput(os.Stderr)
	defer stdlog.SetFlags(stdlog.LstdFlags)
	routeLibraryLogs(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	golog.Logger("dht").Errorw("failed to bootstrap", "peer", "12D3KooWx")
	golog.Logger("relay").Debug("below the level")
	stdlog.Printf("[WARN] mdns: Failed to set multicast interface: %v", "no such device")
	stdlog.Print("plain line")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=ERROR msg="failed to bootstrap" component=dht peer=12D3KooWx`,
		`level=WARN msg="mdns: Failed to set multicast interface: no such device" component=log`,
		`level=INFO msg="plain line" component=log`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "time=") || !strings.HasSuffix(l, want[i]) {
			t.Errorf("line %d: %q, want time=… %s", i, l, want[i])
		}
	}
}

// TestDescribeBuild: the version, revision and dirty flag come from the
// build (before: always "dev").
func TestDescribeBuild(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-29T08:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name     string
		ldflags  string
		bi       *debug.BuildInfo
		want     buildVersion
		wantWord string
	}{
		{"go run, go test", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, buildVersion{Version: "dev"}, "dev"},
		{"go install …@v0.4.0", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, buildVersion{Version: "v0.4.0"}, "v0.4.0"},
		{"go build in a clone", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261129080000-0123456789ab+dirty"}, Settings: vcs},
			buildVersion{Version: "v0.0.0-20261129080000-0123456789ab+dirty", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-11-29T08:00:00Z", Modified: true},
			"v0.0.0-20261129080000-0123456789ab+dirty"},
		{"-ldflags -X main.version", "v1.0.0", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, buildVersion{Version: "v1.0.0"}, "v1.0.0"},
	} {
		got := describeBuild(c.ldflags, c.bi)
		got.Go = ""
		if got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestVersionFromAClone: a binary built in a git clone says the version
// the go command stamps from the repository (Go 1.24+): at a release tag,
// the tag; with changes in the tree, "+dirty" and the modified flag;
// between tags, the pseudo-version after the last tag, naming the commit
// (before the v0.1.0 tag, a v0.0.0- pseudo-version). The clone gets a tag
// of its own (v0.99.0, on an empty commit above HEAD: HEAD's code; a v2 or
// later would need a /v2 module path), so the test holds whatever the
// repository's tags are.
func TestVersionFromAClone(t *testing.T) {
	if testing.Short() {
		t.Skip("clones this repository and builds ifaced in it; not in -short")
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		c := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.invalid"}, args...)...)
		c.Dir = dir
		c.Env = append(os.Environ(), "TZ=UTC")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Skipf("git %q: %v (%s): this test needs the repository's history", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	head := git(".", "rev-parse", "HEAD")
	clone := filepath.Join(t.TempDir(), "clone")
	git(".", "clone", "--quiet", "--shared", "--no-checkout", "../..", clone)
	git(clone, "checkout", "--quiet", head)
	bin := filepath.Join(t.TempDir(), "ifaced")
	build := func() buildVersion {
		t.Helper()
		// -trimpath: without it the build cache keys each package by
		// its directory, and a fresh clone compiled every package of
		// the module again (minutes on a busy machine, three builds past
		// the package's 10 min test limit); with it a clone of a tree
		// built before links only.
		if out, err := cmdIn(clone, "go", "build", "-trimpath", "-buildvcs=true", "-o", bin, "./cmd/ifaced"); err != nil {
			t.Fatalf("go build in the clone: %v\n%s", err, out)
		}
		out, err := cmdIn(clone, bin, "version", "--json")
		var v buildVersion
		if err != nil || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("ifaced version --json: %v\n%s", err, out)
		}
		return v
	}

	// At a release tag, clean: the tag.
	git(clone, "commit", "--quiet", "--allow-empty", "-m", "release")
	git(clone, "tag", "-a", "v0.99.0", "-m", "v0.99.0")
	tagged := git(clone, "rev-parse", "HEAD")
	if v := build(); v.Version != "v0.99.0" || v.Revision != tagged || v.Modified {
		t.Errorf("built at tag v0.99.0: %+v, want version v0.99.0, revision %s, not modified", v, tagged)
	}
	if out, err := cmdIn(clone, bin, "version"); err != nil || !strings.HasPrefix(out, "ifaced v0.99.0\nrevision "+tagged+", committed ") {
		t.Errorf("ifaced version at the tag: %v\n%s", err, out)
	}

	// The same with a change in the tree (an untracked file).
	if err := os.WriteFile(filepath.Join(clone, "untracked.txt"), []byte("a change"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v := build(); v.Version != "v0.99.0+dirty" || v.Revision != tagged || !v.Modified {
		t.Errorf("built at tag v0.99.0 with a change: %+v, want v0.99.0+dirty, modified", v)
	}
	out, err := cmdIn(clone, bin, "version")
	if err != nil || !strings.Contains(out, "revision "+tagged+" (modified: built with uncommitted changes)") {
		t.Errorf("ifaced version: %v\n%s", err, out)
	}

	// A commit after the tag: the pseudo-version after the highest release
	// tag it follows (Go's rule: patch + 1, "-0.", the commit's UTC time,
	// 12 digits of its hash): v0.99.0, or a later release of this module.
	git(clone, "commit", "--quiet", "--allow-empty", "-m", "after the release")
	after := git(clone, "rev-parse", "HEAD")
	when := git(clone, "log", "-1", "--format=%cd", "--date=format-local:%Y%m%d%H%M%S")
	base := "v0.99.0"
	for _, tag := range strings.Fields(git(clone, "tag", "--merged", "HEAD", "--list", "v*")) {
		if semver.IsValid(tag) && semver.Prerelease(tag) == "" && semver.Compare(tag, base) > 0 && (semver.Major(tag) == "v0" || semver.Major(tag) == "v1") {
			base = tag
		}
	}
	var major, minor, patch int
	fmt.Sscanf(semver.Canonical(base), "v%d.%d.%d", &major, &minor, &patch)
	want := fmt.Sprintf("v%d.%d.%d-0.%s-%s+dirty", major, minor, patch+1, when, after[:12])
	if v := build(); v.Version != want || v.Revision != after || !v.Modified {
		t.Errorf("built after the tag: %+v, want version %s, revision %s", v, want, after)
	}
}

// TestRunSaysWhatItDoes: the first `ifaced run` says it created a key and
// config, and the start says what it is starting; a slow step repeats
// that it is still at it.
func TestRunSaysWhatItDoes(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the daemon stops as soon as it started
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := run(ctx, e, []string{"run", "--home", home, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--no-mdns"}); code != 0 {
		t.Fatalf("run: %d\n%s", code, errb.String())
	}
	wantLines(t, "the first run's log", errb.String(), "first run: created a new key and config.toml", "starting: opening the store and audit log, then the libp2p host", "ifaced started")

	said := make(chan struct{}, 16)
	stop := progress(slog.New(slog.NewTextHandler(signalWriter(said), nil)), 10*time.Millisecond, "still starting")
	<-said
	<-said
	stop()
}

// signalWriter is a log sink that signals each write.
type signalWriter chan struct{}

func (w signalWriter) Write(p []byte) (int, error) {
	select {
	case w <- struct{}{}:
	default:
	}
	return len(p), nil
}

// cmdIn runs a command in dir.
func cmdIn(dir, name string, args ...string) (string, error) {
	c := exec.Command(name, args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	return string(out), err
}

// TestIDField: `ifaced id --field F` prints that field alone, for
// scripts (ALICE=$(ifaced id --field peer_id)); a field it has not is a
// usage error with the one meant.
func TestIDField(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	var info idInfo
	if err := json.Unmarshal([]byte(mustRun(t, home, "init", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{"peer_id": info.PeerID, "did": info.DID, "key_id": info.KeyID, "fingerprint": info.Fingerprint, "home": info.Home} {
		if got := mustRun(t, home, "id", "--field", field); got != want+"\n" {
			t.Errorf("id --field %s = %q, want %q", field, got, want+"\n")
		}
	}
	if r := ifaced(t, home, "id", "--field", "peerid"); r.code != 2 || !strings.Contains(r.stderr, `did you mean "peer_id"?`) {
		t.Errorf("id --field peerid: %d %q", r.code, r.stderr)
	}
}

// TestConversationsShowPeer: `conversations show --peer P` shows the
// newest conversation with P, open or recorded, with each message's ID.
func TestConversationsShowPeer(t *testing.T) {
	aliceHome, alice := startDaemon(t, nodetest.AliceConfig())
	bobHome, _ := startDaemon(t, nil)
	b := bobHome.Dir
	aliceID := alice.ID().PeerID().String()
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	mustRun(t, b, "alias", "alice", aliceID)
	mustRun(t, b, "greet", "alice")
	newest := conversationLine.FindStringSubmatch(mustRun(t, b, "greet", "alice"))[1]
	mustRun(t, b, "say", "alice", "--phase", "context", "--text", "the newest")
	out := mustRun(t, b, "conversations", "show", "--peer", "alice")
	wantLines(t, "show --peer, open", out, "conversation  "+newest, "state         open", " msg:", "context 3: the newest")
	mustRun(t, b, "conversations", "close", "--peer", "alice")
	wantLines(t, "show --peer, closed", mustRun(t, b, "conversations", "show", "--peer", "alice"), "state         closed", "context 3: the newest")
	if r := ifaced(t, aliceHome.Dir, "conversations", "show", "--peer", "12D3KooWEm9qfbCB9Kmnd32XZEhqs4ewL7ty14SYVKHFwqJHpVXf"); r.code != 1 || !strings.Contains(r.stderr, "no conversation with") {
		t.Errorf("show --peer of a peer never met: %d %q", r.code, r.stderr)
	}
	if r := ifaced(t, b, "conversations", "show", newest, "--peer", "alice"); r.code != 2 {
		t.Errorf("show ID --peer P: %d %q", r.code, r.stderr)
	}
}

// TestPeerHintsKeepTheirWords: what a peer answered is the peer's text,
// and its hints are for the peer's owner: the command line's --home does
// not go into them.
func TestPeerHintsKeepTheirWords(t *testing.T) {
	_, alice := startDaemon(t, agentConfig(t))
	bobHome, _ := startDaemon(t, nil)
	b := bobHome.Dir
	mustRun(t, "", "connect", "--home", b, alice.Addrs()[0].String())
	r := ifaced(t, "", "invoke", "--home", b, alice.ID().PeerID().String(), "calendar.availability", "--params", `{"days": 1}`)
	if r.code != 1 || !strings.Contains(r.stderr, "`ifaced trust ") || strings.Contains(r.stderr, "--home") {
		t.Errorf("a peer's refusal with --home %s: %d\n%s", b, r.code, r.stderr)
	}
}

// TestKeyOutDirectoryMissing: --out in a directory that does not exist
// yet makes it, mode 0700, for the revocation statement as for the next
// key (before: commit-next made it, revocation-statement failed "no such
// file or directory", and the README's command with it).
func TestKeyOutDirectoryMissing(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	mustRun(t, home, "init")
	for _, c := range []struct{ sub, file string }{{"revocation-statement", "revoke.json"}, {"commit-next", "next.pem"}} {
		dir := filepath.Join(t.TempDir(), "offline", "keys")
		out := filepath.Join(dir, c.file)
		mustRun(t, home, "key", c.sub, "--out", out)
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("key %s --out %s: the directory %v %v", c.sub, out, fi, err)
		}
		if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("key %s --out %s: %v %v", c.sub, out, fi, err)
		}
	}
}

// bobHomeFingerprint is the key fingerprint of the daemon in home.
func bobHomeFingerprint(t *testing.T, home string) string {
	t.Helper()
	return strings.TrimSpace(mustRun(t, home, "id", "--field", "fingerprint"))
}
