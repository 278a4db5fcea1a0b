// Package tally holds the figures a component counts as it works — how
// many of what ended how, how long each step took — in atomic counters
// that a reader (node/metrics) reads at any moment without a lock on the
// path that counts: a count is one atomic add, a duration one clock read
// and three. A component keeps its tallies and hands out only their read
// side (Counts, Latencies); what the figures are called, their help text
// and their exposition belong to node/metrics.
//
// Every label a tally counts by has a fixed list of values, known when
// the tally is made (a direction, a door step, a wire code from the
// wire-code table, "ok" or "failed"): nothing a peer chose, and no peer or
// conversation ID, can become a label value, so no peer can grow what a
// tally holds or what a scrape returns.
package tally

import (
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ifaced/ifaced/node/wire"
)

// Counts is the read side of a Table: f is called with the label values
// and the count of every cell that counted something, in the table's
// order.
type Counts interface {
	Each(f func(values []string, n uint64))
	Stray() uint64
}

// Table counts events by a fixed set of labels, each with a fixed list of
// values: one atomic counter per combination.
type Table struct {
	dims  [][]string
	n     []atomic.Uint64
	stray atomic.Uint64 // Adds that named no cell
}

// NewTable makes a table with one dimension per list of values.
func NewTable(dims ...[]string) *Table {
	size := 1
	for _, d := range dims {
		size *= len(d)
	}
	return &Table{dims: dims, n: make([]atomic.Uint64, size)}
}

// Add counts one event at idx, one index per dimension, in the order of
// NewTable's lists. An index out of its dimension's range, or the wrong
// number of them, counts in no cell but as a stray (Stray): a tally never
// panics the path that counts, and a figure it could not place still
// shows, as a bug to report.
func (t *Table) Add(idx ...int) {
	if len(idx) != len(t.dims) {
		t.stray.Add(1)
		return
	}
	cell := 0
	for i, x := range idx {
		if x < 0 || x >= len(t.dims[i]) {
			t.stray.Add(1)
			return
		}
		cell = cell*len(t.dims[i]) + x
	}
	t.n[cell].Add(1)
}

// Stray is how many Adds named no cell of the table (an index out of
// range): always 0 unless ifaced has a bug.
func (t *Table) Stray() uint64 { return t.stray.Load() }

// Each calls f for every cell that counted something, with its values
// (a slice f must not keep) and count.
func (t *Table) Each(f func(values []string, n uint64)) {
	values := make([]string, len(t.dims))
	for cell := range t.n {
		n := t.n[cell].Load()
		if n == 0 {
			continue
		}
		rest := cell
		for i := len(t.dims) - 1; i >= 0; i-- {
			values[i] = t.dims[i][rest%len(t.dims[i])]
			rest /= len(t.dims[i])
		}
		f(values, n)
	}
}

// Outcome values: how an exchange ended. OK and Failed stand beside the
// wire codes (Outcomes).
const (
	OK     = "ok"
	Failed = "failed"
)

// outcomes are OK, every wire code of the wire-code table, and Failed.
var outcomes = func() []string {
	out := []string{OK}
	for _, c := range wire.Codes() {
		out = append(out, string(c))
	}
	return append(out, Failed)
}()

// codes are the wire codes, in the table's order.
var codes = outcomes[1 : len(outcomes)-1]

// Outcomes are the values of an outcome label: "ok", each wire code, and
// "failed" for an exchange that ended without one (the stream broke, no
// answer came in time, or this daemon failed on its own side).
func Outcomes() []string { return slices.Clone(outcomes) }

// Codes are the wire codes, the values of a code label.
func Codes() []string { return slices.Clone(codes) }

// OutcomeOf is err's index in Outcomes: ok for nil, the wire code err
// carries (one this daemon sent or refused with, or a peer's, which the
// wire-code table knows or it is internal_error), and failed for an error
// no code of the table names.
func OutcomeOf(err error) int {
	if err == nil {
		return 0
	}
	c := wire.CodeOf(err)
	if c == wire.CodeInternal && !errors.Is(err, wire.ErrInternal) {
		return len(outcomes) - 1
	}
	return 1 + codeIndex(c)
}

