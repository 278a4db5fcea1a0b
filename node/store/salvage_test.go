package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestSalvage: a page of garbage in the middle of the seen set makes Open
// refuse the file with ErrDamaged, naming it, instead of panicking on the
// page; Salvage keeps the damaged file, copies the rest, names what it
// lost, and marks the seen set for rebuilding from the audit log.
func TestSalvage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ifaced.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	for i := range 600 {
		if _, err := s.Seen().Add(fmt.Sprintf("id-%06d-%s", i, strings.Repeat("padding-", 20)), exp); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutTrust(TrustRecord{PeerID: "12D3KooWPinned", PinnedKey: "fp"}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The root (a branch page) of the seen set.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var pgid int64
	db.View(func(tx *bolt.Tx) error {
		pgid = int64(tx.Bucket(bucketSeen).Root())
		return nil
	})
	pageSize := db.Info().PageSize
	db.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt(make([]byte, pageSize), pgid*int64(pageSize))
	f.Close()

	if _, err := Open(path); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open of a damaged file: %v; want ErrDamaged", err)
	}
	rep, err := Salvage(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) == 0 || rep.Damaged == "" {
		t.Errorf("salvage report: %+v; want the seen set named lost and the damaged file kept", rep)
	}
	if _, err := os.Stat(rep.Damaged); err != nil {
		t.Errorf("the damaged file is not kept: %v", err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatalf("Open after Salvage: %v", err)
	}
	defer s.Close()
	if tr, err := s.Trust("12D3KooWPinned"); err != nil || tr.PinnedKey != "fp" {
		t.Errorf("the pinned key after the salvage: %+v, %v", tr, err)
	}
	if at, err := s.SeenFlushedAt(); err != nil || at.IsZero() || at.After(time.Unix(1, 0)) {
		t.Errorf("SeenFlushedAt after the salvage: %v, %v; want the epoch, so the seen set is rebuilt from the whole audit log", at, err)
	}
}
