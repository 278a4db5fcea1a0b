package compat

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/store"
	bolt "go.etcd.io/bbolt"
)

// schemaOf reads the store schema version a home's ifaced.db holds
// (v0.1.0 wrote 1), without this tree's store package (which would
// migrate it).
func schemaOf(t *testing.T, home string) int {
	t.Helper()
	db, err := bolt.Open(filepath.Join(home, "ifaced.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		if meta == nil {
			return errors.New("no meta bucket")
		}
		return json.Unmarshal(meta.Get([]byte("schema_version")), &v)
	})
	if err != nil {
		t.Fatalf("reading the fixture's schema_version: %v", err)
	}
	return v
}

// copyHome copies a fixture home into a new data directory with the modes
// the daemon requires (git keeps none: the directories 0700, the files
// 0600), and points its libp2p listener at a free port (the fixture's was
// a port of the machine that made it).
func copyHome(t *testing.T, from string) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		to := filepath.Join(home, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
	if err != nil {
		t.Fatalf("copying the fixture home: %v", err)
	}
	cfg := filepath.Join(home, "config.toml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = regexp.MustCompile(`/ip4/127\.0\.0\.1/tcp/\d+`).ReplaceAll(b, []byte("/ip4/127.0.0.1/tcp/0"))
	// Its audit day would age out 90 days after it was made
	// (audit.retention_days), and the test checks that day.
	if !strings.Contains(string(b), "[audit]") {
		b = append(b, "\n[audit]\nretention_days = 0\n"...)
	}
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// TestHomeFromPreviousRelease opens each data directory an earlier release
// made (testdata/home-v0.1.0; the README there says how) with this tree's
// ifaced:
// the daemon starts on it, keeps its identity, its alias and its peer's
// view, its audit log verifies before and after it records more, and the
// store's migration runs when this tree's schema is newer than the
// fixture's (and nothing runs when it is not).
func TestHomeFromPreviousRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ifaced and runs two daemons; not in -short")
	}
	root := repoRoot(t)
	fixtures, _ := filepath.Glob(filepath.Join("testdata", "home-v*.json"))
	if len(fixtures) == 0 {
		t.Fatal("no fixture home in testdata")
	}
	bin := headBinary(t, root)
	for _, f := range fixtures {
		fixture := strings.TrimSuffix(f, ".json")
		t.Run(filepath.Base(fixture), func(t *testing.T) { openFixture(t, bin, fixture) })
	}
}

// openFixture is TestHomeFromPreviousRelease on one fixture home.
func openFixture(t *testing.T, bin, fixture string) {
	var want struct {
		PeerID      string `json:"peer_id"`
		Fingerprint string `json:"fingerprint"`
		Other       string `json:"other"`
	}
	b, err := os.ReadFile(fixture + ".json")
	if err != nil || json.Unmarshal(b, &want) != nil {
		t.Fatalf("reading %s.json: %v", fixture, err)
	}
	d := &daemon{name: "fixture", home: copyHome(t, fixture), bin: bin, t: t}

	// Its identity, read from the key v0.1.0 wrote.
	var id struct {
		PeerID      string `json:"peer_id"`
		Fingerprint string `json:"fingerprint"`
	}
	d.json(&id, "id")
	if id.PeerID != want.PeerID || id.Fingerprint != want.Fingerprint {
		t.Errorf("the fixture's identity is %+v, want %+v", id, want)
	}
	// Its audit log, as v0.1.0 left it.
	if out, err := d.run("audit", "verify"); err != nil {
		t.Errorf("audit verify of the fixture as v0.1.0 left it: %v\n%s", err, out)
	}

	fixtureSchema := schemaOf(t, d.home)
	start := time.Now()
	d.start()
	t.Logf("this tree's daemon started on the v0.1.0 home in %.1f s", time.Since(start).Seconds())
	migrated := strings.Contains(d.Log(), `msg="store: migrated"`)
	if store.SchemaVersion > fixtureSchema && !migrated {
		t.Errorf("the store is schema %d and the fixture %d, but no migration was logged:\n%s", store.SchemaVersion, fixtureSchema, d.Log())
	}
	if store.SchemaVersion == fixtureSchema && migrated {
		t.Errorf("a migration ran on a store of the current schema:\n%s", d.Log())
	}
	for _, line := range strings.Split(d.Log(), "\n") {
		if strings.Contains(line, "store: migrat") {
			t.Logf("migration: %s", line)
		}
	}

	// Its peer: the alias, the pin and the view v0.1.0 stored.
	if out := d.must("alias"); !strings.Contains(out, want.Other) || !strings.Contains(out, "other") {
		t.Errorf("the alias \"other\" is gone:\n%s", out)
	}
	if seq := d.peerSeq(want.Other); seq < 2 {
		t.Errorf("the other peer's view after the upgrade: seq %d, want the seq 2 view v0.1.0 stored", seq)
	}
	if out := d.must("trust", want.Other); !strings.Contains(strings.ToLower(out), "pinned") {
		t.Errorf("the pin of the other peer is gone:\n%s", out)
	}
	var convs struct {
		Conversations []json.RawMessage `json:"conversations"`
	}
	d.json(&convs, "audit", "--peer", want.Other)
	if len(convs.Conversations) == 0 {
		t.Errorf("the audit log lists no conversation with the other peer")
	}

	// It goes on working: it greets a daemon of this tree, and the audit
	// log, old days and new, verifies.
	peer := newDaemon(t, bin, "peer", baseConfig("/ip4/127.0.0.1/tcp/0"))
	peer.start()
	d.must("connect", peer.addrs()[0])
	d.must("greet", peer.peerID)
	d.stop()
	if out, err := d.run("audit", "verify"); err != nil {
		t.Errorf("audit verify after this tree's daemon recorded more: %v\n%s", err, out)
	}
	if strings.Contains(d.Log(), "level=ERROR") {
		t.Errorf("the daemon logged an error on the v0.1.0 home:\n%s", d.Log())
	}
}
