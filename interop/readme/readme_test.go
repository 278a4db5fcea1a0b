package readme

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

const readmePath = "../../README.md"

// walkthroughSections are the README sections whose every sh block must be
// a marked example.
var walkthroughSections = []string{
	"Quick start",
	"Running it as a service",
	"See it work",
	"Two daemons, two terminals",
	"Reaching peers behind NATs",
	"The HTTP binding",
}

// expectedFailures are README lines that fail today, each with the issue
// item whose fix makes it pass. The test fails when one passes: delete the
// entry then.
var expectedFailures = map[string]string{}

// check is a claim a README line makes beyond its exit status and shown
// output.
type check struct {
	// eventually: the claim is about something the daemons do in the
	// background (a push, a mailbox fetch), so the command is run again
	// until it holds, for up to settle.
	eventually bool
	fn         func(s *session, out string) error
}

// settle bounds waiting for what daemons do in the background: generous,
// since the machine is shared and slow at times; a healthy run takes
// well under a second.
const settle = 60 * time.Second

// checks are keyed by the README line as written.
var checks = map[string]check{
	"go run ./cmd/ifaced run         # the daemon, on its embedded defaults": {fn: func(s *session, _ string) error {
		home := filepath.Join(s.home, ".ifaced")
		for name, mode := range map[string]os.FileMode{"": 0o700, "key.pem": 0o600, "api.token": 0o600} {
			fi, err := os.Stat(filepath.Join(home, name))
			if err != nil {
				return fmt.Errorf("the data directory: %w", err)
			}
			if fi.Mode().Perm() != mode {
				return fmt.Errorf("%s has mode %o, the README says %o", filepath.Join(home, name), fi.Mode().Perm(), mode)
			}
		}
		for _, name := range []string{"config.toml", "ifaced.db", "audit"} {
			if _, err := os.Stat(filepath.Join(home, name)); err != nil {
				return fmt.Errorf("the README says the data directory holds %s: %w", name, err)
			}
		}
		return nil
	}},
	"go run ./cmd/ifaced demo": {fn: func(s *session, out string) error {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "next: ") {
			return fmt.Errorf("the demo does not end with where to go next: %q", last)
		}
		heading := "Two daemons, two terminals"
		if !strings.Contains(last, heading) || !bytes.Contains(s.readme, []byte("\n## "+heading+"\n")) {
			return fmt.Errorf("the demo's next step %q does not name a section of the README (%q)", last, heading)
		}
		return nil
	}},
	"./ifaced caps --home ~/bob <Alice's peer ID>    # what Alice offers Bob, and why not the rest": {fn: func(s *session, out string) error {
		seq, err := viewSeq(out)
		s.seq = seq
		return err
	}},
	"./ifaced caps --home ~/bob <Alice's peer ID>    # now at the next seq": {eventually: true, fn: func(s *session, out string) error {
		seq, err := viewSeq(out)
		if err != nil {
			return err
		}
		if seq != s.seq+1 || !strings.Contains(out, "calendar.availability") {
			return fmt.Errorf("Bob's view of Alice is at seq %d (was %d) and shows calendar.availability: %v; want the next seq, with it:\n%s",
				seq, s.seq, strings.Contains(out, "calendar.availability"), out)
		}
		return nil
	}},
	"./ifaced status --home ~/bob      # addresses: …/p2p/<R>/p2p-circuit/p2p/<B>; relay slots: <R>": {eventually: true, fn: func(s *session, out string) error {
		circuit := "/p2p/" + s.peerID("~/relay") + "/p2p-circuit/p2p/" + s.peerID("~/bob")
		if !strings.Contains(out, circuit) {
			return fmt.Errorf("B's status does not show its circuit address %s:\n%s", circuit, out)
		}
		return nil
	}},
	"./ifaced outbox --home ~/alice                          # empty once R holds it": {eventually: true, fn: func(s *session, out string) error {
		if !strings.Contains(out, "empty") {
			return fmt.Errorf("the outbox is not empty:\n%s", out)
		}
		return nil
	}},
	"./ifaced audit --home ~/bob                             # the message, dated when it arrived, with R's trace entry": {eventually: true, fn: func(s *session, out string) error {
		// The listing names conversations; the message itself is in the
		// files it names, with the relay's trace entry.
		files, _ := filepath.Glob(filepath.Join(s.home, "bob", "audit", "*", s.peerID("~/alice")+".jsonl"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			for _, l := range bytes.Split(b, []byte("\n")) {
				if bytes.Contains(l, []byte("Call me when you are back.")) && bytes.Contains(l, []byte(s.peerID("~/relay"))) &&
					bytes.Contains(l, []byte(`"transport":"ifp-8-mailbox"`)) {
					return nil
				}
			}
		}
		return fmt.Errorf("B's audit log does not hold the mail with R's trace entry (in %v); audit printed:\n%s", files, out)
	}},
}

