// Package costlru is a least-recently-used cache bounded by the bytes its
// entries hold, not by their number: the room for what strangers can make
// the daemon remember (views they sent, views signed for them, records of
// peers nobody made known). Each entry states its cost when it is added;
// adding past the budget evicts the least recently used entries, one at a
// time, until the new one fits, so the cache never empties at once. An
// entry that alone costs more than the budget is not kept.
//
// The list itself is hashicorp/golang-lru's simplelru; this package only
// counts bytes around it. A Cache is safe for concurrent use.
package costlru

import (
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache is an LRU cache of at most Budget bytes (as its entries' costs say).
type Cache[K comparable, V any] struct {
	mu     sync.Mutex
	list   *simplelru.LRU[K, entry[V]]
	budget int64
	used   int64
}

type entry[V any] struct {
	v    V
	cost int64
}

// New returns a cache holding at most budget bytes of entries.
func New[K comparable, V any](budget int64) *Cache[K, V] {
	c := &Cache[K, V]{budget: budget}
	// The count bound of simplelru is never reached: bytes bound first.
	c.list, _ = simplelru.NewLRU[K, entry[V]](math.MaxInt32, func(_ K, e entry[V]) { c.used -= e.cost })
	return c
}

// Add keeps v under k at cost bytes, replacing what k held, and evicts the
// least recently used entries until the cache is within its budget. It
// reports whether v was kept (false when cost alone is over the budget).
func (c *Cache[K, V]) Add(k K, v V, cost int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list.Remove(k)
	if cost > c.budget {
		return false
	}
	for c.used+cost > c.budget {
		if _, _, ok := c.list.RemoveOldest(); !ok {
			break
		}
	}
	c.list.Add(k, entry[V]{v: v, cost: cost})
	c.used += cost
	return true
}

// Get returns what k holds and marks it used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.list.Get(k)
	return e.v, ok
}

// Peek returns what k holds without marking it used.
func (c *Cache[K, V]) Peek(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.list.Peek(k)
	return e.v, ok
}

// Remove forgets k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list.Remove(k)
}

// Purge forgets every entry.
func (c *Cache[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list.Purge()
}

// Len is the number of entries held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.list.Len()
}

// Used is the bytes the entries held cost, at most the budget.
func (c *Cache[K, V]) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Fill is how full a cache is: its entries, the bytes they cost, and its
// budget (the daemon's metrics show it per cache).
type Fill struct {
	Entries int
	Used    int64
	Budget  int64
}

// Fill reports how full the cache is now.
func (c *Cache[K, V]) Fill() Fill {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Fill{Entries: c.list.Len(), Used: c.used, Budget: c.budget}
}

// Keys lists the keys held, least recently used first.
func (c *Cache[K, V]) Keys() []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.list.Keys()
}
