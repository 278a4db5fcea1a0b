package soak

import (
	"math"
	"testing"
	"time"
)

// TestTheilSen: the estimator finds a trend under a sawtooth and
// outliers, and finds none under a sawtooth alone.
func TestTheilSen(t *testing.T) {
	series := func(trendPerMin float64, outliers bool) []point {
		var pts []point
		for i := range 120 { // ten minutes, one sample each 5 s
			at := time.Duration(i) * 5 * time.Second
			v := 100 + trendPerMin*at.Minutes()
			v += float64(i%6) * 4 // a sawtooth of 20 with a 30 s period, like a GC's
			if outliers && i%10 == 3 {
				v += 500 // a burst on one sample in ten
			}
			pts = append(pts, point{at, v})
		}
		return pts
	}
	for _, c := range []struct {
		name     string
		trend    float64
		outliers bool
	}{
		{"flat sawtooth", 0, false},
		{"flat with bursts", 0, true},
		{"leak of 3 per minute", 3, false},
		{"leak of 3 per minute with bursts", 3, true},
		{"shrinking", -2, true},
	} {
		got := theilSen(series(c.trend, c.outliers))
		// The sawtooth's phase against the window adds at most its
		// height over the run's length: 20 over 10 min.
		if math.Abs(got-c.trend) > 2 {
			t.Errorf("%s: slope %.2f/min, want %.2f ± 2", c.name, got, c.trend)
		}
	}
	if got := theilSen([]point{{0, 5}}); got != 0 {
		t.Errorf("one point: slope %v, want 0", got)
	}
}
