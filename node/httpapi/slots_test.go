package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/invoke"
)

// clientFrom is an HTTP client whose connections come from the loopback
// address ip (127.0.0.0/8 is all loopback on Linux): another client, to
// the binding, than 127.0.0.1.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxConnsPerHost: 0, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

func postFrom(t *testing.T, c *http.Client, url, body string) response {
	t.Helper()
	res, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return response{}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}
}

// TestOneClientCannotTakeEveryInvocationSlot: one client sends 40
// invocations the agent holds; it gets perClientInvocations of the slots
// and busy (with Retry-After and what would work) for the rest, while
// another client's ping and its own invocation are served, and so is the
// first client's ping. (Before the per-client caps, the first client took
// all 32 slots and everyone got 503 busy, even for ping.)
func TestOneClientCannotTakeEveryInvocationSlot(t *testing.T) {
	hold := make(chan struct{})
	var inFlight atomic.Int32
	arrived := make(chan struct{}, 100)
	cfg := testConfig()
	cfg.Agent.Timeout = config.Duration{Duration: 2 * time.Minute}
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		inFlight.Add(1)
		arrived <- struct{}{}
		<-hold
		return events.InvocationAnswer{Result: map[string]any{"summary": "sunny"}}
	})
	d := start(t, cfg)
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	defer release()

	a, b := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")
	const flood = maxInvocations + 8
	forecast := `{"action": "weather.forecast", "input": {"city": "Lyon"}}`
	answers := make(chan response, flood)
	var wg sync.WaitGroup
	for range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers <- postFrom(t, a, d.url+"/invoke", forecast)
		}()
	}
	// Every request of the flood is either with the agent or answered.
	var refused []response
	deadline := time.After(time.Minute)
	for int(inFlight.Load())+len(refused) < flood {
		select {
		case r := <-answers:
			refused = append(refused, r)
		case <-arrived:
		case <-deadline:
			t.Fatalf("after a minute: %d with the agent, %d answered, of %d", inFlight.Load(), len(refused), flood)
		}
	}
	// Another client: its ping, and its own invocation, are not busy.
	if r := postFrom(t, b, d.url+"/invoke", `{"action": "ping"}`); r.status != http.StatusOK || !strings.Contains(string(r.body), "pong") {
		t.Fatalf("another client's ping during the flood: %d %s", r.status, r.body)
	}
	if got := inFlight.Load(); got != perClientInvocations {
		t.Errorf("one client has %d invocations with the agent; at most %d", got, perClientInvocations)
	}
	for _, r := range refused {
		if r.status != http.StatusServiceUnavailable || r.errorCode(t) != "busy" || r.header.Get("Retry-After") == "" ||
			!strings.Contains(string(r.body), "the most one client may have at once") || !strings.Contains(string(r.body), "never refused") {
			t.Fatalf("a refusal of the flood: %d %v %s", r.status, r.header, r.body)
		}
	}

	theirs := make(chan response, 1)
	go func() { theirs <- postFrom(t, b, d.url+"/invoke", forecast) }()
	select {
	case <-arrived:
	case r := <-theirs:
		t.Fatalf("another client's invocation during the flood: %d %s", r.status, r.body)
	case <-time.After(time.Minute):
		t.Fatal("another client's invocation reached neither the agent nor an answer in a minute")
	}
	// The flooding client's own ping is served too: it takes no slot.
	if r := postFrom(t, a, d.url+"/invoke", `{"action": "ping"}`); r.status != http.StatusOK {
		t.Fatalf("the flooding client's ping: %d %s", r.status, r.body)
	}
	// Over A2A as well: a ping skill is answered, another message of the
	// flooding client is busy.
	a2aPing := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m1","kind":"message","parts":[{"kind":"data","data":{"skill":"ping"}}]}}}`
	if r := postFrom(t, b, d.url+"/a2a", a2aPing); r.status != http.StatusOK || !strings.Contains(string(r.body), "pong") {
		t.Fatalf("another client's A2A ping: %d %s", r.status, r.body)
	}
	a2aText := `{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"role":"user","messageId":"m2","kind":"message","parts":[{"kind":"text","text":"hello"}]}}}`
	var rpc struct {
		Error struct {
			Data struct {
				Code              string `json:"code"`
				RetryAfterSeconds int    `json:"retry_after_seconds"`
			} `json:"data"`
		} `json:"error"`
	}
	if r := postFrom(t, a, d.url+"/a2a", a2aText); json.Unmarshal(r.body, &rpc) != nil || rpc.Error.Data.Code != "busy" || rpc.Error.Data.RetryAfterSeconds < 1 {
		t.Fatalf("the flooding client's A2A message: %d %s", r.status, r.body)
	}

	release()
	wg.Wait()
	close(answers)
	for r := range answers {
		if r.status != http.StatusOK {
			t.Errorf("an invocation the agent held ended %d %s", r.status, r.body)
		}
	}
	if r := <-theirs; r.status != http.StatusOK {
		t.Errorf("the other client's invocation ended %d %s", r.status, r.body)
	}
}

