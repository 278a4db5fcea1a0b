package store

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2, err := Open(s.Path())
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	t.Cleanup(func() { s2.Close() })
	return s2
}

// record builds a peer record whose DocHash really is the hash of its view.
func record(peer string, seq uint64, body string, fetched time.Time) PeerRecord {
	view := json.RawMessage(fmt.Sprintf(`{"seq":%d,"body":%q}`, seq, body))
	sum := sha256.Sum256(view)
	return PeerRecord{
		PeerID:    peer,
		AgentID:   "did:key:z6Mk" + peer,
		Display:   "agent " + peer,
		Addrs:     []string{"/ip4/127.0.0.1/tcp/4001"},
		Seq:       seq,
		DocHash:   hex.EncodeToString(sum[:]),
		View:      view,
		Context:   json.RawMessage(`{"tier":"public"}`),
		FetchedAt: fetched,
	}
}

func mustPut(t *testing.T, s *Store, rec PeerRecord) bool {
	t.Helper()
	changed, err := s.PutPeer(rec)
	if err != nil {
		t.Fatalf("PutPeer(%s seq %d): %v", rec.PeerID, rec.Seq, err)
	}
	return changed
}

func mustPeer(t *testing.T, s *Store, id string) PeerRecord {
	t.Helper()
	rec, err := s.Peer(id)
	if err != nil {
		t.Fatalf("Peer(%s): %v", id, err)
	}
	return rec
}

func samePeer(t *testing.T, got, want PeerRecord) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("record:\n got  %s\n want %s", g, w)
	}
}

func TestPutPeerRules(t *testing.T) {
	s, _ := openTemp(t)

	first := record("p1", 5, "five", t0)
	if !mustPut(t, s, first) {
		t.Error("first PutPeer reported no change")
	}
	stored := mustPeer(t, s, "p1")
	want := first
	want.ChangedAt = t0
	samePeer(t, stored, want)

	t.Run("lower seq refused, record unchanged", func(t *testing.T) {
		changed, err := s.PutPeer(record("p1", 4, "four", t0.Add(time.Hour)))
		if !errors.Is(err, ErrStaleSeq) || changed {
			t.Fatalf("PutPeer(lower seq) = %v, %v; want false, ErrStaleSeq", changed, err)
		}
		samePeer(t, mustPeer(t, s, "p1"), want)
	})

	t.Run("same seq same hash refreshes FetchedAt only", func(t *testing.T) {
		refresh := first
		refresh.FetchedAt = t0.Add(time.Minute)
		refresh.Display = "ignored on refresh"
		if mustPut(t, s, refresh) {
			t.Error("refresh reported a change")
		}
		want.FetchedAt = t0.Add(time.Minute)
		samePeer(t, mustPeer(t, s, "p1"), want)

		// A refresh that finishes late does not move FetchedAt backwards.
		late := first
		late.FetchedAt = t0.Add(time.Second)
		mustPut(t, s, late)
		samePeer(t, mustPeer(t, s, "p1"), want)
	})

	t.Run("same seq same hash replaces Addrs and Context when given", func(t *testing.T) {
		refresh := first
		refresh.FetchedAt = t0.Add(2 * time.Minute)
		refresh.Addrs = []string{"/ip4/10.0.0.2/udp/4001/quic-v1"}
		refresh.Context = json.RawMessage(`{"tier":"personal"}`)
		mustPut(t, s, refresh)
		want.FetchedAt, want.Addrs, want.Context = refresh.FetchedAt, refresh.Addrs, refresh.Context
		samePeer(t, mustPeer(t, s, "p1"), want)

		bare := first
		bare.FetchedAt = t0.Add(3 * time.Minute)
		bare.Addrs, bare.Context = nil, nil
		mustPut(t, s, bare)
		want.FetchedAt = bare.FetchedAt
		samePeer(t, mustPeer(t, s, "p1"), want)
	})

	t.Run("same seq, another view replaces", func(t *testing.T) {
		other := record("p1", 5, "another five", t0.Add(time.Hour))
		changed, err := s.PutPeer(other)
		if err != nil || !changed {
			t.Fatalf("PutPeer(another view) = %v, %v; want true, nil", changed, err)
		}
		other.ChangedAt = other.FetchedAt
		want = other
		samePeer(t, mustPeer(t, s, "p1"), want)
	})

	t.Run("higher seq replaces and reports changed", func(t *testing.T) {
		next := record("p1", 6, "six", t0.Add(time.Hour))
		next.Addrs = nil
		if !mustPut(t, s, next) {
			t.Error("higher seq reported no change")
		}
		want := next
		want.ChangedAt = next.FetchedAt
		samePeer(t, mustPeer(t, s, "p1"), want)
	})
}

