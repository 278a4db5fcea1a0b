package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	bolt "go.etcd.io/bbolt"
)

// Migration takes a store file from schema version From to From+1. Run
// gets the bbolt transaction Open runs it in: the migration and the new
// schema_version commit together or not at all, so a daemon killed in the
// middle of one restarts on the file as it was before it.
type Migration struct {
	From int
	What string // one line for the log: what the migration changes
	Run  func(tx *bolt.Tx) error
}

// migrations are the forward migrations this package knows, in order: the
// first starts at the oldest version Open still reads, each ends where
// the next starts, and the last ends at SchemaVersion. None yet: the
// layout has not changed since v0.1.0 (schema 1). doc.go ("Schema
// versions") says how one is added.
var migrations []Migration

// schema is the layout Open reads and how it gets there: SchemaVersion and
// migrations. It is a variable so the package's tests can register a
// migration of their own (a version 2 that exists only in the test).
type schema struct {
	version    int
	migrations []Migration
}

var current = schema{version: SchemaVersion, migrations: migrations}

// oldest is the oldest schema version Open reads: the first migration's
// start, or the current version when there is none.
func (sc schema) oldest() int {
	if len(sc.migrations) == 0 {
		return sc.version
	}
	return sc.migrations[0].From
}

// check holds the migrations to their order: From N to N+1, without gaps,
// ending at version.
func (sc schema) check() error {
	for i, m := range sc.migrations {
		if m.Run == nil || (i > 0 && m.From != sc.migrations[i-1].From+1) {
			return fmt.Errorf("store migrations out of order at %d (from %d)", i, m.From)
		}
	}
	if n := len(sc.migrations); n > 0 && sc.migrations[n-1].From+1 != sc.version {
		return fmt.Errorf("store migrations end at %d, not at schema version %d", sc.migrations[n-1].From+1, sc.version)
	}
	return nil
}

// SchemaError is Open's refusal of a file whose schema version it does not
// read: one written by a newer ifaced, or one older than the oldest
// migration. It matches ErrSchemaVersion (errors.Is), and its message
// names the file, both versions and what to do.
type SchemaError struct {
	Path   string
	Found  int // the file's schema_version
	Reads  int // the version this ifaced reads and writes (SchemaVersion)
	Oldest int // the oldest version it migrates from
}

func (e *SchemaError) Error() string {
	if e.Found > e.Reads {
		return fmt.Sprintf("store %s was written by a newer ifaced (found version %d; this ifaced reads version %d), and this one would misread it. "+
			"Run that newer ifaced (or a later one) on this data directory; or, to go back to this version, stop ifaced and restore the store "+
			"from before the upgrade (the upgrade's migration kept it as %s.schema-%d.bak; docs/upgrading.md)",
			e.Path, e.Found, e.Reads, e.Path, e.Reads)
	}
	return fmt.Sprintf("store %s is older than this ifaced migrates from (found version %d; this ifaced reads version %d and migrates from version %d on). "+
		"Open it once with an older ifaced release that reads version %d (it migrates the file), then with this one; or restore a newer backup (docs/upgrading.md)",
		e.Path, e.Found, e.Reads, e.Oldest, e.Found)
}

// Is makes a SchemaError match ErrSchemaVersion.
func (e *SchemaError) Is(target error) bool { return target == ErrSchemaVersion }

// readVersion reads the file's schema_version: 0 and no error for a new,
// empty file; an error wrapping ErrSchemaVersion for a file that is not an
// ifaced store or whose version does not parse.
func readVersion(tx *bolt.Tx) (int, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		// A file with data buckets but no meta was not written by us (or
		// by a version we know); guessing its layout could lose data.
		empty := true
		tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if !empty {
			return 0, fmt.Errorf("%w: the file has no %s/%s; this ifaced reads version %d", ErrSchemaVersion, bucketMeta, keySchemaVersion, current.version)
		}
		return 0, nil
	}
	raw := meta.Get(keySchemaVersion)
	if raw == nil {
		return 0, fmt.Errorf("%w: %s/%s is missing; this ifaced reads version %d", ErrSchemaVersion, bucketMeta, keySchemaVersion, current.version)
	}
	var version int
	if err := json.Unmarshal(raw, &version); err != nil || version < 1 {
		return 0, fmt.Errorf("%w: found %s/%s %q; this ifaced reads version %d", ErrSchemaVersion, bucketMeta, keySchemaVersion, raw, current.version)
	}
	return version, nil
}

// migrate brings the file at path to the current schema: it refuses a
// version it cannot read (SchemaError), and for an older one it first
// copies the file to <path>.schema-<N>.bak (what an older ifaced reads, so
// the owner can go back), then runs each migration in a transaction of
// its own, logging each.
func migrate(db *bolt.DB, path string, log *slog.Logger) error {
	if err := current.check(); err != nil {
		return err
	}
	var found int
	if err := db.View(func(tx *bolt.Tx) (err error) { found, err = readVersion(tx); return err }); err != nil {
		return err
	}
	if found == 0 || found == current.version {
		return nil // new (initSchema writes it) or current
	}
	if found > current.version || found < current.oldest() {
		return &SchemaError{Path: path, Found: found, Reads: current.version, Oldest: current.oldest()}
	}
	backup := fmt.Sprintf("%s.schema-%d.bak", path, found)
	if err := copyFile(db, backup); err != nil {
		return fmt.Errorf("keeping a copy of the schema %d store before migrating it: %w", found, err)
	}
	log.Info("store: migrating the schema", "file", path, "from", found, "to", current.version, "backup", backup)
	for _, m := range current.migrations[found-current.oldest():] {
		err := db.Update(func(tx *bolt.Tx) error {
			if v, err := readVersion(tx); err != nil || v != m.From {
				return errors.Join(err, fmt.Errorf("store migration %d→%d: the file is at version %d", m.From, m.From+1, v))
			}
			if err := m.Run(tx); err != nil {
				return err
			}
			v, _ := json.Marshal(m.From + 1)
			return tx.Bucket(bucketMeta).Put(keySchemaVersion, v)
		})
		if err != nil {
			return fmt.Errorf("migrating store %s from schema %d to %d (%s): %w; the file is still at version %d, and %s is the copy from before",
				path, m.From, m.From+1, m.What, err, m.From, backup)
		}
		log.Info("store: migrated", "from", m.From, "to", m.From+1, "what", m.What)
	}
	return nil
}

// copyFile writes a consistent copy of the open file to dst (mode 0600,
// fsynced); an existing dst (from an earlier attempt) is replaced.
func copyFile(db *bolt.DB, dst string) error {
	f, err := os.OpenFile(dst+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = db.View(func(tx *bolt.Tx) error { _, err := tx.WriteTo(f); return err })
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(dst+".tmp", dst)
	}
	if err != nil {
		os.Remove(dst + ".tmp")
	}
	return err
}

// Option changes how Open opens a store.
type Option func(*openOptions)

type openOptions struct{ log *slog.Logger }

// WithLog has Open log its schema migrations to log (by default, nowhere).
func WithLog(log *slog.Logger) Option { return func(o *openOptions) { o.log = log } }

var discard = slog.New(slog.DiscardHandler)
