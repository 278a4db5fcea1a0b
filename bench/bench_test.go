package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
)

// TestMain lets a test binary serve as a child (sections 3 and 4 re-run
// this program as the daemon they load).
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

// smallest is every section at its smallest: a handful of iterations, one
// peer loading a daemon, 8 idle peers, 4 in rotation.
func smallest(dir string) settings {
	return settings{warmN: 3, coldN: 2, loadFor: 300 * time.Millisecond, loadLevels: []int{1},
		idlePeers: []int{8}, rotate: 4, settle: 100 * time.Millisecond, rows: []int{1, 2, 3, 4, 5}, gossipN: 30, dir: dir}
}

// TestReportJSON runs every section once at its smallest and checks the
// shape of the -json report: every row and ratio named by its stable key
// and measured, every ratio the quotient of its rows, every target's
// verdict the one its figure gives. It checks the shape, not the figures.
func TestReportJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := smallest(t.TempDir())
	var out bytes.Buffer
	s.json = true
	if err := run(ctx, s, &out); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Machine map[string]any   `json:"machine"`
		Rows    []map[string]any `json:"rows"`
		Ratios  []map[string]any `json:"ratios"`
		Targets []map[string]any `json:"targets"`
	}
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, out.String())
	}

	for _, k := range []string{"date", "cpus", "cpu_model", "kernel", "go", "go_libp2p", "mcp_go_sdk", "load_at_start", "homes_fs", "fd_limit", "fd_hard_limit"} {
		if _, ok := rep.Machine[k]; !ok {
			t.Errorf("machine has no %q: %v", k, rep.Machine)
		}
	}
	if _, err := time.Parse(time.RFC3339, fmt.Sprint(rep.Machine["date"])); err != nil {
		t.Errorf("machine.date: %v", err)
	}
	if v, _ := rep.Machine["mcp_go_sdk"].(string); v != "v1.8.0" {
		t.Errorf("machine.mcp_go_sdk = %q, want the pinned v1.8.0", v)
	}

	rows := map[string]map[string]any{}
	for _, r := range rep.Rows {
		key, _ := r["key"].(string)
		if key == "" {
			t.Errorf("a row without a key: %v", r)
			continue
		}
		if rows[key] != nil {
			t.Errorf("two rows named %s", key)
		}
		rows[key] = r
	}
	want := []string{
		"warm.greeting", "warm.greet_conversation", "warm.greeting_sync_always",
		"floor.long_lived", "floor.long_lived_unsigned", "floor.new_stream",
		"a2a.full", "a2a.full_signed_per_request", "a2a.etag_304",
		"mcp.discover", "mcp.discover_tools_list", "mcp.initialize", "mcp.initialize_tools_list",
		"fsync.1kb", "ed25519.sign", "ed25519.verify",
		"audit.greeting_cpu", "audit.proof_cpu", "audit.proof_cpu_ab", "audit.record_disk", "audit.proof_disk",
		"cold.new_peer.tcp", "cold.new_peer.tcp.connect", "cold.new_peer.quic", "cold.new_peer.quic.connect",
		"cold.known_peer.tcp", "cold.known_peer.tcp.connect", "cold.mtls_exchange", "cold.https", "cold.https_signed_per_request",
		"load.ed25519_pairs", "load.ed25519_pair", "load.1.rate", "load.1.daemon_cpu",
		"memory.bare.8", "memory.idle.8", "memory.greeted.8", "rotation.one_peer", "rotation.4",
		"gossip.one_way", "gossip.reach99.30",
	}
	for _, key := range want {
		r, ok := rows[key]
		if !ok {
			t.Errorf("no row %s", key)
			continue
		}
		if e, ok := r["error"]; ok {
			t.Errorf("%s: %v", key, e)
			continue
		}
		if _, ok := r["value"].(float64); !ok {
			t.Errorf("%s: no value: %v", key, r)
		}
		switch u := r["unit"]; u {
		case "us", "1/s", "KB":
		default:
			t.Errorf("%s: unit %v", key, u)
		}
		if sec, _ := r["section"].(float64); sec < 1 || sec > 5 {
			t.Errorf("%s: section %v", key, r["section"])
		}
	}
	if len(rows) != len(want) {
		for key := range rows {
			if !contains(want, key) {
				t.Errorf("a row this test does not know: %s (add it to the package comment's keys and here)", key)
			}
		}
	}
	// Latency rows: the median is the value, inside its spread, over the
	// samples asked for.
	for _, key := range []string{"warm.greeting", "floor.long_lived", "a2a.etag_304", "mcp.discover_tools_list", "rotation.4"} {
		r := rows[key]
		med, p10, p90 := num(r["median_us"]), num(r["p10_us"]), num(r["p90_us"])
		if med != num(r["value"]) || p10 > med || med > p90 {
			t.Errorf("%s: median %v, value %v, p10 %v, p90 %v", key, med, r["value"], p10, p90)
		}
	}
	if n := num(rows["warm.greeting"]["n"]); int(n) != s.warmN {
		t.Errorf("warm.greeting: n = %v, want the %d iterations asked for", n, s.warmN)
	}
	if n := num(rows["rotation.4"]["n"]); int(n) < 4 {
		t.Errorf("rotation.4: n = %v, want at least a full rotation of 4", n)
	}
	for _, key := range []string{"memory.bare.8", "memory.idle.8", "memory.greeted.8"} {
		if held, asked := num(rows[key]["held"]), num(rows[key]["asked"]); asked != 8 || held < 1 || held > asked {
			t.Errorf("%s: held %v of %v", key, held, asked)
		}
	}
	if g, ok := rows["memory.greeted.8"]["greeted"].(float64); !ok || g != num(rows["memory.greeted.8"]["held"]) {
		t.Errorf("memory.greeted.8: %v greeted of %v held", rows["memory.greeted.8"]["greeted"], rows["memory.greeted.8"]["held"])
	}

	ratios := map[string]map[string]any{}
	for _, q := range rep.Ratios {
		key, _ := q["key"].(string)
		n, _ := q["num"].(string)
		d, _ := q["den"].(string)
		if key != n+"/"+d {
			t.Errorf("ratio %q divides %q by %q", key, n, d)
		}
		a, b := rows[n], rows[d]
		if a == nil || b == nil {
			t.Errorf("ratio %s: a row it divides is missing", key)
			continue
		}
		if want := num(a["value"]) / num(b["value"]); math.Abs(num(q["value"])-want) > 0.002*math.Max(1, want) {
			t.Errorf("ratio %s = %v, its rows give %v", key, q["value"], want)
		}
		checkBar(t, key, q["target"], num(q["value"]))
		ratios[key] = q
	}
	for _, key := range []string{"warm.greeting/floor.long_lived", "warm.greeting/floor.new_stream", "warm.greeting/a2a.full",
		"warm.greeting/a2a.etag_304", "warm.greeting/mcp.discover_tools_list", "warm.greeting/mcp.initialize_tools_list",
		"cold.new_peer.tcp/cold.mtls_exchange", "cold.new_peer.tcp/cold.https", "load.1.daemon_cpu/load.ed25519_pair",
		"memory.greeted.8/memory.bare.8", "rotation.4/rotation.one_peer",
		"audit.proof_cpu/audit.greeting_cpu", "audit.proof_disk/audit.record_disk"} {
		if ratios[key] == nil {
			t.Errorf("no ratio %s", key)
		}
	}
	for key, tg := range ratioTargets {
		if q := ratios[key]; q != nil && q["target"] == nil {
			t.Errorf("ratio %s carries no target (%s)", key, tg.text)
		}
	}
	for key, r := range rows {
		if r["target"] != nil {
			checkBar(t, key, r["target"], num(r["value"]))
		}
	}

	// The targets: each of the issue's, in its order, with the verdict its
	// figure gives; this run is too small for three of them.
	if len(rep.Targets) != len(targetOrder) {
		t.Fatalf("%d targets, want %d", len(rep.Targets), len(targetOrder))
	}
	for i, j := range rep.Targets {
		key := j["key"]
		if key != targetOrder[i] || j["text"] == "" {
			t.Errorf("target %d: %v, want %s", i, j, targetOrder[i])
		}
		verdict := "not measured"
		if q := ratios[targetOrder[i]]; q != nil {
			if met, _ := q["target"].(map[string]any)["met"].(bool); met {
				verdict = "met"
			} else {
				verdict = "not met"
			}
		}
		if j["verdict"] != verdict {
			t.Errorf("target %s: verdict %v, its figure gives %q", key, j["verdict"], verdict)
		}
	}
}

