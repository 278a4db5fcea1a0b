package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/nodetest"
)

// openDaemon runs a daemon and its control API in this process, in a
// fresh home, on loopback (cfg nil: loopbackConfig). The caller stops
// them, the API first, as runDaemon does.
func openDaemon(t *testing.T, cfg *config.Config) (config.Home, *node.Node, *api.Server, *slog.Logger) {
	t.Helper()
	if cfg == nil {
		cfg = nodetest.LoopbackConfig()
	}
	h, id := nodetest.Home(t)
	log := nodetest.Logger()
	n, err := node.New(cfg, id, h, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.Listen(n, h, cfg.API.Listen, log)
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	return h, n, srv, log
}

// startServer is openDaemon stopped when the test ends.
func startServer(t *testing.T, cfg *config.Config) (config.Home, *node.Node, *api.Server, *slog.Logger) {
	t.Helper()
	h, n, srv, log := openDaemon(t, cfg)
	t.Cleanup(func() { n.Close() })
	t.Cleanup(func() { srv.Close() }) // cleanups run last first: the API stops first
	return h, n, srv, log
}

// startDaemon runs a daemon and its control API in this process, in a
// fresh home, on loopback, until the test ends.
func startDaemon(t *testing.T, cfg *config.Config) (config.Home, *node.Node) {
	t.Helper()
	h, n, _, _ := startServer(t, cfg)
	return h, n
}

func mustRun(t *testing.T, home string, args ...string) string {
	t.Helper()
	r := ifaced(t, home, args...)
	if r.code != 0 {
		t.Fatalf("ifaced %q: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: no %q in\n%s", what, w, out)
		}
	}
}

var conversationLine = regexp.MustCompile(`(?m)^conversation\s+(\S+)$`)

