package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/interop/netlab"
	"github.com/ifaced/ifaced/node/wire"
)

// The suite runs only when asked (IFACED_HOSTILE=1, as .ci/run does): it
// builds the daemon and runs it as a separate process, under load, for a
// minute or two. IFACED_HOSTILE_LONG=1 runs the long forms.
func TestMain(m *testing.M) {
	code := m.Run()
	netlab.RemoveBinary()
	os.Exit(code)
}

func enabled(t *testing.T) {
	if os.Getenv("IFACED_HOSTILE") == "" && os.Getenv("IFACED_HOSTILE_LONG") == "" {
		t.Skip("the hostile-load suite runs real daemon processes under load: set IFACED_HOSTILE=1 (IFACED_HOSTILE_LONG=1 for the long forms)")
	}
}

// scale is short in CI, long when IFACED_HOSTILE_LONG is set.
func scale(short, long int) int {
	if os.Getenv("IFACED_HOSTILE_LONG") != "" {
		return long
	}
	return short
}

// The bounds every test holds the daemon to (docs/bounds.md).
const (
	// memoryFactor: peak resident memory stays within this multiple of
	// limits.max_memory_mb, whatever strangers send.
	memoryFactor = 2
	// establishedP95: the established peer's greetings, p95, while the
	// attack runs. A liveness bound, generous for two shared cores, not a
	// speed bar.
	establishedP95 = 5 * time.Second
)

// holds asserts the bounds common to every attack: the daemon is alive,
// its peak RSS within memoryFactor × limits.max_memory_mb, and the
// established peer greeted throughout.
func holds(t *testing.T, target *Target, e *Established, before Sample) Sample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	after := target.WaitQuiet(ctx, t)
	n, p95, failures := e.Report(t, target)
	t.Logf("before: %s", before)
	t.Logf("after:  %s (CPU +%s, disk +%s)", after, (after.CPU - before.CPU).Round(time.Millisecond), MiB(after.Disk-before.Disk))
	t.Logf("established peer: %d greetings, p95 %s, %d failed", n, p95.Round(time.Millisecond), len(failures))
	if bound := int64(memoryFactor*target.MemoryMB) << 20; after.PeakRSS > bound {
		t.Errorf("peak RSS %s, over the bound %s (%d × limits.max_memory_mb)", MiB(after.PeakRSS), MiB(bound), memoryFactor)
	}
	if n == 0 || p95 > establishedP95 {
		t.Errorf("the established peer greeted %d times, p95 %s: want some, p95 within %s", n, p95, establishedP95)
	}
	if len(failures) > 0 {
		t.Errorf("the established peer's greetings failed %d times; first: %s", len(failures), failures[0])
	}
	return after
}

// bomb is a part content of tiny nested containers, [[{},{},…],…],
// whose CBOR encoding is about size bytes: each {} is one byte on the
// wire and a whole map once decoded.
func bomb(size int) any {
	const row = 16000 // under every per-container limit a decoder might have
	var rows []any
	for n := row; n <= size; n += row {
		r := make([]any, row)
		for i := range r {
			r[i] = map[string]any{}
		}
		rows = append(rows, r)
	}
	return rows
}

// parallel runs f(i) for i in [0,n) on workers goroutines.
func parallel(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// dense is a part content just within the message bounds (16,384
// containers, 131,072 elements): 16,000 maps of 7 members each, the most
// decoding a message may cost.
func dense() any {
	rows := make([]any, 16)
	for r := range rows {
		row := make([]any, 1000)
		for i := range row {
			row[i] = map[string]any{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7}
		}
		rows[r] = row
	}
	return rows
}

// Several peers, many streams, each sending 1 MiB frames of nested empty
// containers, and frames just within the bounds, all signed by the
// attacker's key with a signature that does not verify.
func TestContainerBombOverStreams(t *testing.T) {
	enabled(t)
	target := Start(t, Options{})
	e := Establish(t, target)
	before := target.Measure(t)
	attackers := make([]*Peer, scale(4, 16))
	frames := make([][]byte, len(attackers))
	for i := range attackers {
		attackers[i] = NewPeer(t, target)
		m := attackers[i].Message(target, gossip.PhaseGreeting, "")
		content := bomb(gossip.MaxMessageSize - 4096)
		if i%2 == 1 {
			content = dense()
		}
		m.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: "junk", Content: content}}
		if err := m.Sign(attackers[i].ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		// The attacker's own key, so the signer is established and the
		// signature is checked over the whole message — and fails: one of
		// its characters changed (not the last, whose low bits are unused).
		sig := &m.Security.Signatures[0]
		sig.Sig = sig.Sig[:10] + map[bool]string{true: "A", false: "B"}[sig.Sig[10] != 'A'] + sig.Sig[11:]
		frames[i] = Frame(t, m)
	}
	t.Logf("frames: %d bytes (bomb), %d bytes (dense, within the bounds)", len(frames[0]), len(frames[1]))
	streams, rounds := scale(16, 48), scale(3, 10)
	codes := map[string]int{}
	var mu sync.Mutex
	parallel(streams*rounds, streams, func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		a := i % len(attackers)
		m, err := attackers[a].Exchange(ctx, target, wire.Conversation, frames[a])
		mu.Lock()
		defer mu.Unlock()
		codes[answerCode(m, err)]++
	})
	t.Logf("%d frames from %d peers on %d streams at once: %v", streams*rounds, len(attackers), streams, codes)
	if codes["greeting"] > 0 {
		t.Errorf("%d frames with a wrong signature were admitted", codes["greeting"])
	}
	holds(t, target, e, before)
}

