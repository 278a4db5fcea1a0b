package readme

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// root is the repository, from this package's directory.
const root = "../.."

// documents are README.md and every Markdown file under docs/, as paths
// from the root.
func documents(t *testing.T) []string {
	t.Helper()
	docs := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(docs[1:])
	return docs
}

// check is a claim a line makes beyond its exit status and shown output.
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

// commandTimeout bounds one command of a walkthrough.
const commandTimeout = 2 * time.Minute

// checks are keyed by the document and the line as written.
var checks = map[string]check{
	`docs/tutorials/relay-mailbox.md: grep -ho '"trace":{"received":\[{"by":"[^"]*"' ~/relays/b/audit/*/*.jsonl`: {fn: func(s *session, out string) error {
		// The hop is R's: the mail went through its mailbox.
		pid, _, err := s.idOf("~/relays/r")
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"by":"relay:/p2p/`+pid+`"`) {
			return fmt.Errorf("the trace entry is not R's (relay:/p2p/%s): %s", pid, out)
		}
		return nil
	}},
	"README.md: go run ./cmd/ifaced run          # the daemon, on its embedded defaults": {fn: func(s *session, _ string) error {
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
	"README.md: go run ./cmd/ifaced demo         # three daemons in this process, narrated": {fn: func(s *session, out string) error {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := lines[len(lines)-1]
		next, ok := strings.CutPrefix(last, "next: ")
		if !ok {
			return fmt.Errorf("the demo does not end with where to go next: %q", last)
		}
		// It names a document and a section of it that exist.
		m := regexp.MustCompile(`((?:docs/[a-z/-]+|README)\.md)(?:, "([^"]+)")?`).FindStringSubmatch(next)
		if m == nil {
			return fmt.Errorf("the demo's next step %q names no document", next)
		}
		b, err := os.ReadFile(filepath.Join(root, m[1]))
		if err != nil {
			return fmt.Errorf("the demo's next step names %s: %w", m[1], err)
		}
		if m[2] != "" && !bytes.Contains(b, []byte("\n## "+m[2]+"\n")) {
			return fmt.Errorf("the demo's next step names the section %q, which %s has not", m[2], m[1])
		}
		return nil
	}},
}

// idOf is the peer ID and did:key of the daemon of home (~/x).
func (s *session) idOf(home string) (peerID, did string, err error) {
	out, err := exec.Command(s.bins.ifaced, "id", "--home", s.expand(home), "--json").Output()
	if err != nil {
		return "", "", fmt.Errorf("ifaced id --home %s: %w", home, err)
	}
	var info struct {
		PeerID string `json:"peer_id"`
		DID    string `json:"did"`
	}
	err = json.Unmarshal(out, &info)
	return info.PeerID, info.DID, err
}

// knownNarration are the comment lines a walkthrough may hold on their
// own; each says what a person does that is not a command.
var knownNarration = []*regexp.Regexp{
	regexp.MustCompile(`^terminal (\d+)\b`),
	regexp.MustCompile(`^stop it \(Ctrl-C in terminal (\d+)\)`),
	regexp.MustCompile(`^start it again in terminal (\d+)`),
}

// docPorts are the ports the documents use; each walkthrough maps them to
// free ones, in commands, files and expected output alike.
var portRE = regexp.MustCompile(`(:|/tcp/|/udp/)(48\d\d|808\d)\b`)

// TestDocuments runs every document's commands as one walkthrough, in
// order, as a user would: README.md and each file under docs/.
func TestDocuments(t *testing.T) {
	docs := documents(t)
	all := map[string][]block{}
	var problems []string
	for _, d := range docs {
		bs, p, err := readDoc(filepath.Join(root, d), d)
		if err != nil {
			t.Fatal(err)
		}
		all[d] = bs
		problems = append(problems, p...)
	}
	for _, p := range problems {
		t.Error(p)
	}
	// Every check names a line still in its document.
	for key := range checks {
		d, line, _ := strings.Cut(key, ": ")
		b, err := os.ReadFile(filepath.Join(root, d))
		if err != nil || !bytes.Contains(b, []byte(line)) {
			t.Errorf("checks names a line no longer in %s: %q", d, line)
		}
	}
	ran, notRun := 0, 0
	for _, d := range docs {
		for _, b := range all[d] {
			if b.lang == "sh" && b.notRun == "" {
				ran++
			} else if b.lang == "sh" {
				notRun++
			}
		}
	}
	t.Logf("%d documents: %d command blocks run, %d not run (each says why)", len(docs), ran, notRun)
	if testing.Short() {
		t.Skip("runs the documents' walkthroughs with real daemons; not in -short")
	}
	bins := buildBinaries(t)
	for _, d := range docs {
		t.Run(strings.ReplaceAll(d, "/", "_"), func(t *testing.T) {
			runs := false
			for _, b := range all[d] {
				runs = runs || b.lang == "sh" && b.notRun == "" || b.file != ""
			}
			if !runs {
				t.Logf("%s has no command to run", d)
				return
			}
			s := newSession(t, d, bins)
			for _, b := range all[d] {
				switch {
				case b.lang == "sh" && b.notRun != "":
					t.Logf("%s: not run: %s", b.where(), b.notRun)
				case b.lang == "sh":
					for _, st := range parseSteps(b) {
						if t.Failed() {
							return // a walkthrough stops at its first failure, as a person would
						}
						s.do(b, st)
					}
				case b.file != "":
					s.writeFile(b)
				}
			}
		})
	}
}

