package p2phost

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// peerBudget counts what each peer has made this daemon do (hole punches
// begun, refused connects retried) over a window, and refuses more than
// limit in one. Any peer that reaches the daemon through a relay is
// counted, strangers included, so the table is bounded: at most cap
// peers; a new peer past it takes the place of the one whose window began
// first (it is the closest to being forgotten anyway). A peer's count
// outlives its connections until its window ends: forgetting it when the
// peer disconnects would let the peer start again by reconnecting. What
// one peer cannot do, many peers (a stranger can make identities at will)
// could; the daemon-wide rate in punchTCP bounds that.
type peerBudget struct {
	limit  int
	window time.Duration
	cap    int

	mu sync.Mutex
	m  map[peer.ID]*budgetEntry
}

type budgetEntry struct {
	start time.Time // when the current window began
	used  int
}

func newPeerBudget(limit int, window time.Duration, cap int) *peerBudget {
	return &peerBudget{limit: limit, window: window, cap: cap, m: map[peer.ID]*budgetEntry{}}
}

// take spends one of id's budget and reports whether there was one left.
func (b *peerBudget) take(id peer.ID, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[id]
	if e != nil && now.Sub(e.start) >= b.window {
		e.start, e.used = now, 0
	}
	if e == nil {
		b.makeRoom(now)
		e = &budgetEntry{start: now}
		b.m[id] = e
	}
	if e.used >= b.limit {
		return false
	}
	e.used++
	return true
}

// left is what id may still spend in its current window.
func (b *peerBudget) left(id peer.ID, now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.m[id]; e != nil && now.Sub(e.start) < b.window {
		return b.limit - e.used
	}
	return b.limit
}

// makeRoom drops the peers whose window ended and, if the table is still
// full, the one whose window began first. Called with b.mu held.
func (b *peerBudget) makeRoom(now time.Time) {
	if len(b.m) < b.cap {
		return
	}
	var oldest peer.ID
	var first time.Time
	for id, e := range b.m {
		if now.Sub(e.start) >= b.window {
			delete(b.m, id)
			continue
		}
		if first.IsZero() || e.start.Before(first) {
			oldest, first = id, e.start
		}
	}
	if len(b.m) >= b.cap {
		delete(b.m, oldest)
	}
}

// size is the number of peers counted (for tests).
func (b *peerBudget) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}
