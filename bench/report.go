package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// A table is the bench's output: sections, each with its baseline.
type table struct{ sections []section }

func (t *table) add(s section) { t.sections = append(t.sections, s) }

// A section is one group of rows whose ratios share a baseline, measured
// in the same run.
type section struct {
	title    string
	baseline string // the row the ratios are against
	rows     []row
	notes    []string
}

// A row is one measured figure. figure and spread are formatted; ratio is
// against the section's baseline.
type row struct {
	name   string
	figure string // median, rate or size
	spread string // p10–p90, where samples were taken
	n      string // samples behind the figure
	ratio  string
	note   string
}

func (t *table) print(w io.Writer) {
	for i, s := range t.sections {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, s.title)
		if s.baseline != "" {
			fmt.Fprintln(w, "   ratios against: "+s.baseline)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  what\tfigure\tp10–p90\tn\tratio\tnotes")
		for _, r := range s.rows {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.figure, r.spread, r.n, r.ratio, r.note)
		}
		tw.Flush()
		for _, n := range s.notes {
			fmt.Fprintf(w, "  · %s\n", n)
		}
	}
}

// failed is a row that could not be measured because of err.
func failed(name string, err error) row {
	return row{name: name, figure: "failed", note: oneLine(err.Error())}
}

// oneLine joins a multi-line error (libp2p's dial errors list every
// address) into one table cell.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// notMeasured is a row left out, and why.
func notMeasured(name, reason string) row {
	return row{name: name, figure: "not measured", note: reason}
}

// samples are the timed durations of one variant.
type samples []time.Duration

// quantile is the q-quantile (0 ≤ q ≤ 1) by nearest rank.
func (s samples) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	i := int(q*float64(len(c)-1) + 0.5)
	return c[i]
}

func (s samples) median() time.Duration { return s.quantile(0.5) }

// latencyRow is the row of a variant's samples, its ratio against base
// (the baseline's median; none when base is 0).
func latencyRow(name string, s samples, base time.Duration, note string) row {
	r := row{name: name, figure: fmtDur(s.median()), n: fmt.Sprint(len(s)), note: note,
		spread: fmtDur(s.quantile(0.1)) + "–" + fmtDur(s.quantile(0.9))}
	if base > 0 {
		r.ratio = fmtRatio(float64(s.median()) / float64(base))
	}
	return r
}

func fmtRatio(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f×", x)
	case x >= 10:
		return fmt.Sprintf("%.1f×", x)
	case x >= 0.1:
		return fmt.Sprintf("%.2f×", x)
	default:
		return fmt.Sprintf("%.3f×", x)
	}
}

// fmtDur writes a duration in µs below 10 ms, in ms above.
func fmtDur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return d.Round(time.Millisecond).String()
	}
}

func fmtKB(bytes float64) string { return fmt.Sprintf("%.1f KB", bytes/1024) }

// A variant is one thing timed: once runs it and returns the time its
// measured part took (setup and teardown inside once are not timed).
type variant struct {
	name    string
	once    func() (time.Duration, error)
	samples samples
	err     error // the first failure; the variant is not run again
}

// interleave runs warmup untimed iterations of each variant, then n timed
// ones, in blocks of block iterations taken in turn, so that drift on a
// shared machine falls on every variant alike. stop, when it returns true,
// ends the run early (an interrupt).
func interleave(vs []*variant, warmup, n, block int, stop func() bool) {
	for _, v := range vs {
		for i := 0; i < warmup && v.err == nil && !stop(); i++ {
			_, v.err = v.once()
		}
	}
	for done := 0; done < n && !stop(); done += block {
		for _, v := range vs {
			for i := 0; i < block && done+i < n && v.err == nil; i++ {
				d, err := v.once()
				if err != nil {
					v.err = err
					break
				}
				v.samples = append(v.samples, d)
			}
		}
	}
}

// rowOf is the row of v: failed if it failed, else its latency row.
func rowOf(v *variant, base time.Duration, note string) row {
	if v.err != nil {
		return failed(v.name, v.err)
	}
	if len(v.samples) == 0 {
		return notMeasured(v.name, "interrupted")
	}
	return latencyRow(v.name, v.samples, base, note)
}

// baseOf is v's median, or 0 when v did not run.
func baseOf(v *variant) time.Duration {
	if v == nil || v.err != nil {
		return 0
	}
	return v.samples.median()
}
