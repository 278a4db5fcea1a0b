package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// A report is the bench's output: the machine, then sections of rows.
// Every row has a stable key; every ratio is named by the keys of the
// two rows it divides ("warm.greeting/floor.long_lived") and computed
// from their figures, measured in the same run.
type report struct {
	machine  machine
	sections []section
}

func (r *report) add(s section) { r.sections = append(r.sections, s) }

// A section is one group of rows measured together.
type section struct {
	title    string
	baseline string // the key the rows' ratios are against, unless a row names its own
	rows     []row
	ratios   []ratioSpec // ratios beyond each row's against its baseline
	notes    []string
	// ratioUnit, when set, names what a ratio against the baseline counts
	// ("RTT": the latency section's rows ÷ the round-trip time).
	ratioUnit string
}

// A unit says what a row's value measures.
type unit string

const (
	unitMicros unit = "us"   // a median latency, or CPU time per operation
	unitPerSec unit = "1/s"  // operations per second
	unitKB     unit = "KB"   // kibibytes per peer
	unitNone   unit = ""     // a ratio's target; a row that failed
	unitTest   unit = "test" // a pointer to a test that logs the figure: no figure here
	unitRTT    unit = "RTT"  // a ratio's target counted in round trips (a figure ÷ the RTT)
)

// A row is one measured figure.
type row struct {
	key     string
	name    string
	unit    unit
	value   float64 // in unit; meaningless unless measured()
	samples samples // latency rows: the timed durations
	base    string  // the key this row's ratio is against; "" is the section's baseline, "-" none
	held    int     // memory rows: connections the daemon held
	asked   int     // memory rows: connections the bench opened
	greeted *int    // greeted memory rows: peers whose greeting was answered
	note    string
	failure string  // why the row has no figure ("failed: …", "not measured: …")
	target  *target // an absolute target of issue 16 (CPU, memory)
	// floorRTT is the physical floor of a latency row, in round trips
	// (0: none stated).
	floorRTT float64
}

func (r row) measured() bool { return r.failure == "" && r.unit != unitNone && r.unit != unitTest }

// A ratioSpec asks for one ratio beyond a row's against its baseline.
type ratioSpec struct{ num, den string }

// A ratio is one figure divided by another of the same run.
type ratio struct {
	key      string // num + "/" + den
	num, den string
	value    float64
	target   *target
}

// A target is a bar of issue 16 (DESIGN.md §8): a ratio or a figure that
// must be below, or at most, limit. Whether it is met is computed from
// the figures of the run, never asserted.
type target struct {
	op    string // "<=" or "<"
	limit float64
	unit  unit   // a figure's bar: the row's unit; a ratio's: none
	text  string // the bar as the issue states it
	// unmeasurable, when set, says why the figure cannot judge the bar
	// (a memory row holding fewer peers than the bar names).
	unmeasurable string
}

// met says whether value meets t; ok is false when it cannot be judged.
func (t *target) met(value float64) (met, ok bool) {
	if t.unmeasurable != "" || math.IsNaN(value) || math.IsInf(value, 0) {
		return false, false
	}
	if t.op == "<" {
		return value < t.limit, true
	}
	return value <= t.limit, true
}

func (t *target) verdict(value float64) string {
	if t.unmeasurable != "" {
		return "not judged: " + t.unmeasurable
	}
	if met, ok := t.met(value); !ok {
		return "not judged"
	} else if met {
		return "met"
	}
	return "NOT MET"
}

func (t *target) String() string {
	op := "≤"
	if t.op == "<" {
		op = "<"
	}
	switch t.unit {
	case unitMicros:
		return fmt.Sprintf("%s %s µs", op, trimFloat(t.limit))
	case unitNone:
		return fmt.Sprintf("%s %s×", op, trimFloat(t.limit))
	case unitRTT:
		return fmt.Sprintf("%s %s RTT", op, trimFloat(t.limit))
	}
	return fmt.Sprintf("%s %s %s", op, trimFloat(t.limit), t.unit)
}

func trimFloat(x float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", x), "0"), ".")
}

// rowByKey finds a measured row.
func (r *report) rowByKey(key string) (row, bool) {
	for _, s := range r.sections {
		for _, x := range s.rows {
			if x.key == key {
				return x, x.measured()
			}
		}
	}
	return row{}, false
}

