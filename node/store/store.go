package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ifaced/ifaced/node/internal/costlru"
	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout this package reads and writes.
const SchemaVersion = 1

// lockTimeout bounds how long Open waits for another process's lock: long
// enough to ride out a daemon that is just closing, short enough that a
// second daemon on the same data directory fails at once.
const lockTimeout = time.Second

var (
	// ErrLocked: another process (or another Store in this one) has the file open.
	ErrLocked = errors.New("store is locked by another process")
	// ErrStaleSeq: a document's seq is older than (or, for the own
	// document, not newer than) the stored one.
	ErrStaleSeq = errors.New("capability document seq is older than the cached one")
	// ErrNotFound: no record under that key.
	ErrNotFound = errors.New("not found")
	// ErrCorrupt: a stored record does not decode.
	ErrCorrupt = errors.New("store record is corrupt")
	// ErrSchemaVersion: the file was written in a layout this package does not read.
	ErrSchemaVersion = errors.New("unknown store schema version")
)

// Bucket and key names; they are part of the file format.
var (
	bucketMeta         = []byte("meta")
	bucketPeers        = []byte("peers")
	bucketSeen         = []byte("seen")
	bucketSeenByExpiry = []byte("seen_by_expiry")
	bucketOwn          = []byte("own")

	keySchemaVersion = []byte("schema_version")
	keyOwnDocument   = []byte("document")
)

// dataBuckets are created with the file alongside meta.
var dataBuckets = [][]byte{bucketPeers, bucketSeen, bucketSeenByExpiry, bucketOwn,
	bucketTrust, bucketIntrosIssued, bucketIntrosHeld,
	bucketMail, bucketMailBySender, bucketMailRecipients, bucketOutbox, bucketImports, bucketMailMeta, bucketSent}

// Store is the open store file. It is safe for concurrent use: bbolt runs
// one writer at a time and readers beside it.
type Store struct {
	db   *bolt.DB
	path string

	headsMu sync.Mutex
	heads   map[string]peerHead // what PutPeer last wrote per peer (peers.go)

	seenCount  atomic.Int64 // IDs in the seen set (seen.go)
	seenPruned atomic.Int64 // the seen set's PrunedTo in Unix nanoseconds (seen.go)
	maxSeen    int          // MaxSeenIDs; smaller in tests

	gate        atomic.Pointer[PeerGate]           // which peers are known (peers.go); nil: all
	strangers   *costlru.Cache[string, PeerRecord] // strangers' records, in memory only (peers.go)
	strangersMu sync.Mutex                         // one merge into strangers at a time

	sentStrangers *costlru.Cache[string, SentView] // strangers' records of the views sent them, in memory only (sent.go)
}

// Open opens (creating with mode 0600) the store file at path. If another
// process holds it, it fails within about a second with an error wrapping
// ErrLocked that says another ifaced may be running with this data directory.
//
// A file of an older schema version is migrated first (migrate.go: a copy
// of it kept beside it, then each migration in its own transaction, each
// logged to WithLog's logger); one of a newer version, or older than the
// oldest migration, is refused with a SchemaError. A damaged file is
// refused before anything reads it for use (salvage.go).
func Open(path string, opts ...Option) (*Store, error) {
	o := openOptions{log: discard}
	for _, opt := range opts {
		opt(&o)
	}
	db, err := openChecked(path) // salvage.go: a damaged file is refused, not read
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("opening store %s: %w; another ifaced may be running with this data directory", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	if err := migrate(db, path, o.log); err != nil {
		db.Close()
		if se := (*SchemaError)(nil); errors.As(err, &se) {
			return nil, err // it names the file
		}
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	if err := db.Update(initSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, maxSeen: MaxSeenIDs, strangers: costlru.New[string, PeerRecord](MaxStrangerBytes),
		sentStrangers: newSentStrangers()}
	db.View(func(tx *bolt.Tx) error {
		s.seenCount.Store(int64(tx.Bucket(bucketSeen).Stats().KeyN))
		return nil
	})
	if err := s.loadSeenPruned(); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	return s, nil
}

// initSchema writes the schema version and buckets into a new file, and
// checks the version of an existing one (which migrate brought to the
// current one) before anything else reads it.
func initSchema(tx *bolt.Tx) error {
	version, err := readVersion(tx)
	if err != nil {
		return err
	}
	if version == 0 {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return fmt.Errorf("creating bucket %s: %w", bucketMeta, err)
		}
		v, _ := json.Marshal(current.version)
		if err := meta.Put(keySchemaVersion, v); err != nil {
			return fmt.Errorf("writing %s/%s: %w", bucketMeta, keySchemaVersion, err)
		}
		version = current.version
	}
	if version != current.version {
		return fmt.Errorf("%w: found version %d; this ifaced reads version %d", ErrSchemaVersion, version, current.version)
	}
	for _, name := range dataBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("creating bucket %s: %w", name, err)
		}
	}
	return nil
}

// Close flushes nothing (every write is already committed) and releases
// the file and its lock.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing store %s: %w", s.path, err)
	}
	return nil
}

// Path is the file the store was opened from.
func (s *Store) Path() string { return s.path }

// Size is the store file's size in bytes, as the database sees it.
func (s *Store) Size() (int64, error) {
	var n int64
	if err := s.db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		return 0, fmt.Errorf("reading the store's size: %w", err)
	}
	return n, nil
}

// encode marshals v without HTML escaping, so that embedded JSON
// (documents, views) keeps its canonical bytes.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decode unmarshals a stored record, naming the bucket and key when it is
// corrupt so an operator can find it.
func decode(bucket, key, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %s/%q: %v", ErrCorrupt, bucket, key, err)
	}
	return nil
}