// checkBar checks that a target's met is what its op and limit give for
// value.
func checkBar(t *testing.T, key string, bar any, value float64) {
	t.Helper()
	b, ok := bar.(map[string]any)
	if !ok {
		return
	}
	limit, op := num(b["limit"]), b["op"]
	want := value <= limit
	if op == "<" {
		want = value < limit
	} else if op != "<=" {
		t.Errorf("%s: target op %v", key, op)
	}
	if met, ok := b["met"].(bool); !ok {
		if b["why"] == nil {
			t.Errorf("%s: target neither judged nor saying why: %v", key, b)
		}
	} else if met != want {
		t.Errorf("%s: met = %v for %v %v %v", key, met, value, op, limit)
	}
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// TestTextReport prints the table of a report and checks that each
// target is listed with a verdict computed from its figure.
func TestTextReport(t *testing.T) {
	r := &report{machine: describeMachine(t.TempDir())}
	ll := latencyRow("floor.long_lived", "floor", samples{100 * time.Microsecond}, "")
	wg := latencyRow("warm.greeting", "greeting", samples{140 * time.Microsecond}, "")
	mcp := latencyRow("mcp.discover_tools_list", "mcp", samples{120 * time.Microsecond}, "")
	r.add(section{title: "1. Warm", baseline: "floor.long_lived", rows: []row{wg, ll, mcp},
		ratios: []ratioSpec{{"warm.greeting", "mcp.discover_tools_list"}}})
	mem := row{key: memoryTargetKey, name: peersName("greeted", 5000, 4096, 4096), unit: unitKB, value: 40, held: 4096, asked: 5000,
		target: memoryTarget(5000, 4096, 4096)}
	r.add(section{title: "4. Many", rows: []row{mem}})
	var out strings.Builder
	r.print(&out)
	text := out.String()
	for _, want := range []string{
		"warm.greeting ÷ mcp.discover_tools_list = 1.17×   target < 1×: NOT MET",
		"greeted, 4,096 peers held of 5,000 asked",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
	// The targets' lines: text, key, figure, bar, verdict.
	for _, want := range [][]string{
		{"warm greeting ≤ 1.5× the long-lived signed floor", "warm.greeting/floor.long_lived", "1.40×", "≤ 1.5×", "met"},
		{"faster than MCP", "warm.greeting/mcp.discover_tools_list", "1.17×", "< 1×", "NOT MET"},
		{"warm greeting faster than the A2A full signed card fetch", "warm.greeting/a2a.full", "—", "not measured"},
		{"daemon CPU ≤ 150 µs per greeting at 32 peers", "load.32.daemon_cpu", "≤ 150 µs", "not measured"},
		{"≤ 64 KB per greeted idle peer at 5,000 peers", "memory.greeted.5000", "40.0 KB", "≤ 64 KB", "not judged: 4,096 of 5,000 peers held"},
	} {
		found := false
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, want[1]+" ") && strings.Contains(line, want[0]) {
				found = true
				for _, part := range want[2:] {
					if !strings.Contains(line, part) {
						t.Errorf("target line %q lacks %q", line, part)
					}
				}
				if v := want[len(want)-1]; !strings.HasSuffix(strings.TrimSpace(line), v) {
					t.Errorf("target line %q: verdict is not %q", line, v)
				}
			}
		}
		if !found {
			t.Errorf("no target line for %s:\n%s", want[1], text)
		}
	}
}