// binaries are the programs a walkthrough runs, built once.
type binaries struct {
	dir     string // on PATH: ifaced, example-agent
	ifaced  string
	example string
}

func buildBinaries(t *testing.T) binaries {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool, to build ifaced: %v", err)
	}
	dir := t.TempDir()
	b := binaries{dir: dir, ifaced: filepath.Join(dir, "ifaced"), example: filepath.Join(dir, "example-agent")}
	for pkg, out := range map[string]string{"./cmd/ifaced": b.ifaced, "./examples/agent/cmd/example-agent": b.example} {
		c := exec.Command(goTool, "build", "-o", out, pkg)
		c.Dir = root
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, out)
		}
	}
	return b
}

// session is one document's world: its $HOME, its working directory (the
// repository's top level, linked), its shell, its free ports and the
// programs running in its other terminals.
type session struct {
	t        *testing.T
	doc      string
	bins     binaries
	home     string            // $HOME: ~ in the documents
	work     string            // the working directory
	ports    map[string]string // document port → free port
	sh       *shell
	terms    map[int]*proc // terminal → what runs there
	terminal int           // the terminal the walkthrough is in
	lastLine map[int]string
}

func newSession(t *testing.T, doc string, bins binaries) *session {
	s := &session{t: t, doc: doc, bins: bins, home: t.TempDir(), work: t.TempDir(), ports: map[string]string{},
		terms: map[int]*proc{}, lastLine: map[int]string{}}
	// The working directory is a clone's top level, its entries linked, so
	// that what a command writes there stays in the test's directory.
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(abs, e.Name()), filepath.Join(s.work, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if s.sh, err = startShell(s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for n := range s.terms {
			if err := s.stop(n); err != nil {
				t.Errorf("stopping what runs in terminal %d: %v", n, err)
			}
		}
		s.sh.close()
	})
	return s
}

// env is the environment of the walkthrough's shell and terminals: the
// session's $HOME, the built programs on PATH, Go's caches as they are
// (the walkthroughs build nothing), and no IFACED_ variable.
func (s *session) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME" || k == "PATH" || k == "GOPATH" || strings.HasPrefix(k, "IFACED_"):
		default:
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+s.home, "GOPATH="+filepath.Join(s.home, "go"),
		"PATH="+s.bins.dir+string(os.PathListSeparator)+os.Getenv("PATH"), "IFACED_TEST_BIN="+s.bins.ifaced)
}

// freePort finds a port free on loopback for both TCP and UDP (QUIC),
// below the kernel's range of ephemeral ports: a port from that range,
// free when chosen, can be handed to any process's outgoing connection or
// :0 listener (a daemon's, another test's) before the walkthrough's
// command binds it, which happened on the shared machine ("bind: address
// already in use" for the example agent). Below the range only a process
// that names the port takes it. No port is handed out twice in a run.
func freePort(t *testing.T) string {
	low := ephemeralLow()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		port := 0
		if low > minPort+1000 {
			port = minPort + rand.IntN(low-minPort)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		port = l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			if !portsGiven[port] {
				portsGiven[port] = true
				return fmt.Sprint(port)
			}
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}

// minPort is the lowest port freePort hands out.
const minPort = 20000

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range (Linux),
// 0 when unknown (then freePort asks the kernel for a port).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 0
	}
	return low
}

// rewrite maps the documents' ports and wildcard addresses to the
// session's: tests run on loopback only, on ports nothing else holds.
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

