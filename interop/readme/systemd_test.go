package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unitPath is the unit the README's service example installs.
const unitPath = "examples/systemd/ifaced.service"

// runSystemd runs the README's service example as far as a test can: the
// files are put where it says, and `systemd-analyze --user verify` stands
// in for systemctl, which needs a user manager a test does not have.
func runSystemd(t *testing.T, s *session, bs []block) {
	if len(bs) != 1 {
		t.Fatalf("want one systemd block, got %d", len(bs))
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var verify bool
	for _, st := range parseSteps(bs[0]) {
		switch {
		case st.cmd == "go install ./cmd/ifaced":
			// what go install does, without a second build: the binary in ~/go/bin
			if err := os.MkdirAll(filepath.Join(s.home, "go", "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(s.bin, filepath.Join(s.home, "go", "bin", "ifaced")); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(st.cmd, "mkdir ") || strings.HasPrefix(st.cmd, "cp "):
			// run as written, from the root of the clone
			c := exec.Command("sh", "-c", st.cmd)
			c.Dir, c.Env = root, s.env()
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("README.md:%d: %s: %v\n%s", st.line, st.cmd, err, out)
			}
		case strings.HasPrefix(st.cmd, "systemctl --user ") || strings.HasPrefix(st.cmd, "journalctl --user ") ||
			strings.HasPrefix(st.cmd, "loginctl enable-linger "):
			verify = true // needs a user manager: verified below instead
		default:
			t.Errorf("README.md:%d: the test does not know how to run %q", st.line, st.cmd)
		}
	}
	installed := filepath.Join(s.home, ".config", "systemd", "user", filepath.Base(unitPath))
	if _, err := os.Stat(installed); err != nil {
		t.Fatalf("the README's commands did not install %s: %v", unitPath, err)
	}
	if !verify {
		t.Fatal("the README's service example never starts the unit")
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
	c.Env = append(s.env(), "XDG_RUNTIME_DIR="+runtime)
	var stderr strings.Builder
	c.Stderr = &stderr
	err = c.Run()
	// verify exits 0 on some mistakes (an unknown value is "ignoring"), but
	// says so on stderr.
	if err != nil || strings.TrimSpace(stderr.String()) != "" {
		t.Errorf("systemd-analyze --user verify %s: %v\n%s", unitPath, err, stderr.String())
	}
}