// A row that failed stays in the JSON report with its error and no
// figure, and ratios and targets it would give are left out, not faked.
func TestFailedRowsStayInJSON(t *testing.T) {
	r := &report{machine: describeMachine(t.TempDir())}
	r.add(section{title: "2. Cold", baseline: "cold.mtls_exchange", rows: []row{
		failed("cold.new_peer.tcp", "new peer", fmt.Errorf("dialing: timeout")),
		latencyRow("cold.mtls_exchange", "mtls", samples{time.Millisecond}, ""),
	}})
	r.add(pointerSection())
	j := r.toJSON()
	var got *jsonRow
	for i := range j.Rows {
		if j.Rows[i].Key == "cold.new_peer.tcp" {
			got = &j.Rows[i]
		}
		if j.Rows[i].Key == "dht.find" {
			t.Error("a pointer to a test is a row of the JSON report")
		}
	}
	if got == nil || got.Error != "failed: dialing: timeout" || got.Value != nil {
		t.Fatalf("the failed row: %+v", got)
	}
	if len(j.Ratios) != 0 {
		t.Errorf("ratios of a failed row: %+v", j.Ratios)
	}
	for _, v := range j.Targets {
		if v.Key == "cold.new_peer.tcp/cold.mtls_exchange" && v.Verdict != "not measured" {
			t.Errorf("the target of a failed row: %+v", v)
		}
	}
}

