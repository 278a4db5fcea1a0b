package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/ifaced/ifaced/node/api"
)

// Login pages: how `ifaced ui` opens the console without putting the
// login code where another user can read it.
//
// The desktop's opener (xdg-open, open) is a process like any other, and
// its command line is readable by every user of the machine
// (/proc/PID/cmdline, ps). So `ifaced ui` never hands it the login URL:
// it asks for the login as a page file (POST /v1/ui/login-code with
// {"page": true}), and the console writes an HTML file, mode 0600, in
// <home>/console/ (mode 0700), which sends the browser on to
//
//	http://ADDR/ui/login#code=CODE
//
// and the opener is given only the file's path, as Jupyter's servers do.
// The code rides in the URL's fragment, which the browser never sends to
// a server: the login page's script posts it from the console's own
// origin. That matters beyond secrecy: a navigation that starts from a
// file is cross-site, and on it, and on the redirect that follows, the
// browser holds back a SameSite=Strict cookie, so a code redeemed by the
// file's own navigation would leave the browser at /ui/ without its
// session; the page's own post is same-site, and the overview after it
// gets the cookie.
//
// The file is removed once its code is used (valid or not), expires
// (CodeTTL), is evicted by newer codes (MaxCodes), or the console closes;
// files a daemon left when it stopped uncleanly are removed when the next
// one starts. `ifaced ui --no-open` prints the URL instead, to the
// owner's own terminal.

// pageDirName is the directory of login pages in the data directory.
const pageDirName = "console"

// writePage writes the login page for code, valid until exp, and returns
// its path.
func (c *Console) writePage(code string, exp time.Time) (string, error) {
	if c.pageDir == "" {
		return "", errors.New("this console has no data directory to write a login page in")
	}
	if err := os.MkdirAll(c.pageDir, 0o700); err != nil {
		return "", fmt.Errorf("writing a login page: %w", err)
	}
	st, err := os.Lstat(c.pageDir)
	if err != nil {
		return "", fmt.Errorf("writing a login page: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("writing a login page: %s is not a directory", c.pageDir)
	}
	if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(c.pageDir, 0o700); err != nil {
			return "", fmt.Errorf("writing a login page: %w", err)
		}
	}
	f, err := os.CreateTemp(c.pageDir, "login-*.html") // mode 0600, a new name
	if err != nil {
		return "", fmt.Errorf("writing a login page: %w", err)
	}
	target := html.EscapeString("http://" + c.addr + api.UIPath + "login#code=" + url.QueryEscape(code))
	_, werr := fmt.Fprintf(f, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0;url=%s">
<title>ifaced console: logging in</title>
</head>
<body>
<p>Opening <a href="%s">this agent's ifaced console</a>…</p>
<p>The link works once, until %s. This file is removed once it is used or expires; run <code>ifaced ui</code> again for a new one.</p>
</body>
</html>
`, target, target, exp.UTC().Format("15:04:05 UTC"))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing a login page: %w", werr)
	}
	return f.Name(), nil
}

// removePage removes a login page whose code is gone.
func (c *Console) removePage(page string) {
	if err := os.Remove(page); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("removing a used or expired console login page", "page", page, "err", err)
	}
}

// removeStalePages removes the login pages a console of an earlier run
// left (it stopped before they were used or expired).
func (c *Console) removeStalePages() {
	if c.pageDir == "" {
		return
	}
	stale, _ := filepath.Glob(filepath.Join(c.pageDir, "login-*.html"))
	for _, p := range stale {
		c.removePage(p)
	}
}

// sweepAt forgets the codes (and removes their pages) once they expire,
// even if nothing else happens by then; Close stops what is pending.
func (c *Console) sweepAt(d time.Duration) {
	c.timersMu.Lock()
	defer c.timersMu.Unlock()
	if c.timers == nil {
		return // closed
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		c.auth.sweepCodes()
		c.timersMu.Lock()
		delete(c.timers, t)
		c.timersMu.Unlock()
	})
	c.timers[t] = struct{}{}
}

// stopSweeps stops the pending sweeps, as the console closes.
func (c *Console) stopSweeps() {
	c.timersMu.Lock()
	defer c.timersMu.Unlock()
	for t := range c.timers {
		t.Stop()
	}
	c.timers = nil
}

// mintCode answers POST api.UILoginCodePath, behind the API's token: a
// login URL, and with {"page": true} its page file.
func (c *Console) mintCode(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	fail := func(status int, e api.Error) {
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(e)
	}
	var req api.UILoginRequest
	if body, err := io.ReadAll(r.Body); err != nil {
		fail(http.StatusBadRequest, api.Error{Message: "reading the request body: " + err.Error(), Code: api.CodeBadRequest})
		return
	} else if len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			fail(http.StatusBadRequest, api.Error{Message: `the body is not {"page": true|false}: ` + err.Error(), Code: api.CodeBadRequest, Field: "page"})
			return
		}
	}
	code, exp, err := c.auth.newCode()
	if err != nil {
		fail(http.StatusInternalServerError, api.Error{Message: err.Error(), Code: api.CodeInternal})
		return
	}
	out := api.UILogin{URL: "http://" + c.addr + "/ui/login?code=" + url.QueryEscape(code), ExpiresAt: exp.UTC()}
	if req.Page {
		if out.Page, err = c.writePage(code, exp); err != nil {
			c.log.Error("writing a console login page", "err", err)
			fail(http.StatusInternalServerError, api.Error{Message: err.Error(), Code: api.CodeInternal})
			return
		}
	}
	c.auth.holdCode(code, exp, out.Page)
	if out.Page != "" {
		c.sweepAt(CodeTTL)
	}
	json.NewEncoder(w).Encode(out)
}
