package netlab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	dhtNodeOnce sync.Once
	dhtNodeDir  string
	dhtNodeBin  string
	dhtNodeErr  error
)

// buildDHTNode builds interop/netlab/dhtnode once per test binary run, into
// a temporary directory TestMain removes (removeDHTNode), and returns its
// path.
func buildDHTNode(t testing.TB) string {
	t.Helper()
	dhtNodeOnce.Do(func() {
		if dhtNodeDir, dhtNodeErr = os.MkdirTemp("", "netlab-dhtnode-"); dhtNodeErr != nil {
			return
		}
		dhtNodeBin = filepath.Join(dhtNodeDir, "dhtnode")
		out, err := exec.Command("go", "build", "-o", dhtNodeBin, "github.com/ifaced/ifaced/interop/netlab/dhtnode").CombinedOutput()
		if err != nil {
			dhtNodeErr = fmt.Errorf("go build ./interop/netlab/dhtnode: %v: %s", err, out)
		}
	})
	if dhtNodeErr != nil {
		t.Fatalf("netlab: %v", dhtNodeErr)
	}
	return dhtNodeBin
}

// removeDHTNode deletes what buildDHTNode built, if anything.
func removeDHTNode() {
	if dhtNodeDir != "" {
		os.RemoveAll(dhtNodeDir)
	}
}

// dhtAnswer is one answer line of dhtnode's control channel (see its
// package comment).
type dhtAnswer struct {
	ID           int      `json:"id"`
	Error        string   `json:"error"`
	RoutingTable *int     `json:"routing_table"`
	Provided     []string `json:"provided"`
	Conns        *int     `json:"conns"`
	Providers    []string `json:"providers"`
	Found        bool     `json:"found"`
	Hops         *int     `json:"hops"`
	LookupMS     float64  `json:"lookup_ms"`
	DialMS       float64  `json:"dial_ms"`
}

// dhtProc is one dhtnode process, in namespace NS ("" for the test's own),
// driven over its stdin and stdout; its stderr goes to Log.
type dhtProc struct {
	Name, NS, Log string
	PeerID        string
	Addrs         []string

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}

	mu      sync.Mutex
	next    int
	waiting map[int]chan dhtAnswer
}

// startDHTProc starts bin with args (inside ns unless it is empty) and
// returns once it has printed its peer ID and addresses.
func startDHTProc(ctx context.Context, bin, dir, name, ns string, env []string, args ...string) (*dhtProc, error) {
	p := &dhtProc{Name: name, NS: ns, Log: filepath.Join(dir, name+".log"), exited: make(chan struct{}), waiting: map[int]chan dhtAnswer{}}
	cmd := exec.Command(bin, args...)
	if ns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...)
	}
	cmd.Env = append(os.Environ(), env...)
	logf, err := os.Create(p.Log)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p.cmd = cmd
	ready := make(chan error, 1)
	go func() {
		defer func() { cmd.Wait(); logf.Close(); close(p.exited) }()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		if !sc.Scan() {
			ready <- fmt.Errorf("%s printed nothing", name)
			return
		}
		var hello struct {
			PeerID string   `json:"peer_id"`
			Addrs  []string `json:"addrs"`
		}
		if err := json.Unmarshal(sc.Bytes(), &hello); err != nil || hello.PeerID == "" {
			ready <- fmt.Errorf("%s: first line %q is not {peer_id, addrs}: %v", name, sc.Text(), err)
			return
		}
		p.PeerID, p.Addrs = hello.PeerID, hello.Addrs
		ready <- nil
		for sc.Scan() {
			var a dhtAnswer
			if json.Unmarshal(sc.Bytes(), &a) != nil {
				continue
			}
			p.mu.Lock()
			ch := p.waiting[a.ID]
			delete(p.waiting, a.ID)
			p.mu.Unlock()
			if ch != nil {
				ch <- a
			}
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			p.Stop()
			return nil, fmt.Errorf("%w; log:\n%s", err, p.LogTail(20))
		}
		return p, nil
	case <-ctx.Done():
		p.Stop()
		return nil, fmt.Errorf("%s: not ready: %w; log:\n%s", name, ctx.Err(), p.LogTail(20))
	}
}

// Call sends one request (its id is set here) and waits for its answer.
func (p *dhtProc) Call(ctx context.Context, req map[string]any) (dhtAnswer, error) {
	ch := make(chan dhtAnswer, 1)
	p.mu.Lock()
	p.next++
	id := p.next
	p.waiting[id] = ch
	req["id"] = id
	line, _ := json.Marshal(req)
	_, err := p.stdin.Write(append(line, '\n'))
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		delete(p.waiting, id)
		p.mu.Unlock()
	}
	if err != nil {
		forget()
		return dhtAnswer{}, fmt.Errorf("%s: sending %s: %w", p.Name, req["op"], err)
	}
	select {
	case a := <-ch:
		return a, nil
	case <-p.exited:
		forget()
		return dhtAnswer{}, fmt.Errorf("%s exited; log:\n%s", p.Name, p.LogTail(20))
	case <-ctx.Done():
		forget()
		return dhtAnswer{}, fmt.Errorf("%s: no answer to %s: %w", p.Name, req["op"], ctx.Err())
	}
}

// PID is the node's process ID (ip netns exec execs it in place).
func (p *dhtProc) PID() int { return p.cmd.Process.Pid }

// Stop closes the node's stdin (it ends at that), sends SIGTERM after 5 s
// and SIGKILL after 10 s, by PID, and waits for it.
func (p *dhtProc) Stop() {
	p.stdin.Close()
	for _, step := range []struct {
		after time.Duration
		sig   syscall.Signal
	}{{5 * time.Second, syscall.SIGTERM}, {5 * time.Second, syscall.SIGKILL}} {
		select {
		case <-p.exited:
			return
		case <-time.After(step.after):
			p.cmd.Process.Signal(step.sig)
		}
	}
	<-p.exited
}

// LogTail is the last n lines of the node's stderr.
func (p *dhtProc) LogTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(string(bytes.TrimRight(b, "\n")), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// procMemory is the resident memory of process pid from /proc, in MB: all
// of it (VmRSS) and its private part (RssAnon: heap and stacks; the rest
// is mostly the executable's pages, which every process running the same
// binary shares). Zeros when pid is gone.
func procMemory(pid int) (rss, anon float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb float64
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fmt.Sscan(rest, &kb)
			rss = kb / 1024
		} else if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			fmt.Sscan(rest, &kb)
			anon = kb / 1024
		}
	}
	return rss, anon
}