// Many requests at once to the HTTPS inbox, each 1 MB of nested JSON.
func TestContainerBombThroughTheInbox(t *testing.T) {
	enabled(t)
	target := Start(t, Options{HTTP: true})
	e := Establish(t, target)
	before := target.Measure(t)
	sender, _ := identity.Generate(nil)
	p := &Peer{ID: sender}
	m := p.Message(target, gossip.PhaseGreeting, "")
	m.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: "junk", Content: bomb(gossip.MaxMessageSize / 4)}}
	if err := m.Sign(sender, time.Now()); err != nil {
		t.Fatal(err)
	}
	body, err := gossip.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > gossip.MaxMessageSize {
		body = body[:0]
	}
	t.Logf("one body: %d bytes", len(body))
	codes := map[int]int{}
	var mu sync.Mutex
	client := &http.Client{Timeout: 60 * time.Second}
	requests, workers := scale(48, 400), scale(16, 48)
	parallel(requests, workers, func(int) {
		resp, err := client.Post("http://"+target.HTTP+"/.well-known/iface/inbox", "application/json", bytes.NewReader(body))
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			codes[0]++
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	})
	t.Logf("%d requests, %d at once: status codes %v", requests, workers, codes)
	holds(t, target, e, before)
}

// Greetings of 900 KiB signed by a key that is not the sender's: each is
// refused; the record of refusals must not grow with their size.
func TestWrongKeyFlood(t *testing.T) {
	enabled(t)
	target := Start(t, Options{})
	e := Establish(t, target)
	before := target.Measure(t)
	attacker := NewPeer(t, target)
	wrong, _ := identity.Generate(nil)
	n := scale(40, 400)
	parallel(n, 8, func(int) {
		m := attacker.Greeting(t, target, nil, nil)
		m.Body.Text = strings.Repeat("w", 900<<10)
		if err := m.Sign(wrong, time.Now()); err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		attacker.Exchange(ctx, target, wire.Conversation, Frame(t, m))
	})
	after := holds(t, target, e, before)
	t.Logf("%d wrong-key messages of 900 KiB: disk +%s", n, MiB(after.Disk-before.Disk))
	if grew, bound := after.Disk-before.Disk, int64(wrongKeyDiskBound); grew > bound {
		t.Errorf("disk grew %s for %d refused messages, over the bound %s", MiB(grew), n, MiB(bound))
	}
	// Stopped, the daemon has accounted for every refusal: written as a
	// summary, or counted as left out (the count said at shutdown), and no
	// summary's excerpt is over 2 KiB as written.
	target.Stop()
	written, leftOut, longest := refusalRecords(t, target)
	t.Logf("record of refusals: %d summaries, %d left out (counted), longest excerpt %d bytes as written", written, leftOut, longest)
	if written+int(leftOut) < n {
		t.Errorf("%d refusals written and %d counted as left out, for %d refused messages: the count was lost at shutdown", written, leftOut, n)
	}
	if longest > gossip.RefusalExcerpt {
		t.Errorf("an excerpt takes %d bytes in the record of refusals, over %d", longest, gossip.RefusalExcerpt)
	}
}

