// Package otheruser is what the tests that play a second local user
// share: they start this test binary again as the user nobody (uid and
// gid 65534, no supplementary groups) to do one thing — send an HTTP
// request, hold a TCP connection open, read a file — and report what
// happened. What the daemon must refuse to another user of the machine
// (its control API and console, node/api's peeruid.go; the console's
// login page file; `ifaced ui`'s opener) is shown only by a real process
// of another user, so that is what these tests run.
//
// Starting a process as another user needs root, as CI runs; elsewhere
// Need skips the test and says why. A test package that uses this calls
// Main first in its TestMain, which does the helper's work and exits when
// the process was started as the helper, and Cleanup after its tests.
package otheruser

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// UID and GID are the other user's: nobody and nogroup on Debian.
const (
	UID = 65534
	GID = 65534
)

// The helper's environment: what to do, and its argument as JSON.
const (
	doEnv  = "IFACED_OTHER_USER_DO"
	argEnv = "IFACED_OTHER_USER_ARG"
)

// Request is an HTTP request the other user sends.
type Request struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Header  map[string]string `json:"header,omitempty"`
	Body    string            `json:"body,omitempty"`
	Timeout time.Duration     `json:"timeout,omitempty"` // 0: 30 s
}

// Response is what the other user got: a status and a body, or the error
// that kept it from getting one.
type Response struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
	Err    string `json:"err,omitempty"`
}

// Main does the helper's work and exits when this process was started as
// the helper (by Do, Hold or ReadFile); otherwise it returns at once.
// Call it first in the package's TestMain.
func Main() {
	do := os.Getenv(doEnv)
	if do == "" {
		return
	}
	arg := os.Getenv(argEnv)
	out := json.NewEncoder(os.Stdout)
	switch do {
	case "http":
		var req Request
		if err := json.Unmarshal([]byte(arg), &req); err != nil {
			out.Encode(Response{Err: "bad request argument: " + err.Error()})
			break
		}
		out.Encode(send(req))
	case "hold":
		c, err := net.DialTimeout("tcp", arg, 10*time.Second)
		if err != nil {
			fmt.Println("error: " + err.Error())
			break
		}
		fmt.Println(c.LocalAddr().String())
		io.Copy(io.Discard, os.Stdin) // until the test closes it
		c.Close()
	case "read":
		b, err := os.ReadFile(arg)
		if err != nil {
			out.Encode(Response{Err: err.Error()})
			break
		}
		out.Encode(Response{Body: string(b)})
	default:
		fmt.Fprintf(os.Stderr, "otheruser: unknown helper action %q\n", do)
		os.Exit(2)
	}
	os.Exit(0)
}

func send(r Request) Response {
	req, err := http.NewRequest(r.Method, r.URL, strings.NewReader(r.Body))
	if err != nil {
		return Response{Err: err.Error()}
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	c := &http.Client{Timeout: timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		return Response{Err: err.Error()}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return Response{Status: res.StatusCode, Err: err.Error()}
	}
	return Response{Status: res.StatusCode, Body: string(b)}
}

// Need skips t unless this process can start processes as another user:
// it must be root (CI runs as root).
func Need(t testing.TB) {
	t.Helper()
	if !supported {
		t.Skipf("playing a second local user starts a process as uid %d, which this test does on Unix only", UID)
	}
	if os.Geteuid() != 0 {
		t.Skipf("playing a second local user means starting a process as uid %d, which needs root (CI runs as root); this test runs as uid %d", UID, os.Geteuid())
	}
}

var (
	binOnce sync.Once
	bin     string
	binErr  error
)

// binary is a copy of this test binary that the other user may run: the
// go tool builds it in a directory only its owner may enter.
func binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		var exe, dir string
		if exe, binErr = os.Executable(); binErr != nil {
			return
		}
		if dir, binErr = os.MkdirTemp("", "ifaced-otheruser-"); binErr != nil {
			return
		}
		if binErr = os.Chmod(dir, 0o755); binErr != nil {
			return
		}
		bin = filepath.Join(dir, "helper.test")
		var src, dst *os.File
		if src, binErr = os.Open(exe); binErr != nil {
			return
		}
		defer src.Close()
		if dst, binErr = os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755); binErr != nil {
			return
		}
		if _, binErr = io.Copy(dst, src); binErr == nil {
			binErr = dst.Close()
		} else {
			dst.Close()
		}
	})
	if binErr != nil {
		t.Fatalf("otheruser: copying the test binary for uid %d: %v", UID, binErr)
	}
	return bin
}

// Cleanup removes the copy of the test binary, if one was made; call it
// in TestMain after the tests ran.
func Cleanup() {
	if bin != "" {
		os.RemoveAll(filepath.Dir(bin))
	}
}

// command is the helper, to do what with arg, as the other user.
func command(t testing.TB, what, arg string) *exec.Cmd {
	t.Helper()
	Need(t)
	b := binary(t)
	cmd := exec.Command(b)
	cmd.Dir = filepath.Dir(b)
	cmd.Env = []string{doEnv + "=" + what, argEnv + "=" + arg, "HOME=" + filepath.Dir(b), "PATH=/usr/bin:/bin"}
	asOther(cmd)
	return cmd
}

// Do sends r as the other user and returns what it got.
func Do(t testing.TB, r Request) Response {
	t.Helper()
	arg, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	cmd := command(t, "http", string(arg))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res Response
	if err != nil || json.Unmarshal(out, &res) != nil {
		t.Fatalf("otheruser: the helper as uid %d: %v, %q\n%s", UID, err, out, stderr.String())
	}
	return res
}

// ReadFile reads path as the other user; the error is what the other
// user's process was told.
func ReadFile(t testing.TB, path string) (string, error) {
	t.Helper()
	cmd := command(t, "read", path)
	out, err := cmd.Output()
	var res Response
	if err != nil || json.Unmarshal(out, &res) != nil {
		t.Fatalf("otheruser: the helper as uid %d: %v, %q", UID, err, out)
	}
	if res.Err != "" {
		return "", fmt.Errorf("%s", res.Err)
	}
	return res.Body, nil
}

// Hold opens a TCP connection to addr as the other user and keeps it
// open until release; it returns the connection's local address as the
// other user's process sees it.
func Hold(t testing.TB, addr string) (local string, release func()) {
	t.Helper()
	cmd := command(t, "hold", addr)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("otheruser: starting the helper as uid %d: %v", UID, err)
	}
	line, err := bufio.NewReader(outPipe).ReadString('\n')
	line = strings.TrimSpace(line)
	var once sync.Once
	release = func() {
		once.Do(func() {
			in.Close()
			cmd.Wait()
		})
	}
	t.Cleanup(release)
	if err != nil || strings.HasPrefix(line, "error: ") {
		t.Fatalf("otheruser: the helper as uid %d could not connect to %s: %q %v", UID, addr, line, err)
	}
	return line, release
}
