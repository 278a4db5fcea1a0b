// Package groupsync runs a flush (an fsync, a store commit) on behalf of
// many callers at once: a caller's records are durable when a flush that
// began after it asked has finished, so one flush serves every caller
// that asked before it began. Under a burst (every acknowledged message
// asks for one) the flushes run back to back, each for all who waited
// meanwhile, instead of one per caller.
package groupsync

import "sync"

// Syncer runs flush for its callers. The zero value is not usable: New.
type Syncer struct {
	flush func() error

	mu      sync.Mutex
	done    *sync.Cond
	asked   uint64 // tickets given out
	covered uint64 // the highest ticket the last finished flush covers
	running bool
	lastErr error // the error of the flush that last finished
}

// New returns a Syncer that runs flush.
func New(flush func() error) *Syncer {
	s := &Syncer{flush: flush}
	s.done = sync.NewCond(&s.mu)
	return s
}

// Sync returns once a flush that began after this call has finished,
// with the error of the last flush finished then (one that began later
// covers this call's records too, so its nil is as good).
func (s *Syncer) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked++
	ticket := s.asked
	for s.covered < ticket {
		if s.running {
			s.done.Wait()
			continue
		}
		// Every ticket given out so far asked before this flush begins.
		s.running = true
		cover := s.asked
		s.mu.Unlock()
		err := s.flush()
		s.mu.Lock()
		s.running = false
		s.covered, s.lastErr = cover, err
		s.done.Broadcast()
	}
	return s.lastErr
}
