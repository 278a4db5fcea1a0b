package p2phost

import "testing"

// The resource manager gets the process's descriptors less the reserve
// for the daemon's own files, within sane bounds.
func TestFDBudget(t *testing.T) {
	for _, tc := range []struct {
		limit uint64
		want  int
	}{
		{20000, 20000 - fdReserve},
		{4096, 4096 - fdReserve},
		{1024, 1024 - fdReserve},
		{300, 256},
		{0, 256},
		{1 << 62, 1<<20 - fdReserve},
	} {
		if got := fdBudget(tc.limit); got != tc.want {
			t.Errorf("fdBudget(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
	if got := fdBudget(processFDLimit()); got < 256 {
		t.Errorf("this process's budget is %d", got)
	}
}
