package tally

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/prometheus/client_golang/prometheus"
)

func TestTableCountsByCell(t *testing.T) {
	tb := NewTable([]string{"in", "out"}, []string{"a", "b", "c"})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				tb.Add(1, 2)
			}
		}()
	}
	wg.Wait()
	tb.Add(0, 0)
	tb.Add(0, 3)    // out of range: a stray
	tb.Add(2, 0)    // out of range: a stray
	tb.Add(0)       // too few: a stray
	tb.Add(0, 0, 0) // too many: a stray
	var got []string
	tb.Each(func(v []string, n uint64) { got = append(got, fmt.Sprintf("%s/%s=%d", v[0], v[1], n)) })
	if want := []string{"in/a=1", "out/c=8000"}; !slices.Equal(got, want) {
		t.Errorf("cells %v, want %v", got, want)
	}
	if n := tb.Stray(); n != 4 {
		t.Errorf("%d strays, want the 4 Adds that named no cell", n)
	}
}

func TestOutcomeOf(t *testing.T) {
	outcomes := Outcomes()
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, OK},
		{fmt.Errorf("reading: %w", gossip.ErrFrameTooLarge), "payload_too_large"},
		{wire.ErrRateLimited, "rate_limited"},
		{&wire.RemoteError{Peer: "p", Body: wire.ErrorBody{Code: wire.CodeBusy}}, "busy"},
		{&wire.RemoteError{Peer: "p", Body: wire.ErrorBody{Code: wire.CodeInternal}}, "internal_error"},
		// A code the peer made up is not a label value.
		{&wire.RemoteError{Peer: "p", Body: wire.ErrorBody{Code: "made_up_by_the_peer"}}, Failed},
		{io.EOF, Failed},
		{errors.New("dial failed"), Failed},
	} {
		if got := outcomes[OutcomeOf(c.err)]; got != c.want {
			t.Errorf("OutcomeOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if got := outcomes[AnsweredWith(errors.New("the agent's own failure"))]; got != "internal_error" {
		t.Errorf("AnsweredWith(unknown) = %s, want internal_error", got)
	}
	if got := outcomes[AnsweredWith(nil)]; got != OK {
		t.Errorf("AnsweredWith(nil) = %s", got)
	}
	codes := Codes()
	if got := codes[CodeOf(errors.New("anything"))]; got != "internal_error" {
		t.Errorf("CodeOf(unknown) = %s, want internal_error", got)
	}
	if got := codes[CodeIndex("made_up")]; got != "internal_error" {
		t.Errorf("CodeIndex(made_up) = %s, want internal_error", got)
	}
	if got := codes[CodeIndex(wire.CodeBusy)]; got != "busy" {
		t.Errorf("CodeIndex(busy) = %s", got)
	}
	if got := codes[CodeOf(identityReplay())]; got != "replay" {
		t.Errorf("CodeOf(replay) = %s", got)
	}
	if len(codes) != len(wire.Codes()) || outcomes[0] != OK || outcomes[len(outcomes)-1] != Failed {
		t.Errorf("outcomes %v", outcomes)
	}
}

func identityReplay() error { return fmt.Errorf("checking: %w", wire.ErrorOf(wire.CodeReplay)) }

func TestHistograms(t *testing.T) {
	h := NewHistograms([]string{"a", "b"}, []float64{.001, .01})
	h.Observe(0, 500*time.Microsecond) // first bucket
	h.Observe(0, time.Millisecond)     // on the bound: first bucket
	h.Observe(0, 5*time.Millisecond)   // second
	h.Observe(0, time.Second)          // above every bound
	h.Observe(2, time.Second)          // no such histogram: a stray
	var got []string
	h.Each(func(name string, s Snapshot) {
		got = append(got, fmt.Sprintf("%s count=%d sum=%.4f le.001=%d le.01=%d", name, s.Count, s.Sum, s.Buckets[.001], s.Buckets[.01]))
	})
	want := []string{"a count=4 sum=1.0065 le.001=2 le.01=3", "b count=0 sum=0.0000 le.001=0 le.01=0"}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := h.Stray(); n != 1 {
		t.Errorf("%d strays, want the 1 Observe that named no histogram", n)
	}
}

// BenchmarkCounting is what counting costs the path that counts: a
// table's add, and a door step's lap (a clock read and an observation).
func BenchmarkCounting(b *testing.B) {
	b.Run("table add", func(b *testing.B) {
		tb := NewTable([]string{"in", "out"}, []string{"a", "b"}, Outcomes())
		for i := 0; i < b.N; i++ {
			tb.Add(1, 0, 3)
		}
	})
	b.Run("step lap", func(b *testing.B) {
		h := NewHistograms([]string{"a", "b"}, StepBounds)
		last := time.Now()
		for i := 0; i < b.N; i++ {
			now := time.Now()
			h.Observe(1, now.Sub(last))
			last = now
		}
	})
}

// The figures a component counts are kept here rather than in the
// Prometheus client's own types so that no component imports the client
// and no label value can come from anywhere but a fixed list. These
// benchmarks hold that this costs nothing on the path that counts: each
// pair is the same work with tally and with client_golang, in one run.

func BenchmarkObserveTally(b *testing.B) {
	h := NewHistograms([]string{"a", "b"}, StepBounds)
	for i := 0; b.Loop(); i++ {
		h.Observe(i&1, time.Duration(i%5000)*time.Microsecond)
	}
}

func BenchmarkObservePrometheus(b *testing.B) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "x", Buckets: StepBounds}, []string{"step"})
	obs := []prometheus.Observer{h.WithLabelValues("a"), h.WithLabelValues("b")}
	for i := 0; b.Loop(); i++ {
		obs[i&1].Observe((time.Duration(i%5000) * time.Microsecond).Seconds())
	}
}

func BenchmarkAddTally(b *testing.B) {
	t := NewTable([]string{"in", "out"}, Outcomes())
	for i := 0; b.Loop(); i++ {
		t.Add(i&1, i%3)
	}
}

func BenchmarkAddPrometheus(b *testing.B) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"direction", "outcome"})
	out := Outcomes()
	for i := 0; b.Loop(); i++ {
		c.WithLabelValues([]string{"in", "out"}[i&1], out[i%3]).Inc()
	}
}