func (s *session) where(st step) string { return fmt.Sprintf("%s:%d", s.doc, st.line) }

// writeFile writes a data block where its marker says.
func (s *session) writeFile(b block) {
	path := s.expand(b.file)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		s.t.Fatalf("%s: %v", b.where(), err)
	}
	if err := os.WriteFile(path, []byte(s.rewrite(strings.Join(b.lines, "\n")+"\n")), 0o600); err != nil {
		s.t.Fatalf("%s: %v", b.where(), err)
	}
}

// expand turns a document's path (~/x, or relative to the working
// directory) into the session's.
func (s *session) expand(p string) string {
	switch {
	case p == "~":
		return s.home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(s.home, p[2:])
	case filepath.IsAbs(p):
		return p
	}
	return filepath.Join(s.work, p)
}

func (s *session) do(b block, st step) {
	t := s.t
	where := s.where(st)
	if st.cmd == "" {
		for _, re := range knownNarration {
			m := re.FindStringSubmatch(st.comment)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			var err error
			switch {
			case strings.HasPrefix(st.comment, "terminal"):
				s.terminal = n
			case strings.HasPrefix(st.comment, "stop it"):
				err = s.stop(n)
			default:
				err = s.restart(n)
			}
			if err != nil {
				t.Fatalf("%s: %s: %v", where, st.comment, err)
			}
			return
		}
		t.Fatalf("%s: the test does not know what to do with the comment %q: a walkthrough's own lines are commands, their output under them, "+
			"or one of %v", where, st.comment, knownNarration)
	}
	cmd := s.rewrite(st.cmd)
	expect := make([]string, len(st.expect))
	for i, e := range st.expect {
		expect[i] = s.rewrite(e)
	}
	key := s.doc + ": " + strings.TrimSpace(b.lines[st.line-b.line])
	c, hasCheck := checks[key]
	if isLongRunning(cmd) {
		if err := s.startTerminal(cmd, expect); err != nil {
			t.Fatalf("%s: %s: %v", where, st.cmd, err)
		}
		if hasCheck {
			if err := c.fn(s, ""); err != nil {
				t.Errorf("%s: %s: %v", where, st.cmd, err)
			}
		}
		return
	}
	// A step whose output comes from something in the background
	// ("eventually") runs again until that output shows, as a person
	// would run it again. What it may show meanwhile is "not yet": the
	// document's exit status with other output, or one answer that says
	// the thing is not there (a refusal such as "no conversation … open
	// or recorded"), the same on every run. Anything else — a second,
	// different failure — is a failure in between, and fails the step
	// at once rather than being run again until it passes; every run
	// that did not pass is logged.
	deadline := time.Now().Add(settle)
	var notYet string // the one failing answer seen so far, exit status and output
	for {
		out, code, err := s.sh.run(cmd)
		if err != nil {
			t.Fatalf("%s: %s: %v", where, st.cmd, err)
		}
		if code != st.exit {
			err = fmt.Errorf("exit status %d, the document shows %d; it printed:\n%s", code, st.exit, out)
		}
		if err == nil {
			err = matchOutput(out, expect)
		}
		if err == nil && hasCheck {
			err = c.fn(s, out)
		}
		if err == nil {
			return
		}
		retry := (st.eventually || hasCheck && c.eventually) && time.Now().Before(deadline)
		if retry && code != st.exit {
			answer := fmt.Sprintf("%d\n%s", code, out)
			if notYet != "" && answer != notYet {
				t.Errorf("%s: %s: failed otherwise than the run before it, a failure in between rather than the state not there yet: %v", where, st.cmd, err)
				return
			}
			notYet = answer
		}
		if !retry {
			t.Errorf("%s: %s: %v", where, st.cmd, err)
			return
		}
		t.Logf("%s: %s: not there yet, running it again: %v", where, st.cmd, err)
		time.Sleep(200 * time.Millisecond) // polling a daemon in another process, as a person would
	}
}

// isLongRunning tells a command that runs until stopped, which a person
// runs in a terminal of its own: the daemon and the example agents.
func isLongRunning(cmd string) bool {
	f := strings.Fields(cmd)
	switch {
	case len(f) >= 2 && f[0] == "ifaced" && f[1] == "run",
		len(f) >= 4 && f[0] == "go" && f[1] == "run" && f[2] == "./cmd/ifaced" && f[3] == "run",
		len(f) >= 3 && f[0] == "go" && f[1] == "run" && f[2] == "./examples/agent/cmd/example-agent",
		len(f) >= 2 && f[0] == "python3" && f[1] == "examples/python/agent.py":
		return true
	}
	return false
}

