package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBufferedSeenCommitsAtFlush(t *testing.T) {
	s, _ := openTemp(t)
	b := s.BufferedSeen(time.Now)
	if at, err := s.SeenFlushedAt(); err != nil || !at.IsZero() {
		t.Fatalf("SeenFlushedAt before any flush: %v, %v", at, err)
	}
	if added, err := b.Add("m1", t0); err != nil || !added {
		t.Fatalf("first Add = %v, %v", added, err)
	}
	if added, err := b.Add("m1", t0); err != nil || added {
		t.Fatalf("repeat Add before the flush = %v, %v; want false", added, err)
	}
	// Not on disk yet: the committed set (what a restart would read) has it not.
	if added, err := s.BufferedSeen(time.Now).Add("m1", t0); err != nil || !added {
		t.Fatalf("the ID reached the store before Flush (%v, %v)", added, err)
	}
	if b.Pending() != 1 {
		t.Fatalf("%d pending, want 1", b.Pending())
	}
	before := time.Now()
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if b.Pending() != 0 {
		t.Fatalf("%d pending after Flush", b.Pending())
	}
	at, err := s.SeenFlushedAt()
	if err != nil || at.Before(before.Add(-time.Second)) {
		t.Fatalf("SeenFlushedAt after Flush: %v, %v", at, err)
	}
	// A restart sees it, and so do the plain seen-set and this one.
	s = reopen(t, s)
	for name, added := range map[string]func() (bool, error){
		"buffered after restart": func() (bool, error) { return s.BufferedSeen(time.Now).Add("m1", t0) },
		"plain after restart":    func() (bool, error) { return s.Seen().Add("m1", t0) },
	} {
		if got, err := added(); err != nil || got {
			t.Errorf("%s: Add = %v, %v; want false", name, got, err)
		}
	}
}

func TestBufferedSeenExtendsAndForgets(t *testing.T) {
	s, _ := openTemp(t)
	b := s.BufferedSeen(time.Now)
	b.Add("m", t0)
	b.Flush()
	// A later expiry extends the committed entry at the next flush.
	if added, _ := b.Add("m", t0.Add(time.Hour)); added {
		t.Fatal("a known ID with a later expiry was reported new")
	}
	if err := b.Prune(t0.Add(time.Minute)); err != nil { // Prune flushes first
		t.Fatal(err)
	}
	if added, _ := s.Seen().Add("m", t0); added {
		t.Fatal("the extended entry was pruned at its old expiry")
	}
	// Forget removes an ID whether pending or committed.
	b.Add("pending", t0.Add(time.Hour))
	for _, id := range []string{"m", "pending"} {
		if err := b.Forget(id); err != nil {
			t.Fatal(err)
		}
		if added, err := b.Add(id, t0.Add(time.Hour)); err != nil || !added {
			t.Errorf("%s after Forget: Add = %v, %v; want a new ID", id, added, err)
		}
	}
	if _, err := b.Add("", t0); err == nil {
		t.Error("an empty ID was accepted")
	}
}

// Adds racing each other and a Flush: each ID is new exactly once.
func TestBufferedSeenConcurrentAddsAndFlushes(t *testing.T) {
	s, _ := openTemp(t)
	b := s.BufferedSeen(time.Now)
	const workers, ids = 8, 50
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range workers {
		wg.Go(func() {
			<-start
			for i := range ids {
				added, err := b.Add(string(rune('a'+i%26))+string(rune('A'+i/26)), t0)
				if err != nil {
					t.Error(err)
				}
				if added {
					wins.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		for range 20 {
			if err := b.Flush(); err != nil {
				t.Error(err)
			}
		}
	})
	close(start)
	wg.Wait()
	if n := wins.Load(); n != ids {
		t.Errorf("%d Adds reported a new ID, want %d (one per ID)", n, ids)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		if added, _ := s.Seen().Add(string(rune('a'+i%26))+string(rune('A'+i/26)), t0); added {
			t.Fatalf("ID %d never reached the store", i)
		}
	}
}