// refusalRecords reads the stopped target's record of refusals: the
// summaries written, the refusals counted as left out, and the longest
// excerpt as written (a JSON string, quotes and escapes included).
func refusalRecords(t *testing.T, target *Target) (written int, leftOut int64, longest int) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(target.Home, "audit", "*", "_refused.jsonl"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var members map[string]json.RawMessage
			if json.Unmarshal([]byte(line), &members) != nil {
				continue
			}
			var r gossip.Refusal
			json.Unmarshal([]byte(line), &r)
			leftOut += r.LeftOut
			if r.Transport != "-" {
				written++
			}
			longest = max(longest, len(members["excerpt"]))
		}
	}
	return written, leftOut, longest
}

// wrongKeyDiskBound: what a flood of refused messages may add to the
// data directory: bounded summaries, rate-limited per connection.
const wrongKeyDiskBound = 4 << 20

// Fresh keys, each greeting once with a large view, as fast as the daemon
// takes them (each peer connected and its greeting signed first, then the
// greetings let go together, inFlight at a time: all 30 at once in the
// short form, 32 at a time in the long form, which keeps the daemon
// decoding, verifying and recording all along): the daemon's peak memory
// stays within its bound, strangers' views are not persisted, and their
// files take at most their share of the audit log (a quarter of
// audit.max_mb) — the oldest making room for new strangers, who are never
// shut out — while the peers the owner knows go on. A last stranger, after
// the flood, is greeted.
func TestFreshKeysWithLargeViews(t *testing.T) {
	enabled(t)
	const auditMB = 64
	target := Start(t, Options{Extra: fmt.Sprintf("[audit]\nmax_mb = %d\n", auditMB)})
	e := Establish(t, target)
	before := target.Measure(t)
	n, inFlight := scale(30, 300), scale(30, 32)
	peers := make([]*Peer, n)
	frames := make([][]byte, n)
	strangers := map[string]bool{}
	var mu sync.Mutex
	parallel(n, 4, func(i int) {
		p := NewPeer(t, target)
		f := Frame(t, p.Greeting(t, target, p.View(t, 230, 900<<10), p.ID))
		mu.Lock()
		defer mu.Unlock()
		peers[i], frames[i] = p, f
		strangers[p.ID.PeerID().String()] = true
	})
	codes := map[string]int{}
	go_ := make(chan struct{})
	slots := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-go_
			slots <- struct{}{}
			defer func() { <-slots }()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			m, err := peers[i].Exchange(ctx, target, wire.Conversation, frames[i])
			mu.Lock()
			defer mu.Unlock()
			codes[answerCode(m, err)]++
		}()
	}
	close(go_)
	wg.Wait()
	for _, p := range peers {
		p.Close()
	}
	after := holds(t, target, e, before)
	grew := after.Disk - before.Disk
	t.Logf("%d fresh keys with 900 KiB views, %d at a time: %v; disk +%s", n, inFlight, codes, MiB(grew))
	// Their files within the share, plus the last entries written as it
	// filled, plus the bounded refusal summaries and records.
	if bound := int64(auditMB<<20)/4 + 8<<20; grew > bound {
		t.Errorf("disk grew %s for %d strangers' greetings, over the bound %s (a quarter of audit.max_mb, and 8 MiB)", MiB(grew), n, MiB(bound))
	}
	if codes["unavailable"] > 0 {
		t.Errorf("%d strangers were refused as unavailable: the strangers' share must make room, not shut them out", codes["unavailable"])
	}
	// A last stranger, once the flood is over, is greeted.
	last := NewPeer(t, target)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m, err := last.Exchange(ctx, target, wire.Conversation, Frame(t, last.Greeting(t, target, last.View(t, 230, 900<<10), last.ID))); answerCode(m, err) != "greeting" {
		t.Errorf("a new stranger after the flood: %s, want a greeting", answerCode(m, err))
	}
	peerRecords, _ := target.Records(t)
	kept := 0
	for _, p := range peerRecords {
		if strangers[p] {
			kept++
		}
	}
	t.Logf("the store holds %d peer records, %d of them the strangers'", len(peerRecords), kept)
	if kept > 0 {
		t.Errorf("%d of %d strangers' views were persisted in the peer cache", kept, n)
	}
}

// answerCode names an exchange's outcome: "greeting" (answered), the
// error code, or "no answer".
func answerCode(m *gossip.Message, err error) string {
	switch {
	case err != nil:
		return "no answer"
	case m.Headers.Phase != gossip.PhaseError:
		return string(m.Headers.Phase)
	}
	var body wire.ErrorBody
	if p, ok := m.Body.Part("error"); ok {
		if raw, err := json.Marshal(p.Content); err == nil {
			json.Unmarshal(raw, &body)
		}
	}
	return string(body.Code)
}