// placeholders are the README's names for peer IDs, by home.
var placeholders = map[string]string{
	"<Alice's peer ID>": "~/alice",
	"<R>":               "~/relay",
	"<B>":               "~/bob",
}

// narrations are the comment lines the test knows how to act on.
var narrations = []struct {
	re  *regexp.Regexp
	act func(s *session) error
}{
	{regexp.MustCompile(`^terminal \d+`), nil},
	{regexp.MustCompile(`^another terminal$`), nil},
	{regexp.MustCompile(`^stop B \(Ctrl-C in terminal 2\), then:$`), func(s *session) error { return s.stop("~/bob") }},
	{regexp.MustCompile(`^start B again: it reserves its slot, fetches its mail`), func(s *session) error { return s.restart("~/bob") }},
}

// readmePorts are the ports the README uses; each block maps them to free ones.
var portRE = regexp.MustCompile(`(:|/tcp/|/udp/)(48\d\d)\b`)

func TestREADMEExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's walkthroughs with real daemons; not in -short")
	}
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readBlocks(readmePath, walkthroughSections)
	if err != nil {
		t.Error(err)
	}
	byName := map[string][]block{}
	for _, b := range blocks {
		byName[b.name] = append(byName[b.name], b)
	}
	runners := map[string]func(*testing.T, *session, []block){
		"quick-start":   runShell,
		"demo":          runShell,
		"two-daemons":   runShell,
		"relay-mailbox": runShell,
		"http-binding":  runShell,
		"systemd":       runSystemd,
	}
	for name := range byName {
		if runners[name] == nil {
			t.Errorf("README.md has an example %q that no runner here runs", name)
		}
	}
	// Every check and expected failure must name a line still in the README.
	for line := range checks {
		if !bytes.Contains(readme, []byte(line)) {
			t.Errorf("checks names a line no longer in README.md: %q", line)
		}
	}
	for line, why := range expectedFailures {
		if !bytes.Contains(readme, []byte(line)) {
			t.Errorf("expectedFailures names a line no longer in README.md (%s): %q", why, line)
		}
	}
	bin := buildIfaced(t)
	for name, run := range runners {
		t.Run(name, func(t *testing.T) {
			if len(byName[name]) == 0 {
				t.Fatalf("no <!-- example: %s --> block in README.md", name)
			}
			s := newSession(t, bin, readme)
			run(t, s, byName[name])
		})
	}
}

// buildIfaced builds the command line once for every example.
func buildIfaced(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool, to build ifaced: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "ifaced")
	if out, err := exec.Command(goTool, "build", "-o", bin, "github.com/ifaced/ifaced/cmd/ifaced").CombinedOutput(); err != nil {
		t.Fatalf("building ifaced: %v\n%s", err, out)
	}
	return bin
}

// session is one example's world: its own $HOME, working directory, free
// ports and daemons.
type session struct {
	t       *testing.T
	bin     string
	readme  []byte
	home    string            // $HOME: ~ in the README
	work    string            // the working directory: ./ifaced and the block's files
	ports   map[string]string // README port → free port
	daemons map[string]*daemon
	ids     map[string]string // home → peer ID
	history []string          // the `ifaced run` lines started, in order
	seq     int               // a view's seq, remembered by one check for a later one
}

var seqRE = regexp.MustCompile(`: seq (\d+),`)

// viewSeq is the seq `ifaced caps PEER` shows.
func viewSeq(out string) (int, error) {
	m := seqRE.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no seq in:\n%s", out)
	}
	var n int
	_, err := fmt.Sscan(m[1], &n)
	return n, err
}

func newSession(t *testing.T, bin string, readme []byte) *session {
	s := &session{t: t, bin: bin, readme: readme, home: t.TempDir(), work: t.TempDir(),
		ports: map[string]string{}, daemons: map[string]*daemon{}, ids: map[string]string{}}
	if err := os.Symlink(bin, filepath.Join(s.work, "ifaced")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for h := range s.daemons {
			if err := s.stop(h); err != nil {
				t.Errorf("stopping the daemon of %s: %v", h, err)
			}
		}
	})
	return s
}

func (s *session) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "IFACED_") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+s.home)
}

// expand turns a README path (~/x) into the session's.
func (s *session) expand(p string) string {
	if p == "~" {
		return s.home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(s.home, rest)
	}
	return p
}

// freePort finds a port free on loopback for both TCP and UDP (QUIC).
func freePort(t *testing.T) string {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return fmt.Sprint(port)
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}