// AnsweredWith is err's index in Outcomes for a request this daemon
// answers whatever happens: ok for nil, else the wire code it answers err
// with (wire.CodeOf: internal_error for an error the table does not
// name), never failed.
func AnsweredWith(err error) int {
	if err == nil {
		return 0
	}
	return 1 + CodeOf(err)
}

// CodeOf is the index in Codes of the wire code err is answered with
// (wire.CodeOf): internal_error for an error the table does not name.
func CodeOf(err error) int { return codeIndex(wire.CodeOf(err)) }

// CodeIndex is c's index in Codes, for a caller that has the code
// already; internal_error's for a code the table does not list.
func CodeIndex(c wire.Code) int { return codeIndex(c) }

// codeIndex is c's index in codes; internal_error's for a code the table
// does not list (wire.CodeOf gives none such).
func codeIndex(c wire.Code) int {
	if i := slices.Index(codes, string(c)); i >= 0 {
		return i
	}
	return slices.Index(codes, string(wire.CodeInternal))
}

// Latencies is the read side of Histograms: f is called with the name and
// a snapshot of every histogram, in order, those that observed nothing
// included.
type Latencies interface {
	Each(f func(name string, s Snapshot))
	Stray() uint64
}

// Snapshot is a histogram as read: how many durations it observed, their
// sum in seconds, and, for each upper bound (seconds), how many were at
// most that (cumulative, as Prometheus counts buckets).
type Snapshot struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// StepBounds are the upper bounds, in seconds, of the buckets a step of
// message handling is timed in: from 10 µs (a rate bucket) to 2.5 s (an
// audit entry on a slow disk).
var StepBounds = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// Histograms are named histograms of durations sharing their bucket
// bounds, one per step, say, of a pipeline.
type Histograms struct {
	names  []string
	bounds []float64
	counts []atomic.Uint64 // per histogram, len(bounds)+1 buckets (the last: above every bound), not cumulative
	sums   []atomic.Int64  // per histogram, nanoseconds
	stray  atomic.Uint64   // Observes that named no histogram
}

// NewHistograms makes one histogram per name over bounds (ascending, in
// seconds).
func NewHistograms(names []string, bounds []float64) *Histograms {
	return &Histograms{names: names, bounds: bounds,
		counts: make([]atomic.Uint64, len(names)*(len(bounds)+1)), sums: make([]atomic.Int64, len(names))}
}

// Observe adds d to histogram i; an i out of range is counted as a stray
// (Stray), in no histogram.
func (h *Histograms) Observe(i int, d time.Duration) {
	if i < 0 || i >= len(h.names) {
		h.stray.Add(1)
		return
	}
	s := d.Seconds()
	b := len(h.bounds)
	for j, bound := range h.bounds {
		if s <= bound {
			b = j
			break
		}
	}
	h.counts[i*(len(h.bounds)+1)+b].Add(1)
	h.sums[i].Add(int64(d))
}

// Stray is how many Observes named no histogram: always 0 unless ifaced
// has a bug.
func (h *Histograms) Stray() uint64 { return h.stray.Load() }

// Each calls f with every histogram. The count is the sum of the buckets
// as read, so a snapshot is consistent with itself; its sum may miss a
// duration being added at that moment.
func (h *Histograms) Each(f func(name string, s Snapshot)) {
	for i, name := range h.names {
		s := Snapshot{Buckets: make(map[float64]uint64, len(h.bounds))}
		base := i * (len(h.bounds) + 1)
		for j, bound := range h.bounds {
			s.Count += h.counts[base+j].Load()
			s.Buckets[bound] = s.Count
		}
		s.Count += h.counts[base+len(h.bounds)].Load()
		s.Sum = time.Duration(h.sums[i].Load()).Seconds()
		f(name, s)
	}
}