// A memory row never carries a count it did not hold, and a figure on
// fewer peers than the bar names cannot judge it.
func TestMemoryRowsSayWhatWasHeld(t *testing.T) {
	if got := peersName("ifaced", 5000, 5000, -1); got != "ifaced, 5,000 peers" {
		t.Errorf("all held: %q", got)
	}
	if got := peersName("ifaced", 5000, 5000, 5000); got != "ifaced, 5,000 peers" {
		t.Errorf("all held and greeted: %q", got)
	}
	if got := peersName("ifaced", 5000, 4096, -1); !strings.Contains(got, "4,096 peers held of 5,000 asked") {
		t.Errorf("fewer held: %q", got)
	}
	if got := peersName("ifaced", 5000, 5000, 2622); !strings.HasSuffix(got, "5,000 peers, 2,622 greeted") {
		t.Errorf("fewer greeted: %q", got)
	}
	if _, ok := memoryTarget(5000, 4096, 4096).met(40); ok {
		t.Error("a memory bar judged on 4,096 peers of 5,000")
	}
	if _, ok := memoryTarget(5000, 5000, 2622).met(40); ok {
		t.Error("a memory bar judged on 2,622 greeted peers of 5,000")
	}
	if met, ok := memoryTarget(5000, 5000, 5000).met(70); !ok || met {
		t.Errorf("70 KB at 5,000 peers: met %v, judged %v", met, ok)
	}
	if met, ok := memoryTarget(5000, 5000, 5000).met(60); !ok || !met {
		t.Errorf("60 KB at 5,000 peers: met %v, judged %v", met, ok)
	}
	if s := fdShortfall(5000, 4096); !strings.Contains(s, "below the 5256 that 5000 peers need") {
		t.Errorf("shortfall: %q", s)
	}
	if s := fdShortfall(5000, 20000); s != "" {
		t.Errorf("no shortfall expected: %q", s)
	}
}

