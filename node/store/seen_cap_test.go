package store

import (
	"fmt"
	"testing"
	"time"
)

// Past its cap the seen set evicts the IDs that expire first; IDs that
// expire later stay and are still refused as replays, and the count
// survives a restart. Both seen-sets (each Add committed, and buffered)
// keep the cap.
func TestSeenSetIsCapped(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffered=%v", buffered), func(t *testing.T) {
			s, _ := openTemp(t)
			s.maxSeen = 100
			add := func(s *Store, id string, expires time.Time) bool {
				t.Helper()
				if buffered {
					b := s.BufferedSeen(time.Now)
					added, err := b.Add(id, expires)
					if err != nil {
						t.Fatal(err)
					}
					if err := b.Flush(); err != nil {
						t.Fatal(err)
					}
					return added
				}
				added, err := s.Seen().Add(id, expires)
				if err != nil {
					t.Fatal(err)
				}
				return added
			}
			// Genuine IDs, expiring late.
			for i := range 20 {
				add(s, fmt.Sprintf("genuine-%d", i), t0.Add(24*time.Hour))
			}
			// A flood of fresh IDs, expiring earlier, past the cap.
			for i := range 300 {
				add(s, fmt.Sprintf("flood-%03d", i), t0.Add(time.Hour+time.Duration(i)*time.Second))
			}
			if n := bucketLen(t, s, bucketSeen); n != 100 {
				t.Fatalf("%d IDs held, want the cap, 100", n)
			}
			if n := bucketLen(t, s, bucketSeenByExpiry); n != 100 {
				t.Fatalf("%d index entries, want 100", n)
			}
			if hasKey(t, s, bucketSeen, []byte("flood-000")) {
				t.Error("the ID that expires first was kept")
			}
			if !hasKey(t, s, bucketSeen, []byte("flood-299")) {
				t.Error("the newest flood ID was evicted before older ones")
			}
			if add(s, "genuine-7", t0.Add(24*time.Hour)) {
				t.Error("a genuine ID was evicted: its replay was accepted")
			}
			s2 := reopen(t, s)
			s2.maxSeen = 100
			if got := s2.seenCount.Load(); got != 100 {
				t.Fatalf("count after reopening: %d, want 100", got)
			}
			add(s2, "after-restart", t0.Add(48*time.Hour))
			if n := bucketLen(t, s2, bucketSeen); n != 100 {
				t.Fatalf("%d IDs after a restart, want 100", n)
			}
		})
	}
}
