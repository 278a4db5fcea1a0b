package gossip

import (
	"sync"
	"time"
)

// FreeSpaceEvery is how long a free-space figure the file system gave is
// used before it is asked again. Room is asked at every new conversation
// and every refusal, and a statfs at each was some 4 % of an answering
// daemon's CPU at 32 peers greeting in a loop (bench section 3); the
// watermark is a margin (audit.min_free_mb, hundreds of MiB), which a
// figure a quarter of a second old judges as well.
const FreeSpaceEvery = 250 * time.Millisecond

// recentFree returns free, asked at most once per every (by now, a
// monotonic clock): within that, the figure asked last, or its error.
func recentFree(free func() (uint64, error), every time.Duration, now func() time.Time) func() (uint64, error) {
	var (
		mu    sync.Mutex
		asked time.Time
		n     uint64
		err   error
	)
	return func() (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		if t := now(); asked.IsZero() || t.Sub(asked) >= every || t.Before(asked) {
			n, err = free()
			asked = t
		}
		return n, err
	}
}
