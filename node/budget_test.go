package node

import (
	"context"
	"testing"
)

// TestBudget: messages take their cost until they give it back, and one
// that does not fit waits; a cost over the whole budget takes all of it;
// giving back twice gives back once; a nil budget bounds nothing.
func TestBudget(t *testing.T) {
	if got := BudgetSize(256); got != 128<<20 {
		t.Errorf("BudgetSize(256) = %d, want 128 MiB", got)
	}
	if got := BudgetSize(16); got != minBudget {
		t.Errorf("BudgetSize(16) = %d, want the minimum %d", got, minBudget)
	}
	b := NewBudget(64) // 32 MiB
	// fits reports whether n bytes are free now, taking nothing.
	fits := func(n int64) bool {
		if !b.sem.TryAcquire(n) {
			return false
		}
		b.sem.Release(n)
		return true
	}
	r1, err := b.Acquire(context.Background(), 20<<20)
	if err != nil {
		t.Fatal(err)
	}
	if fits(13<<20) || !fits(12<<20) {
		t.Fatal("20 MiB of 32 taken: 12 MiB should fit, 13 not")
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Acquire(done, 20<<20); err == nil {
		t.Fatal("a cost that does not fit was taken")
	}
	r2, err := b.Acquire(context.Background(), 12<<20)
	if err != nil {
		t.Fatalf("a cost that fits beside another: %v", err)
	}
	r1()
	r1() // once only: otherwise the budget would grow past its size
	if fits(21<<20) || !fits(20<<20) {
		t.Fatal("after giving back twice, the budget is not 20 MiB free")
	}
	r2()
	all, err := b.Acquire(context.Background(), 1<<40)
	if err != nil {
		t.Fatalf("a cost over the whole budget: %v, want it to take all of it", err)
	}
	if fits(1) {
		t.Fatal("a cost over the whole budget did not take all of it")
	}
	all()
	if !fits(b.size) {
		t.Fatal("the budget is not all free again")
	}
	var none *Budget
	release, err := none.Acquire(done, 1<<40)
	if err != nil {
		t.Fatalf("a nil budget: %v", err)
	}
	release()
}
