package admit

import (
	"context"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestBudget: messages take their cost until they give it back, and one
// that does not fit waits; strangers share three quarters, so a known
// peer always finds the last quarter; a cost over the whole budget takes
// all of it; giving back twice gives back once; a nil budget bounds
// nothing.
func TestBudget(t *testing.T) {
	if got := BudgetSize(256); got != 128<<20 {
		t.Errorf("BudgetSize(256) = %d, want 128 MiB", got)
	}
	if got := BudgetSize(16); got != minBudget {
		t.Errorf("BudgetSize(16) = %d, want the minimum %d", got, minBudget)
	}
	const known, stranger = peer.ID("known"), peer.ID("stranger")
	b := newBudget(128, func(p peer.ID) bool { return p == known }) // 64 MiB, 48 for strangers
	// fits reports whether n bytes are free now for anyone, taking nothing.
	fits := func(n int64) bool {
		if !b.all.TryAcquire(n) {
			return false
		}
		b.all.Release(n)
		return true
	}
	bg := context.Background()
	done, cancel := context.WithCancel(bg)
	cancel()
	s1, err := b.Acquire(bg, stranger, 40<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(done, "", 9<<20); err == nil {
		t.Fatal("a stranger took more than the strangers' share")
	}
	s2, err := b.Acquire(bg, "", 8<<20)
	if err != nil {
		t.Fatalf("a stranger within the share: %v", err)
	}
	k, err := b.Acquire(bg, known, 16<<20)
	if err != nil {
		t.Fatalf("a known peer with strangers holding their whole share: %v", err)
	}
	if fits(1) {
		t.Fatal("the budget is not all taken")
	}
	s1()
	s1() // once only: otherwise the budget would grow past its size
	if fits(40<<20+1) || !fits(40<<20) {
		t.Fatal("after giving back twice, the budget is not 40 MiB free")
	}
	s2()
	k()
	all, err := b.Acquire(bg, known, 1<<40)
	if err != nil {
		t.Fatalf("a cost over the whole budget: %v, want it to take all of it", err)
	}
	if fits(1) {
		t.Fatal("a cost over the whole budget did not take all of it")
	}
	all()
	big, err := b.Acquire(bg, stranger, 1<<40)
	if err != nil || fits(16<<20+1) || !fits(16<<20) {
		t.Fatalf("a stranger's cost over the whole budget: %v; want it to take the strangers' share", err)
	}
	big()
	if !fits(b.size) {
		t.Fatal("the budget is not all free again")
	}
	var none *Budget
	release, err := none.Acquire(done, "", 1<<40)
	if err != nil {
		t.Fatalf("a nil budget: %v", err)
	}
	release()
}
