package netlab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Percentiles of a sample of durations, in milliseconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Summarize sorts a copy of ds and reads its percentiles (nearest rank).
func Summarize(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return Percentiles{N: len(s), P50: ms(Rank(s, 0.50)), P90: ms(Rank(s, 0.90)), P99: ms(Rank(s, 0.99)), Max: ms(s[len(s)-1])}
}

// Rank is the nearest-rank q-quantile of sorted s.
func Rank[T any](s []T, q float64) T {
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (p Percentiles) String() string {
	return fmt.Sprintf("p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, max %.1f ms (n=%d)", p.P50, p.P90, p.P99, p.Max, p.N)
}

// WriteFigures writes v as indented JSON to <dir>/<test name>.json, where
// dir is $IFACED_LAB_OUT or, unset, netlab-figures in the system's
// temporary directory, and logs the path.
func WriteFigures(t testing.TB, v any) {
	t.Helper()
	dir := os.Getenv("IFACED_LAB_OUT")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "netlab-figures")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("netlab: figures: %v", err)
		return
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Errorf("netlab: figures: %v", err)
		return
	}
	path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Errorf("netlab: figures: %v", err)
		return
	}
	t.Logf("figures written to %s", path)
}

// Long reports whether the long form was asked for (IFACED_LAB_LONG=1).
func Long() bool { return os.Getenv("IFACED_LAB_LONG") == "1" }
