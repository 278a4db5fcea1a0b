package console

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/nodetest"
)

// The console's tests run real daemons (node.Node with its api.Server on
// loopback), each with its console mounted as `ifaced run` mounts it, and
// drive the pages over HTTP as a browser would: a cookie jar, forms posted
// as application/x-www-form-urlencoded, redirects followed. Nothing is
// mocked. The clock of the console's sessions is the test's, so that
// expiry is tested without waiting.

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// daemon is a real daemon, its control API with the console mounted, and
// an API client.
type daemon struct {
	n     *node.Node
	home  config.Home
	srv   *api.Server
	c     *api.Client
	con   *Console
	clock *testClock
	base  string // http://127.0.0.1:port
}

// aliceConfig offers ping (answered by the daemon itself), a calendar for
// professionals and a diary hidden from anyone below close.
func aliceConfig() *config.Config {
	c := nodetest.LoopbackConfig()
	c.Identity.Display = "Alice's agent"
	c.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "calendar.availability", "description": "Share calendar availability windows",
			"conditions": map[string]any{"min_disclosure": "professional"}},
		{"name": "diary.read", "description": "Read the diary", "advertise": "when-eligible",
			"conditions": map[string]any{"min_disclosure": "close"}},
	}
	return c
}

func startDaemon(t *testing.T, cfg *config.Config) *daemon {
	t.Helper()
	if cfg == nil {
		cfg = nodetest.LoopbackConfig()
	}
	h, id := nodetest.Home(t)
	n := nodetest.StartIn(t, cfg, h, id)
	srv, err := api.Listen(n, h, cfg.API.Listen, nodetest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := api.Dial(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	order, err := cfg.TierOrder()
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: time.Now()}
	con, err := New(Config{API: c, Addr: srv.Addr(), Home: h.Dir, Tiers: order, Log: nodetest.Logger(), Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	srv.MountUI(con.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		con.Follow(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-followed
		con.Close()
	})
	return &daemon{n: n, home: h, srv: srv, c: c, con: con, clock: clock, base: "http://" + srv.Addr()}
}

func (d *daemon) peerID() string { return d.n.ID().PeerID().String() }

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// browser is an HTTP client with a cookie jar, as a browser is to the
// console.
type browser struct {
	t    *testing.T
	d    *daemon
	hc   *http.Client
	csrf string
}

func newBrowser(t *testing.T, d *daemon) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, d: d, hc: &http.Client{Jar: jar, Timeout: 60 * time.Second}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// login logs in through a fresh login URL, as `ifaced ui` prints it, and
// reads the session's CSRF token from the overview.
func (b *browser) login() {
	b.t.Helper()
	l, err := b.d.c.UILogin(testContext(b.t))
	if err != nil {
		b.t.Fatal(err)
	}
	st, body := b.get(strings.TrimPrefix(l.URL, b.d.base))
	if st != http.StatusOK || !strings.Contains(body, b.d.peerID()) {
		b.t.Fatalf("logging in with %s: %d\n%s", l.URL, st, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("the overview has no CSRF field:\n%s", body)
	}
	b.csrf = m[1]
}

func (b *browser) do(req *http.Request) (int, string) {
	b.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.d.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// post sends a form with the session's CSRF token.
func (b *browser) post(path string, form url.Values) (int, string) {
	b.t.Helper()
	return b.postRaw(path, form, &b.csrf)
}

func ptr(s string) *string { return &s }

// postRaw sends a form with csrf as its CSRF token, none when nil.
func (b *browser) postRaw(path string, form url.Values, csrf *string) (int, string) {
	b.t.Helper()
	if csrf != nil {
		form.Set("csrf", *csrf)
	}
	req, err := http.NewRequest(http.MethodPost, b.d.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// want checks a page's status and that it says each of says (as HTML,
// or as the text a browser shows).
func want(t *testing.T, what string, status int, body string, wantStatus int, says ...string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("%s: status %d, want %d\n%s", what, status, wantStatus, pageText(body))
		return
	}
	text := html.UnescapeString(body)
	for _, s := range says {
		if !strings.Contains(body, s) && !strings.Contains(text, s) {
			t.Errorf("%s: the page does not say %q\n%s", what, s, pageText(body))
		}
	}
}

var tags = regexp.MustCompile(`<[^>]*>`)

// pageText is a page's text, for failure messages.
func pageText(body string) string {
	s := tags.ReplaceAllString(body, " ")
	s = regexp.MustCompile(`\s+`).ReplaceAllString(s, " ")
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

// errorOn is the refusal a page shows, "" when none.
func errorOn(body string) string {
	m := regexp.MustCompile(`(?s)<p class="error" role="alert" id="error">(.*?)</p>`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// state is what a refused change must leave as it was.
type state struct {
	Seq    uint64
	Policy *api.Policy
	Trust  string
	Intros string
}

func stateOf(t *testing.T, d *daemon) state {
	t.Helper()
	ctx := testContext(t)
	pol, err := d.c.Policy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := d.c.Trust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in, err := d.c.Introductions().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tj, _ := json.Marshal(tr)
	ij, _ := json.Marshal(in)
	return state{Seq: d.n.Document().Seq, Policy: pol, Trust: string(tj), Intros: string(ij)}
}

func sameState(t *testing.T, what string, before, after state) {
	t.Helper()
	bj, _ := json.Marshal(before)
	aj, _ := json.Marshal(after)
	if string(bj) != string(aj) {
		t.Errorf("%s changed the daemon:\nbefore %s\nafter  %s", what, bj, aj)
	}
}

// TestLogin: a login URL opens one session, once, within its minute; the
// cookie is HttpOnly, SameSite=Strict and scoped to /ui/; a session ends
// after 12 idle hours, at logout, and is unknown to another daemon.
func TestLogin(t *testing.T) {
	ctx := testContext(t)
	d := startDaemon(t, nil)

	l, err := d.c.UILogin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/ui/login\?code=[A-Za-z0-9_-]{43}$`).MatchString(l.URL) || !strings.HasPrefix(l.URL, d.base) {
		t.Errorf("login URL %q", l.URL)
	}
	if left := l.ExpiresAt.Sub(d.clock.now()); left <= 0 || left > CodeTTL {
		t.Errorf("the code expires in %v, want at most %v", left, CodeTTL)
	}
	// The exchange itself: a 303 to /ui/ with the cookie.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("the login answered %d to %q, want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("the login set %d cookies", len(cookies))
	}
	ck := cookies[0]
	_, port, _ := strings.Cut(strings.TrimPrefix(d.base, "http://"), ":")
	if ck.Name != "ifaced_ui_"+port || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || len(ck.Value) != 43 {
		t.Errorf("session cookie %+v: want ifaced_ui_%s, HttpOnly, SameSite=Strict, Path=/ui/, 32 random bytes", ck, port)
	}
	// The code was used: the URL in the browser's history opens nothing.
	b := newBrowser(t, d)
	st, body := b.get(strings.TrimPrefix(l.URL, d.base))
	want(t, "a used code", st, body, http.StatusUnauthorized, "not valid", "ifaced ui")
	// An expired one neither.
	l, err = d.c.UILogin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.clock.advance(CodeTTL)
	st, body = b.get(strings.TrimPrefix(l.URL, d.base))
	want(t, "a code a minute old", st, body, http.StatusUnauthorized, "expired")
	// Nor a made-up one, or one pasted wrong into the form.
	st, body = b.get("/ui/login?code=" + strings.Repeat("A", 43))
	want(t, "a made-up code", st, body, http.StatusUnauthorized, "not valid")
	st, body = b.post("/ui/login", url.Values{"code": {"nope"}})
	want(t, "a wrong code in the form", st, body, http.StatusUnauthorized, "not valid")
	// The login page without a code says how to get one.
	st, body = b.get("/ui/login")
	want(t, "the login page", st, body, http.StatusOK, "ifaced ui", `id="login-form"`)

	// A code pasted into the form logs in too.
	l, err = d.c.UILogin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	code := strings.TrimPrefix(l.URL, d.base+"/ui/login?code=")
	st, body = b.post("/ui/login", url.Values{"code": {code}})
	want(t, "a code posted", st, body, http.StatusOK, d.peerID(), "Log out")

	// Idle for 12 hours: the session is over.
	b2 := newBrowser(t, d)
	b2.login()
	d.clock.advance(SessionIdle - time.Minute)
	st, body = b2.get("/ui/")
	want(t, "a session used within 12 hours", st, body, http.StatusOK, d.peerID())
	d.clock.advance(SessionIdle)
	st, body = b2.get("/ui/")
	want(t, "a session idle for 12 hours", st, body, http.StatusUnauthorized, "Not logged in")
	if strings.Contains(body, d.peerID()) {
		t.Error("a page refused for want of a session shows the daemon's peer ID")
	}

	// Logging out ends the session; the cookie no longer opens anything.
	b3 := newBrowser(t, d)
	b3.login()
	st, body = b3.post("/ui/logout", url.Values{})
	want(t, "logging out", st, body, http.StatusOK, "ifaced ui")
	st, body = b3.get("/ui/peers")
	want(t, "a page after logging out", st, body, http.StatusUnauthorized, "Not logged in")

	// Another daemon's console knows nothing of this one's session, even
	// when the browser sends it the same cookie value.
	other := startDaemon(t, nil)
	b4 := newBrowser(t, d)
	b4.login()
	u, _ := url.Parse(d.base + "/ui/")
	var sess *http.Cookie
	for _, c := range b4.hc.Jar.Cookies(u) {
		sess = c
	}
	_, otherPort, _ := strings.Cut(strings.TrimPrefix(other.base, "http://"), ":")
	req, _ := http.NewRequest(http.MethodGet, other.base+"/ui/", nil)
	req.AddCookie(&http.Cookie{Name: "ifaced_ui_" + otherPort, Value: sess.Value})
	st, body = newBrowser(t, other).do(req)
	want(t, "one daemon's session at another", st, body, http.StatusUnauthorized, "Not logged in")
}

// TestRefusals: without a session, with a forged one, without or with a
// wrong CSRF token, from a foreign Host or Origin, every page and change
// is refused with a message, and nothing changes.
func TestRefusals(t *testing.T) {
	alice := startDaemon(t, aliceConfig())
	bob := startDaemon(t, nil)
	bobID := bob.peerID()
	before := stateOf(t, alice)

	grant := func() url.Values {
		return url.Values{"peer": {bobID}, "tier": {"close"}, "persona": {"default"}}
	}
	changes := []struct {
		path string
		form func() url.Values
	}{
		{"/ui/policy/disclosure", grant},
		{"/ui/policy/temperature", func() url.Values { return url.Values{"peer": {bobID}, "max": {"hot"}} }},
		{"/ui/caps/add", func() url.Values { return url.Values{"capability": {`{"name": "x.y", "description": "Z"}`}} }},
		{"/ui/caps/remove", func() url.Values { return url.Values{"name": {"ping"}} }},
		{"/ui/caps/edit/ping", func() url.Values {
			return url.Values{"capability": {`{"name": "ping", "description": "Changed"}`}}
		}},
		{"/ui/trust/pin", func() url.Values { return url.Values{"peer": {bobID}, "fingerprint": {bob.n.ID().Fingerprint()}} }},
		{"/ui/trust/revoke", func() url.Values { return url.Values{"peer": {bobID}} }},
		{"/ui/intros", func() url.Values { return url.Values{"label": {"Bob"}} }},
		{"/ui/intros/revoke", func() url.Values { return url.Values{"id": {"intro:x"}} }},
		{"/ui/logout", func() url.Values { return url.Values{} }},
	}
	pages := []string{"/ui/", "/ui/peers", "/ui/peers/" + bobID, "/ui/caps", "/ui/caps/edit/ping", "/ui/policy", "/ui/trust",
		"/ui/audit", "/ui/audit/c/conv:x", "/ui/audit/c/conv:x/bundle", "/ui/audit/why/msg:x", "/ui/events", "/ui/nowhere"}

	// No session.
	anon := newBrowser(t, alice)
	for _, p := range pages {
		st, body := anon.get(p)
		want(t, "GET "+p+" without a session", st, body, http.StatusUnauthorized, "Not logged in", "ifaced ui")
		if strings.Contains(body, alice.peerID()) {
			t.Errorf("GET %s without a session shows the daemon's peer ID", p)
		}
	}
	for _, c := range changes {
		st, body := anon.post(c.path, c.form())
		want(t, "POST "+c.path+" without a session", st, body, http.StatusUnauthorized, "Not logged in")
	}
	// A forged session cookie.
	_, port, _ := strings.Cut(strings.TrimPrefix(alice.base, "http://"), ":")
	forged := newBrowser(t, alice)
	u, _ := url.Parse(alice.base + "/ui/")
	forged.hc.Jar.SetCookies(u, []*http.Cookie{{Name: "ifaced_ui_" + port, Value: strings.Repeat("x", 43), Path: "/ui/"}})
	st, body := forged.get("/ui/policy")
	want(t, "a forged session", st, body, http.StatusUnauthorized, "Not logged in")
	st, body = forged.post("/ui/policy/disclosure", grant())
	want(t, "a change with a forged session", st, body, http.StatusUnauthorized, "Not logged in")

	// A session, but no CSRF token, or another session's.
	b := newBrowser(t, alice)
	b.login()
	other := newBrowser(t, alice)
	other.login()
	for _, c := range changes {
		for name, tok := range map[string]*string{"no CSRF token": nil, "an empty CSRF token": ptr(""),
			"a wrong CSRF token": ptr(strings.Repeat("y", 43)), "another session's CSRF token": &other.csrf} {
			st, body := b.postRaw(c.path, c.form(), tok)
			want(t, "POST "+c.path+" with "+name, st, body, http.StatusForbidden, "CSRF", "nothing was changed")
		}
	}
	// Still logged in: the refusals ended nothing.
	st, body = b.get("/ui/")
	want(t, "the session after refused changes", st, body, http.StatusOK, alice.peerID())

	// A foreign Host (DNS rebinding) and a foreign Origin, with the session.
	for _, host := range []string{"rebind.example:" + port, "127.0.0.1:1"} {
		req, _ := http.NewRequest(http.MethodGet, alice.base+"/ui/policy", nil)
		req.Host = host
		st, body := b.do(req)
		want(t, "Host "+host, st, body, http.StatusMisdirectedRequest, "refused", "DNS rebinding")
	}
	for _, origin := range []string{"http://evil.example", "null"} {
		f := grant()
		f.Set("csrf", b.csrf)
		req, _ := http.NewRequest(http.MethodPost, alice.base+"/ui/policy/disclosure", strings.NewReader(f.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		st, body := b.do(req)
		want(t, "Origin "+origin, st, body, http.StatusForbidden, "refused", "nothing was changed")
	}
	// The login code needs the API's token, which a browser has not.
	st, body = anon.post(api.UILoginCodePath, url.Values{})
	if st != http.StatusUnauthorized || strings.Contains(body, "code=") {
		t.Errorf("a login code without the token: %d %s", st, body)
	}

	sameState(t, "the refused requests", before, stateOf(t, alice))
	if n := alice.con.auth.count(); n != 2 {
		t.Errorf("%d sessions after the refusals, want the 2 logged in", n)
	}
}

// TestStaticAndHeaders: the style sheet and script are served (without a
// session: the login page needs them) with their types; every page
// carries the headers that keep it from being framed or leaking a
// referrer to another site.
func TestStaticAndHeaders(t *testing.T) {
	d := startDaemon(t, nil)
	b := newBrowser(t, d)
	for path, typ := range map[string]string{"/ui/static/console.css": "text/css", "/ui/static/console.js": "text/javascript", "/ui/static/favicon.svg": "image/svg+xml"} {
		req, _ := http.NewRequest(http.MethodGet, d.base+path, nil)
		resp, err := b.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), typ) {
			t.Errorf("%s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for _, path := range []string{"/ui/static/nope.css", "/ui/static/..%2fdoc.go", "/ui/static/layout.html"} {
		if st, _ := b.get(path); st != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, st)
		}
	}
	b.login()
	for _, path := range []string{"/ui/", "/ui/login", "/ui/nowhere"} {
		req, _ := http.NewRequest(http.MethodGet, d.base+path, nil)
		resp, err := b.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") ||
			h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "same-origin" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
	st, body := b.get("/ui/nowhere")
	want(t, "an unknown page", st, body, http.StatusNotFound, "no such page")
	// /ui leads to /ui/.
	st, body = b.get("/ui")
	want(t, "/ui", st, body, http.StatusOK, d.peerID())
}

// TestLiveEvents: the overview's event stream carries what happens now,
// and the overview lists it without JavaScript.
func TestLiveEvents(t *testing.T) {
	ctx := testContext(t)
	d := startDaemon(t, nil)
	b := newBrowser(t, d)
	b.login()
	// Wait until the console follows the daemon's events.
	waitUntil(t, "the console to follow the events", func() bool { _, status := d.con.events.recent(); return status == "" })
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/ui/events", nil)
	resp, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("/ui/events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := resp.Body.Read(buf)
			acc += string(buf[:n])
			for {
				line, rest, ok := strings.Cut(acc, "\n")
				if !ok {
					break
				}
				lines <- line
				acc = rest
			}
			if err != nil {
				return
			}
		}
	}()
	if first := <-lines; first != ": following" {
		t.Fatalf("the stream opened with %q", first)
	}
	doc, err := d.c.AddCapability(ctx, json.RawMessage(`{"name": "live.test", "description": "An event"}`))
	if err != nil {
		t.Fatal(err)
	}
	got := false
	for !got {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended before the document event")
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var e shownEvent
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("an event that is not a shownEvent: %q (%v)", data, err)
			}
			if e.Type == events.EventDocument {
				if !strings.Contains(e.Detail, "seq") {
					t.Errorf("the document event: %q", data)
				}
				got = true
			}
		case <-ctx.Done():
			t.Fatal("no document event on /ui/events")
		}
	}
	st, body := b.get("/ui/")
	want(t, "the overview", st, body, http.StatusOK, "<b>document</b>", "seq "+itoa(doc.Seq))

	// At most MaxLiveViews pages follow at once; the next one is told.
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	for i := 1; i < MaxLiveViews; i++ {
		r, err := b.hc.Do(req.Clone(ctx))
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("live view %d: %v %v", i+1, err, r)
		}
		open = append(open, r)
	}
	st, body = b.get("/ui/events")
	want(t, "one live view too many", st, body, http.StatusServiceUnavailable, "refused")
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// waitUntil polls cond for up to a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling observable state
	}
}
