package main

// A child is this same program re-run in another process, to serve as the
// daemon whose CPU (row 3) or memory (row 4) is measured, apart from the
// peers that load it. It learns its role from the environment variable
// childEnv (so that it works from a test binary too), says where it
// listens in one JSON line on stdout, then answers one JSON line per
// command read on stdin:
//
//	stats   its CPU time, connections and Go heap
//	gc      the same, after a garbage collection that returns freed memory
//	        to the system, and the size of its home on disk
//
// and stops when stdin closes.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// childEnv carries a child's childSpec, as JSON.
const childEnv = "IFACED_BENCH_CHILD"

// Child roles.
const (
	roleIfaced = "ifaced" // a Node with the 20 capabilities (benchConfig)
	roleBare   = "bare"   // a libp2p host with the same transports, and no limits
)

type childSpec struct {
	Role      string `json:"role"`
	Dir       string `json:"dir"`        // where an ifaced child's home goes
	ConnsHigh int    `json:"conns_high"` // an ifaced child's connection manager high water mark
	AuditMB   int    `json:"audit_mb"`   // an ifaced child's audit.max_mb, when more than ConnsHigh gives
}

type childHello struct {
	Addrs []string `json:"addrs"` // ending in /p2p/<peer ID>
	FDs   uint64   `json:"fds"`   // its file descriptor limit, raised to the hard limit
	Err   string   `json:"err,omitempty"`
}

type childStats struct {
	CPUNanos   int64  `json:"cpu_ns"`
	Conns      int    `json:"conns"`
	HeapInuse  uint64 `json:"heap_inuse"`
	Goroutines int    `json:"goroutines"`
	HomeBytes  int64  `json:"home_bytes"` // an ifaced child's home on disk (audit log, store), after gc only
}

// childMain runs the child's part when this process is a child, and
// reports whether it was one.
func childMain() (bool, error) {
	v := os.Getenv(childEnv)
	if v == "" {
		return false, nil
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		return true, fmt.Errorf("reading %s: %w", childEnv, err)
	}
	return true, serveChild(spec, os.Stdin, os.Stdout)
}

func serveChild(spec childSpec, in io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	fds, err := raiseFDLimit()
	if err != nil {
		enc.Encode(childHello{Err: err.Error()})
		return err
	}
	stopProfile, err := startCPUProfile()
	if err != nil {
		enc.Encode(childHello{Err: err.Error()})
		return err
	}
	defer stopProfile()
	h, addrs, home, stop, err := startChildHost(spec)
	if err != nil {
		enc.Encode(childHello{Err: err.Error()})
		return err
	}
	defer stop()
	if err := enc.Encode(childHello{Addrs: addrs, FDs: fds.cur}); err != nil {
		return fmt.Errorf("saying hello: %w", err)
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch cmd := sc.Text(); cmd {
		case "gc", "stats":
			var disk int64
			if cmd == "gc" {
				runtime.GC()
				debug.FreeOSMemory()
				disk = dirBytes(home)
				if err := writeHeapProfile(); err != nil {
					return err
				}
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			cpu, err := cpuTime()
			if err != nil {
				return err
			}
			st := childStats{CPUNanos: cpu, Conns: len(h.Network().Conns()), HeapInuse: ms.HeapInuse, Goroutines: runtime.NumGoroutine(),
				HomeBytes: disk}
			if err := enc.Encode(st); err != nil {
				return fmt.Errorf("answering %s: %w", cmd, err)
			}
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
	}
	return sc.Err()
}

// startChildHost starts what spec asks for and returns its host, its
// addresses, its home (an ifaced child's; "" for a bare host) and how to
// stop it.
func startChildHost(spec childSpec) (host.Host, []string, string, func(), error) {
	switch spec.Role {
	case roleIfaced:
		cfg := benchConfig()
		if spec.ConnsHigh > cfg.Limits.ConnectionsHigh {
			// Room for every peer the parent opens: the connection manager
			// must not trim them, nor the resource manager refuse them.
			cfg.Limits.ConnectionsHigh = spec.ConnsHigh
			cfg.Limits.ConnectionsLow = spec.ConnsHigh * 9 / 10
			cfg.Limits.MaxMemoryMB = 4096
			cfg.Limits.MaxStreams = 4 * spec.ConnsHigh
			// Room in the audit log for every stranger's greeting: strangers
			// get a quarter of audit.max_mb a day, and past it the daemon
			// takes no new conversation from them (at 5,000 peers the
			// default's 256 MiB held some 2,600 greetings). 1 MiB per
			// connection slot is 2 MiB per peer, half a MiB of it theirs.
			cfg.Audit.MaxMB = max(cfg.Audit.MaxMB, spec.ConnsHigh)
		}
		cfg.Audit.MaxMB = max(cfg.Audit.MaxMB, spec.AuditMB)
		// The collector as `ifaced run` sets it for its process.
		node.TuneGC(cfg.Limits)
		d, err := startDaemon(spec.Dir, cfg)
		if err != nil {
			return nil, nil, "", nil, err
		}
		var addrs []string
		for _, a := range d.Addrs() {
			addrs = append(addrs, a.String())
		}
		return d.Host(), addrs, d.home, d.close, nil
	case roleBare:
		h, err := libp2p.New(
			libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"),
			libp2p.Transport(tcp.NewTCPTransport),
			libp2p.Transport(quic.NewTransport),
			libp2p.Security(noise.ID, noise.New),
			libp2p.Security(libp2ptls.ID, libp2ptls.New),
			libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
			libp2p.ResourceManager(&network.NullResourceManager{}),
			libp2p.Ping(true),
			libp2p.DisableMetrics(),
		)
		if err != nil {
			return nil, nil, "", nil, fmt.Errorf("starting a bare libp2p host: %w", err)
		}
		var addrs []string
		for _, a := range h.Addrs() {
			addrs = append(addrs, a.String()+"/p2p/"+h.ID().String())
		}
		return h, addrs, "", func() { h.Close() }, nil
	default:
		return nil, nil, "", nil, fmt.Errorf("unknown role %q", spec.Role)
	}
}

// dirBytes is the size of the files under dir (0 for ""): what a daemon
// keeps on disk.
func dirBytes(dir string) int64 {
	if dir == "" {
		return 0
	}
	var n int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil // a file removed meanwhile is not counted
	})
	return n
}

