package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func sent(peer string, seq uint64, tier string, at time.Time) SentView {
	return SentView{PeerID: peer, At: at, Via: "greeting", Seq: seq, Sum: fmt.Sprintf("sum-%d-%s", seq, tier), Tier: tier, Level: 1,
		Temperature: "cool", Eligible: []string{"ping"}, Shown: []string{"calendar.availability"}}
}

// The view sent to a known peer is kept in the file, across a restart;
// a stranger's in memory only. The record reads back as it was put.
func TestSentViewKeptLikeThePeerCache(t *testing.T) {
	s, _ := openTemp(t)
	known := map[string]bool{"friend": true}
	s.SetPeerGate(func(id string) bool { return known[id] })
	if err := s.PutSentView(sent("friend", 3, "professional", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSentView(sent("stranger", 3, "public", t0)); err != nil {
		t.Fatal(err)
	}
	if hasKey(t, s, bucketSent, []byte("stranger")) || !hasKey(t, s, bucketSent, []byte("friend")) {
		t.Fatal("the file holds the stranger's record, or not the known peer's")
	}
	got, err := s.SentView("stranger")
	if err != nil || !sameView(got, sent("stranger", 3, "public", t0)) || !got.At.Equal(t0) {
		t.Fatalf("the stranger's record: %+v, %v", got, err)
	}
	s2 := reopen(t, s)
	s2.SetPeerGate(func(id string) bool { return known[id] })
	if _, err := s2.SentView("stranger"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a stranger's record after a restart: %v, want %v", err, ErrNotFound)
	}
	if got, err := s2.SentView("friend"); err != nil || got.Tier != "professional" || got.Seq != 3 {
		t.Fatalf("the known peer's record after a restart: %+v, %v", got, err)
	}
	// Made known, a stranger's next record goes to the file, and the
	// memory lets it go.
	known["stranger"] = true
	if err := s2.PutSentView(sent("stranger", 4, "professional", t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if !hasKey(t, s2, bucketSent, []byte("stranger")) || s2.sentStrangerCount() != 0 {
		t.Fatalf("a stranger made known: in the file %v, in memory %d", hasKey(t, s2, bucketSent, []byte("stranger")), s2.sentStrangerCount())
	}
}

// A flood of strangers costs a bounded memory and no write, and never
// takes the record of a known peer: the least recently sent strangers go.
func TestSentViewStrangersBounded(t *testing.T) {
	s, _ := openTemp(t)
	s.SetPeerGate(func(id string) bool { return id == "friend" })
	if err := s.PutSentView(sent("friend", 1, "close", t0)); err != nil {
		t.Fatal(err)
	}
	per := sentCost(sent("stranger-00000", 1, "public", t0))
	n := int(MaxSentStrangerBytes/per) * 2
	for i := range n {
		if err := s.PutSentView(sent(fmt.Sprintf("stranger-%05d", i), 1, "public", t0)); err != nil {
			t.Fatal(err)
		}
	}
	if used := s.sentStrangers.Used(); used > MaxSentStrangerBytes {
		t.Fatalf("the strangers' records take %d bytes, over the bound of %d", used, MaxSentStrangerBytes)
	}
	if kept := s.sentStrangerCount(); kept >= n || kept < n/4 {
		t.Fatalf("%d of %d strangers' records kept", kept, n)
	}
	if _, err := s.SentView("stranger-00000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the first stranger, least recently sent: %v, want evicted", err)
	}
	if _, err := s.SentView(fmt.Sprintf("stranger-%05d", n-1)); err != nil {
		t.Fatalf("the last stranger: %v", err)
	}
	if got, err := s.SentView("friend"); err != nil || got.Tier != "close" {
		t.Fatalf("the known peer's record after the flood: %+v, %v", got, err)
	}
	count := 0
	s.db.View(func(tx *bolt.Tx) error {
		count = tx.Bucket(bucketSent).Stats().KeyN
		return nil
	})
	if count != 1 {
		t.Fatalf("the file holds %d records of views sent, want the known peer's only", count)
	}
}

// The same view sent again within a minute is not written again; a
// different one, or the same one later, is.
func TestSentViewRepeatNotRewritten(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.PutSentView(sent("friend", 1, "public", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSentView(sent("friend", 1, "public", t0.Add(30*time.Second))); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SentView("friend"); !got.At.Equal(t0) {
		t.Fatalf("a repeat within a minute was written: at %v", got.At)
	}
	if err := s.PutSentView(sent("friend", 1, "public", t0.Add(2*time.Minute))); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SentView("friend"); !got.At.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("a repeat two minutes later: at %v", got.At)
	}
	if err := s.PutSentView(sent("friend", 2, "professional", t0.Add(2*time.Minute+time.Second))); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SentView("friend"); got.Seq != 2 || got.Tier != "professional" {
		t.Fatalf("a new view: %+v", got)
	}
	if err := s.PutSentView(SentView{}); err == nil {
		t.Fatal("a record without a peer was taken")
	}
}
