package store

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// withSchema has Open read version and migrate with ms until the test
// ends: a schema that exists only in the test (the product has no
// migration yet; doc.go, "Schema versions").
func withSchema(t *testing.T, version int, ms ...Migration) {
	t.Helper()
	saved := current
	current = schema{version: version, migrations: ms}
	t.Cleanup(func() { current = saved })
}

// storeAt makes a store file of schema version 1 (what v0.1.0 writes)
// holding one peer record, then sets its schema_version to version.
func storeAt(t *testing.T, version int) string {
	t.Helper()
	s, path := openTemp(t)
	rec := PeerRecord{PeerID: "12D3KooWpeer", Seq: 3, DocHash: "ab", View: []byte(`{"seq":3}`), FetchedAt: time.Unix(1e9, 0).UTC(), ChangedAt: time.Unix(1e9, 0).UTC()}
	if _, err := s.PutPeer(rec); err != nil {
		t.Fatal(err)
	}
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, []byte(strconv.Itoa(version)))
	})
	return path
}

func fileVersion(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	db.View(func(tx *bolt.Tx) error { v = string(tx.Bucket(bucketMeta).Get(keySchemaVersion)); return nil })
	return v
}

// markMigration is a migration that leaves a mark in meta.
func markMigration(from int, mark string) Migration {
	return Migration{From: from, What: "test: mark " + mark, Run: func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte("mark-"+mark), []byte("yes"))
	}}
}

// TestMigrationsRunOnOpen: a store of version 1 opened by a daemon that
// reads version 3 runs 1→2 then 2→3, each logged, keeps a copy of the
// version 1 file beside it (what the older ifaced reads), keeps every
// record, and runs nothing the next time.
func TestMigrationsRunOnOpen(t *testing.T) {
	path := storeAt(t, 1)
	withSchema(t, 3, markMigration(1, "one"), markMigration(2, "two"))
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	s, err := Open(path, WithLog(log))
	if err != nil {
		t.Fatalf("Open of a version 1 store: %v", err)
	}
	if rec, err := s.Peer("12D3KooWpeer"); err != nil || rec.Seq != 3 {
		t.Errorf("the peer record after migrating: %+v %v", rec, err)
	}
	s.Close()
	t.Logf("migration log:\n%s", logged.String())
	for _, want := range []string{
		`msg="store: migrating the schema" file=` + path + ` from=1 to=3 backup=` + path + `.schema-1.bak`,
		`msg="store: migrated" from=1 to=2 what="test: mark one"`,
		`msg="store: migrated" from=2 to=3 what="test: mark two"`,
	} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the log does not say %s", want)
		}
	}
	if v := fileVersion(t, path); v != "3" {
		t.Errorf("schema_version after migrating = %q, want 3", v)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		for _, m := range []string{"mark-one", "mark-two"} {
			if tx.Bucket(bucketMeta).Get([]byte(m)) == nil {
				t.Errorf("migration %s did not run", m)
			}
		}
		return nil
	})
	if v := fileVersion(t, path+".schema-1.bak"); v != "1" {
		t.Errorf("the backup's schema_version = %q, want 1", v)
	}
	if fi, err := os.Stat(path + ".schema-1.bak"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("backup: %v %v, want mode 0600", fi, err)
	}

	logged.Reset()
	s, err = Open(path, WithLog(log))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if logged.Len() != 0 {
		t.Errorf("the second Open logged %q, want nothing (already migrated)", logged.String())
	}
}

// TestMigrationFailureLeavesTheFile: a migration that fails leaves the
// file at the version before it, with nothing of its half done, and the
// error names the file, the versions and the backup.
func TestMigrationFailureLeavesTheFile(t *testing.T) {
	path := storeAt(t, 1)
	withSchema(t, 3, markMigration(1, "one"), Migration{From: 2, What: "test: fails", Run: func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put([]byte("half"), []byte("done")); err != nil {
			return err
		}
		return errors.New("disk on fire")
	}})
	s, err := Open(path)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded with a failing migration")
	}
	for _, part := range []string{path, "from schema 2 to 3 (test: fails)", "disk on fire", "still at version 2", path + ".schema-1.bak"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
	if v := fileVersion(t, path); v != "2" {
		t.Errorf("schema_version = %q, want 2 (the first migration committed, the second not)", v)
	}
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get([]byte("half")) != nil {
			t.Error("the failed migration's write is in the file")
		}
		return nil
	})
}

// TestNewerStoreRefused: a store written by a newer ifaced is refused with
// the file, both versions and what to do, and is left as it was.
func TestNewerStoreRefused(t *testing.T) {
	path := storeAt(t, 2)
	s, err := Open(path)
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a store of schema version 2")
	}
	var se *SchemaError
	if !errors.Is(err, ErrSchemaVersion) || !errors.As(err, &se) || se.Found != 2 || se.Reads != SchemaVersion {
		t.Errorf("error %v (%+v), want a SchemaError matching ErrSchemaVersion", err, se)
	}
	t.Logf("refusal: %v", err)
	for _, part := range []string{path, "written by a newer ifaced", "found version 2", "reads version 1",
		"Run that newer ifaced", "restore the store from before the upgrade", path + ".schema-1.bak", "docs/upgrading.md"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
	if v := fileVersion(t, path); v != "2" {
		t.Errorf("the refused file's schema_version = %q, want 2 unchanged", v)
	}
	if _, err := os.Stat(path + ".schema-2.bak"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused file was copied: %v", err)
	}
}

// TestTooOldStoreRefused: a store older than the oldest migration is
// refused with the file, the versions and what to do.
func TestTooOldStoreRefused(t *testing.T) {
	path := storeAt(t, 1)
	withSchema(t, 3, markMigration(2, "two"))
	s, err := Open(path)
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a store older than its oldest migration")
	}
	t.Logf("refusal: %v", err)
	for _, part := range []string{path, "older than this ifaced migrates from", "found version 1", "reads version 3", "migrates from version 2 on", "older ifaced release"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
	if !errors.Is(err, ErrSchemaVersion) {
		t.Errorf("error %v does not match ErrSchemaVersion", err)
	}
	if v := fileVersion(t, path); v != "1" {
		t.Errorf("the refused file's schema_version = %q, want 1 unchanged", v)
	}
}

// TestMigrationsInOrder: a list with a gap or that does not end at the
// schema version is a programming error Open reports, not a file it
// half migrates.
func TestMigrationsInOrder(t *testing.T) {
	for _, c := range []struct {
		name    string
		version int
		ms      []Migration
	}{
		{"gap", 4, []Migration{markMigration(1, "a"), markMigration(3, "b")}},
		{"short", 4, []Migration{markMigration(1, "a"), markMigration(2, "b")}},
		{"no Run", 2, []Migration{{From: 1}}},
	} {
		path := storeAt(t, 1)
		saved := current
		current = schema{version: c.version, migrations: c.ms}
		if s, err := Open(path); err == nil {
			s.Close()
			t.Errorf("%s: Open accepted the migrations", c.name)
		}
		current = saved
		if v := fileVersion(t, path); v != "1" {
			t.Errorf("%s: schema_version = %q, want 1", c.name, v)
		}
	}
	if err := (schema{version: SchemaVersion, migrations: migrations}).check(); err != nil {
		t.Errorf("the product's migrations: %v", err)
	}
}
