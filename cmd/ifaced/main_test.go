package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type result struct {
	code           int
	stdout, stderr string
}

func ifaced(t *testing.T, home string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(k string) string {
		if k == "IFACED_HOME" {
			return home
		}
		return ""
	}}
	code := run(context.Background(), e, args)
	return result{code, out.String(), errb.String()}
}

func TestInitAndID(t *testing.T) {
	home := filepath.Join(t.TempDir(), "alice")
	r := ifaced(t, home, "init", "--json")
	if r.code != 0 {
		t.Fatalf("init: %d %s", r.code, r.stderr)
	}
	var created idInfo
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil {
		t.Fatalf("init --json: %v\n%s", err, r.stdout)
	}
	if !strings.HasPrefix(created.PeerID, "12D3KooW") || !strings.HasPrefix(created.DID, "did:key:z6Mk") || !strings.HasPrefix(created.Fingerprint, "SHA256:") {
		t.Fatalf("init printed %+v", created)
	}
	for _, f := range []string{"key.pem", "config.toml"} {
		if _, err := os.Stat(filepath.Join(home, f)); err != nil {
			t.Errorf("init did not create %s: %v", f, err)
		}
	}
	r = ifaced(t, home, "id", "--json")
	var again idInfo
	if err := json.Unmarshal([]byte(r.stdout), &again); err != nil || again != created {
		t.Fatalf("id --json gave %+v (%v), init gave %+v", again, err, created)
	}
	r = ifaced(t, home, "id")
	if r.code != 0 || !strings.Contains(r.stdout, created.PeerID) || !strings.Contains(r.stdout, created.Fingerprint) {
		t.Fatalf("id: %d %q", r.code, r.stdout)
	}
	r = ifaced(t, home, "init")
	if r.code != 1 || !strings.Contains(r.stderr, "never replaced") {
		t.Fatalf("second init: %d %q", r.code, r.stderr)
	}
	// The config init wrote validates.
	r = ifaced(t, home, "caps", "validate", filepath.Join(home, "config.toml"))
	if r.code != 0 {
		t.Fatalf("validate the written config: %d %s", r.code, r.stderr)
	}
	// --home wins over $IFACED_HOME.
	other := filepath.Join(t.TempDir(), "bob")
	if r := ifaced(t, home, "init", "--home", other); r.code != 0 || !strings.Contains(r.stdout, other) {
		t.Fatalf("init --home: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestIDWithoutKey(t *testing.T) {
	r := ifaced(t, t.TempDir(), "id")
	if r.code != 1 || !strings.Contains(r.stderr, "ifaced init") {
		t.Fatalf("id without a key: %d %q", r.code, r.stderr)
	}
}

func TestKeyReadableByOthersIsRefused(t *testing.T) {
	home := t.TempDir()
	ifaced(t, home, "init")
	os.Chmod(filepath.Join(home, "key.pem"), 0o644)
	r := ifaced(t, home, "id")
	if r.code != 1 || !strings.Contains(r.stderr, "chmod 600") {
		t.Fatalf("id with a 0644 key: %d %q", r.code, r.stderr)
	}
}

// TestRunRefusesHomeOthersCanWrite: `ifaced run` on a data directory or
// config.toml that group or others may write stops before it starts,
// saying which chmod fixes it. (Its context is already done, so a daemon
// that started anyway would stop at once and exit 0.)
func TestRunRefusesHomeOthersCanWrite(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	ifaced(t, home, "init")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	runIn := func() result {
		var out, errb bytes.Buffer
		e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		code := run(ctx, e, []string{"run", "--home", home, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--no-mdns"})
		return result{code, out.String(), errb.String()}
	}
	for _, path := range []string{home, filepath.Join(home, "config.toml")} {
		st, _ := os.Stat(path)
		os.Chmod(path, st.Mode().Perm()|0o020)
		r := runIn()
		if want := "run `chmod go-w " + path + "`"; r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "writable by group or others") {
			t.Errorf("run with %s group-writable: %d %q, want exit 1 and %q", path, r.code, r.stderr, want)
		}
		os.Chmod(path, st.Mode().Perm())
	}
	if r := runIn(); r.code != 0 {
		t.Errorf("run once fixed: %d %q", r.code, r.stderr)
	}
}

func TestCapsValidate(t *testing.T) {
	home := t.TempDir()
	r := ifaced(t, home, "caps", "validate", "../../config.example.toml")
	if r.code != 0 || !strings.Contains(r.stdout, "valid config, 6 capabilities") {
		t.Fatalf("example config: %d %q %q", r.code, r.stdout, r.stderr)
	}
	for _, f := range []string{"../../negotiate/testdata/document.json", "../../negotiate/testdata/document.toml"} {
		r := ifaced(t, home, "caps", "validate", "--json", f)
		var rep capsReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.Valid || rep.Kind != "document" || len(rep.Capabilities) != 4 {
			t.Fatalf("%s: %d %+v %v %s", f, r.code, rep, err, r.stderr)
		}
	}

	dir := t.TempDir()
	broken := filepath.Join(dir, "config.toml")
	os.WriteFile(broken, []byte("version = 1\n\n[[capabilities]]\nname = \"calendar.availability\"\ndescription = \"x\"\n[capabilities.conditions]\nmin_disclosure = \"profesional\"\n"), 0o644)
	r = ifaced(t, home, "caps", "validate", broken)
	want := broken + ":7: capabilities[0].conditions.min_disclosure (capability \"calendar.availability\"): "
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("broken config: %d\n%s\nwant a line starting %q", r.code, r.stderr, want)
	}
	r = ifaced(t, home, "caps", "validate", "--json", broken)
	var rep capsReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 1 || rep.Valid || len(rep.Errors) != 1 || rep.Errors[0].Line != 7 {
		t.Fatalf("broken config --json: %d %+v %v", r.code, rep, err)
	}

	bad := filepath.Join(dir, "doc.json")
	os.WriteFile(bad, []byte("{\n  \"ifp\": 7,\n  \"agent_id\": \"a\",\n  \"capabilities\": [\n    {\"name\": \"x\", \"descripton\": \"typo\"}\n  ]\n}\n"), 0o644)
	r = ifaced(t, home, "caps", "validate", bad)
	if r.code != 1 || !strings.Contains(r.stderr, bad+":5: capabilities[0].descripton") {
		t.Fatalf("document with a typo: %d %q", r.code, r.stderr)
	}
	r = ifaced(t, home, "caps", "validate", filepath.Join(dir, "missing.json"))
	if r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("missing file: %d %q", r.code, r.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"frobnicate"}, {"caps", "explode"}, {"caps", "validate"}, {"id", "extra"}, {"init", "--bogus"}} {
		if r := ifaced(t, t.TempDir(), args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	// Help asked for is output: on standard output (issue 19).
	if r := ifaced(t, t.TempDir(), "id", "-h"); r.code != 0 || !strings.Contains(r.stdout, "Usage: ifaced id") || r.stderr != "" {
		t.Errorf("id -h: %d %q", r.code, r.stderr)
	}
	if r := ifaced(t, t.TempDir(), "help"); r.code != 0 || !strings.Contains(r.stdout, "caps") {
		t.Errorf("help: %d %q", r.code, r.stdout)
	}
}

func TestDemoVerb(t *testing.T) {
	r := ifaced(t, t.TempDir(), "demo", "--keep", t.TempDir())
	if r.code != 0 || !strings.Contains(r.stdout, "Bob greets Alice") || !strings.Contains(r.stdout, "received bob close 11: Closing this exchange.") {
		t.Fatalf("demo: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
