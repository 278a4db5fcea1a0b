// Package jsdeps is what the tests that run real JavaScript clients and
// servers (the packages locked in interop/js) share: whether Node.js and
// npm are here, and installing those packages from the lock file. A
// missing Node.js skips such a test, or fails it when RequireEnv is set,
// as CI sets it, so that CI never passes by skipping them.
package jsdeps

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns a missing Node.js
// into a failure rather than a skip.
const RequireEnv = "IFACED_REQUIRE_INTEROP"

// Dir is interop/js, where the locked packages and the scripts are.
func Dir(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("jsdeps: cannot find its own source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "js")
}

// NeedNode skips t when Node.js 20 or later and npm are not installed, or
// fails it when RequireEnv is set.
func NeedNode(t testing.TB) {
	t.Helper()
	missing := func(why string) {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("%s, and %s is set", why, RequireEnv)
		}
		t.Skipf("%s; install Node.js 20 or later with npm to run this check (set %s to make this a failure)", why, RequireEnv)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(tool + " is not on PATH")
		}
	}
	v, err := exec.Command("node", "--version").Output()
	if err != nil {
		missing("node --version failed: " + err.Error())
	}
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(v)), "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < 20 {
		missing("node is " + strings.TrimSpace(string(v)) + ", older than 20")
	}
}

// Install installs dir's packages with `npm ci` from its
// package-lock.json, unless node_modules already holds exactly what the
// lock file names. npm writes node_modules/.package-lock.json last, with
// the packages it installed, so comparing the two catches an interrupted
// install and a lock file that changed since (file times do not: a
// checkout or an edit of the lock alone can leave them in either order).
//
// The test binaries of several packages call it at once on a fresh clone
// (go test runs packages side by side), and two `npm ci` in one directory
// remove each other's files (ENOTEMPTY, TAR_ENTRY_ERROR); so an install
// holds a lock on a file beside the lock file, taken by every process,
// and looks again once it holds it.
func Install(t testing.TB, dir string) {
	t.Helper()
	if installed(dir) {
		return
	}
	unlock, err := lockDir(filepath.Join(dir, ".install.lock"))
	if err != nil {
		t.Fatalf("npm ci in %s: taking the install lock: %v", dir, err)
	}
	defer unlock()
	if installed(dir) {
		return // another test binary installed them while this one waited
	}
	timeout := 10 * time.Minute
	if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dl.Deadline(); ok {
			timeout = min(timeout, time.Until(d)-10*time.Second)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out.String())
	}
}

// installed reports whether dir/node_modules holds the packages of
// dir/package-lock.json, at their versions.
func installed(dir string) bool {
	want, err := lockedPackages(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return false
	}
	delete(want, "") // the project itself
	have, err := lockedPackages(filepath.Join(dir, "node_modules", ".package-lock.json"))
	return err == nil && maps.Equal(want, have)
}

// lockedPackages reads a lock file's packages: path → version.
func lockedPackages(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(lock.Packages))
	for p, v := range lock.Packages {
		out[p] = v.Version
	}
	return out, nil
}
