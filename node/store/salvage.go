package store

// A damaged store file. bbolt trusts its file: a page overwritten with
// garbage, or a file cut short (a full disk while copying a home, a bad
// sector, a backup restored half way), makes it panic or fault (SIGBUS on
// the mapped pages past the end) on the first read of that page, which
// would take the daemon down at a random moment. So Open reads every
// bucket and key once, with faults turned into errors, and refuses a
// damaged file with ErrDamaged, naming the file and what is wrong; Salvage
// copies what can be read into a new file and keeps the damaged one.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrDamaged: the store file cannot be read whole (a page that is not
// what the file's index says, or a file shorter than its index).
var ErrDamaged = errors.New("store file is damaged")

// guarded runs f with memory faults turned into panics (a mapped page
// past the end of a cut file) and every panic into an error.
func guarded(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return f()
}

// openChecked opens path as Open does, after reading all of it once
// read-only (without the list of free pages, which only a writer needs,
// so that one damaged page cannot keep the file locked); a damaged file
// is refused with an error wrapping ErrDamaged.
func openChecked(path string) (*bolt.DB, error) {
	if st, err := os.Stat(path); err == nil && st.Size() > 0 {
		err := guarded(func() error {
			ro, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, ReadOnly: true, PreLoadFreelist: false})
			if err != nil {
				return err
			}
			defer ro.Close()
			return ro.View(readAll)
		})
		if errors.Is(err, bolt.ErrTimeout) || errors.Is(err, os.ErrPermission) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrDamaged, path, err)
		}
	}
	var db *bolt.DB
	err := guarded(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
		return err
	})
	if err != nil && !errors.Is(err, bolt.ErrTimeout) && !errors.Is(err, os.ErrPermission) {
		// The list of free pages, read only here.
		return nil, fmt.Errorf("%w: %s: its list of free pages cannot be read (%v)", ErrDamaged, path, err)
	}
	return db, err
}

// readAll reads every bucket, key and value page of the file, and checks
// that the file is as long as its index says.
func readAll(tx *bolt.Tx) error {
	if st, err := os.Stat(tx.DB().Path()); err == nil && st.Size() < tx.Size() {
		return fmt.Errorf("the file is %d bytes but its index says %d: it was cut short", st.Size(), tx.Size())
	}
	if err := guarded(func() error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return readBucket(b) })
	}); err != nil {
		return fmt.Errorf("a page does not hold what the file's index says it does (reading it: %v)", err)
	}
	return nil
}

func readBucket(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if sub := b.Bucket(k); sub != nil {
				return readBucket(sub)
			}
			return nil
		}
		touch(v)
		return nil
	})
}

// sink keeps touch's reads from being optimised away.
var sink byte

// touch reads one byte of every page v spans (a value larger than a page
// lies on overflow pages, read only when the value is).
func touch(v []byte) {
	for i := 0; i < len(v); i += 4096 {
		sink ^= v[i]
	}
	if len(v) > 0 {
		sink ^= v[len(v)-1]
	}
}

// SalvageReport is what Salvage copied and what it could not read.
type SalvageReport struct {
	Path    string   // the store file, now the new one
	Damaged string   // where the damaged file was kept
	Buckets int      // buckets copied (nested ones included)
	Keys    int      // keys copied
	Lost    []string // what could not be read, one line each
}