// rewrite maps the README's ports and wildcard addresses to the session's.
func (s *session) rewrite(text string) string {
	text = portRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := portRE.FindStringSubmatch(m)
		p, ok := s.ports[sub[2]]
		if !ok {
			p = freePort(s.t)
			s.ports[sub[2]] = p
		}
		return sub[1] + p
	})
	text = strings.ReplaceAll(text, "/ip4/0.0.0.0/", "/ip4/127.0.0.1/")
	return strings.ReplaceAll(text, "/ip6/::/", "/ip6/::1/")
}

// substitute fills in the placeholders, ports and addresses.
func (s *session) substitute(text string) (string, error) {
	for ph, home := range placeholders {
		if strings.Contains(text, ph) {
			text = strings.ReplaceAll(text, ph, s.peerID(home))
		}
	}
	if m := regexp.MustCompile(`<[A-Z][^<>]*>`).FindString(text); m != "" {
		return "", fmt.Errorf("the placeholder %s is not one the test knows (%v)", m, placeholders)
	}
	return s.rewrite(text), nil
}

// peerID is the peer ID of the daemon whose home is h (~/x).
func (s *session) peerID(h string) string {
	if id, ok := s.ids[h]; ok {
		return id
	}
	out, err := exec.Command(s.bin, "id", "--home", s.expand(h), "--json").Output()
	if err != nil {
		s.t.Fatalf("the peer ID of %s (for the README's placeholder): %v", h, err)
	}
	var info struct {
		PeerID string `json:"peer_id"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.PeerID == "" {
		s.t.Fatalf("the peer ID of %s: %v in %s", h, err, out)
	}
	s.ids[h] = info.PeerID
	return info.PeerID
}

// runShell runs an example's data blocks (writing their files) and its sh
// block.
func runShell(t *testing.T, s *session, bs []block) {
	var sh []block
	for _, b := range bs {
		if b.file != "" {
			if err := os.WriteFile(filepath.Join(s.work, b.file), []byte(strings.Join(b.lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		sh = append(sh, b)
	}
	for _, b := range sh {
		for _, st := range parseSteps(b) {
			s.do(st)
		}
	}
}

func (s *session) do(st step) {
	t := s.t
	where := fmt.Sprintf("README.md:%d", st.line)
	switch {
	case st.edit != nil:
		if err := s.applyEdit(*st.edit); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	case st.cmd == "":
		for _, n := range narrations {
			if n.re.MatchString(st.comment) {
				if n.act != nil {
					if err := n.act(s); err != nil {
						t.Fatalf("%s: %s: %v", where, st.comment, err)
					}
				}
				return
			}
		}
		t.Errorf("%s: the test does not know what to do with %q (add it to narrations)", where, st.comment)
	default:
		s.command(where, st)
	}
}

func (s *session) command(where string, st step) {
	t := s.t
	key := st.cmd
	if st.comment != "" {
		// checks are keyed by the whole line as written
		for line := range checks {
			if strings.HasPrefix(line, st.cmd+" ") && strings.HasSuffix(line, "# "+st.comment) {
				key = line
			}
		}
	}
	cmd := st.cmd
	switch {
	case cmd == "go build ./cmd/ifaced":
		return // built once for every example: ./ifaced is in the working directory
	case cmd == "go test ./...":
		t.Logf("%s: %s: not run here, CI (.ci/run) runs it around this test", where, cmd)
		return
	case strings.HasPrefix(cmd, "go run ./cmd/ifaced "):
		cmd = "./ifaced " + strings.TrimPrefix(cmd, "go run ./cmd/ifaced ")
	}
	if strings.HasPrefix(cmd, "curl ") {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skipf("%s: curl is not installed (.ci/run installs it)", where)
		}
	} else if !strings.HasPrefix(cmd, "./ifaced ") {
		t.Fatalf("%s: the test does not know how to run %q", where, st.cmd)
	}
	line, err := s.substitute(cmd)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	expect := make([]string, len(st.expect))
	for i, e := range st.expect {
		if expect[i], err = s.substitute(e); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	}
	if f := strings.Fields(line); len(f) > 1 && f[1] == "run" {
		if err := s.start(line); err != nil {
			t.Fatalf("%s: %s: %v", where, st.cmd, err)
		}
		if c, ok := checks[key]; ok {
			if err := c.fn(s, ""); err != nil {
				t.Errorf("%s: %s: %v", where, st.cmd, err)
			}
		}
		return
	}
	why, xfail := expectedFailures[st.cmd]
	c, hasCheck := checks[key]
	deadline := time.Now().Add(settle)
	for {
		out, err := s.sh(line)
		if err == nil {
			err = matchOutput(out, expect)
		}
		if err == nil && hasCheck {
			err = c.fn(s, out)
		}
		switch {
		case xfail && err == nil:
			t.Errorf("%s: %s passes now (%s): delete its entry from expectedFailures", where, st.cmd, why)
		case xfail:
			t.Logf("%s: %s fails as expected (%s): %v", where, st.cmd, why, err)
		case err != nil && hasCheck && c.eventually && time.Now().Before(deadline):
			time.Sleep(200 * time.Millisecond) // polling a daemon in another process, as a person would
			continue
		case err != nil:
			t.Errorf("%s: %s: %v\n%s", where, st.cmd, err, out)
		}
		return
	}
}

// sh runs one command line as a person would in the working directory.
func (s *session) sh(line string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", line)
	c.Dir, c.Env = s.work, s.env()
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// applyEdit sets one key in a home's config.toml.
func (s *session) applyEdit(e edit) error {
	val, err := s.substitute(e.value)
	if err != nil {
		return err
	}
	var v map[string]any
	if err := toml.Unmarshal([]byte("v = "+val), &v); err != nil {
		return fmt.Errorf("the README's value for %s.%s: %w", e.section, e.key, err)
	}
	return s.setConfig(s.expand(e.file), e.section, e.key, v["v"])
}

func (s *session) setConfig(file, section, key string, val any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("the config the README edits: %w", err)
	}
	var cfg map[string]any
	if err := toml.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	sec, _ := cfg[section].(map[string]any)
	if sec == nil {
		sec = map[string]any{}
		cfg[section] = sec
	}
	sec[key] = val
	out, err := toml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return os.WriteFile(file, out, 0o600)
}

// daemon is an `ifaced run` in the background.
type daemon struct {
	line string // the command line as run
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
	err  error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// homeOf is the data directory an ifaced command line names.
func (s *session) homeOf(line string) string {
	f := strings.Fields(line)
	for i := range f {
		if f[i] == "--home" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return "~/.ifaced"
}

// start runs `ifaced run` in the background and waits until it answers.
func (s *session) start(line string) error {
	h := s.homeOf(line)
	dir := s.expand(h)
	args := strings.Fields(line)[1:]
	if _, err := os.Stat(filepath.Join(dir, "config.toml")); err == nil {
		// an existing config: its ports and addresses as the session's, and no mDNS
		b, err := os.ReadFile(filepath.Join(dir, "config.toml"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(s.rewrite(string(b))), 0o600); err != nil {
			return err
		}
		if err := s.setConfig(filepath.Join(dir, "config.toml"), "discovery", "mdns", false); err != nil {
			return err
		}
	} else {
		args = append(args, "--no-mdns")
		if !strings.Contains(line, "--listen") {
			args = append(args, "--listen", s.rewrite("/ip4/127.0.0.1/tcp/4817,/ip4/127.0.0.1/udp/4817/quic-v1"))
		}
		if !strings.Contains(line, "--api") {
			args = append(args, "--api", s.rewrite("127.0.0.1:4818"))
		}
	}
	for i, a := range args {
		args[i] = s.expand(a)
	}
	d := &daemon{line: line, log: &lockedBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(s.bin, args...)
	d.cmd.Dir, d.cmd.Env, d.cmd.Stdout, d.cmd.Stderr = s.work, s.env(), d.log, d.log
	if err := d.cmd.Start(); err != nil {
		return err
	}
	s.daemons[h] = d
	s.history = append(s.history, line)
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	deadline := time.Now().Add(settle)
	for {
		if out, err := exec.Command(s.bin, "status", "--home", dir).CombinedOutput(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the daemon did not answer `ifaced status` within %v: %v %s\nits log:\n%s", settle, err, out, d.log.String())
		}
		select {
		case <-d.done:
			return fmt.Errorf("the daemon exited: %v\nits log:\n%s", d.err, d.log.String())
		case <-time.After(100 * time.Millisecond): // polling another process until it answers
		}
	}
}

// stop does what Ctrl-C in the daemon's terminal does.
func (s *session) stop(h string) error {
	d := s.daemons[h]
	if d == nil {
		return fmt.Errorf("no daemon runs for %s", h)
	}
	delete(s.daemons, h)
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("the daemon did not stop within 30 s of Ctrl-C\nits log:\n%s", d.log.String())
	}
	var ee *exec.ExitError
	if d.err != nil && !(errors.As(d.err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()) {
		if s.t.Failed() || testing.Verbose() {
			s.t.Logf("the daemon of %s exited with %v; its log:\n%s", h, d.err, d.log.String())
		}
	}
	return nil
}

// restart starts a stopped daemon again with the command it last ran.
func (s *session) restart(h string) error {
	line := ""
	if d := s.daemons[h]; d != nil {
		return fmt.Errorf("the daemon of %s is still running", h)
	}
	for _, l := range s.history {
		if s.homeOf(l) == h {
			line = l
		}
	}
	if line == "" {
		return fmt.Errorf("no daemon ran for %s", h)
	}
	return s.start(line)
}
