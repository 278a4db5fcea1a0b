// Package ratelimit is the per-signer rate limit of the daemon's
// conversations and mailbox: a token bucket per peer, its rate set by the
// temperature of the peer's conversation.
package ratelimit

import (
	"fmt"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// Limits holds one token bucket per peer. The rate follows the
// temperature of the peer's conversation (warmer conversations may say
// more, IFP-6 §6); the burst is one minute's worth, so a greeting and its
// first exchanges are never delayed.
type Limits struct {
	cfg config.RatesConfig
	now func() time.Time

	mu    sync.Mutex
	peers map[peer.ID]*rate.Limiter
}

// New returns the limits of cfg (limits.rates).
func New(cfg config.RatesConfig, now func() time.Time) *Limits {
	return &Limits{cfg: cfg, now: now, peers: map[peer.ID]*rate.Limiter{}}
}

func (r *Limits) perMinute(temperature string) int {
	switch temperature {
	case conditions.Hot:
		return r.cfg.Hot
	case conditions.Warm:
		return r.cfg.Warm
	default:
		return r.cfg.Cool
	}
}

// Allow takes one message from pid's bucket at temperature, or says how
// long to wait.
func (r *Limits) Allow(pid peer.ID, temperature string) error {
	n := r.perMinute(temperature)
	limit := rate.Limit(float64(n) / 60)
	now := r.now()
	r.mu.Lock()
	l, ok := r.peers[pid]
	if !ok {
		l = rate.NewLimiter(limit, n)
		r.peers[pid] = l
	} else if l.Limit() != limit {
		l.SetLimitAt(now, limit)
		l.SetBurstAt(now, n)
	}
	r.mu.Unlock()
	res := l.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return &wire.RetryAfterError{Err: fmt.Errorf("%w: at most %d messages a minute in a %s conversation", wire.ErrRateLimited, n, orCool(temperature)), After: d}
	}
	return nil
}

func orCool(t string) string {
	if t == "" {
		return conditions.Cool
	}
	return t
}

// idleLimiter is how long a peer's bucket is kept after it last refilled
// completely: a quiet peer costs nothing, and a returning one starts full.
const idleLimiter = 10 * time.Minute

// Prune forgets the buckets of peers that have been quiet, so memory does
// not grow with every peer ID ever seen.
func (r *Limits) Prune() {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid, l := range r.peers {
		if l.TokensAt(now.Add(-idleLimiter)) >= float64(l.Burst()) {
			delete(r.peers, pid)
		}
	}
}