func TestPeersSortedAndDelete(t *testing.T) {
	s, _ := openTemp(t)
	for _, id := range []string{"c", "a", "b"} {
		mustPut(t, s, record(id, 1, id, t0))
	}
	peers, err := s.Peers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range peers {
		ids = append(ids, p.PeerID)
	}
	if got := strings.Join(ids, ","); got != "a,b,c" {
		t.Errorf("Peers order = %s, want a,b,c", got)
	}

	if err := s.DeletePeer("b"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePeer("never-seen"); err != nil {
		t.Errorf("DeletePeer(unknown) = %v, want nil", err)
	}
	if _, err := s.Peer("b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Peer(deleted) error = %v, want ErrNotFound", err)
	}
	if _, err := s.PutPeer(PeerRecord{}); err == nil {
		t.Error("PutPeer with empty PeerID succeeded")
	}
	if age := mustPeer(t, s, "a").Age(t0.Add(90 * time.Second)); age != 90*time.Second {
		t.Errorf("Age = %s, want 1m30s", age)
	}
}

func TestPersistenceAcrossReopen(t *testing.T) {
	s, _ := openTemp(t)
	rec := record("p1", 3, "<&> kept as is", t0)
	mustPut(t, s, rec)
	if added, err := s.Seen().Add("msg-1", t0.Add(time.Hour)); err != nil || !added {
		t.Fatalf("Seen.Add = %v, %v", added, err)
	}
	doc := json.RawMessage(`{"name":"<alice>","seq":7}`)
	if err := s.Own().SaveOwnDocument(7, doc); err != nil {
		t.Fatal(err)
	}

	s = reopen(t, s)

	want := rec
	want.ChangedAt = t0
	samePeer(t, mustPeer(t, s, "p1"), want)
	if added, err := s.Seen().Add("msg-1", t0.Add(time.Hour)); err != nil || added {
		t.Errorf("Seen.Add(repeat after reopen) = %v, %v; want false, nil", added, err)
	}
	seq, got, err := s.Own().OwnDocument()
	if err != nil || seq != 7 || string(got) != string(doc) {
		t.Errorf("OwnDocument = %d, %s, %v; want 7, %s", seq, got, err, doc)
	}
	// The seq rules hold across the restart too.
	if _, err := s.PutPeer(record("p1", 2, "older", t0)); !errors.Is(err, ErrStaleSeq) {
		t.Errorf("PutPeer(lower seq after reopen) error = %v, want ErrStaleSeq", err)
	}
	if err := s.Own().SaveOwnDocument(7, doc); !errors.Is(err, ErrStaleSeq) {
		t.Errorf("SaveOwnDocument(same seq after reopen) error = %v, want ErrStaleSeq", err)
	}
}

func TestOwnDocument(t *testing.T) {
	s, _ := openTemp(t)
	if _, _, err := s.Own().OwnDocument(); !errors.Is(err, ErrNotFound) {
		t.Errorf("OwnDocument before save: error = %v, want ErrNotFound", err)
	}
	if err := s.Own().SaveOwnDocument(1, json.RawMessage(`{"seq":1}`)); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{0, 1} {
		if err := s.Own().SaveOwnDocument(seq, json.RawMessage(`{"seq":0}`)); !errors.Is(err, ErrStaleSeq) {
			t.Errorf("SaveOwnDocument(%d) error = %v, want ErrStaleSeq", seq, err)
		}
	}
	if err := s.Own().SaveOwnDocument(2, json.RawMessage(`{not json`)); err == nil {
		t.Error("SaveOwnDocument accepted invalid JSON")
	}
	if err := s.Own().SaveOwnDocument(2, json.RawMessage(`{"seq":2}`)); err != nil {
		t.Fatal(err)
	}
	if seq, doc, err := s.Own().OwnDocument(); err != nil || seq != 2 || string(doc) != `{"seq":2}` {
		t.Errorf("OwnDocument = %d, %s, %v", seq, doc, err)
	}
}