// proc is what runs in a terminal of its own.
type proc struct {
	line string // the command as run
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
	err  error
	home string // for a daemon, its home
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
func (s *session) homeOf(f []string) string {
	for i := range f {
		if f[i] == "--home" && i+1 < len(f) {
			return s.expand(f[i+1])
		}
	}
	return filepath.Join(s.home, ".ifaced")
}

// startTerminal runs a long-running command in the current terminal and
// waits until it is ready: a daemon until `ifaced status` answers, an
// agent until it says it listens; then, until its log shows what the
// document shows under it.
func (s *session) startTerminal(line string, expect []string) error {
	if old := s.terms[s.terminal]; old != nil {
		return fmt.Errorf("terminal %d still runs %q (say where this one runs: # terminal N)", s.terminal, old.line)
	}
	f := strings.Fields(line)
	args := slices.Clone(f)
	p := &proc{line: line, log: &lockedBuffer{}, done: make(chan struct{})}
	switch {
	case f[0] == "ifaced" || f[0] == "go" && f[2] == "./cmd/ifaced":
		if f[0] == "go" {
			args = append([]string{"ifaced"}, f[3:]...)
		}
		p.home = s.homeOf(args)
		extra, err := s.prepareDaemon(p.home, line)
		if err != nil {
			return err
		}
		args = append(args, extra...)
		args[0] = s.bins.ifaced
	case f[0] == "go":
		args = append([]string{s.bins.example}, f[3:]...)
	}
	for i, a := range args {
		if strings.HasPrefix(a, "~") {
			args[i] = s.expand(a)
		}
	}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Dir, p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = s.work, s.env(), p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	s.terms[s.terminal] = p
	s.lastLine[s.terminal] = line
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(settle)
	ready := func() bool {
		switch {
		case p.home != "":
			return exec.Command(s.bins.ifaced, "status", "--home", p.home).Run() == nil
		case len(expect) > 0:
			return true // what the document shows under it says it is ready
		}
		return strings.Contains(p.log.String(), "listening")
	}
	for !ready() || matchOutput(p.log.String(), expect) != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v (or its log does not show what the document shows: %v)\nits log:\n%s",
				settle, matchOutput(p.log.String(), expect), p.log.String())
		}
		select {
		case <-p.done:
			return fmt.Errorf("it exited: %v\nits log:\n%s", p.err, p.log.String())
		case <-time.After(100 * time.Millisecond): // polling another process until it answers
		}
	}
	return nil
}

// prepareDaemon makes a daemon's start the session's: an existing
// config's ports and addresses mapped and mDNS off (no daemon here
// multicasts on the machine's networks), or for a home with no config
// yet, the flags that do the same.
func (s *session) prepareDaemon(home, line string) ([]string, error) {
	cfgPath := filepath.Join(home, "config.toml")
	b, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		if err := os.WriteFile(cfgPath, []byte(s.rewrite(string(b))), 0o600); err != nil {
			return nil, err
		}
		return nil, s.setConfig(cfgPath, "discovery", "mdns", false)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	extra := []string{"--no-mdns"}
	if !strings.Contains(line, "--listen") {
		extra = append(extra, "--listen", s.rewrite("/ip4/127.0.0.1/tcp/4817,/ip4/127.0.0.1/udp/4817/quic-v1"))
	}
	if !strings.Contains(line, "--api") {
		extra = append(extra, "--api", s.rewrite("127.0.0.1:4818"))
	}
	return extra, nil
}

func (s *session) setConfig(file, section, key string, val any) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
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

// stop does what Ctrl-C in terminal n does.
func (s *session) stop(n int) error {
	p := s.terms[n]
	if p == nil {
		return fmt.Errorf("nothing runs in terminal %d", n)
	}
	delete(s.terms, n)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%q did not stop within 30 s of Ctrl-C\nits log:\n%s", p.line, p.log.String())
	}
	var ee *exec.ExitError
	if p.err != nil && !(errors.As(p.err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()) && (s.t.Failed() || testing.Verbose()) {
		s.t.Logf("%q exited with %v; its log:\n%s", p.line, p.err, p.log.String())
	}
	return nil
}

