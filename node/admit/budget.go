package admit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/sync/semaphore"
)

// Budget bounds the memory that inbound messages hold while they are
// decoded and verified, all transports together: a weighted semaphore of
// limits.max_memory_mb / 2 (BudgetSize), of which each message takes its
// cost — an upper estimate of decoding it and checking its signature at
// once, from its size and its counts of containers and elements
// (gossip.Counts.Cost) — from before it is decoded until the door has
// recorded it in the audit log (whose JSON line and rendering copy it) or
// refused it. A libp2p stream takes it in wire.Stream.ReadHeld and the
// door gives it back (arrival.release); the HTTPS inbox, signed
// POST /invoke and A2A take it around decoding and admitting a body.
//
// Messages from strangers — any sender but a peer this daemon has
// exchanged verified greetings with on its current connection (known),
// and every HTTP body — share three quarters of it (strangerShare), so
// that a flood of fresh keys can never make an established peer's
// greeting wait behind it: a quarter is always theirs. The semaphores are
// first come, first served, so a large message is not starved by small
// ones.
//
// The libp2p resource manager bounds each stream's and each peer's share
// of memory, but only the memory reserved from it, and not across
// transports; the budget bounds what every peer together, over every
// transport, makes this daemon build at once. Half of max_memory_mb leaves
// the other half to the resource manager's own accounting (connections,
// stream buffers) and to the daemon's stores, so that a flood of messages
// cannot take the process past about twice max_memory_mb. A message that
// waits for the budget waits at most its read deadline; then it is
// refused as rate_limited (wire.ErrOverloaded).
type Budget struct {
	all, strangers *semaphore.Weighted
	size, share    int64
	greeted        func(peer.ID) bool
	// used counts what is taken, of the whole and of the strangers' share
	// (Used): the semaphores do not say.
	used, strangersUsed atomic.Int64
}

// minBudget is the least budget: what the costliest message within the
// container bounds is charged (36 MiB) over strangerShare, so that no
// message is refused for want of a budget that could never hold it.
const minBudget = 48 << 20

// strangerShare is the part of the budget strangers share: 3/4.
func strangerShare(size int64) int64 { return size / 4 * 3 }

// BudgetSize is the budget for limits.max_memory_mb: half of it, and at
// least 48 MiB.
func BudgetSize(maxMemoryMB int) int64 { return max(int64(maxMemoryMB)<<20/2, minBudget) }

// newBudget returns a budget of BudgetSize(maxMemoryMB) bytes; greeted
// tells the peers that need not share the strangers' part (nil: none).
func newBudget(maxMemoryMB int, greeted func(peer.ID) bool) *Budget {
	size := BudgetSize(maxMemoryMB)
	if greeted == nil {
		greeted = func(peer.ID) bool { return false }
	}
	return &Budget{all: semaphore.NewWeighted(size), strangers: semaphore.NewWeighted(strangerShare(size)),
		size: size, share: strangerShare(size), greeted: greeted}
}

var _ wire.Budget = (*Budget)(nil)

// Acquire waits until n bytes of the budget are free for a message from
// from ("" for a sender not yet established, as over HTTP) and takes
// them, or fails when ctx ends first. A cost over what the sender's class
// may hold takes all of that. release gives them back; calling it again
// does nothing. A nil Budget bounds nothing.
func (b *Budget) Acquire(ctx context.Context, from peer.ID, n int64) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	n = min(max(n, 1), b.size)
	stranger := from == "" || !b.greeted(from)
	if stranger {
		n = min(n, b.share)
		if err := b.strangers.Acquire(ctx, n); err != nil {
			return nil, fmt.Errorf("waiting for %d bytes of the decoding budget strangers share: %w", n, err)
		}
	}
	if err := b.all.Acquire(ctx, n); err != nil {
		if stranger {
			b.strangers.Release(n)
		}
		return nil, fmt.Errorf("waiting for %d bytes of the decoding budget: %w", n, err)
	}
	b.used.Add(n)
	if stranger {
		b.strangersUsed.Add(n)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			b.used.Add(-n)
			b.all.Release(n)
			if stranger {
				b.strangersUsed.Add(-n)
				b.strangers.Release(n)
			}
		})
	}, nil
}

// Whole says whether the budget and the strangers' share are whole, as
// the semaphores themselves say (each taken whole for an instant and given
// back): what a lost release would leave short, Used's counters cannot
// show.
func (b *Budget) Whole() (all, strangers bool) {
	if b == nil {
		return true, true
	}
	if all = b.all.TryAcquire(b.size); all {
		b.all.Release(b.size)
	}
	if strangers = b.strangers.TryAcquire(b.share); strangers {
		b.strangers.Release(b.share)
	}
	return all, strangers
}

// Size is the budget in bytes, and the strangers' share of it (0 for a
// nil Budget).
func (b *Budget) Size() (all, strangers int64) {
	if b == nil {
		return 0, 0
	}
	return b.size, b.share
}

// Used is how many bytes of the budget messages hold now, of the whole
// and of the strangers' share (0 for a nil Budget).
func (b *Budget) Used() (all, strangers int64) {
	if b == nil {
		return 0, 0
	}
	return b.used.Load(), b.strangersUsed.Load()
}
