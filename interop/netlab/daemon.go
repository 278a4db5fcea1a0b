package netlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// Binary builds cmd/ifaced once per test binary run and returns its path.
// RemoveBinary (from TestMain) deletes it.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "netlab-bin-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "ifaced")
		cmd := exec.Command("go", "build", "-o", buildBin, "github.com/ifaced/ifaced/cmd/ifaced")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/ifaced: %v: %s", err, out.String())
		}
	})
	if buildErr != nil {
		t.Fatalf("netlab: %v", buildErr)
	}
	return buildBin
}

// RemoveBinary deletes the binary Binary built, if any.
func RemoveBinary() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Capability is one capability of a lab daemon's document.
type Capability struct{ Name, Description string }

// Config is what the lab sets in a daemon's config.toml; every other key
// keeps its default.
type Config struct {
	Listen       []string // listen.addresses; nil means TCP and QUIC on port 4817, IPv4
	RelayService bool     // relay.service (and relay.mailbox)
	RelayUse     []string
	DHT          string // discovery.dht; "" means "off"
	Bootstrap    []string
	Gossip       bool
	MDNS         bool
	Capabilities []Capability
	Display      string
	Extra        string // more TOML, appended
	APIPort      int    // the control API's port on the namespace's loopback; 0 means 4818
}

