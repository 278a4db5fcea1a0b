package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/console"
)

// runUI is `ui`: it asks the running daemon for a one-time login URL to
// its console (node/console), prints it, and opens the console in a
// browser where it can (xdg-open with a display, or macOS's open), unless
// --no-open. The URL alone goes to standard output, so `ifaced ui
// --no-open` can be handed to another program; what happened goes to
// standard error.
//
// The opener is never given the URL: a command line can be read by every
// user of the machine (/proc/PID/cmdline, ps), and the URL holds the
// login code. It is given the path of a login page the daemon writes for
// it (mode 0600, in the data directory; node/console, login pages), which
// takes the browser on to the login and is removed once used or expired.
func runUI(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "ui", "", true)
	noOpen := f.Bool("no-open", false, "only print the login URL; do not open a browser")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("ui takes no arguments, got %q", f.Args())
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	opener := ""
	if !*noOpen {
		opener = findOpener(e)
	}
	var login *api.UILogin
	if opener != "" {
		login, err = c.UILoginPage(ctx)
	} else {
		login, err = c.UILogin(ctx)
	}
	if err != nil {
		return fmt.Errorf("asking the daemon for a console login: %w", err)
	}
	opened := ""
	if opener != "" {
		if err := openPage(opener, login.Page); err != nil {
			fmt.Fprintf(e.stderr, "could not open a browser (%v)\n", err)
		} else {
			opened = filepath.Base(opener)
		}
	}
	if f.json {
		return writeJSON(e.stdout, struct {
			URL        string    `json:"url"`
			ExpiresAt  time.Time `json:"expires_at"`
			OpenedWith string    `json:"opened_with,omitempty"`
			Page       string    `json:"page,omitempty"`
		}{login.URL, login.ExpiresAt, opened, login.Page})
	}
	fmt.Fprintln(e.stdout, login.URL)
	if opened != "" {
		fmt.Fprintf(e.stderr, "opened with %s (given only the path of a login page, %s, which the daemon removes once it is used); the link works once, for %s\n",
			opened, login.Page, console.CodeTTL)
	} else {
		fmt.Fprintf(e.stderr, "open it in a browser on this machine: it works once, for %s\n", console.CodeTTL)
	}
	return nil
}

// findOpener is the path of the desktop's opener, when there is one and
// a display to show it on; "" when there is none.
func findOpener(e *env) string {
	opener := "xdg-open"
	switch runtime.GOOS {
	case "darwin":
		opener = "open"
	case "linux", "freebsd", "openbsd", "netbsd":
		if e.getenv("DISPLAY") == "" && e.getenv("WAYLAND_DISPLAY") == "" {
			return "" // a terminal without a desktop: printing is all there is
		}
	default:
		return ""
	}
	path, ok := lookPathIn(opener, e.getenv("PATH"))
	if !ok {
		return ""
	}
	return path
}

// openPage opens the login page file page with the opener at path. It
// does not wait for the browser.
func openPage(path, page string) error {
	if page == "" {
		return fmt.Errorf("the daemon wrote no login page")
	}
	cmd := exec.Command(path, page)
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", filepath.Base(path), err)
	}
	go cmd.Wait() // reaped if the opener ends before this process does
	return nil
}

// lookPathIn finds an executable named name in the directories of path
// (a PATH value: the command's environment, not necessarily this
// process's).
func lookPathIn(name, path string) (string, bool) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// mountUI serves the console (node/console) at api.UIPath on the control
// API srv, through a client of that same API, so that every page reads
// and every change goes through its handlers as the command line's do.
// The returned stop ends the console's event follower, its live pages
// and its client.
func mountUI(srv *api.Server, h config.Home, cfg *config.Config, log *slog.Logger) (stop func(), err error) {
	order, err := cfg.TierOrder()
	if err != nil {
		return nil, fmt.Errorf("starting the console: %w", err)
	}
	c, err := api.Dial(h)
	if err != nil {
		return nil, fmt.Errorf("starting the console: %w", err)
	}
	con, err := console.New(console.Config{API: c, Addr: srv.Addr(), Home: h.Dir, Tiers: order, Log: log.With("component", "console")})
	if err != nil {
		c.Close()
		return nil, err
	}
	srv.MountUI(con.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		con.Follow(ctx)
	}()
	return func() {
		cancel()
		<-followed
		con.Close()
		c.Close()
	}, nil
}

// uiURLPattern is the shape of the login URL `ifaced ui` prints (for
// tests and docs/console.md).
var uiURLPattern = strings.Join([]string{`^http://(127\.0\.0\.1|\[::1\]|localhost):[0-9]+`, `/ui/login\?code=[A-Za-z0-9_-]{43}$`}, "")