// The card server answers If-None-Match with 304 only for the card it
// serves, and the mutual exchange refuses a client without a certificate
// and a card signed by another key.
func TestCardBaselinesRefuse(t *testing.T) {
	gs, err := greeters(3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cards, err := startCardServer(eligible(t, gs[0]), gs[0].id)
	if err != nil {
		t.Fatal(err)
	}
	defer cards.close()
	c := cards.client(true)
	etag, err := cards.fetchCard(ctx, c, cachedCardPath)
	if err != nil {
		t.Fatal(err)
	}
	if etag != entityTag(cards.card) {
		t.Errorf("ETag %s, want the hash of the signed card %s", etag, entityTag(cards.card))
	}
	if err := cards.revalidate(ctx, c, cachedCardPath, etag); err != nil {
		t.Errorf("revalidating the held card: %v", err)
	}
	if err := cards.revalidate(ctx, c, cachedCardPath, `"another"`); err == nil || !strings.Contains(err.Error(), "200") {
		t.Errorf("revalidating a card the server does not serve: %v, want 200 refused", err)
	}

	x, err := startMTLSExchange(eligible(t, gs[0]), gs[0].id, eligible(t, gs[1]), gs[1].id)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	if _, err := x.once(ctx); err != nil {
		t.Fatalf("the exchange: %v", err)
	}
	withCert := x.client
	x.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: withCert.Transport.(*http.Transport).TLSClientConfig.Clone()}}
	x.client.Transport.(*http.Transport).TLSClientConfig.Certificates = nil
	if _, err := x.once(ctx); err == nil {
		t.Error("an exchange without a client certificate succeeded")
	}
	x.client = withCert
	stranger, err := startMTLSExchange(eligible(t, gs[0]), gs[0].id, eligible(t, gs[2]), gs[2].id)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.close()
	x.card = stranger.card // signed by a key the server does not trust
	if _, err := x.once(ctx); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a card signed by another key: %v, want 400", err)
	}
}

// eligible is g's document as a view in which the viewer may use every
// capability, so that its card lists them all (a card lists only those).
func eligible(t *testing.T, g greeter) *negotiate.Document {
	t.Helper()
	doc, err := benchConfig().Document(g.id.DID())
	if err != nil {
		t.Fatal(err)
	}
	for i := range doc.Capabilities {
		yes := true
		doc.Capabilities[i].Eligible = &yes
	}
	return doc
}

func TestParseFlags(t *testing.T) {
	s, err := parseFlags([]string{"-quick", "-n", "40", "-rows", "1,3", "-json", "-rotate", "500"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.quick || s.warmN != 40 || s.coldN != 10 || len(s.rows) != 2 || s.rows[1] != 3 || !s.json || s.rotate != 500 {
		t.Errorf("parsed %+v", s)
	}
	for _, bad := range [][]string{{"-n", "-1"}, {"-rows", "7"}, {"-idle", "x"}, {"-rotate", "-2"}, {"extra"},
		{"-latency", "50"}, {"-latency", "1ms"}, {"-latency", "1500us"}, {"-latency", "3s"}, {"-loss", "60"}, {"-loss", "x"},
		{"-rows", "1", "-loss", "1"}, {"-quick", "-trace"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A child given IFACED_BENCH_CPUPROFILE and IFACED_BENCH_HEAPPROFILE
// writes a CPU profile of its life and a heap profile at each gc, as the
// commands of docs/benchmarks.md say: each a gzipped protocol buffer, as pprof reads.
func TestChildWritesProfiles(t *testing.T) {
	dir := t.TempDir()
	prefix := dir + "/child"
	t.Setenv(cpuProfileEnv, prefix)
	t.Setenv(heapProfileEnv, prefix)
	c, err := startChild(childSpec{Role: roleIfaced, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	pid := c.pid()
	if _, err := c.command("gc"); err != nil {
		t.Fatal(err)
	}
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{fmt.Sprintf("%s-%d.cpu", prefix, pid), fmt.Sprintf("%s-%d-1.heap", prefix, pid)} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatalf("the child wrote no profile: %v", err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s is not gzipped as a pprof profile is: %v", name, err)
		}
		n, err := io.Copy(io.Discard, zr)
		f.Close()
		if err != nil || n == 0 {
			t.Fatalf("%s: %d bytes of profile, %v", name, n, err)
		}
	}
}