// TestSlotsKeepAReserve: clients at their cap leave reservedInvocations
// slots that only a client with none running can take; a signed request
// counts against its address and its signer.
func TestSlotsKeepAReserve(t *testing.T) {
	sl := newSlots()
	key := func(i int) slotKey {
		return slotKey{id: fmt.Sprintf("addr 192.0.2.%d/32", i), name: fmt.Sprintf("192.0.2.%d", i)}
	}
	take := func(keys ...slotKey) error {
		_, err := sl.take(keys)
		return err
	}
	full := (maxInvocations - reservedInvocations) / perClientInvocations
	for c := range full {
		for i := range perClientInvocations {
			if err := take(key(c)); err != nil {
				t.Fatalf("client %d, slot %d: %v", c, i, err)
			}
		}
		if err := take(key(c)); err == nil || !strings.Contains(err.Error(), "the most one client may have") {
			t.Fatalf("client %d past its cap: %v", c, err)
		}
	}
	// The rest is the reserve: a client with one running gets no second.
	if err := take(key(100)); err != nil {
		t.Fatalf("a new client's first slot: %v", err)
	}
	if err := take(key(100)); err == nil || !strings.Contains(err.Error(), "kept for clients with none running") {
		t.Fatalf("a second slot out of the reserve: %v", err)
	}
	for i := 1; i < reservedInvocations; i++ {
		if err := take(key(100 + i)); err != nil {
			t.Fatalf("new client %d in the reserve: %v", i, err)
		}
	}
	if err := take(key(200)); err == nil || !strings.Contains(err.Error(), "all 32 invocation slots are taken") {
		t.Fatalf("with every slot taken: %v", err)
	}

	// Signed: fresh signers from one address are one client; one signer
	// from many addresses is one client too.
	sl = newSlots()
	addr := key(1)
	for i := range perClientInvocations {
		if err := take(addr, slotKey{id: fmt.Sprintf("signer did:key:fresh%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := take(addr, slotKey{id: "signer did:key:another", name: "the signer"}); err == nil {
		t.Error("fresh signers from one address took more than its cap")
	}
	signer := slotKey{id: "signer did:key:one", name: "the signer"}
	for i := range perClientInvocations {
		if err := take(key(10+i), signer); err != nil {
			t.Fatal(err)
		}
	}
	if err := take(key(50), signer); err == nil || !strings.Contains(err.Error(), "the signer has") {
		t.Errorf("one signer from many addresses past its cap: %v", err)
	}

	// Released slots come back, once.
	sl = newSlots()
	rel, err := sl.take([]slotKey{addr})
	if err != nil {
		t.Fatal(err)
	}
	rel()
	rel()
	if sl.used != 0 || len(sl.held) != 0 {
		t.Errorf("after release: %d used, %d clients held", sl.used, len(sl.held))
	}
}

// TestAnsweredByDaemonTakesNoSlot: every capability the daemon answers
// itself is answered with no local agent at all (so it never waits on
// one), and with every slot taken.
func TestAnsweredByDaemonTakesNoSlot(t *testing.T) {
	cfg := testConfig()
	names := []string{"ping", "capabilities.get", "gossip.exchange", "message.receive", "message.reply", "identity.verify"}
	cfg.Capabilities = nil
	for _, n := range names {
		cfg.Capabilities = append(cfg.Capabilities, map[string]any{"name": n, "description": "standard " + n})
	}
	cfg.Capabilities = append(cfg.Capabilities, map[string]any{"name": "weather.forecast", "description": "agent's"})
	d := start(t, cfg)
	fill := d.b.slots
	for fill.used < maxInvocations {
		if _, err := fill.take([]slotKey{{id: fmt.Sprintf("filler %d", fill.used)}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if !invoke.AnsweredByDaemon(n) {
			t.Errorf("node.AnsweredByDaemon(%q) is false", n)
		}
		r := do(t, "POST", d.url+"/invoke", "application/json", []byte(`{"action": "`+n+`"}`))
		if r.status != http.StatusOK {
			t.Errorf("%s with no agent and every slot taken: %d %s", n, r.status, r.body)
		}
	}
	if invoke.AnsweredByDaemon("weather.forecast") {
		t.Error("weather.forecast counts as answered by the daemon")
	}
	if r := do(t, "POST", d.url+"/invoke", "application/json", []byte(`{"action": "weather.forecast", "input": {}}`)); r.status != http.StatusServiceUnavailable || r.errorCode(t) != "busy" {
		t.Errorf("an agent's capability with every slot taken: %d %s", r.status, r.body)
	}
}
