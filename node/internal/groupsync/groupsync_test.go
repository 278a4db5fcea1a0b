package groupsync

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestOneFlushServesTheCallersWaiting: callers that ask while a flush
// runs are served together by the next one, and each returns only after
// a flush that began after it asked.
func TestOneFlushServesTheCallersWaiting(t *testing.T) {
	var written, durable atomic.Int64 // records written, and made durable by a finished flush
	var flushes atomic.Int64
	gate := make(chan struct{})
	first := true
	var s *Syncer
	s = New(func() error {
		flushes.Add(1)
		upTo := written.Load() // what a flush beginning now makes durable
		if first {
			first = false
			<-gate // hold the first flush until the others have asked
		}
		durable.Store(upTo)
		return nil
	})
	started := make(chan struct{})
	go func() {
		close(started)
		written.Add(1)
		if err := s.Sync(); err != nil {
			t.Error(err)
		}
	}()
	<-started
	until(func() bool { return s.state().running })
	const callers = 50
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := written.Add(1)
			if err := s.Sync(); err != nil {
				t.Error(err)
			}
			if durable.Load() < mine {
				t.Errorf("Sync returned with record %d not durable (durable up to %d)", mine, durable.Load())
			}
		}()
	}
	until(func() bool { return s.state().asked == 1+callers })
	close(gate)
	wg.Wait()
	if n := flushes.Load(); n != 2 {
		t.Errorf("%d flushes for 1+%d callers, the others asking during the first: want 2", n, callers)
	}
}

// state reads the syncer's counters under its lock.
func (s *Syncer) state() struct {
	running bool
	asked   uint64
} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return struct {
		running bool
		asked   uint64
	}{s.running, s.asked}
}

// until yields until cond holds: the goroutines it waits for need only
// to be scheduled.
func until(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// TestSyncReturnsTheFlushError: a failed flush is every waiting caller's
// error.
func TestSyncReturnsTheFlushError(t *testing.T) {
	boom := errors.New("disk gone")
	s := New(func() error { return boom })
	if err := s.Sync(); !errors.Is(err, boom) {
		t.Fatalf("Sync: %v, want the flush's error", err)
	}
}
