package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/api"
)

var pageTarget = regexp.MustCompile(`content="0;url=(http://[^"]+)"`)

// TestLoginPage: asked for, the login comes with a page file, mode 0600
// in <home>/console (mode 0700), that leads a browser to the login with
// the code in the URL's fragment; the login page's post of that code
// opens a session, and the file is gone.
func TestLoginPage(t *testing.T) {
	ctx := testContext(t)
	d := startDaemon(t, nil)
	l, err := d.c.UILoginPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	code := strings.TrimPrefix(l.URL, d.base+"/ui/login?code=")
	if filepath.Dir(l.Page) != filepath.Join(d.home.Dir, "console") {
		t.Fatalf("the page is %q, want a file in %s", l.Page, filepath.Join(d.home.Dir, "console"))
	}
	st, err := os.Stat(l.Page)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the page file: %v %v", st, err)
	}
	if dir, err := os.Stat(filepath.Dir(l.Page)); err != nil || dir.Mode().Perm() != 0o700 {
		t.Fatalf("the pages' directory: %v %v", dir, err)
	}
	b, err := os.ReadFile(l.Page)
	if err != nil {
		t.Fatal(err)
	}
	m := pageTarget.FindSubmatch(b)
	if m == nil || string(m[1]) != d.base+"/ui/login#code="+code || !bytes.Contains(b, []byte(`<a href="`+d.base+"/ui/login#code="+code+`"`)) {
		t.Fatalf("the page does not lead to the login with the code in the fragment:\n%s", b)
	}

	// What the browser does: load the login page (the fragment stays
	// with it), whose script posts the code from the console's origin.
	br := newBrowser(t, d)
	st2, body := br.get("/ui/login")
	want(t, "the login page", st2, body, http.StatusOK)
	if !strings.Contains(body, `id="login-form"`) {
		t.Fatalf("the login page has no form for the script to post:\n%s", body)
	}
	req, _ := http.NewRequest(http.MethodPost, d.base+"/ui/login", strings.NewReader(url.Values{"code": {code}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", d.base)
	st2, body = br.do(req)
	want(t, "posting the page's code", st2, body, http.StatusOK, d.peerID())
	if _, err := os.Stat(l.Page); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the page is still there once its code was used: %v", err)
	}

	// A body that is not {"page": …} is refused, naming what is wanted;
	// no body is a plain login.
	for _, bad := range []string{`{"pages": true}`, `[]`, `{"page": "yes"}`} {
		res, err := apiPost(d, bad)
		if err != nil || res != http.StatusBadRequest {
			t.Errorf("login code with %s: %d %v", bad, res, err)
		}
	}
	plain, err := d.c.UILogin(ctx)
	if err != nil || plain.Page != "" {
		t.Errorf("a login without a page: %+v %v", plain, err)
	}
}

// apiPost posts body to the login code endpoint with the token.
func apiPost(d *daemon, body string) (int, error) {
	tok, err := os.ReadFile(api.TokenFile(d.home))
	if err != nil {
		return 0, err
	}
	req, _ := http.NewRequest(http.MethodPost, d.base+api.UILoginCodePath, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var e api.Error
	if res.StatusCode != http.StatusOK && (json.NewDecoder(res.Body).Decode(&e) != nil || e.Message == "") {
		return 0, errors.New("the refusal is not an API error")
	}
	return res.StatusCode, nil
}

// TestLoginPagesGo: a page goes when its code expires, when newer codes
// evict its code, when its code is tried and fails, and when the console
// closes; pages an earlier console left are removed when one starts.
func TestLoginPagesGo(t *testing.T) {
	ctx := testContext(t)
	d := startDaemon(t, nil)
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	expiring, err := d.c.UILoginPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.clock.advance(CodeTTL)
	d.con.auth.sweepCodes() // what the console's timer does at CodeTTL
	if exists(expiring.Page) {
		t.Error("a page outlived its code's expiry")
	}

	evicted, err := d.c.UILoginPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range MaxCodes {
		d.clock.advance(time.Millisecond)
		if _, err := d.c.UILogin(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if exists(evicted.Page) {
		t.Error("a page outlived its code's eviction by newer codes")
	}

	tried, err := d.c.UILoginPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.clock.advance(CodeTTL) // expired, but not swept yet: tried, it fails and goes
	st, _ := newBrowser(t, d).get(strings.TrimPrefix(tried.URL, d.base))
	if st != http.StatusUnauthorized || exists(tried.Page) {
		t.Errorf("an expired code tried: %d, page still there: %v", st, exists(tried.Page))
	}

	open, err := d.c.UILoginPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.con.Close()
	if exists(open.Page) {
		t.Error("a page outlived the console")
	}

	// A page left by a console that stopped uncleanly, and a file of the
	// owner's beside it: the next console removes the first only.
	dir := filepath.Join(d.home.Dir, pageDirName)
	stale, mine := filepath.Join(dir, "login-123.html"), filepath.Join(dir, "notes.txt")
	for _, p := range []string{stale, mine} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(Config{API: d.c, Addr: d.srv.Addr(), Home: d.home.Dir}); err != nil {
		t.Fatal(err)
	}
	if exists(stale) || !exists(mine) {
		t.Errorf("a new console: stale page there %v, other file there %v", exists(stale), exists(mine))
	}
}
