package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/multiformats/go-multiaddr"
)

// TestLatencySection runs section 6 once at its smallest (one timed
// iteration at 10 ms RTT) and checks the shape of its JSON: every row
// measured under its key, with its floor, each ifaced row and baseline
// at least its floor's round trips of the RTT the proxies were given (a
// figure that had bypassed them would be a loopback figure, far below),
// and each row's round trips as its ratio to the RTT measured through a
// proxy. The targets of issue 26 are judged at 50 ms: here they are not
// measured.
func TestLatencySection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const rtt = 10 * time.Millisecond
	s := settings{rows: []int{6}, latency: []latencyBlock{{rtt: rtt}}, latencyN: 1, dir: t.TempDir(), json: true}
	var out bytes.Buffer
	if err := run(ctx, s, &out); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows    []map[string]any `json:"rows"`
		Ratios  []map[string]any `json:"ratios"`
		Targets []map[string]any `json:"targets"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, out.String())
	}
	rows := map[string]map[string]any{}
	for _, r := range rep.Rows {
		rows[r["key"].(string)] = r
	}
	floors := map[string]float64{
		"rtt": 0, "rtt_udp": 0,
		"cold.new_peer.tcp": 3, "cold.new_peer.tcp.connect": 0, "cold.new_peer.quic": 2, "cold.new_peer.quic.connect": 0,
		"cold.known_peer.tcp": 3, "cold.known_peer.tcp.connect": 0, "cold.known_peer.quic": 2, "cold.known_peer.quic.connect": 0,
		"warm.greeting": 1, "dht.find": 0, "cold.mtls_exchange": 3, "cold.https": 3, "a2a.both_cards": 6,
	}
	if len(rows) != len(floors) {
		t.Errorf("%d rows, want %d: %v", len(rows), len(floors), rep.Rows)
	}
	ratios := map[string]float64{}
	for _, q := range rep.Ratios {
		ratios[q["key"].(string)] = num(q["value"])
	}
	for name, floor := range floors {
		key := "latency.10ms." + name
		r := rows[key]
		if r == nil {
			t.Errorf("no row %s", key)
			continue
		}
		if e, ok := r["error"]; ok {
			t.Errorf("%s: %v", key, e)
			continue
		}
		if sec := num(r["section"]); sec != 6 {
			t.Errorf("%s: section %v", key, r["section"])
		}
		if got := num(r["floor_rtt"]); got != floor {
			t.Errorf("%s: floor_rtt %v, want %v", key, got, floor)
		}
		// Everything crossed a proxy at least once each way.
		least := max(floor, 1) * float64(rtt/time.Microsecond)
		if v := num(r["value"]); v < least {
			t.Errorf("%s: %v µs, less than the %v µs its round trips through the proxy take", key, v, least)
		}
		if name == "rtt" {
			continue
		}
		q, ok := ratios[key+"/latency.10ms.rtt"]
		if !ok {
			t.Errorf("no round trips for %s", key)
		} else if want := num(r["value"]) / num(rows["latency.10ms.rtt"]["value"]); math.Abs(q-want) > 0.002*math.Max(1, want) {
			t.Errorf("%s: %v round trips, its figures give %v", key, q, want)
		}
	}
	for _, c := range []string{"cold.new_peer.tcp", "cold.new_peer.quic", "cold.known_peer.tcp", "cold.known_peer.quic"} {
		for _, den := range []string{"cold.mtls_exchange", "a2a.both_cards"} {
			if _, ok := ratios["latency.10ms."+c+"/latency.10ms."+den]; !ok {
				t.Errorf("no ratio of %s to %s", c, den)
			}
		}
	}
	keys, _ := roundTripTargets()
	for _, j := range rep.Targets {
		if slices.Contains(keys, j["key"].(string)) && j["verdict"] != "not measured" {
			t.Errorf("target %v judged on a run at 10 ms", j)
		}
	}
}

// -latency alone runs section 6 only, at each RTT times each -loss;
// with -rows it is added to them; a full run has it at 50 ms and -quick
// leaves it out.
func TestParseLatencyFlags(t *testing.T) {
	blocks := func(s settings) (out []string) {
		for _, b := range s.latency {
			out = append(out, b.prefix())
		}
		return out
	}
	for _, c := range []struct {
		args   []string
		rows   []int
		blocks []string
		skip   bool
	}{
		{nil, []int{1, 2, 3, 4, 5, 6}, []string{"latency.50ms"}, false},
		{[]string{"-quick"}, []int{1, 2, 3, 4, 5, 6}, []string{"latency.50ms"}, true},
		{[]string{"-latency", "50ms"}, []int{6}, []string{"latency.50ms"}, false},
		{[]string{"-quick", "-latency", "20ms,50ms,100ms"}, []int{6}, []string{"latency.20ms", "latency.50ms", "latency.100ms"}, false},
		{[]string{"-latency", "50ms", "-loss", "0,1,0.5"}, []int{6}, []string{"latency.50ms", "latency.50ms.loss1", "latency.50ms.loss0_5"}, false},
		{[]string{"-rows", "1,2", "-latency", "100ms", "-trace"}, []int{1, 2, 6}, []string{"latency.100ms"}, false},
		{[]string{"-rows", "6", "-loss", "1"}, []int{6}, []string{"latency.50ms.loss1"}, false},
	} {
		s, err := parseFlags(c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !slices.Equal(s.rows, c.rows) || !slices.Equal(blocks(s), c.blocks) || s.skipLatency != c.skip {
			t.Errorf("%q: rows %v, blocks %v, skipped %v; want %v, %v, %v", c.args, s.rows, blocks(s), s.skipLatency, c.rows, c.blocks, c.skip)
		}
	}
	if s, _ := parseFlags([]string{"-latency", "50ms"}); s.latencyN != 15 {
		t.Errorf("round-trip iterations %d, want 15 (a twentieth of 300)", s.latencyN)
	}
}

// A latency section's rows show their round trips (the ratio to the
// RTT) and floor, and the targets of issue 26 are judged on them.
func TestRoundTripRows(t *testing.T) {
	r := &report{machine: describeMachine(t.TempDir())}
	k := func(s string) string { return targetBlock.prefix() + "." + s }
	ms := func(d float64) samples { return samples{time.Duration(d * float64(time.Millisecond))} }
	r.add(section{title: "6. Round trips", baseline: k("rtt"), ratioUnit: "RTT", rows: []row{
		latencyRow(k("rtt"), "rtt", ms(50), ""),
		withFloor(latencyRow(k("warm.greeting"), "warm", ms(53), ""), 1),
		withFloor(latencyRow(k("cold.new_peer.quic"), "quic", ms(175), ""), 2),
		withFloor(latencyRow(k("cold.mtls_exchange"), "mtls", ms(155), ""), 3),
	}, ratios: []ratioSpec{{k("cold.new_peer.quic"), k("cold.mtls_exchange")}}})
	var out strings.Builder
	r.print(&out)
	text := out.String()
	for _, want := range []string{
		"1.06 RTT (target ≤ 1.2 RTT: met)",
		"3.50 RTT (target ≤ 2.5 RTT: NOT MET)",
		"floor 2 RTT",
		k("cold.new_peer.quic") + " ÷ " + k("cold.mtls_exchange") + " = 1.13×   target < 1×: NOT MET",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
	judged := false
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, k("cold.new_peer.quic")+"/"+k("rtt")) {
			judged = true
			if !strings.HasSuffix(strings.TrimSpace(line), "3.50 RTT  ≤ 2.5 RTT  NOT MET") {
				t.Errorf("the target's line: %q", line)
			}
		}
	}
	if !judged {
		t.Errorf("no target line for %s:\n%s", k("cold.new_peer.quic"), text)
	}
	j := r.toJSON()
	for _, row := range j.Rows {
		if row.Key == k("cold.new_peer.quic") && row.FloorRTT != 2 {
			t.Errorf("floor_rtt %v in JSON, want 2", row.FloorRTT)
		}
	}
}

// A connection that does not run through the proxy fails a row's check;
// one through it passes.
func TestViaProxyRefusesDirectConnections(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	alice, err := startDaemon(root, benchConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer alice.close()
	bob, err := startDaemon(root, benchConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer bob.close()
	px, err := proxyForDaemon(alice.Node, tcpTransport, pathModel{rtt: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()
	direct, err := addrFor(alice.Node, tcpTransport)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := connectOver(ctx, bob.Node, direct, tcpTransport)
	if err != nil {
		t.Fatal(err)
	}
	if err := viaProxy(bob.Node, pid, px); err == nil || !strings.Contains(err.Error(), "not through its proxy") {
		t.Errorf("a direct connection passed the check: %v", err)
	}
	if err := reconnectVia(ctx, bob, pid, px.multiaddr().String()+"/p2p/"+pid.String(), tcpTransport); err != nil {
		t.Fatal(err)
	}
	if err := passed(bob.Node, pid, px, 0); err != nil {
		t.Errorf("a connection through the proxy: %v", err)
	}
}

// A bare DHT node keeps only a peer's proxy address, whatever address it
// is handed, and dials nothing but proxies.
func TestBareDHTNodeUsesProxiesOnly(t *testing.T) {
	book := newProxyBook()
	a, da, err := newBareDHTNode(book)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer da.Close()
	b, db, err := newBareDHTNode(book)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	defer db.Close()
	direct := b.Network().ListenAddresses()[0]
	if book.InterceptAddrDial(b.ID(), direct) {
		t.Error("the gater lets a node dial a direct address")
	}
	px, err := proxyForAddr(direct, pathModel{rtt: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer px.close()
	book.add(b.ID(), px)
	if got := b.Addrs(); len(got) != 1 || !got[0].Equal(px.multiaddr()) {
		t.Errorf("b announces %v, want only its proxy %s", got, px.multiaddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: []multiaddr.Multiaddr{direct}}); err != nil {
		t.Fatal(err)
	}
	// What identify and the DHT hand the peerstore, kept for long.
	a.Peerstore().AddAddrs(b.ID(), []multiaddr.Multiaddr{direct}, peerstore.PermanentAddrTTL)
	a.Peerstore().SetAddrs(b.ID(), []multiaddr.Multiaddr{direct}, peerstore.ConnectedAddrTTL)
	if got := a.Peerstore().Addrs(b.ID()); len(got) != 1 || !got[0].Equal(px.multiaddr()) {
		t.Errorf("a holds %v for b, want only its proxy %s", got, px.multiaddr())
	}
	for _, c := range a.Network().ConnsToPeer(b.ID()) {
		if !c.RemoteMultiaddr().Equal(px.multiaddr()) {
			t.Errorf("a's connection to b runs over %s, not the proxy", c.RemoteMultiaddr())
		}
	}
}
