package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/interop/hostile"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/keys"
	"github.com/ifaced/ifaced/node/nodetest"
)

const (
	sampleEvery  = 5 * time.Second
	steadyPeers  = 6
	steadyEvery  = 15 * time.Second // per steady peer: a greeting and an invocation (8 messages a minute: a cool conversation takes 10)
	maxStrangers = 4                // strangers alive at once
	opTimeout    = 30 * time.Second
	// warmStrangers is how many strangers must have come and gone before
	// the warm-up ends: the bounded stores a stranger fills must be full
	// first, and the one that takes the most strangers is the audit log's
	// held files (64 peers' .jsonl and .md handles, gossip.heldJSONL),
	// shared with the steady peers. Until then descriptors and memory grow
	// by design.
	warmStrangers = 80
	// minAfterWarm is the least of the run that must follow the warm-up
	// for a slope to mean anything.
	minAfterWarm = time.Minute
)

// bounds are the flatness bounds after warm-up (doc.go): per minute, or,
// for memory, per stranger that came and went (the stranger rate is
// measured in the same samples). Memory is bounded per stranger because
// the caches strangers fill (held views 8 MiB, peer records 8 MiB, sent
// views and trust records 4 MiB each, the peerstore for a minute after
// each disconnects) take some 1,600 strangers to fill and grow by design
// until then, by 13 to 30 KiB a stranger as measured.
var bounds = []struct {
	curve       string
	max         float64
	unit        string
	perStranger bool
	of          func(sample) float64
}{
	{"goroutines", 1, "/min", false, func(s sample) float64 { return s.goroutines }},
	{"open descriptors", 0.5, "/min", false, func(s sample) float64 { return float64(s.fds) }},
	// Anonymous memory (heap, stacks, buffers): the resident memory of
	// the store's mapped file grows with the store, which disk caps bound.
	{"anonymous resident memory", 64, "KiB a stranger", true, func(s sample) float64 { return float64(s.rssAnon) / 1024 }},
	{"Go heap in use", 64, "KiB a stranger", true, func(s sample) float64 { return s.heap / 1024 }},
}

// sample is one reading of the daemon from outside, with what the peers
// had done by then.
type sample struct {
	at         time.Duration
	rss        int64
	rssAnon    int64
	fds        int
	disk       int64
	heap       float64
	goroutines float64
	strangers  int64 // strangers that had gone by then
	ops        int64 // greetings and invocations that succeeded by then
	// caches is each bounded memory's entries and counted bytes
	// (ifaced_memory_cache_entries and _bytes), by cache.
	caches map[string][2]float64
	// cachesUsed is the sum of their counted bytes.
	cachesUsed float64
}