// restart runs terminal n's last command again there.
func (s *session) restart(n int) error {
	if s.terms[n] != nil {
		return fmt.Errorf("terminal %d still runs %q", n, s.terms[n].line)
	}
	line := s.lastLine[n]
	if line == "" {
		return fmt.Errorf("nothing ran in terminal %d", n)
	}
	was := s.terminal
	s.terminal = n
	defer func() { s.terminal = was }()
	return s.startTerminal(line, nil)
}

// shell is the walkthrough's shell: one bash process that runs each
// command in turn, so that what a command sets (a variable, the working
// directory, PATH) holds for the next, as in a person's terminal.
type shell struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	dir  string // where each command's output goes
	n    int
	done chan struct{}
}

// shellPrelude is read by the shell first. Commands that would build
// from source run the programs already built instead: `go run
// ./cmd/ifaced ARGS` is `ifaced ARGS`, `go install ./cmd/ifaced` puts
// ifaced in $GOPATH/bin; any other go command fails, saying that a
// document marks such a block <!-- not run: … -->.
const shellPrelude = `
go() {
	case "$1 $2" in
	"run ./cmd/ifaced") shift 2; ifaced "$@" ;;
	"install ./cmd/ifaced") mkdir -p "$GOPATH/bin" && ln -sf "$IFACED_TEST_BIN" "$GOPATH/bin/ifaced" ;;
	"env GOPATH") echo "$GOPATH" ;;
	*) echo "interop/readme does not run 'go $*' in a walkthrough: mark its block <!-- not run: REASON -->" >&2; return 97 ;;
	esac
}
`

func startShell(s *session) (*shell, error) {
	sh := &shell{dir: s.t.TempDir(), done: make(chan struct{})}
	sh.cmd = exec.Command("bash", "--noprofile", "--norc")
	sh.cmd.Dir, sh.cmd.Env = s.work, s.env()
	sh.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if sh.in, err = sh.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := sh.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	sh.out = bufio.NewReader(stdout)
	sh.cmd.Stderr = os.Stderr
	if err := sh.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { sh.cmd.Wait(); close(sh.done) }()
	if _, err := io.WriteString(sh.in, shellPrelude); err != nil {
		return nil, err
	}
	return sh, nil
}

// run runs one command in the shell and returns what it printed
// (standard output and error together) and its exit status.
func (sh *shell) run(cmd string) (string, int, error) {
	sh.n++
	outFile := filepath.Join(sh.dir, fmt.Sprintf("out.%d", sh.n))
	marker := fmt.Sprintf("__done_%d__", sh.n)
	script := fmt.Sprintf("{\n%s\n} >%s 2>&1 </dev/null; printf '\\n%s %%d\\n' $?\n", cmd, outFile, marker)
	if _, err := io.WriteString(sh.in, script); err != nil {
		return "", 0, fmt.Errorf("the shell: %w", err)
	}
	type result struct {
		code int
		err  error
	}
	got := make(chan result, 1)
	go func() {
		for {
			l, err := sh.out.ReadString('\n')
			if err != nil {
				got <- result{0, fmt.Errorf("the shell ended: %w", err)}
				return
			}
			if rest, ok := strings.CutPrefix(strings.TrimSpace(l), marker+" "); ok {
				code, err := strconv.Atoi(rest)
				got <- result{code, err}
				return
			}
		}
	}()
	var r result
	select {
	case r = <-got:
	case <-time.After(commandTimeout):
		syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
		return "", 0, fmt.Errorf("no end within %v (the shell was killed)", commandTimeout)
	}
	if r.err != nil {
		return "", 0, r.err
	}
	out, err := os.ReadFile(outFile)
	return string(out), r.code, err
}

func (sh *shell) close() {
	sh.in.Close()
	select {
	case <-sh.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
		<-sh.done
	}
}

// TestDocumentsHaveNoDeadEnds: every relative link in README.md and docs/
// names a file of the repository.
func TestDocumentsHaveNoDeadEnds(t *testing.T) {
	linkRE := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, d := range documents(t) {
		b, err := os.ReadFile(filepath.Join(root, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(root, filepath.Dir(d), target)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which is not there", d, target)
			}
		}
	}
}

// readmeLines is the longest the front page may be.
const readmeLines = 250

// TestREADMEIsAFrontPage: README.md stays a front page; the rest is in
// docs/.
func TestREADMEIsAFrontPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeLines {
		t.Errorf("README.md has %d lines; a front page has at most %d (the rest goes to docs/)", n, readmeLines)
	}
	for _, want := range []string{"go run ./cmd/ifaced run", "go test ./...", "docs/"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("README.md does not say %q", want)
		}
	}
}
