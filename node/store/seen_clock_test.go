package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
)

// The seen set remembers how far it was pruned, across a restart: a
// daemon whose clock ran 1 h ahead, pruned there, and restarted with its
// clock back still refuses a message whose ID that prune forgot (before:
// the restarted guard took it again as new). Both seen-sets.
func TestSeenPrunedToOutlivesClockAndRestart(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffered=%v", buffered), func(t *testing.T) {
			s, _ := openTemp(t)
			set := func(s *Store) identity.SeenSet {
				if buffered {
					return s.BufferedSeen(time.Now)
				}
				return s.Seen()
			}
			now := t0
			old := now.Add(-identity.DefaultReplayWindow + 30*time.Minute).Format(time.RFC3339)
			g := identity.NewReplayGuard(set(s), 0, 0)
			if err := g.Check("peer m1", old, now); err != nil {
				t.Fatal(err)
			}
			if err := g.Prune(now.Add(time.Hour)); err != nil { // 1 h ahead
				t.Fatal(err)
			}
			if err := g.Prune(now); err != nil { // back: the horizon stays
				t.Fatal(err)
			}
			s = reopen(t, s)
			if got := set(s).PrunedTo(); !got.Equal(now.Add(time.Hour)) {
				t.Fatalf("PrunedTo after a restart: %s, want %s", got, now.Add(time.Hour))
			}
			g = identity.NewReplayGuard(set(s), 0, 0)
			if err := g.Check("peer m1", old, now); !errors.Is(err, identity.ErrStale) {
				t.Fatalf("m1 again after the clock went back and a restart: %v, want ErrStale", err)
			}
			if err := g.Check("peer m2", now.Format(time.RFC3339), now); err != nil {
				t.Fatalf("a fresh message: %v", err)
			}
		})
	}
}