// child is a running child process, seen from the parent.
type child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *json.Decoder
	stderr *lockedBuffer
	addrs  []string
	fds    uint64     // its file descriptor limit
	mu     sync.Mutex // one command at a time
}

// startChild starts a child for spec and waits for its hello.
func startChild(spec childSpec) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to re-run it: %w", err)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the child's spec: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	c := &child{cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	if c.in, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("starting the child: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the child: %w", err)
	}
	c.out = json.NewDecoder(out)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the child: %w", err)
	}
	var hello childHello
	if err := c.read(&hello, time.Minute); err != nil {
		c.stop()
		return nil, fmt.Errorf("the %s child did not start: %w", spec.Role, err)
	}
	if hello.Err != "" {
		c.stop()
		return nil, fmt.Errorf("the %s child did not start: %s", spec.Role, hello.Err)
	}
	c.addrs, c.fds = hello.Addrs, hello.FDs
	return c, nil
}

// addr is the child's address for transport.
func (c *child) addr(transport string) (string, error) {
	for _, a := range c.addrs {
		if strings.Contains(a, transport) {
			return a, nil
		}
	}
	return "", fmt.Errorf("the child has no %s address (it has %v)", strings.Trim(transport, "/"), c.addrs)
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// command sends cmd ("stats" or "gc") and reads the answer.
func (c *child) command(cmd string) (childStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var st childStats
	if _, err := fmt.Fprintln(c.in, cmd); err != nil {
		return st, fmt.Errorf("asking the child for %s: %w%s", cmd, err, c.tail())
	}
	if err := c.read(&st, time.Minute); err != nil {
		return st, fmt.Errorf("asking the child for %s: %w", cmd, err)
	}
	return st, nil
}

// read decodes the child's next line into v, or kills the child when none
// comes within timeout.
func (c *child) read(v any, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.out.Decode(v) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%w%s", err, c.tail())
		}
		return nil
	case <-time.After(timeout):
		c.cmd.Process.Kill()
		<-done
		return fmt.Errorf("no answer within %s; killed it%s", timeout, c.tail())
	}
}

// stop closes the child's stdin, which ends it, and waits for it; a child
// that does not end within 30 s is killed.
func (c *child) stop() error {
	c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-done
		return errors.New("the child did not stop within 30 s; killed it")
	}
}

// tail is the end of what the child wrote on stderr, for an error.
func (c *child) tail() string {
	s := strings.TrimSpace(c.stderr.String())
	if s == "" {
		return ""
	}
	if len(s) > 500 {
		s = "…" + s[len(s)-500:]
	}
	return " (child's stderr: " + s + ")"
}

// lockedBuffer is a bytes.Buffer safe to write from the child's stderr
// copier while an error reads it.
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

// heapProfileEnv names a file prefix: a child given it writes a heap
// profile there (PREFIX-<pid>-<n>.heap) after each gc command, to see
// what a row's memory is made of (go tool pprof -sample_index=inuse_space).
const heapProfileEnv = "IFACED_BENCH_HEAPPROFILE"

var heapProfiles int

// cpuProfileEnv names a file prefix: a child given it writes a CPU
// profile of its whole life there (PREFIX-<pid>.cpu), to see where an
// answering daemon's CPU per greeting (section 3) goes.
const cpuProfileEnv = "IFACED_BENCH_CPUPROFILE"

// startCPUProfile starts the child's CPU profile when cpuProfileEnv asks
// for one; the function it returns stops and writes it.
func startCPUProfile() (func(), error) {
	prefix := os.Getenv(cpuProfileEnv)
	if prefix == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s-%d.cpu", prefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("writing a CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing a CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func writeHeapProfile() error {
	prefix := os.Getenv(heapProfileEnv)
	if prefix == "" {
		return nil
	}
	heapProfiles++
	f, err := os.Create(fmt.Sprintf("%s-%d-%d.heap", prefix, os.Getpid(), heapProfiles))
	if err != nil {
		return fmt.Errorf("writing a heap profile: %w", err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return fmt.Errorf("writing a heap profile: %w", err)
	}
	return nil
}
