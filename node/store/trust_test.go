package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func trustRecord(peer string) TrustRecord {
	return TrustRecord{
		PeerID: peer, PinnedKey: "SHA256:abc", PinnedAt: t0,
		Intros: []TrustIntro{{TokenID: "0123456789abcdef", Label: "Bob", Disclosure: "professional", Expires: t0.Add(time.Hour), AdmittedAt: t0}},
		Check: &DocCheck{AgentID: "https://bob.example/", URL: "https://bob.example/", Method: "url", Level: 3,
			Outcome: "bound", CheckedAt: t0},
		Refusal: "token bound to another peer", RefusedAt: t0, UpdatedAt: t0,
	}
}

func TestTrustRecords(t *testing.T) {
	s, _ := openTemp(t)
	if _, err := s.Trust("nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Trust(unknown) = %v, want ErrNotFound", err)
	}
	for _, p := range []string{"peer-b", "peer-a"} {
		if err := s.PutTrust(trustRecord(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutTrust(TrustRecord{}); err == nil {
		t.Error("PutTrust accepted a record without peer ID")
	}
	s = reopen(t, s)
	got, err := s.Trust("peer-a")
	if err != nil {
		t.Fatal(err)
	}
	if want := trustRecord("peer-a"); !reflect.DeepEqual(got, want) {
		t.Errorf("after reopening:\n got %+v\nwant %+v", got, want)
	}
	list, err := s.Trusts()
	if err != nil || len(list) != 2 || list[0].PeerID != "peer-a" || list[1].PeerID != "peer-b" {
		t.Fatalf("Trusts() = %+v, %v", list, err)
	}
	if err := s.DeleteTrust("peer-b"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTrust("peer-b"); err != nil {
		t.Errorf("deleting twice: %v", err)
	}
	if list, _ := s.Trusts(); len(list) != 1 {
		t.Errorf("after deleting: %+v", list)
	}
}

func TestIntroRecords(t *testing.T) {
	s, _ := openTemp(t)
	issued := IssuedIntro{ID: "0123456789abcdef", Issuer: "did:key:z6Mkalice", Label: "Bob", Expires: t0.Add(time.Hour),
		Secret: []byte("0123456789abcdef0123456789abcdef"), Disclosure: "professional", Created: t0}
	if err := s.PutIssuedIntro(issued); err != nil {
		t.Fatal(err)
	}
	issued.BoundPeer, issued.BoundAt = "peer-b", t0
	if err := s.PutIssuedIntro(issued); err != nil {
		t.Fatal(err)
	}
	held := HeldIntro{ID: "fedcba9876543210", Issuer: "did:key:z6Mkcarol", Label: "Alice", Expires: t0, Token: "ifintro1…", AcceptedAt: t0}
	if err := s.PutHeldIntro(held); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	if got, err := s.IssuedIntro(issued.ID); err != nil || !reflect.DeepEqual(got, issued) {
		t.Errorf("IssuedIntro = %+v, %v; want %+v", got, err, issued)
	}
	if _, err := s.IssuedIntro("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("IssuedIntro(unknown) = %v", err)
	}
	if list, err := s.IssuedIntros(); err != nil || len(list) != 1 {
		t.Errorf("IssuedIntros = %+v, %v", list, err)
	}
	if list, err := s.HeldIntros(); err != nil || len(list) != 1 || !reflect.DeepEqual(list[0], held) {
		t.Errorf("HeldIntros = %+v, %v", list, err)
	}
	if err := s.DeleteHeldIntro(held.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.HeldIntros(); len(list) != 0 {
		t.Errorf("after deleting: %+v", list)
	}
}

// A bad record is reported with its bucket and key, and does not hide the
// good ones.
func TestCorruptTrustRecord(t *testing.T) {
	s, path := openTemp(t)
	if err := s.PutTrust(trustRecord("good")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketTrust).Put([]byte("bad"), []byte("{")) })
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	list, err := s.Trusts()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `trust/"bad"`) {
		t.Errorf("Trusts() error = %v, want ErrCorrupt naming trust/\"bad\"", err)
	}
	if len(list) != 1 || list[0].PeerID != "good" {
		t.Errorf("Trusts() = %+v, want the good record", list)
	}
	if _, err := s.Trust("bad"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Trust(bad) = %v", err)
	}
}

// A store written before the trust buckets existed gets them on open.
func TestTrustBucketsAddedToOldFiles(t *testing.T) {
	s, path := openTemp(t)
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketTrust, bucketIntrosIssued, bucketIntrosHeld} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.PutTrust(trustRecord("p")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutHeldIntro(HeldIntro{ID: "x"}); err != nil {
		t.Fatal(err)
	}
}
