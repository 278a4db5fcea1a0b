package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets a test binary serve as a child (row 3 re-runs this
// program as the daemon it loads).
func TestMain(m *testing.M) {
	if handled, err := childMain(); handled {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestQuickRows runs the smallest rows once, with a handful of
// iterations: every variant of the warm greeting, and one peer loading a
// daemon in a child process. It checks that each row was measured, not
// the figures.
func TestQuickRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()
	tab := table{sections: []section{
		warmSection(ctx, root, 3, ""),
		loadSection(ctx, root, []int{1}, 300*time.Millisecond),
	}}
	var out strings.Builder
	tab.print(&out)
	t.Log("\n" + out.String())
	for _, sec := range tab.sections {
		if len(sec.rows) == 0 {
			t.Errorf("%s: no rows", sec.title)
		}
		for _, r := range sec.rows {
			if r.figure == "failed" || r.figure == "not measured" && !strings.Contains(r.note, "tmpfs") {
				t.Errorf("%s: %s: %s: %s", sec.title, r.name, r.figure, r.note)
			}
		}
	}
}

func TestParseFlags(t *testing.T) {
	s, err := parseFlags([]string{"-quick", "-n", "40", "-rows", "1,3"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.quick || s.warmN != 40 || s.coldN != 10 || len(s.rows) != 2 || s.rows[1] != 3 {
		t.Errorf("parsed %+v", s)
	}
	for _, bad := range [][]string{{"-n", "-1"}, {"-rows", "6"}, {"-idle", "x"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