// baseOf is the key row x's ratio is against in section s, or "".
func (s section) baseOf(x row) string {
	switch x.base {
	case "-":
		return ""
	case "":
		if x.key == s.baseline {
			return ""
		}
		return s.baseline
	}
	return x.base
}

// ratios are every ratio of the report, each once: each measured row
// against its baseline, then the sections' further ratios. A ratio whose
// rows were not both measured, or whose units differ, is left out.
func (r *report) ratios() []ratio {
	var out []ratio
	seen := map[string]bool{}
	add := func(num, den string) {
		key := num + "/" + den
		if num == "" || den == "" || seen[key] {
			return
		}
		a, okA := r.rowByKey(num)
		b, okB := r.rowByKey(den)
		if !okA || !okB || a.unit != b.unit || b.value == 0 {
			return
		}
		seen[key] = true
		out = append(out, ratio{key: key, num: num, den: den, value: a.value / b.value, target: ratioTargets[key]})
	}
	for _, s := range r.sections {
		for _, x := range s.rows {
			add(x.key, s.baseOf(x))
		}
		for _, sp := range s.ratios {
			add(sp.num, sp.den)
		}
	}
	return out
}

// print writes the report as text: the machine, each section's rows and
// ratios, then the targets of issue 16 with whether each is met.
func (r *report) print(w io.Writer) {
	r.machine.print(w)
	ratios := r.ratios()
	byKey := map[string]ratio{}
	for _, q := range ratios {
		byKey[q.key] = q
	}
	for _, s := range r.sections {
		fmt.Fprintln(w)
		fmt.Fprintln(w, s.title)
		if s.baseline != "" {
			fmt.Fprintln(w, "   ratios against: "+s.baseline+" (unless the ratio names another row)")
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  key\twhat\tfigure\tp10–p90\tn\tratio\tnotes")
		for _, x := range s.rows {
			var q string
			if b := s.baseOf(x); b != "" {
				if rq, ok := byKey[x.key+"/"+b]; ok {
					q = fmtRatio(rq.value)
					if b == s.baseline && s.ratioUnit != "" {
						q = fmt.Sprintf("%.2f %s", rq.value, s.ratioUnit)
					}
					if b != s.baseline {
						q += " vs " + b
					}
					if rq.target != nil {
						q += fmt.Sprintf(" (target %s: %s)", rq.target, rq.target.verdict(rq.value))
					}
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.key, x.name, x.figure(), x.spread(), x.count(), q, x.fullNote())
		}
		tw.Flush()
		for _, sp := range s.ratios {
			q, ok := byKey[sp.num+"/"+sp.den]
			if !ok {
				fmt.Fprintf(w, "  · %s ÷ %s: not measured\n", sp.num, sp.den)
				continue
			}
			line := fmt.Sprintf("  · %s ÷ %s = %s", sp.num, sp.den, fmtRatio(q.value))
			if q.target != nil {
				line += fmt.Sprintf("   target %s: %s", q.target, q.target.verdict(q.value))
			}
			fmt.Fprintln(w, line)
		}
		for _, n := range s.notes {
			fmt.Fprintf(w, "  · %s\n", n)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Targets of issues 16, 26 and 30 (computed from this run's figures)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  target\tkey\tvalue\tbar\tverdict")
	for _, j := range r.judgements(ratios) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", j.text, j.key, j.value, j.bar, j.verdict)
	}
	tw.Flush()
}

// A judgement is one target of issue 16 and how this run's figure stands.
type judgement struct {
	text, key, value, bar, verdict string
}

// judgements lists every target of issue 16, in the order of targetOrder,
// with the figure it is judged on (or why there is none).
func (r *report) judgements(ratios []ratio) []judgement {
	var out []judgement
	for _, key := range targetOrder {
		if t, ok := ratioTargets[key]; ok {
			j := judgement{text: t.text, key: key, bar: t.String(), value: "—", verdict: "not measured"}
			for _, q := range ratios {
				if q.key == key {
					j.value, j.verdict = fmtRatio(q.value), q.target.verdict(q.value)
					if t.unit == unitRTT {
						j.value = fmt.Sprintf("%.2f RTT", q.value)
					}
				}
			}
			out = append(out, j)
			continue
		}
		t := rowTargets[key]
		j := judgement{key: key, text: t.text, bar: t.String(), value: "—", verdict: "not measured"}
		for _, s := range r.sections {
			for _, x := range s.rows {
				if x.key == key && x.target != nil && x.measured() {
					j.value, j.verdict = x.figure(), x.target.verdict(x.value)
				}
			}
		}
		out = append(out, j)
	}
	return out
}

func (x row) figure() string {
	switch {
	case x.failure != "":
		return strings.SplitN(x.failure, ":", 2)[0]
	case x.unit == unitMicros:
		return fmtDur(time.Duration(x.value * float64(time.Microsecond)))
	case x.unit == unitPerSec:
		return fmt.Sprintf("%.0f /s", x.value)
	case x.unit == unitKB:
		return fmt.Sprintf("%.1f KB", x.value) + " per peer"
	case x.unit == unitTest:
		return "see test"
	}
	return trimFloat(x.value) + " " + string(x.unit)
}

func (x row) spread() string {
	if len(x.samples) == 0 || x.failure != "" {
		return ""
	}
	return fmtDur(x.samples.quantile(0.1)) + "–" + fmtDur(x.samples.quantile(0.9))
}

func (x row) count() string {
	if len(x.samples) == 0 || x.failure != "" {
		return ""
	}
	return fmt.Sprint(len(x.samples))
}

func (x row) fullNote() string {
	parts := []string{}
	if x.failure != "" {
		if _, why, ok := strings.Cut(x.failure, ": "); ok {
			parts = append(parts, why)
		}
	}
	if x.note != "" {
		parts = append(parts, x.note)
	}
	if x.floorRTT > 0 {
		parts = append(parts, fmt.Sprintf("floor %s RTT", trimFloat(x.floorRTT)))
	}
	if x.target != nil && x.measured() {
		parts = append(parts, fmt.Sprintf("target %s: %s", x.target, x.target.verdict(x.value)))
	}
	return strings.Join(parts, "; ")
}

// The JSON form of a report (-json). Its keys are documented in the
// package comment; they are stable.
type jsonReport struct {
	Machine jsonMachine `json:"machine"`
	Rows    []jsonRow   `json:"rows"`
	Ratios  []jsonRatio `json:"ratios"`
	Targets []jsonJudge `json:"targets"`
}

type jsonMachine struct {
	Date     string `json:"date"`
	CPUs     int    `json:"cpus"`
	Model    string `json:"cpu_model"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Libp2p   string `json:"go_libp2p"`
	MCP      string `json:"mcp_go_sdk"`
	Load     string `json:"load_at_start"`
	HomesFS  string `json:"homes_fs"`
	FDLimit  uint64 `json:"fd_limit"`
	FDHardLm uint64 `json:"fd_hard_limit"`
}

type jsonRow struct {
	Key      string   `json:"key"`
	Section  int      `json:"section"`
	Name     string   `json:"name"`
	Unit     string   `json:"unit,omitempty"`
	Value    *float64 `json:"value,omitempty"`
	MedianUS *float64 `json:"median_us,omitempty"`
	P10US    *float64 `json:"p10_us,omitempty"`
	P90US    *float64 `json:"p90_us,omitempty"`
	N        int      `json:"n,omitempty"`
	Held     int      `json:"held,omitempty"`
	Asked    int      `json:"asked,omitempty"`
	Greeted  *int     `json:"greeted,omitempty"`
	Note     string   `json:"note,omitempty"`
	Error    string   `json:"error,omitempty"`
	Target   *jsonBar `json:"target,omitempty"`
	FloorRTT float64  `json:"floor_rtt,omitempty"`
}

type jsonRatio struct {
	Key    string   `json:"key"`
	Num    string   `json:"num"`
	Den    string   `json:"den"`
	Value  float64  `json:"value"`
	Target *jsonBar `json:"target,omitempty"`
}

// jsonBar is a target and whether the figure meets it: met is absent
// when the figure cannot judge it (why says why).
type jsonBar struct {
	Op    string  `json:"op"`
	Limit float64 `json:"limit"`
	Text  string  `json:"text"`
	Met   *bool   `json:"met,omitempty"`
	Why   string  `json:"why,omitempty"`
}

type jsonJudge struct {
	Key     string `json:"key"`
	Text    string `json:"text"`
	Verdict string `json:"verdict"` // "met", "not met", "not judged" or "not measured"
}

func barOf(t *target, value float64, measured bool) *jsonBar {
	if t == nil {
		return nil
	}
	b := &jsonBar{Op: t.op, Limit: t.limit, Text: t.text, Why: t.unmeasurable}
	if met, ok := t.met(value); ok && measured {
		b.Met = &met
	}
	return b
}

func (r *report) toJSON() jsonReport {
	m := r.machine
	out := jsonReport{Machine: jsonMachine{Date: m.date.Format(time.RFC3339), CPUs: m.cpus, Model: m.model, Kernel: m.kernel,
		Go: m.goVersion, Libp2p: m.libp2p, MCP: m.mcp, Load: m.load, HomesFS: m.fsType, FDLimit: m.fds, FDHardLm: m.fdHard},
		Rows: []jsonRow{}, Ratios: []jsonRatio{}, Targets: []jsonJudge{}}
	for i, s := range r.sections {
		num := sectionNumber(s.title, i+1)
		for _, x := range s.rows {
			if x.unit == unitTest {
				continue // pointers to tests carry no figure
			}
			j := jsonRow{Key: x.key, Section: num, Name: x.name, Unit: string(x.unit), Held: x.held, Asked: x.asked, Greeted: x.greeted,
				Note: x.note, Error: x.failure, Target: barOf(x.target, x.value, x.measured()), FloorRTT: x.floorRTT}
			if x.measured() {
				v := round3(x.value)
				j.Value = &v
				if len(x.samples) > 0 {
					p10, p90 := micros(x.samples.quantile(0.1)), micros(x.samples.quantile(0.9))
					j.MedianUS, j.P10US, j.P90US, j.N = &v, &p10, &p90, len(x.samples)
				}
			}
			out.Rows = append(out.Rows, j)
		}
	}
	ratios := r.ratios()
	for _, q := range ratios {
		out.Ratios = append(out.Ratios, jsonRatio{Key: q.key, Num: q.num, Den: q.den, Value: round3(q.value),
			Target: barOf(q.target, q.value, true)})
	}
	for _, j := range r.judgements(ratios) {
		v := strings.ToLower(j.verdict)
		if strings.HasPrefix(v, "not judged") {
			v = "not judged"
		}
		out.Targets = append(out.Targets, jsonJudge{Key: j.key, Text: j.text, Verdict: v})
	}
	return out
}

func (r *report) printJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.toJSON()); err != nil {
		return fmt.Errorf("writing the JSON report: %w", err)
	}
	return nil
}

// sectionNumber reads the number a section's title starts with ("1. …").
func sectionNumber(title string, fallback int) int {
	var n int
	if _, err := fmt.Sscanf(title, "%d.", &n); err != nil {
		return fallback
	}
	return n
}

func micros(d time.Duration) float64 { return round3(float64(d) / float64(time.Microsecond)) }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// failed is a row that could not be measured because of err.
func failed(key, name string, err error) row {
	return row{key: key, name: name, failure: "failed: " + oneLine(err.Error())}
}

// oneLine joins a multi-line error (libp2p's dial errors list every
// address) into one table cell.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// notMeasured is a row left out, and why.
func notMeasured(key, name, reason string) row {
	return row{key: key, name: name, failure: "not measured: " + reason}
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

// latencyRow is the row of a variant's samples: its median, in µs.
func latencyRow(key, name string, s samples, note string) row {
	return row{key: key, name: name, unit: unitMicros, value: float64(s.median()) / float64(time.Microsecond), samples: s, note: note}
}

// cpuRow is a CPU time per operation.
func cpuRow(key, name string, d time.Duration, note string) row {
	return row{key: key, name: name, unit: unitMicros, value: float64(d) / float64(time.Microsecond), note: note}
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
	key     string
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
func rowOf(v *variant, note string) row {
	if v.err != nil {
		return failed(v.key, v.name, v.err)
	}
	if len(v.samples) == 0 {
		return notMeasured(v.key, v.name, "interrupted")
	}
	return latencyRow(v.key, v.name, v.samples, note)
}
