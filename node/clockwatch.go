package node

import "time"

// The daemon's clock may step while it runs: a laptop's sleep (the
// monotonic clock stands still while the system's goes on), NTP setting
// it, an owner changing it. What the daemon does across a step is in
// docs/operations.md, "A clock that jumps"; this only tells the owner, so
// that audit entries dated before earlier ones, or peers refusing this
// daemon's dates, are explained in its log.

const (
	// clockWatchEvery is how often watchClock compares the clock with
	// the time measured on the monotonic clock.
	clockWatchEvery = 5 * time.Second
	// clockStep is the smallest difference watchClock reports: less is
	// within what NTP slews, and within the seen-set's recovery margin.
	clockStep = time.Minute
)

// watchClock warns in the log when the daemon's clock moved other than the
// time measured between two readings, by more than clockStep.
func (n *Node) watchClock() {
	t := time.NewTicker(clockWatchEvery)
	defer t.Stop()
	wall, mono := n.now().Round(0), time.Now() // Round(0): the wall reading alone
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		w, m := n.now().Round(0), time.Now()
		step := w.Sub(wall.Add(m.Sub(mono)))
		switch {
		case step >= clockStep:
			n.log.Warn("the clock moved ahead of the time measured (a sleep, or the clock was set): messages dated by peers' clocks look older to this daemon, and its own look ahead to them; more than replay.clock_skew ahead, peers refuse them",
				"by", step.Round(time.Second).String(), "now", w.UTC().Format(time.RFC3339))
		case step <= -clockStep:
			n.log.Warn("the clock went back (it was set): audit entries from here on are dated before earlier ones, messages dated by peers' clocks may look ahead and be refused, and a message taken before stays refused",
				"by", (-step).Round(time.Second).String(), "now", w.UTC().Format(time.RFC3339))
		}
		wall, mono = w, m
	}
}
