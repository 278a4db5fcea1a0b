package hostile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/interop/netlab"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// Target is one `ifaced run` process on loopback: the daemon under attack.
// Everything the suite asserts about it is measured from outside the
// process: /proc/<pid> for memory and CPU, the data directory for disk.
type Target struct {
	Home     string
	P2P      multiaddr.Multiaddr // its libp2p listen address
	HTTP     string              // its HTTP binding, host:port ("" when off)
	ID       *identity.Identity  // its key, read from the home (the suite signs nothing with it)
	PeerID   peer.ID
	MemoryMB int // limits.max_memory_mb

	t      testing.TB
	cmd    *exec.Cmd
	exited chan struct{}
	log    bytes.Buffer
}

// Options is what a test sets in the target's config.toml.
type Options struct {
	MemoryMB int    // limits.max_memory_mb; 0 means 256, the default
	HTTP     bool   // serve the HTTP binding on loopback
	Gossip   bool   // discovery.gossip
	Relay    bool   // relay.service and the mailbox
	Extra    string // more TOML, appended after the sections the suite writes
	// Capabilities, each {name, description}; nil means one ("ping").
	Capabilities [][2]string
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start prepares a home (ifaced init), writes its config and runs the
// daemon until the test ends; it returns once the libp2p port (and the
// HTTP binding, when there is one) accepts connections.
func Start(t testing.TB, o Options) *Target {
	t.Helper()
	bin := netlab.Binary(t)
	if o.MemoryMB == 0 {
		o.MemoryMB = 256
	}
	d := &Target{Home: filepath.Join(t.TempDir(), "target"), MemoryMB: o.MemoryMB, t: t, exited: make(chan struct{})}
	if out, err := exec.Command(bin, "init", "--home", d.Home).CombinedOutput(); err != nil {
		t.Fatalf("ifaced init: %v: %s", err, out)
	}
	id, err := identity.LoadKey(config.Home{Dir: d.Home}.KeyPath())
	if err != nil {
		t.Fatalf("reading the target's key: %v", err)
	}
	d.ID, d.PeerID = id, id.PeerID()
	port := freePort(t)
	d.P2P = multiaddr.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port))
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "version = 1\n\n[identity]\ndisplay = \"target\"\n\n")
	fmt.Fprintf(&cfg, "[listen]\naddresses = [%q]\n\n", d.P2P.String())
	fmt.Fprintf(&cfg, "[api]\nlisten = \"127.0.0.1:%d\"\n\n", freePort(t))
	if o.HTTP {
		d.HTTP = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		fmt.Fprintf(&cfg, "[http]\nlisten = %q\n\n", d.HTTP)
	}
	fmt.Fprintf(&cfg, "[limits]\nmax_memory_mb = %d\n\n", o.MemoryMB)
	fmt.Fprintf(&cfg, "[relay]\nservice = %v\nmailbox = true\n\n", o.Relay)
	fmt.Fprintf(&cfg, "[discovery]\nmdns = false\ndht = \"off\"\ngossip = %v\n\n", o.Gossip)
	fmt.Fprintf(&cfg, "[log]\nlevel = \"warn\"\n\n")
	cfg.WriteString(o.Extra)
	cfg.WriteString("\n")
	caps := o.Capabilities
	if caps == nil {
		caps = [][2]string{{"ping", "Respond to connectivity tests"}}
	}
	for _, c := range caps {
		fmt.Fprintf(&cfg, "[[capabilities]]\nname = %q\ndescription = %q\n\n", c[0], c[1])
	}
	if err := os.WriteFile(filepath.Join(d.Home, "config.toml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, "run", "--home", d.Home)
	d.cmd.Env = append(os.Environ(), "IFACED_HOME="+d.Home)
	d.cmd.Stdout, d.cmd.Stderr = &lockedWriter{buf: &d.log}, &lockedWriter{buf: &d.log}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting ifaced: %v", err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(d.stop)
	// Up once its libp2p port accepts connections, and its HTTP binding's
	// when it serves one (which may open a moment after).
	deadline := time.Now().Add(60 * time.Second)
	listening := []string{fmt.Sprintf("127.0.0.1:%d", port)}
	if d.HTTP != "" {
		listening = append(listening, d.HTTP)
	}
	for len(listening) > 0 {
		c, err := net.DialTimeout("tcp", listening[0], time.Second)
		if err == nil {
			c.Close()
			listening = listening[1:]
			continue
		}
		select {
		case <-d.exited:
			t.Fatalf("ifaced exited at start: %s", d.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ifaced did not listen on %s within 60 s: %v\n%s", listening[0], err, d.Log())
		}
		time.Sleep(50 * time.Millisecond) // polling a port another process opens: nothing to wait on
	}
	return d
}

// Log is what the daemon wrote to stdout and stderr so far.
func (d *Target) Log() string {
	lockedLog.Lock()
	defer lockedLog.Unlock()
	return d.log.String()
}

// Alive fails the test if the daemon has exited.
func (d *Target) Alive(t testing.TB) {
	t.Helper()
	select {
	case <-d.exited:
		t.Fatalf("the daemon exited under attack: %v\n%s", d.cmd.ProcessState, d.Log())
	default:
	}
}

// Pin has the owner pin id's key with the command line (`ifaced trust
// PEER --verify FINGERPRINT`): that peer is then one the owner made known.
func (d *Target) Pin(t testing.TB, id *identity.Identity) {
	t.Helper()
	out, err := exec.Command(netlab.Binary(t), "trust", id.PeerID().String(), "--verify", id.Fingerprint(), "--home", d.Home).CombinedOutput()
	if err != nil {
		t.Fatalf("ifaced trust --verify: %v: %s", err, out)
	}
}

// PID is the daemon's process ID.
func (d *Target) PID() int { return d.cmd.Process.Pid }

// Stop ends the daemon (SIGTERM, then SIGKILL after 20 s).
func (d *Target) Stop() { d.stop() }

// Records stops the daemon and returns the peer IDs of the peer records
// and the trust records its store holds.
func (d *Target) Records(t testing.TB) (peers, trusts []string) {
	t.Helper()
	d.stop()
	st, err := store.Open(filepath.Join(d.Home, "ifaced.db"))
	if err != nil {
		t.Fatalf("opening the stopped daemon's store: %v", err)
	}
	defer st.Close()
	ps, err := st.Peers()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		peers = append(peers, p.PeerID)
	}
	ts, err := st.Trusts()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ts {
		trusts = append(trusts, r.PeerID)
	}
	return peers, trusts
}

func (d *Target) stop() {
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

// Sample is the daemon process measured from outside at one moment.
type Sample struct {
	PeakRSS int64         // VmHWM: the most resident memory the process ever had
	RSS     int64         // VmRSS now
	RSSAnon int64         // RssAnon now: heap, stacks and buffers, without mapped files (the store's pages)
	CPU     time.Duration // user + system time so far
	Disk    int64         // bytes of regular files under the home
	FDs     int           // open file descriptors (entries of /proc/<pid>/fd)
}

func (s Sample) String() string {
	return fmt.Sprintf("peak RSS %s, RSS %s, CPU %s, disk %s", MiB(s.PeakRSS), MiB(s.RSS), s.CPU.Round(time.Millisecond), MiB(s.Disk))
}

// MiB formats a byte count.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// Measure reads /proc/<pid>/status and /proc/<pid>/stat and walks the home.
func (d *Target) Measure(t testing.TB) Sample {
	t.Helper()
	d.Alive(t)
	pid := d.cmd.Process.Pid
	var s Sample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the daemon's status: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			s.PeakRSS = kb << 10
		case "VmRSS:":
			s.RSS = kb << 10
		case "RssAnon:":
			s.RSSAnon = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("reading the daemon's stat: %v", err)
	}
	// Fields after the command name (which may hold spaces), in
	// parentheses: utime and stime are the 14th and 15th fields of the
	// line, in clock ticks (USER_HZ, 100 on Linux).
	rest := string(stat[bytes.LastIndexByte(stat, ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	s.CPU = time.Duration(utime+stime) * 10 * time.Millisecond
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("reading the daemon's descriptors: %v", err)
	}
	s.FDs = len(fds)
	s.Disk = dirSize(d.Home)
	return s
}

func dirSize(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking (rotation, retention)
			}
			return nil
		}
		if e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// WaitQuiet waits until the daemon's CPU time stops growing (it has
// worked through what was sent), or ctx ends.
func (d *Target) WaitQuiet(ctx context.Context, t testing.TB) Sample {
	t.Helper()
	last := d.Measure(t)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return last
		case <-tick.C:
		}
		s := d.Measure(t)
		if s.CPU-last.CPU < 50*time.Millisecond {
			return s
		}
		last = s
	}
}