func TestSeenAddRepeat(t *testing.T) {
	s, _ := openTemp(t)
	seen := s.Seen()
	if added, err := seen.Add("m", t0); err != nil || !added {
		t.Fatalf("first Add = %v, %v", added, err)
	}
	if added, err := seen.Add("m", t0); err != nil || added {
		t.Errorf("repeat Add = %v, %v; want false", added, err)
	}
	// A repeat with a later expiry is still a repeat, and extends the entry.
	if added, err := seen.Add("m", t0.Add(time.Hour)); err != nil || added {
		t.Errorf("repeat Add with later expiry = %v, %v; want false", added, err)
	}
	if err := seen.Prune(t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if added, _ := seen.Add("m", t0); added {
		t.Error("Prune dropped an entry whose expiry was extended")
	}
	if n := bucketLen(t, s, bucketSeenByExpiry); n != 1 {
		t.Errorf("seen_by_expiry holds %d entries, want 1 (the old one replaced)", n)
	}
	if _, err := seen.Add("", t0); err == nil {
		t.Error("Add of an empty ID succeeded")
	}
}

func TestSeenPrune(t *testing.T) {
	s, _ := openTemp(t)
	seen := s.Seen()
	expiries := map[string]time.Time{
		"long-gone":   t0.Add(-48 * time.Hour),
		"gone":        t0.Add(-time.Hour),
		"just-gone":   t0.Add(-time.Nanosecond),
		"exactly-now": t0, // not before now: kept
		"later":       t0.Add(time.Nanosecond),
		"much-later":  t0.Add(24 * time.Hour),
		"pre-1970":    time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC),
		"far-future":  time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for id, exp := range expiries {
		if added, err := seen.Add(id, exp); err != nil || !added {
			t.Fatalf("Add(%s) = %v, %v", id, added, err)
		}
	}
	if err := seen.Prune(t0); err != nil {
		t.Fatal(err)
	}
	for id, exp := range expiries {
		wantKept := !exp.Before(t0)
		if got := hasKey(t, s, bucketSeen, []byte(id)); got != wantKept {
			t.Errorf("after Prune(t0), %s (expires %s) present = %v, want %v", id, exp, got, wantKept)
		}
		if got := hasKey(t, s, bucketSeenByExpiry, expiryKey(exp, id)); got != wantKept {
			t.Errorf("after Prune(t0), index entry of %s present = %v, want %v", id, got, wantKept)
		}
	}
	if n := bucketLen(t, s, bucketSeen); n != 4 {
		t.Errorf("seen holds %d entries after Prune, want 4", n)
	}

	// A second prune later removes the next ones, and nothing twice.
	if err := seen.Prune(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := bucketLen(t, s, bucketSeen); n != 2 {
		t.Errorf("seen holds %d entries after the second Prune, want 2 (much-later, far-future)", n)
	}
	if n := bucketLen(t, s, bucketSeenByExpiry); n != 2 {
		t.Errorf("seen_by_expiry holds %d entries after the second Prune, want 2", n)
	}
}

func TestSeenConcurrentAdd(t *testing.T) {
	s, _ := openTemp(t)
	const workers = 8
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range workers {
		wg.Go(func() {
			<-start
			added, err := s.Seen().Add("same-id", t0)
			if err != nil {
				t.Error(err)
			}
			if added {
				wins.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Errorf("%d of %d concurrent Adds reported a new ID, want exactly 1", n, workers)
	}
}

func TestOpenLocked(t *testing.T) {
	_, path := openTemp(t)
	begin := time.Now()
	s2, err := Open(path)
	if err == nil {
		s2.Close()
		t.Fatal("second Open of a held store succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second Open error = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "another ifaced may be running") {
		t.Errorf("error %q does not say another ifaced may be running", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("second Open took %s to fail", d)
	}
}

func TestFileMode(t *testing.T) {
	_, path := openTemp(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("store file mode = %o, want 600", perm)
	}
}

// rawUpdate edits the closed store file with bbolt directly, as damage
// from outside this package would.
func rawUpdate(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptRecord(t *testing.T) {
	s, path := openTemp(t)
	mustPut(t, s, record("good", 1, "fine", t0))
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketPeers).Put([]byte("bad-peer"), []byte(`{"peer_id": "bad-peer", "seq": "no`)); err != nil {
			return err
		}
		return tx.Bucket(bucketOwn).Put(keyOwnDocument, []byte(`[1,2`))
	})
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	check := func(what string, err error, key string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s of a corrupt record succeeded", what)
		}
		if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) {
			t.Errorf("%s error = %v, want ErrCorrupt", what, err)
		}
		for _, part := range []string{key, "corrupt"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s error %q does not name %q", what, err, part)
			}
		}
	}
	_, err = s.Peer("bad-peer")
	check("Peer", err, `peers/"bad-peer"`)
	_, err = s.Peers()
	check("Peers", err, `peers/"bad-peer"`)
	_, err = s.PutPeer(record("bad-peer", 9, "new", t0))
	check("PutPeer", err, `peers/"bad-peer"`)
	_, _, err = s.Own().OwnDocument()
	check("OwnDocument", err, `own/"document"`)

	// The good record still reads, and the bad one can be cleared.
	mustPeer(t, s, "good")
	if err := s.DeletePeer("bad-peer"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, record("bad-peer", 9, "new", t0))
}

func TestSchemaVersion(t *testing.T) {
	s, path := openTemp(t)
	s.Close()

	var raw []byte
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *bolt.Tx) error {
		raw = append(raw, tx.Bucket(bucketMeta).Get(keySchemaVersion)...)
		return nil
	})
	db.Close()
	if string(raw) != strconv.Itoa(SchemaVersion) {
		t.Errorf("new store has schema_version %q, want %d", raw, SchemaVersion)
	}

	rawUpdate(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, []byte("99"))
	})
	s, err = Open(path)
	if err == nil {
		s.Close()
		t.Fatal("Open accepted schema_version 99")
	}
	if !errors.Is(err, ErrSchemaVersion) {
		t.Errorf("Open error = %v, want ErrSchemaVersion", err)
	}
	for _, part := range []string{"found version 99", "reads version 1"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("Open error %q does not say %q", err, part)
		}
	}

	// A bbolt file of someone else's layout is refused, not adopted.
	other := filepath.Join(t.TempDir(), "other.db")
	rawUpdate(t, other, func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("something-else"))
		return err
	})
	if s, err := Open(other); !errors.Is(err, ErrSchemaVersion) {
		if err == nil {
			s.Close()
		}
		t.Errorf("Open(foreign bbolt file) error = %v, want ErrSchemaVersion", err)
	}
}

