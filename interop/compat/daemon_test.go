package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// daemon is one `ifaced run` process of some version on loopback, driven
// by that same version's command line (what its owner would type).
type daemon struct {
	name, home, bin string
	peerID          string
	t               testing.TB

	mu     sync.Mutex
	log    bytes.Buffer
	cmd    *exec.Cmd
	exited chan struct{}
}

func (d *daemon) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.Write(p)
}

// Log is what the daemon wrote so far, over all its runs.
func (d *daemon) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// newDaemon makes a data directory with bin's `ifaced init` and writes
// config (TOML; a top-level version = 1 is added) into it.
func newDaemon(t testing.TB, bin, name, config string) *daemon {
	t.Helper()
	d := &daemon{name: name, home: filepath.Join(t.TempDir(), name), bin: bin, t: t}
	if out, err := exec.Command(bin, "init", "--home", d.home).CombinedOutput(); err != nil {
		t.Fatalf("%s: ifaced init: %v: %s", name, err, out)
	}
	d.peerID = strings.TrimSpace(d.must("id", "--field", "peer_id"))
	d.writeConfig(config)
	return d
}

func (d *daemon) writeConfig(config string) {
	if err := os.WriteFile(filepath.Join(d.home, "config.toml"), []byte("version = 1\n\n"+config), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// baseConfig is what every daemon here sets: loopback only, no discovery,
// the control API on a free port, logs at info.
func baseConfig(listen ...string) string {
	q := make([]string, len(listen))
	for i, l := range listen {
		q[i] = fmt.Sprintf("%q", l)
	}
	return fmt.Sprintf("[listen]\naddresses = [%s]\n\n[api]\nlisten = \"127.0.0.1:0\"\n\n"+
		"[discovery]\nmdns = false\ndht = \"off\"\ngossip = false\n\n", strings.Join(q, ", "))
}

// freePort is a loopback TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs the daemon and returns once its control API answers
// `ifaced status`.
func (d *daemon) start() {
	d.t.Helper()
	d.cmd = exec.Command(d.bin, "run", "--home", d.home)
	d.cmd.Stdout, d.cmd.Stderr = d, d
	if err := d.cmd.Start(); err != nil {
		d.t.Fatalf("%s: starting ifaced: %v", d.name, err)
	}
	exited := make(chan struct{})
	d.exited = exited
	go func(c *exec.Cmd) { c.Wait(); close(exited) }(d.cmd)
	d.t.Cleanup(d.stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := d.run("status", "--json"); err == nil {
			return
		}
		select {
		case <-exited:
			d.t.Fatalf("%s exited at start:\n%s", d.name, d.Log())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: the control API did not answer within 60 s:\n%s", d.name, d.Log())
		}
		time.Sleep(100 * time.Millisecond) // another process's start: nothing to wait on but polling
	}
}

// stop ends the daemon with SIGTERM (SIGKILL after 20 s) and waits for it.
func (d *daemon) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
}

// run runs one of the daemon's own verbs against its home.
func (d *daemon) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, d.bin, append(args, "--home", d.home)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: ifaced %s: %v: %s%s", d.name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), nil
}

// must is run, failing the test on an error.
func (d *daemon) must(args ...string) string {
	d.t.Helper()
	out, err := d.run(args...)
	if err != nil {
		d.t.Fatal(err)
	}
	return out
}

// json runs a verb with --json and decodes its output into v.
func (d *daemon) json(v any, args ...string) {
	d.t.Helper()
	out := d.must(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		d.t.Fatalf("%s: ifaced %s --json: %v:\n%s", d.name, strings.Join(args, " "), err, out)
	}
}

// addrs are the daemon's own addresses (`status --json`).
func (d *daemon) addrs() []string {
	d.t.Helper()
	var st struct {
		Addrs []string `json:"addrs"`
	}
	d.json(&st, "status")
	return st.Addrs
}

// peerSeq is the seq of peer's view this daemon holds (`peers --json`), 0
// when it holds none.
func (d *daemon) peerSeq(peer string) uint64 {
	d.t.Helper()
	out := d.must("peers", "--json")
	var list struct {
		Peers []struct {
			PeerID string `json:"peer_id"`
			Seq    uint64 `json:"seq"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		d.t.Fatalf("%s: peers --json: %v\n%s", d.name, err, out)
	}
	for _, p := range list.Peers {
		if p.PeerID == peer {
			return p.Seq
		}
	}
	return 0
}

// auditedConversation says whether the daemon's audit log holds the
// conversation with peer.
func (d *daemon) auditedConversation(peer, conv string) bool {
	d.t.Helper()
	var list struct {
		Conversations []struct {
			ID string `json:"conversation_id"`
		} `json:"conversations"`
	}
	d.json(&list, "audit", "--peer", peer)
	for _, c := range list.Conversations {
		if c.ID == conv {
			return true
		}
	}
	return false
}

// waitFor polls cond (the state of other processes, which say nothing
// when it changes) until it holds or the time is up.
func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
