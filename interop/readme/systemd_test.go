package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitPath is the unit docs/operations.md installs.
const unitPath = "examples/systemd/ifaced.service"

// TestSystemdUnit checks the user unit the operations guide installs, in
// place of running its systemctl commands, which need a user manager a
// test does not have: `systemd-analyze --user verify` on it (skipped,
// saying so, where systemd-analyze is missing), and no system-only target
// in it (a user manager cannot order against network-online.target: the
// unit said it waited for the network and did not).
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, unitPath))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") && strings.Contains(line, "network-online.target") {
			t.Errorf("%s: %q: a user unit cannot wait for the system's network-online.target (it has no effect)", unitPath, line)
		}
	}
	home := t.TempDir()
	installed := filepath.Join(home, ".config", "systemd", "user", filepath.Base(unitPath))
	if err := os.MkdirAll(filepath.Dir(installed), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(installed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The unit's ExecStart is %h/go/bin/ifaced, where `go install` puts it.
	bin := filepath.Join(home, "go", "bin", "ifaced")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed, so the unit cannot be verified here")
	}
	runtime := t.TempDir() // a user manager's runtime directory, which verify needs
	if err := os.Chmod(runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(analyze, "--user", "verify", installed)
	c.Env = append(os.Environ(), "HOME="+home, "XDG_RUNTIME_DIR="+runtime)
	var stderr strings.Builder
	c.Stderr = &stderr
	err = c.Run()
	// verify exits 0 on some mistakes (an unknown value is "ignoring"), but
	// says so on stderr.
	if err != nil || strings.TrimSpace(stderr.String()) != "" {
		t.Errorf("systemd-analyze --user verify %s: %v\n%s", unitPath, err, stderr.String())
	}
}