func TestSoak(t *testing.T) {
	env := os.Getenv("IFACED_SOAK")
	if env == "" {
		t.Skip("the soak runs when asked: IFACED_SOAK=5m (or any Go duration)")
	}
	run, err := time.ParseDuration(env)
	if err != nil || run < 2*time.Minute {
		t.Fatalf("IFACED_SOAK=%q: want a Go duration of at least 2m (e.g. 5m, 1h)", env)
	}
	every := 5 * time.Second
	if e := os.Getenv("IFACED_SOAK_EVERY"); e != "" {
		if every, err = time.ParseDuration(e); err != nil || every <= 0 {
			t.Fatalf("IFACED_SOAK_EVERY=%q: want a positive Go duration (e.g. 5s)", e)
		}
	}

	agent := httptest.NewServer(http.HandlerFunc(echoAgent))
	t.Cleanup(agent.Close)
	metricsAddr := freeAddr(t)
	target := hostile.Start(t, hostile.Options{
		Extra: fmt.Sprintf("[agent]\nwebhook = %q\n\n[metrics]\nlisten = %q\n", agent.URL+"/", metricsAddr),
		Capabilities: [][2]string{
			{"ping", "Respond to connectivity tests"},
			{"echo", "Echo the parameters back"},
		},
	})
	addr := target.P2P.String() + "/p2p/" + target.PeerID.String()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := &driver{t: t, addr: addr, log: log, target: target}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range steadyPeers {
		p := d.start(t.TempDir(), nil)
		if p == nil {
			t.Fatalf("steady peer %d did not start: %v", i, d.failures)
		}
		target.Pin(t, p.ID())
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.Close()
			// Staggered, so that a greeting is due every steadyEvery/steadyPeers.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(i) * steadyEvery / steadyPeers):
			}
			tick := time.NewTicker(steadyEvery)
			defer tick.Stop()
			for {
				d.converse(p, "steady", false)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.churn(ctx, every)
	}()

	began := time.Now()
	var samples []sample
	tick := time.NewTicker(sampleEvery)
	for {
		samples = append(samples, d.sample(time.Since(began), metricsAddr))
		if time.Since(began) >= run {
			break
		}
		<-tick.C
	}
	tick.Stop()
	stop()
	wg.Wait()
	target.Alive(t)

	// The warm-up: a fifth of the run, and until warmStrangers have gone.
	warm := run / 5
	if i := slices.IndexFunc(samples, func(s sample) bool { return s.strangers >= warmStrangers }); i < 0 {
		t.Fatalf("only %d strangers came and went in %s, fewer than the %d the warm-up needs: run longer or set IFACED_SOAK_EVERY shorter", d.strangers.Load(), run, warmStrangers)
	} else {
		warm = max(warm, samples[i].at)
	}
	if after := samples[len(samples)-1].at - warm; after < minAfterWarm {
		t.Fatalf("the warm-up (%d strangers) took %s of the %s run, leaving %s: run longer or set IFACED_SOAK_EVERY shorter", warmStrangers, warm.Round(time.Second), run, after.Round(time.Second))
	}
	d.report(samples, warm)
	if out := os.Getenv("IFACED_SOAK_OUT"); out != "" {
		writeCSV(t, out, samples)
	}
	post := slices.DeleteFunc(slices.Clone(samples), func(s sample) bool { return s.at < warm })
	curve := func(of func(sample) float64) []point {
		pts := make([]point, len(post))
		for i, s := range post {
			pts[i] = point{s.at, of(s)}
		}
		return pts
	}
	strangersPerMin := theilSen(curve(func(s sample) float64 { return float64(s.strangers) }))
	t.Logf("strangers: %.1f a minute after the warm-up", strangersPerMin)
	for _, b := range bounds {
		slope := theilSen(curve(b.of))
		if b.perStranger {
			slope /= strangersPerMin
		}
		t.Logf("%s: %.3f %s after the warm-up (bound %.1f)", b.curve, slope, b.unit, b.max)
		if slope > b.max {
			t.Errorf("%s grows %.3f %s after the warm-up, over the bound of %.1f: a leak (curve in the table above)", b.curve, slope, b.unit, b.max)
			if b.curve == "open descriptors" {
				t.Logf("the daemon's descriptors now, by kind: %v", fdKinds(target.PID()))
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.failures) > 0 {
		t.Errorf("%d operations failed; the first: %s", len(d.failures), strings.Join(d.failures[:min(10, len(d.failures))], "; "))
	}
	if d.strangers.Load() == 0 {
		t.Error("no stranger came and went")
	}
}

// driver runs the peers and keeps what they saw.
type driver struct {
	t      *testing.T
	addr   string
	log    *slog.Logger
	target *hostile.Target

	strangers atomic.Int64 // gone
	rotated   atomic.Int64
	ops       atomic.Int64

	mu        sync.Mutex
	failures  []string
	latencies []time.Duration // steady peers' greetings
}

func (d *driver) fail(format string, args ...any) {
	d.mu.Lock()
	d.failures = append(d.failures, fmt.Sprintf(format, args...))
	d.mu.Unlock()
}

// start runs a peer daemon in dir (a new key when id is nil) and connects
// it to the target; nil when it could not (the failure is recorded).
func (d *driver) start(dir string, id *identity.Identity) *node.Node {
	h := config.Home{Dir: filepath.Join(dir, "home")}
	var err error
	if id == nil {
		if id, err = h.Init(time.Now()); err != nil {
			d.fail("making a peer's home: %v", err)
			return nil
		}
	}
	n, err := node.New(nodetest.LoopbackConfig(), id, h, d.log)
	if err != nil {
		d.fail("starting a peer: %v", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := n.Connect(ctx, d.addr); err != nil {
		d.fail("connecting: %v", err)
		n.Close()
		return nil
	}
	return n
}

// converse greets the target and invokes echo; a stranger then says
// something and, when polite, closes the conversation. It reports the
// conversation's ID ("" when it failed).
func (d *driver) converse(p *node.Node, who string, stranger bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	start := time.Now()
	g, err := p.Greet(ctx, d.target.PeerID, negotiate.Proposal{})
	if err != nil {
		d.fail("%s greeting: %v", who, err)
		return ""
	}
	if !stranger {
		d.mu.Lock()
		d.latencies = append(d.latencies, time.Since(start))
		d.mu.Unlock()
	}
	d.ops.Add(1)
	res, err := p.Invoke(ctx, d.target.PeerID, "echo", map[string]any{"from": who})
	if err != nil {
		d.fail("%s invoking echo: %v", who, err)
		return ""
	}
	if m, ok := res.Result.(map[string]any); !ok || fmt.Sprint(m["echo"]) != fmt.Sprint(map[string]any{"from": who}) {
		d.fail("%s invoking echo: result %v", who, res.Result)
		return ""
	}
	d.ops.Add(1)
	if stranger {
		if _, err := p.Say(g.ConversationID, gossip.PhaseContext, "hello from "+who); err != nil {
			d.fail("%s saying: %v", who, err)
			return ""
		}
	}
	return g.ConversationID
}

// churn brings a new stranger every interval until ctx ends, at most
// maxStrangers at once, and waits for those alive to go.
func (d *driver) churn(ctx context.Context, every time.Duration) {
	slots := make(chan struct{}, maxStrangers)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			d.stranger(i)
		}()
	}
}

// stranger is one stranger's life: it comes, converses and goes in one
// of three ways (politely, without a word, or after a key rotation and a
// second conversation under the new key); its home is removed after.
func (d *driver) stranger(i int) {
	dir, err := os.MkdirTemp("", "soak-stranger-")
	if err != nil {
		d.fail("stranger %d: %v", i, err)
		return
	}
	defer os.RemoveAll(dir)
	who := fmt.Sprintf("stranger %d", i)
	p := d.start(dir, nil)
	if p == nil {
		return
	}
	conv := d.converse(p, who, true)
	switch {
	case conv == "":
		p.Close()
	case i%4 == 3: // rotates its key and comes back
		p.Close()
		h := config.Home{Dir: filepath.Join(dir, "home")}
		if _, err := keys.RotateKey(h, time.Hour, time.Now(), keys.RotateOptions{}); err != nil {
			d.fail("%s rotating its key: %v", who, err)
			break
		}
		id, err := identity.LoadKey(h.KeyPath())
		if err != nil {
			d.fail("%s loading its new key: %v", who, err)
			break
		}
		if p = d.start(dir, id); p == nil {
			break
		}
		d.converse(p, who+" (rotated)", true)
		p.Close()
		d.rotated.Add(1)
	case i%2 == 0: // closes the conversation, then goes
		if _, err := p.Say(conv, gossip.PhaseClose, "goodbye"); err != nil {
			d.fail("%s closing: %v", who, err)
		}
		p.Close()
	default: // disappears without a word
		p.Close()
	}
	d.strangers.Add(1)
}

// sample reads the daemon from outside: /proc and its home (hostile's
// Measure), and its metrics endpoint as a scraper would.
func (d *driver) sample(at time.Duration, metricsAddr string) sample {
	m := d.target.Measure(d.t)
	_, fams, body := nodetest.Scrape(d.t, "http://"+metricsAddr+"/metrics", "")
	if fams == nil {
		d.t.Fatalf("scraping the daemon's metrics: %s", body)
	}
	s := sample{
		at: at, rss: m.RSS, rssAnon: m.RSSAnon, fds: m.FDs, disk: m.Disk,
		heap:       fams.Value("go_memstats_heap_inuse_bytes"),
		goroutines: fams.Value("go_goroutines"),
		strangers:  d.strangers.Load(),
		ops:        d.ops.Load(),
		caches:     map[string][2]float64{},
	}
	for _, cache := range soakCaches {
		used := fams.Value("ifaced_memory_cache_bytes", "cache", cache)
		s.caches[cache] = [2]float64{fams.Value("ifaced_memory_cache_entries", "cache", cache), used}
		s.cachesUsed += used
	}
	return s
}

// soakCaches are the daemon's bounded memories (its metrics' cache label).
var soakCaches = []string{"peer_records", "held_views", "sent_views", "trust_records", "signed_views", "canonical", "decoded", "indented"}

// report logs the curves once a minute (and the last sample), the steady
// greetings' latency, and the disk per stranger.
func (d *driver) report(samples []sample, warm time.Duration) {
	t := d.t
	t.Logf("%8s %10s %10s %10s %10s %5s %10s %9s %6s %10s", "t", "RSS", "anon RSS", "heap", "goroutines", "fds", "disk", "strangers", "ops", "caches")
	for i, s := range samples {
		if i%int(time.Minute/sampleEvery) != 0 && i != len(samples)-1 {
			continue
		}
		t.Logf("%8s %10s %10s %10s %10.0f %5d %10s %9d %6d %10s", s.at.Round(time.Second), hostile.MiB(s.rss), hostile.MiB(s.rssAnon), hostile.MiB(int64(s.heap)), s.goroutines, s.fds, hostile.MiB(s.disk), s.strangers, s.ops, hostile.MiB(int64(s.cachesUsed)))
	}
	first, last := samples[0], samples[len(samples)-1]
	// How full each bounded memory is at the end ("caches" above is the
	// sum of their counted bytes): a curve that still grows while one of
	// them fills is that memory filling, not a leak.
	for _, cache := range soakCaches {
		c := last.caches[cache]
		t.Logf("memory %-13s %7.0f entries, counted as %s", cache, c[0], hostile.MiB(int64(c[1])))
	}
	if n := last.strangers; n > 0 {
		t.Logf("disk: %s over the run, %.1f KiB per stranger gone (%d, %d of them rotated), %.0f B/s",
			hostile.MiB(last.disk-first.disk), float64(last.disk-first.disk)/1024/float64(n), n, d.rotated.Load(),
			float64(last.disk-first.disk)/last.at.Seconds())
	}
	d.mu.Lock()
	l := slices.Clone(d.latencies)
	d.mu.Unlock()
	slices.Sort(l)
	if len(l) > 0 {
		t.Logf("steady greetings: %d, p50 %s, p95 %s, max %s (warm-up %s)", len(l),
			l[len(l)/2].Round(time.Microsecond), l[len(l)*95/100].Round(time.Microsecond), l[len(l)-1].Round(time.Microsecond), warm)
	}
}

// fdKinds counts a process's open descriptors by what they are: a file
// by its directory under the home's parent, else the link's kind
// ("socket", "anon_inode:[eventpoll]", …).
func fdKinds(pid int) map[string]int {
	kinds := map[string]int{}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if k, _, ok := strings.Cut(link, ":"); ok && !strings.HasPrefix(link, "/") {
			link = k
		} else {
			link = filepath.Dir(link)
		}
		kinds[link]++
	}
	return kinds
}

func writeCSV(t *testing.T, path string, samples []sample) {
	var b strings.Builder
	b.WriteString("seconds,rss_bytes,rss_anon_bytes,heap_inuse_bytes,goroutines,fds,disk_bytes,strangers_gone,ops,caches_bytes")
	for _, c := range soakCaches {
		b.WriteString("," + c + "_entries")
	}
	b.WriteString("\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "%.0f,%d,%d,%.0f,%.0f,%d,%d,%d,%d,%.0f", s.at.Seconds(), s.rss, s.rssAnon, s.heap, s.goroutines, s.fds, s.disk, s.strangers, s.ops, s.cachesUsed)
		for _, c := range soakCaches {
			fmt.Fprintf(&b, ",%.0f", s.caches[c][0])
		}
		b.WriteString("\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("writing IFACED_SOAK_OUT: %v", err)
	}
}

// echoAgent is the target's agent (its webhook): echo answers with its
// parameters.
func echoAgent(w http.ResponseWriter, r *http.Request) {
	var inv struct {
		Capability string `json:"capability"`
		Params     any    `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&inv); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"result": map[string]any{"echo": inv.Params}})
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
