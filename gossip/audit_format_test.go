package gossip

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditFormat: a log is format 1 without _format.json (v0.1.0's, and
// this package's, which writes none); one of a newer format is refused by
// OpenAuditLog and VerifyAuditLog, naming the directory, both formats and
// what to do, and is left as it was.
func TestAuditFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	a, err := OpenAuditLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, err := os.Stat(filepath.Join(dir, "_format.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("format 1 wrote _format.json: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_format.json"), []byte(`{"format": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if a, err = OpenAuditLog(dir); err != nil {
		t.Fatalf("opening a log that says format 1: %v", err)
	}
	a.Close()
	if _, err := VerifyAuditLog(dir, VerifyOptions{}); err != nil {
		t.Errorf("verifying a log that says format 1: %v", err)
	}

	newer := []byte(`{"format": 2}` + "\n")
	if err := os.WriteFile(filepath.Join(dir, "_format.json"), newer, 0o600); err != nil {
		t.Fatal(err)
	}
	_, openErr := OpenAuditLog(dir)
	_, verifyErr := VerifyAuditLog(dir, VerifyOptions{})
	for what, err := range map[string]error{"OpenAuditLog": openErr, "VerifyAuditLog": verifyErr} {
		if !errors.Is(err, ErrAuditFormat) {
			t.Errorf("%s of a format 2 log: %v, want ErrAuditFormat", what, err)
			continue
		}
		for _, part := range []string{dir, "written by a newer ifaced", "found format 2", "reads format 1", "Run that newer ifaced", "move " + dir + " aside"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s: %q does not say %q", what, err, part)
			}
		}
	}
	t.Logf("refusal: %v", openErr)
	if b, _ := os.ReadFile(filepath.Join(dir, "_format.json")); string(b) != string(newer) {
		t.Errorf("the refused log's _format.json is now %q", b)
	}

	if err := os.WriteFile(filepath.Join(dir, "_format.json"), []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenAuditLog(dir); !errors.Is(err, ErrAuditFormat) || !strings.Contains(err.Error(), `{"format": N}`) {
		t.Errorf("a _format.json that does not parse: %v", err)
	}
}
