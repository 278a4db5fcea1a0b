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

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/console"
)

// runUI is `ui`: it asks the running daemon for a one-time login URL to
// its console (node/console), prints it, and opens it in a browser where
// it can (xdg-open with a display, or macOS's open), unless --no-open.
// The URL alone goes to standard output, so `ifaced ui --no-open` can be
// handed to another program; what happened goes to standard error.
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
	login, err := c.UILogin(ctx)
	if err != nil {
		return fmt.Errorf("asking the daemon for a console login: %w", err)
	}
	opened := ""
	if !*noOpen {
		opened, err = openBrowser(e, login.URL)
		if err != nil {
			fmt.Fprintf(e.stderr, "could not open a browser (%v)\n", err)
		}
	}
	if f.json {
		return writeJSON(e.stdout, struct {
			URL        string    `json:"url"`
			ExpiresAt  time.Time `json:"expires_at"`
			OpenedWith string    `json:"opened_with,omitempty"`
		}{login.URL, login.ExpiresAt, opened})
	}
	fmt.Fprintln(e.stdout, login.URL)
	if opened != "" {
		fmt.Fprintf(e.stderr, "opened with %s; the link works once, for %s\n", opened, console.CodeTTL)
	} else {
		fmt.Fprintf(e.stderr, "open it in a browser on this machine: it works once, for %s\n", console.CodeTTL)
	}
	return nil
}

// openBrowser opens url with the desktop's opener, when there is one and
// a display to show it on; it reports the opener used, "" when none was.
// It does not wait for the browser.
func openBrowser(e *env, url string) (string, error) {
	opener := "xdg-open"
	switch runtime.GOOS {
	case "darwin":
		opener = "open"
	case "linux", "freebsd", "openbsd", "netbsd":
		if e.getenv("DISPLAY") == "" && e.getenv("WAYLAND_DISPLAY") == "" {
			return "", nil // a terminal without a desktop: printing is all there is
		}
	default:
		return "", nil
	}
	path, ok := lookPathIn(opener, e.getenv("PATH"))
	if !ok {
		return "", nil
	}
	cmd := exec.Command(path, url)
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting %s: %w", opener, err)
	}
	go cmd.Wait() // reaped if the opener ends before this process does
	return opener, nil
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
func mountUI(srv *api.Server, h node.Home, cfg *node.Config, log *slog.Logger) (stop func(), err error) {
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
// tests and the README).
var uiURLPattern = strings.Join([]string{`^http://(127\.0\.0\.1|\[::1\]|localhost):[0-9]+`, `/ui/login\?code=[A-Za-z0-9_-]{43}$`}, "")