// TestControlVerbs runs every verb that talks to a daemon against two
// daemons in this process.
func TestControlVerbs(t *testing.T) {
	aliceHome, alice := startDaemon(t, nodetest.AliceConfig())
	bobHome, bob := startDaemon(t, nil)
	a, b := aliceHome.Dir, bobHome.Dir
	aliceID, bobID := alice.ID().PeerID().String(), bob.ID().PeerID().String()

	wantLines(t, "status", mustRun(t, a, "status"), "peer ID        "+aliceID, "document       seq 1, 3 capabilities", "conversations  0 open")
	var st api.Status
	if err := json.Unmarshal([]byte(mustRun(t, a, "status", "--json")), &st); err != nil || st.PeerID != aliceID {
		t.Fatalf("status --json: %+v %v", st, err)
	}
	wantLines(t, "peers before connecting", mustRun(t, b, "peers"), "no peers known")
	wantLines(t, "connect", mustRun(t, b, "connect", alice.Addrs()[0].String()), "connected to "+aliceID)
	wantLines(t, "peers after connecting", mustRun(t, b, "peers"), aliceID, "not greeted")

	out := mustRun(t, b, "greet", aliceID, "--disclosure", "public", "--temperature", "warm")
	wantLines(t, "greet", out, "peer          "+aliceID, "granted you   disclosure public (accepted), auth 1 (signed), temperature cool",
		"note: temperature \"warm\" lowered to \"cool\"", "their view    seq 1, 2 capabilities, 1 eligible for you", "  + ping",
		"  - calendar.availability (min_disclosure: required professional, have public)")
	m := conversationLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("greet printed no conversation:\n%s", out)
	}
	conv := m[1]

	out = mustRun(t, b, "caps", aliceID)
	wantLines(t, "caps PEER", out, "Alice's agent ("+aliceID+"): seq 1, cached", "granted to you: disclosure public",
		"ping                   yes", "calendar.availability  no", "    min_disclosure: required professional, have public; ")
	if strings.Contains(out, "diary.read") {
		t.Errorf("caps PEER shows the hidden capability:\n%s", out)
	}
	wantLines(t, "caps PEER --refresh", mustRun(t, b, "caps", aliceID, "--refresh"), "seq 1, just asked")
	var pc api.PeerCaps
	if err := json.Unmarshal([]byte(mustRun(t, b, "caps", "--json", aliceID)), &pc); err != nil || pc.View == nil || len(pc.View.Capabilities) != 2 {
		t.Fatalf("caps PEER --json: %+v %v", pc, err)
	}
	wantLines(t, "caps", mustRun(t, a, "caps"), "seq 1, 3 capabilities",
		"calendar.availability  min_disclosure=professional min_auth_level=1 (signed)",
		"diary.read             min_disclosure=close (hidden from anyone not eligible)", "ping                   -")

	// Bob learns of alice's change in conversation: wait for it on his
	// event stream.
	bc, err := api.Dial(bobHome)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := bc.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	dir := t.TempDir()
	weather := filepath.Join(dir, "weather.toml")
	os.WriteFile(weather, []byte("name = \"weather.forecast\"\ndescription = \"Forecast the weather\"\n[conditions]\ntemperature = \"warm\"\n"), 0o644)
	wantLines(t, "caps add", mustRun(t, a, "caps", "add", weather), "added weather.forecast: the document is now seq 2 with 4 capabilities")
	for {
		ev, err := evs.Next()
		if err != nil {
			t.Fatalf("waiting for alice's new view: %v", err)
		}
		if ev.Type == events.EventPeerView && ev.Peer == aliceID && strings.HasPrefix(ev.Detail, "seq 2,") {
			break
		}
	}
	wantLines(t, "caps PEER after the change", mustRun(t, b, "caps", aliceID), "seq 2", "weather.forecast       no",
		"    temperature: required warm, have cool; ")

	r := ifaced(t, a, "caps", "add", weather)
	if r.code != 1 || !strings.Contains(r.stderr, `adding capability "weather.forecast": a capability of that name is already in the document`) {
		t.Errorf("adding it again: %d %q", r.code, r.stderr)
	}
	typo := filepath.Join(dir, "typo.json")
	os.WriteFile(typo, []byte("{\n  \"name\": \"x\",\n  \"descripton\": \"typo\"\n}\n"), 0o644)
	if r := ifaced(t, a, "caps", "add", typo); r.code != 1 || !strings.Contains(r.stderr, typo+":3: descripton") {
		t.Errorf("caps add with a typo: %d %q", r.code, r.stderr)
	}
	tier := filepath.Join(dir, "tier.toml")
	os.WriteFile(tier, []byte("name = \"y\"\ndescription = \"d\"\n\n[conditions]\nmin_disclosure = \"profesional\"\n"), 0o644)
	if r := ifaced(t, a, "caps", "add", tier); r.code != 1 || !strings.Contains(r.stderr, tier+":5: invalid capability: conditions.min_disclosure") {
		t.Errorf("caps add with an unknown tier: %d %q", r.code, r.stderr)
	}
	// Flags may come before the subcommand.
	wantLines(t, "caps remove", mustRun(t, "", "caps", "--home", a, "remove", "weather.forecast"), "removed weather.forecast: the document is now seq 3 with 3 capabilities")
	if r := ifaced(t, a, "caps", "remove", "weather.forecast"); r.code != 1 || !strings.Contains(r.stderr, "no capability of that name") {
		t.Errorf("removing it again: %d %q", r.code, r.stderr)
	}

	wantLines(t, "say", mustRun(t, b, "say", conv, "--phase", "context", "--text", "Hello Alice.\nMore below."), "sent context #", "in "+conv)
	if r := ifaced(t, b, "say", "conv:nope", "--phase", "context", "--text", "hi"); r.code != 1 || !strings.Contains(r.stderr, "no open conversation") {
		t.Errorf("say in an unknown conversation: %d %q", r.code, r.stderr)
	}

	wantLines(t, "audit", mustRun(t, b, "audit"), "CONVERSATION", conv)
	wantLines(t, "audit --peer", mustRun(t, b, "audit", "--peer", aliceID), conv)
	if out := mustRun(t, b, "audit", "--peer", bobID); strings.Contains(out, conv) {
		t.Errorf("audit --peer with a peer bob never met lists %s:\n%s", conv, out)
	}
	out = mustRun(t, b, "audit", "--conversation", conv)
	wantLines(t, "audit --conversation", out, " sent "+aliceID+" greeting 1: Greetings from ", " received "+aliceID+" greeting 2: ",
		" sent "+aliceID+" context 3: Hello Alice.\n", "as a person reads it (with the rest of that day's messages with the peer): "+filepath.Join(b, "audit"))
	if r := ifaced(t, b, "audit", "--conversation", "conv:nope"); r.code != 1 || !strings.Contains(r.stderr, "no conversation") {
		t.Errorf("audit of an unknown conversation: %d %q", r.code, r.stderr)
	}
}

func TestVerbsWithoutDaemon(t *testing.T) {
	home := t.TempDir()
	pid := "12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp"
	for _, args := range [][]string{
		{"status"}, {"peers"}, {"connect", "/ip4/127.0.0.1/tcp/1/p2p/" + pid}, {"caps"}, {"caps", pid},
		{"caps", "remove", "x"}, {"greet", pid}, {"say", "conv:x", "--phase", "context", "--text", "t"}, {"audit"},
	} {
		r := ifaced(t, home, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "no ifaced is running for "+home+` (start one with "ifaced run")`) {
			t.Errorf("%q without a daemon: %d %q", args, r.code, r.stderr)
		}
	}
}

func TestControlUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"caps", "explode"}, {"caps", "--refresh"}, {"caps", "add"}, {"caps", "remove"}, {"connect"}, {"greet"},
		{"greet", "notapeer"}, {"say", "conv:x"}, {"say", "conv:x", "--phase", "context"}, {"status", "extra"},
		{"audit", "extra"}, {"peers", "--bogus"},
		{"run", "--listen", "not-a-multiaddr"}, {"run", "--listen", ","}, {"run", "--api", "0.0.0.0:4818"}, {"run", "--api", "nonsense"},
	} {
		home := filepath.Join(t.TempDir(), "home")
		r := ifaced(t, home, args...)
		if r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
		if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q created the data directory", args)
		}
	}
	r := ifaced(t, t.TempDir(), "run", "--listen", "/ip4/127.0.0.1/tcp/0,bogus", "--api", "192.0.2.1:4818")
	wantLines(t, "run with bad overrides", r.stderr, "--listen: listen.addresses[1]: \"bogus\" is not a multiaddr",
		"--api: api.listen: \"192.0.2.1:4818\" is not a loopback address")
}

func TestHelpListsEveryVerb(t *testing.T) {
	out := mustRun(t, t.TempDir(), "help")
	for _, c := range commands() {
		if !strings.Contains(out, "  "+c.name+" ") || !strings.Contains(out, c.summary) {
			t.Errorf("help does not list %s:\n%s", c.name, out)
		}
	}
	for _, verb := range []string{"init", "id", "run", "status", "peers", "connect", "greet", "caps", "say", "audit"} {
		if !strings.Contains(out, "  "+verb+" ") {
			t.Errorf("help lacks %s", verb)
		}
	}
}

// TestEndToEnd builds the binary and runs two daemons as processes, drives
// them with the binary's verbs, and stops them with SIGTERM.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two daemons")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the binary with")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ifaced")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	type proc struct {
		home   string
		cmd    *exec.Cmd
		stderr bytes.Buffer
		done   chan error
	}
	start := func(name string) *proc {
		p := &proc{home: filepath.Join(dir, name), done: make(chan error, 1)}
		p.cmd = exec.Command(bin, "run", "--home", p.home, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--no-mdns")
		p.cmd.Stderr = &p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.done <- p.cmd.Wait() }()
		t.Cleanup(func() {
			p.cmd.Process.Kill()
			<-p.done
		})
		return p
	}
	alice, bob := start("alice"), start("bob")
	for _, p := range []*proc{alice, bob} {
		addrFile := api.AddrFile(config.Home{Dir: p.home})
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, err := os.Stat(addrFile); err == nil {
				break
			}
			select {
			case err := <-p.done:
				p.done <- err
				t.Fatalf("%s exited before serving its API: %v\n%s", p.home, err, p.stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not write %s", p.home, addrFile)
			}
		}
	}
	verb := func(p *proc, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--home", p.home)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ifaced %q: %v\n%s%s", args, err, out, stderr.String())
		}
		return string(out)
	}

	var st api.Status
	if err := json.Unmarshal([]byte(verb(alice, "status", "--json")), &st); err != nil || len(st.Addrs) == 0 {
		t.Fatalf("status --json: %+v %v", st, err)
	}
	wantLines(t, "connect", verb(bob, "connect", st.Addrs[0]), "connected to "+st.PeerID)
	out := verb(bob, "greet", st.PeerID)
	m := conversationLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("greet printed no conversation:\n%s", out)
	}
	wantLines(t, "greet", out, "granted you   disclosure public (granted)", "  + ping")
	wantLines(t, "caps PEER", verb(bob, "caps", st.PeerID), st.PeerID+": seq 1, cached", "gossip.exchange", "ping ")
	wantLines(t, "audit", verb(alice, "audit"), m[1])
	wantLines(t, "audit --conversation", verb(alice, "audit", "--conversation", m[1]), " received ", " greeting 1: Greetings from ")

	for _, p := range []*proc{alice, bob} {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*proc{alice, bob} {
		select {
		case err := <-p.done:
			p.done <- err // for the cleanup
			if err != nil {
				t.Errorf("%s after SIGTERM: %v\n%s", p.home, err, p.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop after SIGTERM", p.home)
		}
		if _, err := os.Stat(api.AddrFile(config.Home{Dir: p.home})); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: api.addr after shutdown: %v", p.home, err)
		}
		if _, err := os.Lstat(api.SocketFile(config.Home{Dir: p.home})); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: api.sock after shutdown: %v", p.home, err)
		}
	}
}
