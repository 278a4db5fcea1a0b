// Package tasks is a component's background work: a group of goroutines
// that run under the component's context, and that Close cancels and
// waits for, so that no task outlives the component (or reaches its store
// after it closed).
package tasks

import (
	"context"
	"sync"
	"time"
)

// Group is a component's background work: it runs under the component's
// context, and Close cancels that context and waits for all of it. Nothing
// starts once Close has begun, so no task reaches the store after the
// component closed.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // guards closing against wg.Add racing wg.Wait
	closing bool
	wg      sync.WaitGroup
}

// New starts a group whose context ends when parent's does, or at Close.
func New(parent context.Context) *Group {
	ctx, cancel := context.WithCancel(parent)
	return &Group{ctx: ctx, cancel: cancel}
}

// Go runs f in the background unless closing, and reports whether it
// started.
func (t *Group) Go(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing {
		return false
	}
	t.wg.Go(f)
	return true
}

// During runs f on the calling goroutine as a task close waits for, or not
// at all once closing. It is for work that libraries start on goroutines
// of their own (pubsub's validators).
func (t *Group) During(f func()) bool {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		return false
	}
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()
	f()
	return true
}

// Sleep waits d, and reports false if the tasks closed first.
func (t *Group) Sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// Close cancels the context and waits for every task.
func (t *Group) Close() {
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}

// Context is the group's context: it ends at Close.
func (t *Group) Context() context.Context { return t.ctx }
