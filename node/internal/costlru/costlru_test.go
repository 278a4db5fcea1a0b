package costlru

import (
	"slices"
	"testing"
)

// Past its budget the cache evicts the least recently used entries, one
// at a time, and keeps the rest.
func TestEvictsLeastRecentlyUsedByBytes(t *testing.T) {
	c := New[string, int](100)
	for i, k := range []string{"a", "b", "c", "d"} {
		if !c.Add(k, i, 25) {
			t.Fatalf("%s not kept", k)
		}
	}
	c.Get("a") // a is now the most recently used
	c.Add("e", 4, 40)
	if got := c.Keys(); !slices.Equal(got, []string{"d", "a", "e"}) {
		t.Fatalf("keys %v, want [d a e]: b and c, the least recently used, go", got)
	}
	if c.Used() != 90 {
		t.Fatalf("used %d, want 90", c.Used())
	}
	if v, ok := c.Get("a"); !ok || v != 0 {
		t.Fatalf("a: %v %v", v, ok)
	}
}

// Replacing an entry counts its new cost only; an entry over the whole
// budget is not kept and evicts nothing.
func TestReplaceAndOversize(t *testing.T) {
	c := New[string, int](100)
	c.Add("a", 1, 60)
	c.Add("a", 2, 30)
	if c.Used() != 30 || c.Len() != 1 {
		t.Fatalf("used %d len %d", c.Used(), c.Len())
	}
	if c.Add("big", 3, 101) {
		t.Fatal("an entry over the budget was kept")
	}
	if _, ok := c.Get("a"); !ok || c.Used() != 30 {
		t.Fatal("an oversize entry evicted what was held")
	}
	c.Remove("a")
	c.Purge()
	if c.Used() != 0 || c.Len() != 0 {
		t.Fatalf("used %d len %d after purge", c.Used(), c.Len())
	}
}
