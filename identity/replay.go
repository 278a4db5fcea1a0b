package identity

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of the replay window (IFP-5 §4.2).
const (
	DefaultReplayWindow = 24 * time.Hour
	DefaultClockSkew    = 5 * time.Minute
)

var (
	// ErrReplay: the message_id was seen before.
	ErrReplay = errors.New("message_id already seen (replay)")
	// ErrStale: the message date is older than the replay window.
	ErrStale = errors.New("message date is outside the replay window")
	// ErrFuture: the message date is further ahead than the allowed clock skew.
	ErrFuture = errors.New("message date is in the future")
)

// SeenSet remembers message IDs until they expire. The daemon keeps one in
// its store so that replay protection survives restarts.
type SeenSet interface {
	// Add records id until expires and reports whether it was new.
	Add(id string, expires time.Time) (added bool, err error)
	// Prune forgets entries that expired before now.
	Prune(now time.Time) error
	// PrunedTo is the latest now Prune was called with (the zero time
	// if never): an entry that expired before it may be gone, whatever
	// the clock reads now. It only moves forward, and a persistent set
	// keeps it across restarts.
	PrunedTo() time.Time
	// Forget removes id (a message that was checked but not processed).
	Forget(id string) error
}

// ReplayGuard rejects replayed and out-of-window messages.
type ReplayGuard struct {
	seen   SeenSet
	window time.Duration
	skew   time.Duration
}

// NewReplayGuard returns a guard over seen; zero durations take the defaults.
func NewReplayGuard(seen SeenSet, window, skew time.Duration) *ReplayGuard {
	if window <= 0 {
		window = DefaultReplayWindow
	}
	if skew <= 0 {
		skew = DefaultClockSkew
	}
	return &ReplayGuard{seen: seen, window: window, skew: skew}
}

// Check accepts a message once: its date must lie within
// [now-window-skew, now+skew], and, unless it is within 2·skew of now,
// after the seen-set's reach (PrunedTo - window - 2·skew), and its ID must
// be new. Call it only after the message's signature verified.
func (g *ReplayGuard) Check(messageID, date string, now time.Time) error {
	t, err := time.Parse(time.RFC3339, date)
	if err != nil {
		return fmt.Errorf("checking replay: date %q is not an RFC 3339 time", date)
	}
	if t.After(now.Add(g.skew)) {
		return fmt.Errorf("%w: %s is %s ahead of this daemon's clock (allowed skew %s); check the sender's clock", ErrFuture, date, t.Sub(now).Round(time.Second), g.skew)
	}
	oldest := now.Add(-g.window - g.skew)
	if t.Before(oldest) {
		return fmt.Errorf("%w: %s is older than %s; send a new message", ErrStale, date, g.window)
	}
	// Past this time the date check alone rejects the ID, so it can be forgotten.
	expires := t.Add(g.window + 2*g.skew)
	// A clock that went back (a laptop waking, an NTP step) makes a date
	// the window had left fresh again, while its ID may have been pruned
	// already: whatever the clock says, a message dated where the seen-set
	// no longer reaches is refused. Not one dated within 2·skew of the
	// clock, though: a clock that ran far ahead and was put right (a
	// wrong battery clock at boot) would otherwise refuse every message
	// until it caught up with the prune. The IDs a replay could then
	// bring back are of messages of those minutes, taken before the
	// clock ran ahead.
	if pruned := g.seen.PrunedTo(); expires.Before(pruned) && t.Before(now.Add(-2*g.skew)) {
		return fmt.Errorf("%w: %s is older than this daemon's replay record reaches (it was pruned at %s, after what its clock reads now: the clock went back); send a new message",
			ErrStale, date, pruned.UTC().Format(time.RFC3339))
	}
	added, err := g.seen.Add(messageID, expires)
	if err != nil {
		return fmt.Errorf("checking replay: %w", err)
	}
	if !added {
		return fmt.Errorf("%w: %s", ErrReplay, messageID)
	}
	return nil
}

// Recall records the ID of a message accepted before a restart whose
// record may not have reached the seen-set's storage (see
// store.BufferedSeen), for as long as Check would have kept it. A date
// that does not parse has nothing to protect: Check refuses it anyway.
// It reports whether the ID was missing.
func (g *ReplayGuard) Recall(messageID, date string) (bool, error) {
	t, err := time.Parse(time.RFC3339, date)
	if err != nil {
		return false, nil
	}
	added, err := g.seen.Add(messageID, t.Add(g.window+2*g.skew))
	if err != nil {
		return false, fmt.Errorf("recalling message ID: %w", err)
	}
	return added, nil
}

// Prune forgets IDs that the date check now rejects by itself.
func (g *ReplayGuard) Prune(now time.Time) error { return g.seen.Prune(now) }

// Forget undoes the Check of a message that could not be processed after
// all (say, its audit entry could not be written), so that it is accepted
// when it comes again rather than refused as a replay and lost.
func (g *ReplayGuard) Forget(messageID string) error { return g.seen.Forget(messageID) }

// MemorySeenSet is an in-memory SeenSet for tests and for daemons that opt
// out of persistence.
type MemorySeenSet struct {
	mu      sync.Mutex
	expires map[string]time.Time
	pruned  time.Time
}

// NewMemorySeenSet returns an empty set.
func NewMemorySeenSet() *MemorySeenSet {
	return &MemorySeenSet{expires: make(map[string]time.Time)}
}

// Add implements SeenSet.
func (s *MemorySeenSet) Add(id string, expires time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.expires[id]; ok {
		return false, nil
	}
	s.expires[id] = expires
	return true, nil
}

// Forget implements SeenSet.
func (s *MemorySeenSet) Forget(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.expires, id)
	return nil
}

// Prune implements SeenSet.
func (s *MemorySeenSet) Prune(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, exp := range s.expires {
		if exp.Before(now) {
			delete(s.expires, id)
		}
	}
	if now.After(s.pruned) {
		s.pruned = now
	}
	return nil
}

// PrunedTo implements SeenSet.
func (s *MemorySeenSet) PrunedTo() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pruned
}

// Len is the number of remembered IDs.
func (s *MemorySeenSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.expires)
}
