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
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/interop/otheruser"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/nodetest"
	"go.uber.org/goleak"
)

// startUIDaemon is startDaemon with the console mounted as runDaemon
// mounts it.
func startUIDaemon(t *testing.T, cfg *config.Config) (config.Home, *node.Node, *api.Server) {
	t.Helper()
	if cfg == nil {
		cfg = nodetest.LoopbackConfig()
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
	// docs/console.md shows it as printed, on the default address.
	page, err := os.ReadFile("../../docs/console.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(page)
	shown := "\n# http://" + config.DefaultConfig().API.Listen + "/ui/login?code=…\n"
	if !regexp.MustCompile(`\nifaced ui [^\n]*--no-open [^\n]*` + regexp.QuoteMeta(shown)).MatchString(section) {
		t.Errorf("docs/console.md does not show `ifaced ui --no-open` printing %q", strings.TrimSpace(shown))
	}
	if printed := strings.Replace(u, srv.Addr(), config.DefaultConfig().API.Listen, 1); !urlShape.MatchString(printed) ||
		!strings.HasPrefix(printed, strings.TrimSuffix(strings.TrimPrefix(shown, "\n# "), "…\n")) {
		t.Errorf("the URL printed, %q, is not docs/console.md's %q", u, shown)
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

	// With a display and an opener on PATH, the opener gets the path of a
	// login page, never the URL (a real program here, which writes down
	// what it was given and what /proc shows of it).
	bin, opened := fakeOpener(t)
	r = runEnv(t, map[string]string{"IFACED_HOME": home.Dir, "PATH": bin, "DISPLAY": ":0"}, "ui")
	if r.code != 0 || !strings.Contains(r.stderr, "opened with xdg-open") {
		t.Fatalf("ui with a display: exit %d, stderr %q", r.code, r.stderr)
	}
	o := opened()
	code := strings.TrimPrefix(strings.TrimSpace(r.stdout), "http://"+srv.Addr()+"/ui/login?code=")
	if len(o.args) != 1 || filepath.Dir(o.args[0]) != filepath.Join(home.Dir, "console") || !strings.HasSuffix(o.args[0], ".html") {
		t.Errorf("the opener was given %q, want one login page in %s", o.args, filepath.Join(home.Dir, "console"))
	}
	if strings.Contains(o.cmdline, code) || strings.Contains(strings.Join(o.args, " "), code) {
		t.Errorf("the login code is on the opener's command line: %q", o.cmdline)
	}
	if !strings.Contains(o.page, "http://"+srv.Addr()+"/ui/login#code="+code) || o.mode != "600" {
		t.Errorf("the login page (mode %s) does not lead to the code printed:\n%s", o.mode, o.page)
	}
	// The page leads a browser in: the login page's script posts the
	// fragment's code (as a browser does), and the page file is gone.
	loginFromPage(t, srv.Addr(), code)
	if _, err := os.Stat(o.args[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the login page is still there once used: %v", err)
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

// opened is what the fake opener recorded.
type opened struct {
	args    []string // its arguments
	cmdline string   // /proc/PID/cmdline as it read it, NULs as spaces: what every local user can read
	page    string   // the content of the file it was given
	mode    string   // that file's mode, in octal
}

// fakeOpener writes an xdg-open into a new directory (returned, for
// PATH) that records what it was given; the function returned waits for
// its record.
func fakeOpener(t *testing.T) (string, func() opened) {
	t.Helper()
	bin, rec := t.TempDir(), t.TempDir()
	script := `#!/bin/sh
r=` + rec + `
printf '%s
' "$@" > "$r/args"
tr '\000' ' ' < /proc/$$/cmdline > "$r/cmdline"
cat "$1" > "$r/page"
stat -c '%a' "$1" > "$r/mode"
touch "$r/done"
`
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, func() opened {
		t.Helper()
		waitUntil(t, "the opener to record what it was given", func() bool { _, err := os.Stat(filepath.Join(rec, "done")); return err == nil })
		read := func(name string) string {
			b, err := os.ReadFile(filepath.Join(rec, name))
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		o := opened{args: strings.Split(strings.TrimSuffix(read("args"), "\n"), "\n"), cmdline: read("cmdline"), page: read("page"), mode: strings.TrimSpace(read("mode"))}
		for _, name := range []string{"args", "cmdline", "page", "mode", "done"} {
			os.Remove(filepath.Join(rec, name))
		}
		return o
	}
}

// loginFromPage does what a browser does with a login page's URL,
// http://ADDR/ui/login#code=CODE: it loads the login page (the fragment
// stays in the browser), whose script posts the code from the console's
// origin; it returns the session cookie the overview was reached with.
func loginFromPage(t *testing.T, addr, code string) *http.Cookie {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	res, err := hc.Get("http://" + addr + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), `id="login-form"`) {
		t.Fatalf("the login page: %d\n%s", res.StatusCode, page)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/ui/login", strings.NewReader(url.Values{"code": {code}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://"+addr)
	res, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	overview, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/ui/" || !strings.Contains(string(overview), "Overview") {
		t.Fatalf("posting the page's code: %d at %s\n%s", res.StatusCode, res.Request.URL, overview)
	}
	u, _ := url.Parse("http://" + addr + "/ui/")
	for _, ck := range jar.Cookies(u) {
		if strings.HasPrefix(ck.Name, "ifaced_ui_") {
			return ck
		}
	}
	t.Fatal("no session cookie after logging in")
	return nil
}

// TestUILeavesNoGoroutine: with a page following the live events, the
// console stops as runDaemon stops it (before the API) and leaves
// nothing running: its event follower, the page's stream, its client.
func TestUILeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := nodetest.LoopbackConfig()
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

// TestUIOtherLocalUser: another user of the machine (uid 65534, a real
// process) gets nothing of the console. `ifaced ui` hands the opener only
// the path of a login page, so the opener's command line, which every
// user can read in /proc, holds no code; the page is the owner's alone
// (0600 in a 0700 directory), and gone once used. The session cookie, as
// another user's web server on 127.0.0.1 would receive it from the
// owner's browser, is refused when replayed from that user's process,
// and so is the login code; the owner's browser goes on with the same
// cookie. (Before: the URL with the code was xdg-open's argument, and the
// cookie opened the console from any local process.)
func TestUIOtherLocalUser(t *testing.T) {
	otheruser.Need(t)
	home, _, srv := startUIDaemon(t, nil)
	// The directories above the login pages' own let the other user in,
	// so that what keeps it out is the pages' directory and mode.
	for dir := home.Dir; dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin, opened := fakeOpener(t)
	r := runEnv(t, map[string]string{"IFACED_HOME": home.Dir, "PATH": bin, "DISPLAY": ":0"}, "ui")
	if r.code != 0 {
		t.Fatalf("ui: exit %d: %s", r.code, r.stderr)
	}
	o := opened()
	code := strings.TrimPrefix(strings.TrimSpace(r.stdout), "http://"+srv.Addr()+"/ui/login?code=")
	if len(code) != 43 {
		t.Fatalf("ui printed %q", r.stdout)
	}
	// (a) The opener's command line, as /proc shows it to everyone.
	if strings.Contains(o.cmdline, code) || len(o.args) != 1 || strings.Contains(o.args[0], code) {
		t.Fatalf("the login code is on the opener's command line: %q", o.cmdline)
	}
	if !strings.Contains(o.page, "#code="+code) {
		t.Fatalf("the page the opener was given does not lead to the login:\n%s", o.page)
	}
	if st, err := os.Stat(filepath.Dir(o.args[0])); err != nil || st.Mode().Perm() != 0o700 || o.mode != "600" {
		t.Errorf("the login page is mode %s in a directory of mode %v (%v), want 600 in 700", o.mode, st.Mode().Perm(), err)
	}
	if got, err := otheruser.ReadFile(t, o.args[0]); err == nil || strings.Contains(got, code) {
		t.Fatalf("uid %d read the login page: %q", otheruser.UID, got)
	}
	// Nor can the other user redeem the code, had it learnt it; the
	// refusal spends nothing, so the owner's browser then logs in with it.
	base := "http://" + srv.Addr()
	if got := otheruser.Do(t, otheruser.Request{Method: "GET", URL: base + "/ui/login?code=" + code}); got.Status != http.StatusForbidden {
		t.Fatalf("the login code from uid %d: %d %q %s", otheruser.UID, got.Status, got.Body, got.Err)
	}
	ck := loginFromPage(t, srv.Addr(), code)
	if _, err := os.Stat(o.args[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the login page is still there once used: %v", err)
	}

	// (b) The session cookie, replayed from the other user's process.
	for _, path := range []string{"/ui/", "/ui/trust", "/ui/events"} {
		got := otheruser.Do(t, otheruser.Request{Method: "GET", URL: base + path, Header: map[string]string{"Cookie": ck.Name + "=" + ck.Value}, Timeout: 10 * time.Second})
		if got.Status != http.StatusForbidden || !strings.Contains(got.Body, "comes from a process of user 65534") || strings.Contains(got.Body, "Overview") {
			t.Errorf("GET %s with the owner's session cookie, from uid %d: %d %q %s", path, otheruser.UID, got.Status, got.Body, got.Err)
		}
	}
	post := otheruser.Do(t, otheruser.Request{Method: "POST", URL: base + "/ui/logout",
		Header: map[string]string{"Cookie": ck.Name + "=" + ck.Value, "Content-Type": "application/x-www-form-urlencoded", "Origin": base}})
	if post.Status != http.StatusForbidden {
		t.Errorf("a logout with the owner's cookie from uid %d: %d %q", otheruser.UID, post.Status, post.Body)
	}
	// The owner's browser: the same cookie opens the console.
	req, _ := http.NewRequest("GET", base+"/ui/", nil)
	req.AddCookie(ck)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "Overview") {
		t.Errorf("the owner's browser with its cookie: %d\n%s", res.StatusCode, page)
	}
}