// Salvage copies every bucket and key it can read from the store file at
// path (which no process may have open) into a new file beside it, keeps
// the damaged file as path.damaged-TIMESTAMP and puts the new one at path.
// Where a bucket cannot be read through, its keys are read from both
// ends, so only the damaged stretch is lost; the report names it. A file
// whose header pages are unreadable gives nothing: the new store is empty
// and the report says so. The seen set is marked to be rebuilt from the
// audit log at the next start (markSalvaged).
func Salvage(path string) (*SalvageReport, error) {
	var src *bolt.DB
	err := guarded(func() error {
		var err error
		// Read-only, without the free-page list: only the tree is read.
		src, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, ReadOnly: true, PreLoadFreelist: false})
		return err
	})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("salvaging store %s: %w; stop the ifaced running with this data directory first", path, ErrLocked)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("salvaging store %s: %w", path, err)
	}
	unreadable := err // the header pages: nothing can be read, the new store starts empty
	if err == nil {
		defer guarded(src.Close)
	}

	tmp := path + ".salvage"
	os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		return nil, fmt.Errorf("salvaging store %s: creating %s: %w", path, tmp, err)
	}
	rep := &SalvageReport{Path: path}
	var names [][]byte
	if unreadable != nil {
		rep.Lost = append(rep.Lost, fmt.Sprintf("everything: the file's header pages cannot be read (%v)", unreadable))
	} else if err := guarded(func() error {
		return src.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				names = append(names, bytes.Clone(name))
				return nil
			})
		})
	}); err != nil {
		rep.Lost = append(rep.Lost, fmt.Sprintf("the list of buckets, after %d: %v", len(names), err))
	}
	for _, name := range names {
		err := dst.Update(func(out *bolt.Tx) error {
			ob, err := out.CreateBucketIfNotExists(name)
			if err != nil {
				return err
			}
			return src.View(func(in *bolt.Tx) error {
				return salvageBucket(rep, string(name), func() *bolt.Bucket { return in.Bucket(name) }, ob)
			})
		})
		if err != nil {
			dst.Close()
			os.Remove(tmp)
			return nil, fmt.Errorf("salvaging store %s: writing bucket %s to %s: %w", path, name, tmp, err)
		}
	}
	if err := dst.Update(func(tx *bolt.Tx) error { return markSalvaged(rep, tx) }); err != nil {
		dst.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("salvaging store %s: writing %s to %s: %w", path, bucketMeta, tmp, err)
	}
	if err := dst.Close(); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("salvaging store %s: closing %s: %w", path, tmp, err)
	}
	if src != nil {
		guarded(src.Close)
	}
	rep.Damaged = fmt.Sprintf("%s.damaged-%s", path, time.Now().UTC().Format("20060102T150405Z"))
	for i := 2; ; i++ { // never over an earlier salvage's damaged file
		if _, err := os.Lstat(rep.Damaged); errors.Is(err, os.ErrNotExist) {
			break
		}
		rep.Damaged = fmt.Sprintf("%s.damaged-%s-%d", path, time.Now().UTC().Format("20060102T150405Z"), i)
	}
	if err := os.Rename(path, rep.Damaged); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("salvaging store %s: keeping the damaged file: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("salvaging store %s: putting the new file in place (it is %s; the damaged one is %s): %w", path, tmp, rep.Damaged, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return rep, nil
}

// markSalvaged makes the new file one Open accepts and the daemon
// trusts no more than it should: the schema version, when it was not
// readable (the file was one this ifaced opened, or it would not have been
// found damaged), and the seen set's last flush set to long ago, so that
// the daemon's next start puts back into it every message ID the audit
// log received, whatever of the seen set was lost (node/durability.go).
func markSalvaged(rep *SalvageReport, tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	if meta.Get(keySchemaVersion) == nil {
		v, _ := json.Marshal(SchemaVersion)
		if err := meta.Put(keySchemaVersion, v); err != nil {
			return err
		}
		rep.Lost = append(rep.Lost, fmt.Sprintf("%s/%s: written as %d, this ifaced's", bucketMeta, keySchemaVersion, SchemaVersion))
	}
	raw, err := encode(time.Unix(0, 0).UTC())
	if err != nil {
		return err
	}
	return meta.Put(keySeenFlushedAt, raw)
}

// salvageBucket copies what it can read of the bucket get returns into
// out: forward from the first key until the reading fails, then backward
// from the last key until it fails again or meets the keys already read.
func salvageBucket(rep *SalvageReport, name string, get func() *bolt.Bucket, out *bolt.Bucket) error {
	rep.Buckets++
	var subs [][]byte
	copied := map[string]bool{}
	var first, last []byte // the last key read forward; the last read backward
	put := func(k, v []byte) error {
		if copied[string(k)] {
			return nil
		}
		copied[string(k)] = true
		if v == nil {
			subs = append(subs, bytes.Clone(k))
			return nil
		}
		touch(v)
		rep.Keys++
		return out.Put(bytes.Clone(k), bytes.Clone(v))
	}
	var werr error // a write error, which stops the salvage
	fwd := guarded(func() error {
		c := get().Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if werr = put(k, v); werr != nil {
				return nil
			}
			first = bytes.Clone(k)
		}
		return nil
	})
	if werr != nil {
		return werr
	}
	if fwd != nil {
		back := guarded(func() error {
			c := get().Cursor()
			for k, v := c.Last(); k != nil && (first == nil || bytes.Compare(k, first) > 0); k, v = c.Prev() {
				if werr = put(k, v); werr != nil {
					return nil
				}
				last = bytes.Clone(k)
			}
			return nil
		})
		if werr != nil {
			return werr
		}
		gap := fmt.Sprintf("bucket %s: the keys after %q", name, first)
		if first == nil {
			gap = fmt.Sprintf("bucket %s: the keys", name)
		}
		if last != nil {
			gap += fmt.Sprintf(" and before %q", last)
		}
		gap += fmt.Sprintf(" (%v)", fwd)
		if back != nil {
			gap += fmt.Sprintf("; read backward: %v", back)
		}
		rep.Lost = append(rep.Lost, gap)
	}
	for _, k := range subs {
		sub, err := out.CreateBucketIfNotExists(k)
		if err != nil {
			return err
		}
		if err := salvageBucket(rep, name+"/"+string(k), func() *bolt.Bucket { return get().Bucket(k) }, sub); err != nil {
			return err
		}
	}
	return nil
}