// apiAddr is where the control API listens inside the daemon's namespace.
func (c Config) apiAddr() string {
	port := c.APIPort
	if port == 0 {
		port = 4818
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

func (c Config) toml() string {
	q := func(ss []string) string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	listen := c.Listen
	if listen == nil {
		listen = []string{"/ip4/0.0.0.0/tcp/4817", "/ip4/0.0.0.0/udp/4817/quic-v1"}
	}
	dht := c.DHT
	if dht == "" {
		dht = "off"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "version = 1\n\n[identity]\ndisplay = %q\n\n", c.Display)
	fmt.Fprintf(&b, "[listen]\naddresses = %s\n\n[api]\nlisten = %q\n\n", q(listen), c.apiAddr())
	fmt.Fprintf(&b, "[relay]\nservice = %v\nmailbox = true\nuse = %s\n\n", c.RelayService, q(c.RelayUse))
	fmt.Fprintf(&b, "[discovery]\nmdns = %v\ndht = %q\nbootstrap = %s\ngossip = %v\n\n", c.MDNS, dht, q(c.Bootstrap), c.Gossip)
	b.WriteString(c.Extra)
	b.WriteString("\n")
	if c.Capabilities != nil {
		if len(c.Capabilities) == 0 {
			b.WriteString("capabilities = []\n")
		}
		for _, cp := range c.Capabilities {
			fmt.Fprintf(&b, "[[capabilities]]\nname = %q\ndescription = %q\n\n", cp.Name, cp.Description)
		}
	}
	return b.String()
}

// Daemon is one `ifaced run` process inside a lab namespace, with its own
// data directory (IFACED_HOME) and config.toml. Its control API listens on
// 127.0.0.1:4818 (Config.APIPort) inside the namespace; the test reaches it through a
// forwarder on the test's own loopback that opens each connection from
// inside the namespace (dialInNS), so the unchanged node/api client is
// used: its data directory holds the forwarder's address and a copy of the
// daemon's token.
type Daemon struct {
	Name, NS, Home string
	Cfg            Config

	t      testing.TB
	bin    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	fwd    net.Listener
	client *api.Client
	peerID string
}

// NewDaemon prepares a daemon named name in namespace ns: its data
// directory (a key made by `ifaced init`) and config. Start runs it.
func NewDaemon(t testing.TB, dir, name, ns string, cfg Config) *Daemon {
	t.Helper()
	d := &Daemon{Name: name, NS: ns, Home: filepath.Join(dir, name), Cfg: cfg, t: t, bin: Binary(t)}
	if out, err := exec.Command(d.bin, "init", "--home", d.Home).CombinedOutput(); err != nil {
		t.Fatalf("netlab: ifaced init %s: %v: %s", name, err, out)
	}
	out, err := exec.Command(d.bin, "id", "--home", d.Home, "--json").Output()
	var id struct {
		PeerID string `json:"peer_id"`
	}
	if err != nil || json.Unmarshal(out, &id) != nil {
		t.Fatalf("netlab: ifaced id %s: %v: %s", name, err, out)
	}
	d.peerID = id.PeerID
	if d.peerID == "" {
		t.Fatalf("netlab: no peer ID for %s", name)
	}
	d.WriteConfig()
	t.Cleanup(d.cleanup)
	return d
}

// WriteConfig writes d.Cfg as the daemon's config.toml (read at its next
// start).
func (d *Daemon) WriteConfig() {
	if err := os.WriteFile(filepath.Join(d.Home, "config.toml"), []byte(d.Cfg.toml()), 0o600); err != nil {
		d.t.Fatalf("netlab: writing config of %s: %v", d.Name, err)
	}
}

// PeerID is the daemon's libp2p peer ID.
func (d *Daemon) PeerID() string { return d.peerID }

// Start runs the daemon and returns once its control API answers.
func (d *Daemon) Start(ctx context.Context) {
	d.t.Helper()
	if err := d.StartErr(ctx); err != nil {
		d.t.Fatalf("netlab: %v", err)
	}
}

// StartErr is Start returning its error (safe to call from goroutines).
func (d *Daemon) StartErr(ctx context.Context) error {
	d.mu.Lock()
	if d.cmd != nil {
		d.mu.Unlock()
		return fmt.Errorf("%s is already running", d.Name)
	}
	os.Remove(api.AddrFile(config.Home{Dir: d.Home})) // a killed daemon leaves it behind
	logf, err := os.OpenFile(d.Home+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	cmd := exec.Command("ip", "netns", "exec", d.NS, d.bin, "run", "--home", d.Home)
	cmd.Env = append(os.Environ(), "IFACED_HOME="+d.Home)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		d.mu.Unlock()
		return fmt.Errorf("starting %s: %w", d.Name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	d.cmd, d.exited = cmd, exited
	d.mu.Unlock()
	return d.waitAPI(ctx, exited)
}

// waitAPI polls until the daemon's control API answers a status request.
func (d *Daemon) waitAPI(ctx context.Context, exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(api.AddrFile(config.Home{Dir: d.Home})); err == nil {
			if c, err := d.dial(); err == nil {
				if _, err := c.Status(ctx); err == nil {
					return nil
				}
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited while starting; log:\n%s", d.Name, d.LogTail(30))
		case <-ctx.Done():
			return fmt.Errorf("%s: control API not answering: %w; log:\n%s", d.Name, ctx.Err(), d.LogTail(30))
		case <-tick.C:
		}
	}
}

// dial sets up the forwarder and the API client.
func (d *Daemon) dial() (*api.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client != nil {
		return d.client, nil
	}
	if d.fwd == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		d.fwd = ln
		go forward(ln, d.NS, d.Cfg.apiAddr())
	}
	ch := filepath.Join(filepath.Dir(d.Home), ".client-"+d.Name)
	if err := os.MkdirAll(ch, 0o700); err != nil {
		return nil, err
	}
	h := config.Home{Dir: ch}
	tok, err := os.ReadFile(api.TokenFile(config.Home{Dir: d.Home}))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(api.TokenFile(h), tok, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(api.AddrFile(h), []byte(d.fwd.Addr().String()), 0o600); err != nil {
		return nil, err
	}
	c, err := api.Dial(h)
	if err != nil {
		return nil, err
	}
	d.client = c
	return c, nil
}

// forward accepts connections on ln (the test's loopback) and joins each
// to the control API at addr inside namespace ns.
func forward(ln net.Listener, ns, addr string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			up, err := dialInNS(ctx, ns, addr)
			cancel()
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			go func() { io.Copy(c, up); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

// API is the daemon's control API client (the daemon must be running).
func (d *Daemon) API() *api.Client {
	d.t.Helper()
	c, err := d.dial()
	if err != nil {
		d.t.Fatalf("netlab: control API of %s: %v", d.Name, err)
	}
	return c
}

// Running reports whether the daemon's process is running.
func (d *Daemon) Running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// Stop ends the daemon with SIGTERM (SIGKILL after 10 s) and waits for it.
func (d *Daemon) Stop() { d.signal(syscall.SIGTERM, 10*time.Second) }

// Kill ends the daemon with SIGKILL, as a crash or a pulled plug would.
func (d *Daemon) Kill() { d.signal(syscall.SIGKILL, 0) }

func (d *Daemon) signal(sig syscall.Signal, grace time.Duration) {
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.cmd = nil
	if d.client != nil {
		d.client.Close()
		d.client = nil
	}
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	// By PID: the process this Daemon started (ip netns exec execs ifaced
	// in place, so the PID is the daemon's).
	cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-exited:
			return
		case <-time.After(grace):
			cmd.Process.Kill()
		}
	}
	<-exited
}

func (d *Daemon) cleanup() {
	failed := d.t.Failed()
	d.Kill()
	d.mu.Lock()
	if d.fwd != nil {
		d.fwd.Close()
	}
	d.mu.Unlock()
	if failed && os.Getenv("IFACED_LAB_LOGS") != "" {
		d.t.Logf("log of %s:\n%s", d.Name, d.LogTail(60))
	}
	// IFACED_LAB_KEEP_LOGS=DIR keeps every daemon's log (the data
	// directories go with the test's temporary directory).
	if dir := os.Getenv("IFACED_LAB_KEEP_LOGS"); dir != "" {
		if b, err := os.ReadFile(d.Home + ".log"); err == nil && os.MkdirAll(dir, 0o755) == nil {
			os.WriteFile(filepath.Join(dir, strings.ReplaceAll(d.t.Name(), "/", "_")+"-"+d.Name+".log"), b, 0o644)
		}
	}
}

// LogTail is the last n lines of the daemon's log.
func (d *Daemon) LogTail(n int) string {
	b, err := os.ReadFile(d.Home + ".log")
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Log is the daemon's whole log.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.Home + ".log")
	return string(b)
}

// WaitLog waits until the daemon's log holds a line containing s.
func (d *Daemon) WaitLog(ctx context.Context, s string) error {
	return Poll(ctx, 25*time.Millisecond, func() error {
		if strings.Contains(d.Log(), s) {
			return nil
		}
		return fmt.Errorf("%s has not logged %q", d.Name, s)
	})
}

// PID is the daemon's process ID, or 0 when it is not running.
func (d *Daemon) PID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// ErrGiveUp, wrapped in the error of a Poll condition, ends the Poll at
// once: the condition can no longer come true.
var ErrGiveUp = errors.New("giving up")

// Poll calls cond every interval until it returns nil, and returns the
// last error if ctx ends first or at once if it wraps ErrGiveUp. It is how
// the lab waits: on a condition observed, never on a sleep.
func Poll(ctx context.Context, interval time.Duration, cond func() error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := cond()
		if err == nil || errors.Is(err, ErrGiveUp) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
	}
}