// TestCrashMidWrite kills a writer process with SIGKILL while it writes and
// checks that the store opens afterwards, that every record decodes, and
// that every write the writer reported committed is there.
func TestCrashMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "store.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	const minWrites = 50
	acked := map[string]uint64{} // peer → highest seq the writer reported committed
	var lastSeq uint64           // highest own-document seq reported committed
	var ids []string             // message IDs reported committed
	writes := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var peer, id string
		var seq uint64
		if _, err := fmt.Sscanf(sc.Text(), "ack %s %d %s", &peer, &seq, &id); err != nil {
			continue // the testing package's own output
		}
		acked[peer], lastSeq = seq, seq
		ids = append(ids, id)
		writes++
		if writes == minWrites && !killed {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("killing the writer: %v", err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("writer stopped after %d writes before it was killed: %v", writes, err)
	}
	t.Logf("writer killed after %d acknowledged writes (%v)", writes, err)

	s, err := Open(path)
	if err != nil {
		t.Fatalf("opening the store after the crash: %v", err)
	}
	defer s.Close()
	peers, err := s.Peers()
	if err != nil {
		t.Fatalf("reading peers after the crash: %v", err)
	}
	for _, rec := range peers {
		var view struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(rec.View, &view); err != nil {
			t.Errorf("peer %s: view does not decode: %v", rec.PeerID, err)
		}
		sum := sha256.Sum256(rec.View)
		if view.Seq != rec.Seq || rec.DocHash != hex.EncodeToString(sum[:]) {
			t.Errorf("peer %s: seq %d, view seq %d, hash %s: record is torn", rec.PeerID, rec.Seq, view.Seq, rec.DocHash)
		}
		if rec.Seq < acked[rec.PeerID] {
			t.Errorf("peer %s: seq %d, but the writer committed seq %d", rec.PeerID, rec.Seq, acked[rec.PeerID])
		}
		delete(acked, rec.PeerID)
	}
	for peer, seq := range acked {
		t.Errorf("peer %s (committed seq %d) is missing after the crash", peer, seq)
	}
	for _, id := range ids {
		if added, err := s.Seen().Add(id, t0); err != nil || added {
			t.Errorf("seen ID %s committed before the crash: Add = %v, %v; want false", id, added, err)
		}
	}
	seq, doc, err := s.Own().OwnDocument()
	if err != nil {
		t.Fatalf("reading own document after the crash: %v", err)
	}
	if seq < lastSeq || string(doc) != ownDoc(seq) {
		t.Errorf("own document after the crash: seq %d, %s; committed seq %d", seq, doc, lastSeq)
	}
}