// Fresh keys greeting with introduction proofs the target never issued.
func TestBogusIntroductionProofs(t *testing.T) {
	enabled(t)
	target := Start(t, Options{})
	e := Establish(t, target)
	before := target.Measure(t)
	n := scale(50, 500)
	var mu sync.Mutex
	attackers := map[string]bool{}
	parallel(n, 4, func(int) {
		p := NewPeer(t, target)
		mu.Lock()
		attackers[p.ID.PeerID().String()] = true
		mu.Unlock()
		defer p.Close()
		tok, err := identity.MintIntroduction(target.ID.DID(), "bogus", time.Hour, time.Now(), nil)
		if err != nil {
			t.Error(err)
			return
		}
		g := p.Greeting(t, target, nil, nil)
		if err := g.Sign(p.ID, time.Now()); err != nil {
			t.Error(err)
			return
		}
		if err := g.AddIntroProof(tok, time.Now()); err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The proof does not verify, so the greeting is answered as any
		// stranger's: at level 1. What matters is what it leaves behind.
		if _, err := p.Exchange(ctx, target, wire.Conversation, Frame(t, g)); err != nil {
			t.Errorf("a greeting with a bogus introduction proof: %v", err)
		}
	})
	after := holds(t, target, e, before)
	_, trusts := target.Records(t)
	created := 0
	for _, p := range trusts {
		if attackers[p] {
			created++
		}
	}
	t.Logf("%d bogus introduction proofs: disk +%s; %d trust records, %d of them the attackers' (the others: the pinned established peers)",
		n, MiB(after.Disk-before.Disk), len(trusts), created)
	if created > 0 {
		t.Errorf("%d trust records were created by %d bogus introduction proofs, want none", created, n)
	}
}

// Many hosts on loopback sending HTTP requests from distinct addresses:
// a new client must still be served.
func TestHTTPManySourceAddresses(t *testing.T) {
	enabled(t)
	target := Start(t, Options{HTTP: true})
	n := scale(12000, 60000)
	statuses := map[int]int{}
	var mu sync.Mutex
	parallel(n, 32, func(i int) {
		src := net.IPv4(127, byte(1+i>>16), byte(i>>8), byte(i))
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}).DialContext,
			DisableKeepAlives: true,
		}}
		resp, err := client.Get("http://" + target.HTTP + "/capabilities")
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			statuses[0]++
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses[resp.StatusCode]++
	})
	t.Logf("%d clients from distinct addresses: status codes %v", n, statuses)
	// A new client, from an address none of them used, honouring
	// Retry-After as a well-behaved client does, for at most 15 s.
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 200, 0, 1)}}).DialContext}}
	var waited time.Duration
	for {
		resp, err := fresh.Get("http://" + target.HTTP + "/capabilities")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Logf("a new client was served after waiting %s", waited)
			break
		}
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || waited+time.Duration(retry)*time.Second > 15*time.Second {
			t.Fatalf("a new client, after %d others came and went: %d, Retry-After %q (waited %s already)",
				n, resp.StatusCode, resp.Header.Get("Retry-After"), waited)
		}
		time.Sleep(time.Duration(max(retry, 1)) * time.Second) // the server asked for this wait
		waited += time.Duration(max(retry, 1)) * time.Second
	}
	t.Logf("after: %s", target.Measure(t))
}

// A web page that rebinds its own name to 127.0.0.1 reaches the loopback
// binding with its own Host header: the binding must not act on it.
func TestDNSRebindingHost(t *testing.T) {
	enabled(t)
	target := Start(t, Options{HTTP: true})
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/capabilities", ""},
		{"POST", "/invoke", `{"action":"ping","input":{}}`},
		{"POST", "/a2a", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`},
	} {
		req, _ := http.NewRequest(c.method, "http://"+target.HTTP+c.path, strings.NewReader(c.body))
		req.Host = "attacker.example:" + strconv.Itoa(target.httpPort(t))
		req.Header.Set("Origin", "http://attacker.example")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%s %s with Host %s: %d %s", c.method, c.path, req.Host, resp.StatusCode, bytes.TrimSpace(b))
		if resp.StatusCode != http.StatusMisdirectedRequest && resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s with Host %s: status %d, want 421 or 403", c.method, c.path, req.Host, resp.StatusCode)
		}
	}
	// The names the binding answers to still work.
	resp, err := http.Get("http://" + target.HTTP + "/capabilities")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /capabilities with Host %s: %d, want 200", target.HTTP, resp.StatusCode)
	}
}

func (d *Target) httpPort(t *testing.T) int {
	_, p, err := net.SplitHostPort(d.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}
