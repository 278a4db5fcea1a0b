package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"go.uber.org/goleak"
)

// startUIDaemon is startDaemon with the console mounted as runDaemon
// mounts it.
func startUIDaemon(t *testing.T, cfg *node.Config) (node.Home, *node.Node, *api.Server) {
	t.Helper()
	if cfg == nil {
		cfg = loopbackConfig()
	}
	h, n, srv, log := startServer(t, cfg)
	stop, err := mountUI(srv, h, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return h, n, srv
}

// runEnv runs a verb with the environment vars (IFACED_HOME, PATH,
// DISPLAY…), none other.
func runEnv(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	code := run(context.Background(), e, args)
	return result{code, out.String(), errb.String()}
}

// TestUIVerb: `ifaced ui` prints a one-time login URL that opens a
// console session, and hands it to the desktop's opener where there is a
// display; errors say what is wrong.
func TestUIVerb(t *testing.T) {
	home, _, srv := startUIDaemon(t, nil)
	urlShape := regexp.MustCompile(uiURLPattern)

	r := runEnv(t, map[string]string{"IFACED_HOME": home.Dir}, "ui", "--no-open")
	if r.code != 0 {
		t.Fatalf("ui --no-open: exit %d: %s", r.code, r.stderr)
	}
	u := strings.TrimSuffix(r.stdout, "\n")
	if !urlShape.MatchString(u) || !strings.HasPrefix(u, "http://"+srv.Addr()+"/ui/login?code=") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("ui --no-open printed %q, want one login URL on %s", r.stdout, srv.Addr())
	}
	if !strings.Contains(r.stderr, "works once") {
		t.Errorf("ui --no-open said %q on stderr", r.stderr)
	}
	// The README shows it as printed, on the default address.
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## The console\n")
	section, _, _ = strings.Cut(section, "\n## ")
	shown := "\n# http://" + node.DefaultConfig().API.Listen + "/ui/login?code=…\n"
	if !strings.Contains(section, shown) || !strings.Contains(section, "\nifaced ui --no-open ") {
		t.Errorf("README.md's console section does not show `ifaced ui --no-open` printing %q", strings.TrimSpace(shown))
	}
	if printed := strings.Replace(u, srv.Addr(), node.DefaultConfig().API.Listen, 1); !urlShape.MatchString(printed) ||
		!strings.HasPrefix(printed, strings.TrimSuffix(strings.TrimPrefix(shown, "\n# "), "…\n")) {
		t.Errorf("the URL printed, %q, is not the README's %q", u, shown)
	}
	// The URL logs a browser in, once.
	jarless := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, want := range []int{http.StatusSeeOther, http.StatusUnauthorized} {
		resp, err := jarless.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want || (i == 0) != (len(resp.Cookies()) == 1) {
			t.Errorf("opening the URL the %d. time: %d with %d cookies, want %d", i+1, resp.StatusCode, len(resp.Cookies()), want)
		}
	}

	r = runEnv(t, map[string]string{"IFACED_HOME": home.Dir}, "ui", "--no-open", "--json")
	var j struct {
		URL        string    `json:"url"`
		ExpiresAt  time.Time `json:"expires_at"`
		OpenedWith string    `json:"opened_with"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); r.code != 0 || err != nil || !urlShape.MatchString(j.URL) || time.Until(j.ExpiresAt) > time.Minute || j.OpenedWith != "" {
		t.Errorf("ui --json: exit %d, %+v (%v)\n%s", r.code, j, err, r.stderr)
	}

	// With a display and an opener on PATH, the URL goes to the opener (a
	// real program here, which writes down what it was given).
	bin := t.TempDir()
	got := filepath.Join(t.TempDir(), "opened")
	script := "#!/bin/sh\nprintf '%s' \"$1\" > " + got + ".tmp && mv " + got + ".tmp " + got + "\n"
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r = runEnv(t, map[string]string{"IFACED_HOME": home.Dir, "PATH": bin, "DISPLAY": ":0"}, "ui")
	if r.code != 0 || !strings.Contains(r.stderr, "opened with xdg-open") {
		t.Fatalf("ui with a display: exit %d, stderr %q", r.code, r.stderr)
	}
	waitUntil(t, "the opener to be given the URL", func() bool { _, err := os.Stat(got); return err == nil })
	if b, _ := os.ReadFile(got); string(b) != strings.TrimSpace(r.stdout) {
		t.Errorf("the opener was given %q, the URL printed is %q", b, r.stdout)
	}
	// Without a display, or without an opener, it only prints.
	for name, vars := range map[string]map[string]string{
		"no display": {"IFACED_HOME": home.Dir, "PATH": bin},
		"no opener":  {"IFACED_HOME": home.Dir, "PATH": t.TempDir(), "DISPLAY": ":0"},
	} {
		r := runEnv(t, vars, "ui")
		if r.code != 0 || !urlShape.MatchString(strings.TrimSpace(r.stdout)) || !strings.Contains(r.stderr, "open it in a browser") {
			t.Errorf("ui with %s: exit %d, %q, %q", name, r.code, r.stdout, r.stderr)
		}
	}

	if r := runEnv(t, map[string]string{"IFACED_HOME": home.Dir}, "ui", "now"); r.code != 2 || !strings.Contains(r.stderr, "ui takes no arguments") {
		t.Errorf("ui with an argument: exit %d, %q", r.code, r.stderr)
	}
	if r := runEnv(t, map[string]string{"IFACED_HOME": t.TempDir()}, "ui", "--no-open"); r.code != 1 || !strings.Contains(r.stderr, "no ifaced is running") {
		t.Errorf("ui without a daemon: exit %d, %q", r.code, r.stderr)
	}
	// A daemon without the console (embedded without it) says so.
	bare, _ := startDaemon(t, nil)
	if r := runEnv(t, map[string]string{"IFACED_HOME": bare.Dir}, "ui", "--no-open"); r.code != 1 || !strings.Contains(r.stderr, "console login") {
		t.Errorf("ui at a daemon without a console: exit %d, %q", r.code, r.stderr)
	}
}

// TestUILeavesNoGoroutine: with a page following the live events, the
// console stops as runDaemon stops it (before the API) and leaves
// nothing running: its event follower, the page's stream, its client.
func TestUILeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := loopbackConfig()
	h, n, srv, log := openDaemon(t, cfg)
	stop, err := mountUI(srv, h, cfg, log)
	if err != nil {
		srv.Close()
		n.Close()
		t.Fatal(err)
	}
	c, err := api.Dial(h)
	if err != nil {
		t.Fatal(err)
	}
	login, err := c.UILogin(context.Background())
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{}
	hc := &http.Client{Jar: jar, Transport: tr}
	resp, err := hc.Get(login.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	live, err := hc.Get("http://" + srv.Addr() + "/ui/events")
	if err != nil || live.StatusCode != http.StatusOK {
		t.Fatalf("/ui/events: %v %v", live, err)
	}
	line, err := bufio.NewReader(live.Body).ReadString('\n')
	if err != nil || line != ": following\n" {
		t.Fatalf("the live stream began with %q (%v)", line, err)
	}
	stop()
	// The page's stream ended with the console, not with the server.
	if _, err := io.Copy(io.Discard, live.Body); err != nil {
		t.Errorf("the live stream after the console stopped: %v", err)
	}
	live.Body.Close()
	tr.CloseIdleConnections()
	if err := errors.Join(srv.Close(), n.Close()); err != nil {
		t.Fatal(err)
	}
}