const helperEnv = "IFACED_STORE_CRASH_WRITER"

func ownDoc(seq uint64) string { return fmt.Sprintf(`{"seq":%d}`, seq) }

// TestHelperWriter is the child of TestCrashMidWrite: it writes peers, seen
// IDs and its own document until it is killed, printing a line after each
// committed write.
func TestHelperWriter(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("runs only as the child of TestCrashMidWrite")
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// The bound stops an orphaned writer if its parent dies before killing it.
	deadline := time.Now().Add(time.Minute)
	for seq := uint64(1); time.Now().Before(deadline); seq++ {
		peer := fmt.Sprintf("peer-%02d", seq%7)
		id := fmt.Sprintf("msg-%d", seq)
		if _, err := s.PutPeer(record(peer, seq, strings.Repeat("x", int(seq%300)), t0)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Seen().Add(id, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.Own().SaveOwnDocument(seq, json.RawMessage(ownDoc(seq))); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ack %s %d %s\n", peer, seq, id)
	}
	t.Fatal("writer was not killed within a minute")
}

func hasKey(t *testing.T, s *Store, bucket, key []byte) bool {
	t.Helper()
	var found bool
	s.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucket).Get(key) != nil
		return nil
	})
	return found
}

func bucketLen(t *testing.T, s *Store, bucket []byte) int {
	t.Helper()
	var n int
	s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucket).Stats().KeyN
		return nil
	})
	return n
}

// A view confirmed again within a minute with nothing new is not written
// (the store remembers its last write); a deletion, or anything new, is.
func TestPutPeerConfirmsFromMemory(t *testing.T) {
	s, _ := openTemp(t)
	rec := PeerRecord{PeerID: "p", Seq: 1, DocHash: "h", View: []byte(`{}`), Addrs: []string{"/ip4/127.0.0.1/tcp/1"}, FetchedAt: t0}
	if changed, err := s.PutPeer(rec); err != nil || !changed {
		t.Fatalf("first put: %v, %v", changed, err)
	}
	again := rec
	again.FetchedAt = t0.Add(30 * time.Second)
	if changed, err := s.PutPeer(again); err != nil || changed {
		t.Fatalf("confirmation: %v, %v", changed, err)
	}
	if got, _ := s.Peer("p"); !got.FetchedAt.Equal(t0) {
		t.Fatalf("a confirmation within the minute was written: fetched_at %v", got.FetchedAt)
	}
	moved := again
	moved.Addrs = []string{"/ip4/127.0.0.1/tcp/2"}
	if _, err := s.PutPeer(moved); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Peer("p"); !slices.Equal(got.Addrs, moved.Addrs) {
		t.Fatalf("new addresses were not written: %v", got.Addrs)
	}
	if err := s.DeletePeer("p"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutPeer(moved); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Peer("p"); err != nil {
		t.Fatalf("the same record after a deletion was not written again: %v", err)
	}
	// Reopened, the memory is empty and the file decides.
	s = reopen(t, s)
	later := moved
	later.FetchedAt = moved.FetchedAt.Add(10 * time.Second)
	if changed, err := s.PutPeer(later); err != nil || changed {
		t.Fatalf("confirmation after reopening: %v, %v", changed, err)
	}
	if got, _ := s.Peer("p"); !got.FetchedAt.Equal(moved.FetchedAt) {
		t.Fatalf("a confirmation after reopening was written: %v", got.FetchedAt)
	}
}
