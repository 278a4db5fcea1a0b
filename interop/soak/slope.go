package soak

import (
	"slices"
	"time"
)

// point is one sample of one curve: when (since the run began) and what.
type point struct {
	at    time.Duration
	value float64
}

// theilSen is the median of the slopes between every pair of points, per
// minute: the estimator the flatness bounds are stated in. Unlike a
// least-squares fit it ignores up to some 29 % of outliers (a burst of
// connections, a collection that lands on one sample), and a sawtooth
// whose teeth repeat has no slope under it. It is 0 with fewer than two
// points at different times.
func theilSen(pts []point) float64 {
	var slopes []float64
	for i := range pts {
		for j := i + 1; j < len(pts); j++ {
			dt := (pts[j].at - pts[i].at).Minutes()
			if dt == 0 {
				continue
			}
			slopes = append(slopes, (pts[j].value-pts[i].value)/dt)
		}
	}
	if len(slopes) == 0 {
		return 0
	}
	slices.Sort(slopes)
	n := len(slopes)
	if n%2 == 1 {
		return slopes[n/2]
	}
	return (slopes[n/2-1] + slopes[n/2]) / 2
}
