package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/gossip"
)

// After `ifaced demo --keep`, `audit verify` passes on each home; one
// byte changed in a record, it fails naming the file and line, exit 1. A
// conversation exported from the home verifies with `audit
// verify-bundle` alone, in a directory that holds no home, and a bundle
// with a record changed does not.
func TestAuditVerifyAfterTheDemo(t *testing.T) {
	kept := t.TempDir()
	if r := ifaced(t, t.TempDir(), "demo", "--keep", kept); r.code != 0 {
		t.Fatalf("demo: %d\n%s", r.code, r.stderr)
	}
	alice := filepath.Join(kept, "alice")
	for _, who := range []string{"alice", "bob", "carol"} {
		r := ifaced(t, filepath.Join(kept, who), "audit", "verify")
		if r.code != 0 || !strings.Contains(r.stdout, "verifies") || !strings.Contains(r.stdout, "each signed by its sender") {
			t.Fatalf("audit verify of %s after the demo: %d\n%s\n%s", who, r.code, r.stdout, r.stderr)
		}
	}
	r := ifaced(t, alice, "audit", "verify", "--json")
	var rep gossip.VerifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || rep.Records == 0 || rep.Received == 0 || rep.Failure != nil {
		t.Fatalf("audit verify --json: %d %v\n%s", r.code, err, r.stdout)
	}

	// Export a conversation alice had, and verify the bundle with no home.
	files, _ := filepath.Glob(filepath.Join(alice, "audit", "*", "12D3KooW*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no peer file in alice's audit log")
	}
	first, _ := os.ReadFile(files[0])
	var e gossip.AuditEntry
	if err := json.Unmarshal(first[:bytes.IndexByte(first, '\n')], &e); err != nil {
		t.Fatal(err)
	}
	conv := e.Message.Headers.ConversationID
	elsewhere := t.TempDir()
	bundle := filepath.Join(elsewhere, "bundle.json")
	if r := ifaced(t, alice, "audit", "export", "--conversation", conv, "--out", bundle); r.code != 0 {
		t.Fatalf("audit export: %d %s", r.code, r.stderr)
	}
	id := ifaced(t, alice, "id", "--json")
	var who idInfo
	if err := json.Unmarshal([]byte(id.stdout), &who); err != nil {
		t.Fatal(err)
	}
	r = ifaced(t, filepath.Join(elsewhere, "no-home"), "audit", "verify-bundle", bundle, "--key", who.DID)
	if r.code != 0 || !strings.Contains(r.stdout, "verifies: the bundle of conversation "+conv) || !strings.Contains(r.stdout, "signed by the peer") {
		t.Fatalf("audit verify-bundle: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "no-home")); err == nil {
		t.Error("verify-bundle made a home")
	}
	raw, _ := os.ReadFile(bundle)
	changed := filepath.Join(elsewhere, "changed.json")
	os.WriteFile(changed, bytes.Replace(raw, []byte(`\"phase\":\"greeting\"`), []byte(`\"phase\":\"context\"`), 1), 0o600)
	if r := ifaced(t, elsewhere, "audit", "verify-bundle", changed); r.code != 1 || !strings.Contains(r.stderr, "record 0: its inclusion proof does not lead") {
		t.Errorf("a changed bundle: %d\n%s", r.code, r.stderr)
	}

	// One byte of a record changed: named, exit 1.
	b, _ := os.ReadFile(files[0])
	i := bytes.Index(b, []byte(`"text":"`)) + len(`"text":"`)
	b[i] ^= 0x20
	os.WriteFile(files[0], b, 0o600)
	r = ifaced(t, alice, "audit", "verify")
	rel := filepath.Join("audit", filepath.Base(filepath.Dir(files[0])), filepath.Base(files[0]))
	if r.code != 1 || !strings.Contains(r.stderr, rel+" line 1") || !strings.Contains(r.stderr, "it was changed") {
		t.Fatalf("audit verify after a one-byte edit: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Usage mistakes are usage errors.
	for _, args := range [][]string{{"audit", "export"}, {"audit", "verify-bundle"}, {"audit", "verify", "extra"}, {"audit", "--peer", "x", "verify"}} {
		if r := ifaced(t, alice, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
}
