package node

import (
	"context"
	"fmt"
	"sync"

	"github.com/ifaced/ifaced/node/wire"
	"golang.org/x/sync/semaphore"
)

// Budget bounds the memory that inbound messages hold while they are
// decoded and verified, all transports together: one weighted semaphore
// of limits.max_memory_mb / 2 (BudgetSize), of which each message takes
// its cost — an upper estimate of decoding it and checking its signature
// at once, from its size and its counts of containers and elements
// (gossip.Counts.Cost) — from before it is decoded until the door's
// verify step is done. A libp2p stream takes it in wire.Stream.ReadHeld
// and the door gives it back (arrival.release); the HTTPS inbox and
// signed POST /invoke take it around decoding and admitting the body.
//
// The libp2p resource manager bounds each stream's and each peer's share
// of memory, but only the memory reserved from it, and not across
// transports; the budget bounds what every peer together, over every
// transport, makes this daemon build at once. Half of max_memory_mb leaves
// the other half to the resource manager's own accounting (connections,
// stream buffers) and to the daemon's stores, so that a flood of messages
// cannot take the process past about twice max_memory_mb. A message
// that waits for the budget waits at most its read deadline; then it is
// refused as rate_limited (wire.ErrOverloaded).
type Budget struct {
	sem  *semaphore.Weighted
	size int64
}

// minBudget is the least budget: what the costliest message within the
// container bounds needs (about 27 MiB), so that it is never refused for
// want of a budget that could never hold it.
const minBudget = 32 << 20

// BudgetSize is the budget for limits.max_memory_mb: half of it, and at
// least 32 MiB.
func BudgetSize(maxMemoryMB int) int64 { return max(int64(maxMemoryMB)<<20/2, minBudget) }

// NewBudget returns a budget of BudgetSize(maxMemoryMB) bytes.
func NewBudget(maxMemoryMB int) *Budget {
	size := BudgetSize(maxMemoryMB)
	return &Budget{sem: semaphore.NewWeighted(size), size: size}
}

var _ wire.Budget = (*Budget)(nil)

// Acquire waits until n bytes of the budget are free and takes them, or
// fails when ctx ends first. A cost over the whole budget takes all of
// it. release gives them back; calling it again does nothing. A nil
// Budget bounds nothing.
func (b *Budget) Acquire(ctx context.Context, n int64) (release func(), err error) {
	if b == nil {
		return func() {}, nil
	}
	n = min(max(n, 1), b.size)
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("waiting for %d bytes of the decoding budget: %w", n, err)
	}
	var once sync.Once
	return func() { once.Do(func() { b.sem.Release(n) }) }, nil
}

// Budget is the daemon's decoding budget, for the HTTP bindings.
func (n *Node) Budget() *Budget { return n.door.budget }
