package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A stranger's view stays in memory: the file does not grow, the record
// reads back, and a restart forgets it. A known peer's view is persisted.
func TestStrangersAreNotPersisted(t *testing.T) {
	s, _ := openTemp(t)
	known := map[string]bool{"friend": true}
	s.SetPeerGate(func(id string) bool { return known[id] })
	mustPut(t, s, record("stranger", 1, "hello", t0))
	mustPut(t, s, record("friend", 1, "hello", t0))
	if hasKey(t, s, bucketPeers, []byte("stranger")) {
		t.Fatal("a stranger's view was written to the file")
	}
	if !hasKey(t, s, bucketPeers, []byte("friend")) {
		t.Fatal("a known peer's view was not persisted")
	}
	want := record("stranger", 1, "hello", t0)
	want.ChangedAt = t0
	samePeer(t, mustPeer(t, s, "stranger"), want)
	if recs, err := s.Peers(); err != nil || len(recs) != 2 || recs[0].PeerID != "friend" || recs[1].PeerID != "stranger" {
		t.Fatalf("Peers: %v, %v", recs, err)
	}
	// The seq rules hold in memory too.
	if _, err := s.PutPeer(record("stranger", 0, "older", t0)); !errors.Is(err, ErrStaleSeq) {
		t.Fatalf("an older view of a stranger: %v, want %v", err, ErrStaleSeq)
	}
	s2 := reopen(t, s)
	if _, err := s2.Peer("stranger"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a stranger's view after a restart: %v, want %v", err, ErrNotFound)
	}
	mustPeer(t, s2, "friend")
}

// A stranger the owner then makes known moves to the file at its next
// greeting, and stays there when the gate no longer names it.
func TestStrangerMadeKnownIsPersisted(t *testing.T) {
	s, _ := openTemp(t)
	known := false
	s.SetPeerGate(func(string) bool { return known })
	mustPut(t, s, record("bob", 3, "v3", t0))
	known = true
	if changed := mustPut(t, s, record("bob", 3, "v3", t0.Add(time.Hour))); changed {
		t.Fatal("the same view, moved to the file, reported as changed")
	}
	if !hasKey(t, s, bucketPeers, []byte("bob")) {
		t.Fatal("a peer made known was not persisted")
	}
	if got := mustPeer(t, s, "bob"); !got.ChangedAt.Equal(t0) || !got.FetchedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("moved record: changed %v fetched %v", got.ChangedAt, got.FetchedAt)
	}
	known = false
	mustPut(t, s, record("bob", 4, "v4", t0.Add(2*time.Hour)))
	if got := mustPeer(t, reopen(t, s), "bob"); got.Seq != 4 {
		t.Fatalf("a persisted peer's later view: seq %d, want 4 from the file", got.Seq)
	}
}

// Fresh keys past the strangers' budget evict the least recently put
// strangers; known peers and the strangers still greeting stay.
func TestStrangersAreBoundedByBytes(t *testing.T) {
	s, _ := openTemp(t)
	s.SetPeerGate(func(id string) bool { return id == "friend" })
	big := strings.Repeat("x", 64<<10)
	mustPut(t, s, record("friend", 1, big, t0))
	mustPut(t, s, record("regular", 1, big, t0))
	n := 2 * MaxStrangerBytes / len(big)
	for i := range n {
		mustPut(t, s, record(fmt.Sprintf("fresh%05d", i), 1, big, t0))
		if i%50 == 0 {
			mustPut(t, s, record("regular", 1, big, t0.Add(time.Duration(i)*time.Second))) // keeps greeting
		}
	}
	if used := s.strangers.Used(); used > MaxStrangerBytes {
		t.Fatalf("strangers hold %d bytes, over %d", used, MaxStrangerBytes)
	}
	if _, err := s.Peer("fresh00000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the oldest stranger: %v, want it evicted", err)
	}
	mustPeer(t, s, fmt.Sprintf("fresh%05d", n-1))
	mustPeer(t, s, "regular")
	mustPeer(t, s, "friend")
	if got := bucketLen(t, s, bucketPeers); got != 1 {
		t.Fatalf("%d records in the file, want only the known peer's", got)
	}
}

// Addresses learned after a view follow it, for a stranger in memory and
// a known peer in the file; nothing is created for a peer not cached, an
// empty list forgets nothing, and the view itself is left as it was.
func TestSetPeerAddrsFollowsTheView(t *testing.T) {
	s, _ := openTemp(t)
	known := map[string]bool{"friend": true}
	s.SetPeerGate(func(id string) bool { return known[id] })
	for _, id := range []string{"stranger", "friend"} {
		rec := record(id, 2, "v2", t0)
		rec.Addrs = nil
		mustPut(t, s, rec)
		later := []string{"/ip4/127.0.0.1/tcp/4002", "/ip4/127.0.0.1/udp/4002/quic-v1"}
		if changed, err := s.SetPeerAddrs(id, later); err != nil || !changed {
			t.Fatalf("%s: SetPeerAddrs = %v, %v; want the record changed", id, changed, err)
		}
		if changed, err := s.SetPeerAddrs(id, later); err != nil || changed {
			t.Fatalf("%s: the same addresses again = %v, %v; want no change", id, changed, err)
		}
		if changed, err := s.SetPeerAddrs(id, nil); err != nil || changed {
			t.Fatalf("%s: no addresses = %v, %v; want no change", id, changed, err)
		}
		got := mustPeer(t, s, id)
		if strings.Join(got.Addrs, " ") != strings.Join(later, " ") {
			t.Fatalf("%s: addrs %v, want %v", id, got.Addrs, later)
		}
		if got.Seq != 2 || string(got.View) != string(rec.View) || !got.FetchedAt.Equal(t0) {
			t.Fatalf("%s: the view changed with its addresses: seq %d view %s fetched %v", id, got.Seq, got.View, got.FetchedAt)
		}
	}
	s = reopen(t, s)
	if got := mustPeer(t, s, "friend"); len(got.Addrs) != 2 {
		t.Fatalf("a known peer's addresses after a restart: %v", got.Addrs)
	}
	if changed, err := s.SetPeerAddrs("nobody", []string{"/ip4/127.0.0.1/tcp/1"}); err != nil || changed {
		t.Fatalf("a peer not cached: %v, %v; want nothing", changed, err)
	}
	if _, err := s.Peer("nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SetPeerAddrs created a record: %v", err)
	}
}

// A record that does not decode is left as it is by SetPeerAddrs (no
// error, nothing written): PutPeer reports it when the peer greets again,
// and the daemon then replaces it.
func TestSetPeerAddrsLeavesACorruptRecord(t *testing.T) {
	s, path := openTemp(t)
	s.Close()
	bad := []byte(`{"peer_id": "bad-peer", "seq": "no`)
	rawUpdate(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketPeers).Put([]byte("bad-peer"), bad) })
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if changed, err := s.SetPeerAddrs("bad-peer", []string{"/ip4/127.0.0.1/tcp/1"}); err != nil || changed {
		t.Fatalf("SetPeerAddrs on a corrupt record = %v, %v; want no change and no error", changed, err)
	}
	var got []byte
	s.db.View(func(tx *bolt.Tx) error {
		got = append(got, tx.Bucket(bucketPeers).Get([]byte("bad-peer"))...)
		return nil
	})
	if string(got) != string(bad) {
		t.Fatalf("the corrupt record became %q", got)
	}
	if _, err := s.PutPeer(record("bad-peer", 1, "v1", t0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("PutPeer over it: %v, want ErrCorrupt", err)
	}
}
