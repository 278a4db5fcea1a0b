package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/store"
)

// TestKeyVerb: prepare a revocation statement, rotate, revoke the old key
// from its successor, publish the prepared statement; each refused with a
// clear error where it must be.
func TestKeyVerb(t *testing.T) {
	home := filepath.Join(t.TempDir(), "alice")
	if r := ifaced(t, home, "init"); r.code != 0 {
		t.Fatalf("init: %s", r.stderr)
	}
	var before idInfo
	json.Unmarshal([]byte(ifaced(t, home, "id", "--json").stdout), &before)

	stmt := filepath.Join(t.TempDir(), "revocation.json")
	r := ifaced(t, home, "key", "revocation-statement", "--out", stmt, "--reason", "lost")
	if r.code != 0 || !strings.Contains(r.stdout, "keep it offline") {
		t.Fatalf("revocation-statement: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if st, err := os.Stat(stmt); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("statement file: %v %v", st, err)
	}
	raw, _ := os.ReadFile(stmt)
	rev, err := identity.DecodeRevocation(raw)
	if err != nil || rev.Verify(nil) != nil || rev.KeyID != before.KeyID || rev.Reason != "lost" {
		t.Fatalf("the prepared statement %s (%v)", raw, err)
	}
	if r := ifaced(t, home, "key", "revocation-statement", "--out", stmt); r.code != 1 || !strings.Contains(r.stderr, "never overwritten") {
		t.Errorf("a second statement over the first: %d %s", r.code, r.stderr)
	}

	// A running daemon (its store locked) keeps its key.
	st, err := store.Open(filepath.Join(home, "ifaced.db"))
	if err != nil {
		t.Fatal(err)
	}
	if r := ifaced(t, home, "key", "rotate"); r.code != 1 || !strings.Contains(r.stderr, "daemon is running: stop it first") {
		t.Errorf("rotate with the daemon running: %d %s", r.code, r.stderr)
	}
	st.Close()

	r = ifaced(t, home, "key", "rotate", "--transition", "48h", "--json")
	if r.code != 0 {
		t.Fatalf("rotate: %s", r.stderr)
	}
	var rot struct {
		Old, New   string
		Statement  identity.Succession
		RetiredKey string `json:"retired_key"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rot); err != nil {
		t.Fatal(err)
	}
	var after idInfo
	json.Unmarshal([]byte(ifaced(t, home, "id", "--json").stdout), &after)
	if rot.Old != before.PeerID || rot.New != after.PeerID || rot.Old == rot.New || rot.Statement.Verify() != nil || rot.Statement.Transition != 48*3600 {
		t.Fatalf("rotate printed %+v; id now %s", rot, after.PeerID)
	}
	if old, err := identity.LoadKey(rot.RetiredKey); err != nil || old.PeerID().String() != before.PeerID {
		t.Errorf("the retired key at %s: %v", rot.RetiredKey, err)
	}

	if r := ifaced(t, home, "key", "revoke", after.PeerID); r.code != 1 || !strings.Contains(r.stderr, "not its successor") {
		t.Errorf("revoking a key this one did not succeed: %d %s", r.code, r.stderr)
	}
	if r := ifaced(t, home, "key", "revoke", "--reason", "sold"); r.code != 0 || !strings.Contains(r.stdout, before.KeyID) {
		t.Errorf("revoke the old key: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := ifaced(t, home, "key", "revoke", "--statement", stmt); r.code != 0 {
		t.Errorf("publishing the prepared statement: %d %s", r.code, r.stderr)
	}
	forged := strings.Replace(string(raw), `"lost"`, `"stolen"`, 1)
	os.WriteFile(stmt+".forged", []byte(forged), 0o600)
	if r := ifaced(t, home, "key", "revoke", "--statement", stmt+".forged"); r.code != 1 || !strings.Contains(r.stderr, "does not verify") {
		t.Errorf("publishing a forged statement: %d %s", r.code, r.stderr)
	}
	if r := ifaced(t, home, "key", "rotat"); r.code != 2 || !strings.Contains(r.stderr, `did you mean "rotate"`) {
		t.Errorf("a mistyped subcommand: %d %s", r.code, r.stderr)
	}
}

// TestKeyCommitNext: commit to the next key, then rotate: to the
// committed key only, and committing to the key after it.
func TestKeyCommitNext(t *testing.T) {
	home := filepath.Join(t.TempDir(), "alice")
	if r := ifaced(t, home, "init"); r.code != 0 {
		t.Fatalf("init: %s", r.stderr)
	}
	if r := ifaced(t, home, "key", "commit-next"); r.code != 2 || !strings.Contains(r.stderr, "--out FILE") {
		t.Errorf("commit-next without --out: %d %s", r.code, r.stderr)
	}
	next := filepath.Join(t.TempDir(), "next.pem")
	r := ifaced(t, home, "key", "commit-next", "--out", next)
	if r.code != 0 || !strings.Contains(r.stdout, "keep it offline") || !strings.Contains(r.stdout, "next_key_digest sha256:") {
		t.Fatalf("commit-next: %d %s %s", r.code, r.stdout, r.stderr)
	}
	nextKey, err := identity.LoadKey(next)
	if err != nil {
		t.Fatalf("the next key file: %v", err)
	}
	if st, err := os.Stat(next); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the next key file: %v %v", st, err)
	}
	if !strings.Contains(r.stdout, identity.NextKeyDigest(nextKey.PublicKey())) {
		t.Errorf("commit-next printed %q, want the digest of the key it wrote", r.stdout)
	}
	if r := ifaced(t, home, "key", "commit-next", "--out", filepath.Join(t.TempDir(), "other.pem")); r.code != 1 || !strings.Contains(r.stderr, "--replace") {
		t.Errorf("a second commitment: %d %s", r.code, r.stderr)
	}
	if r := ifaced(t, home, "key", "rotate"); r.code != 1 || !strings.Contains(r.stderr, "--next-key FILE") {
		t.Errorf("rotate without the committed key: %d %s", r.code, r.stderr)
	}
	if r := ifaced(t, home, "key", "revoke", "--next-key", next); r.code != 2 || !strings.Contains(r.stderr, "for key rotate") {
		t.Errorf("--next-key on revoke: %d %s", r.code, r.stderr)
	}
	after := filepath.Join(t.TempDir(), "after.pem")
	r = ifaced(t, home, "key", "rotate", "--next-key", next, "--commit-next", after, "--json")
	if r.code != 0 {
		t.Fatalf("rotate to the committed key: %s", r.stderr)
	}
	var rot struct {
		New       string
		Statement identity.Succession
		Committed string
	}
	if err := json.Unmarshal([]byte(r.stdout), &rot); err != nil {
		t.Fatal(err)
	}
	afterKey, err := identity.LoadKey(after)
	if err != nil {
		t.Fatal(err)
	}
	if rot.New != nextKey.PeerID().String() || rot.Committed != after || !identity.Commits(rot.Statement.NextKeyDigest, afterKey.KeyID()) || rot.Statement.Verify() != nil {
		t.Fatalf("rotate printed %+v: want the committed key, and a statement committing to %s", rot, afterKey.PeerID())
	}
	var now idInfo
	json.Unmarshal([]byte(ifaced(t, home, "id", "--json").stdout), &now)
	if now.PeerID != nextKey.PeerID().String() {
		t.Errorf("the daemon's key is %s, want the committed one %s", now.PeerID, nextKey.PeerID())
	}
	// The new key is committed too: only the key after it goes.
	if r := ifaced(t, home, "key", "rotate"); r.code != 1 || !strings.Contains(r.stderr, "committed") {
		t.Errorf("rotating the new key to a fresh one: %d %s", r.code, r.stderr)
	}
}
