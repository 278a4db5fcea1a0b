package httpapi

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/events"
)

// withHost sends a request to d naming host in its Host header (what a
// DNS-rebinding page's browser sends) and origin, if any, in Origin.
func withHost(t *testing.T, d *daemon, method, path, host, origin string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, d.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// TestDNSRebindingHostRefused: a loopback binding answers only requests
// naming it; curl -H 'Host: attacker.example' gets 421 and a body saying
// which names it answers to, and nothing runs.
func TestDNSRebindingHostRefused(t *testing.T) {
	cfg := testConfig()
	var invoked atomic.Int32
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		invoked.Add(1)
		return events.InvocationAnswer{Result: map[string]any{"summary": "sun"}}
	})
	cfg.HTTP.AllowedHosts = []string{"Agent.Example.ORG."}
	d := start(t, cfg)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(d.url, "http://"))
	invoke := []byte(`{"action": "weather.forecast", "input": {"city": "Porto"}}`)

	for _, host := range []string{"attacker.example", "attacker.example:" + port, "127.0.0.1.attacker.example:" + port, "localhost.attacker.example"} {
		r := withHost(t, d, "POST", "/invoke", host, "", invoke)
		if r.status != http.StatusMisdirectedRequest || r.errorCode(t) != CodeMisdirected || !strings.Contains(string(r.body), "http.allowed_hosts") {
			t.Errorf("Host %q: %d %s", host, r.status, r.body)
		}
		if r := withHost(t, d, "GET", "/.well-known/iface/capabilities", host, "", nil); r.status != http.StatusMisdirectedRequest {
			t.Errorf("GET with Host %q: %d", host, r.status)
		}
	}
	if n := invoked.Load(); n != 0 {
		t.Fatalf("a misdirected request ran the capability %d times", n)
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "agent.example.org", "agent.example.org:443"} {
		if r := withHost(t, d, "POST", "/invoke", host, "", invoke); r.status != http.StatusOK {
			t.Errorf("Host %q: %d %s", host, r.status, r.body)
		}
	}

	// A POST from a web page: only pages of the binding's own names.
	for _, origin := range []string{"http://attacker.example", "https://attacker.example:" + port, "null", "file://", "http://localhost.attacker.example"} {
		r := withHost(t, d, "POST", "/invoke", "127.0.0.1:"+port, origin, invoke)
		if r.status != http.StatusForbidden || r.errorCode(t) != CodeForbiddenOrigin {
			t.Errorf("Origin %q: %d %s", origin, r.status, r.body)
		}
	}
	for _, origin := range []string{"http://localhost:" + port, "http://127.0.0.1:" + port, "https://agent.example.org"} {
		if r := withHost(t, d, "POST", "/invoke", "127.0.0.1:"+port, origin, invoke); r.status != http.StatusOK {
			t.Errorf("Origin %q: %d %s", origin, r.status, r.body)
		}
	}
	// A GET carries no state change: a page of another origin may read
	// the public view (the Host still has to name the binding).
	if r := withHost(t, d, "GET", "/.well-known/iface/capabilities", "localhost:"+port, "http://elsewhere.example", nil); r.status != http.StatusOK {
		t.Errorf("cross-origin GET: %d", r.status)
	}
}

func TestHostGuardOnlyOnLoopback(t *testing.T) {
	for listen, want := range map[string]bool{
		"127.0.0.1:80": true, "[::1]:80": true, "localhost:80": true, "127.0.0.5:80": true,
		"0.0.0.0:443": false, "[::]:443": false, "192.0.2.1:443": false, "agent.example.org:443": false,
	} {
		if got := newHostGuard(listen, "", nil) != nil; got != want {
			t.Errorf("%s: guarded %v, want %v", listen, got, want)
		}
	}
	g := newHostGuard("127.0.0.5:8080", "https://public.example.net/iface", []string{"[::1]", "proxy.example"})
	for host, want := range map[string]bool{
		"127.0.0.5:8080": true, "public.example.net": true, "proxy.example:8443": true, "[::1]:1": true,
		"127.0.0.6:8080": false, "example.net": false, "public.example.net.evil": false,
	} {
		if got := g.allows(host); got != want {
			t.Errorf("Host %q: allowed %v, want %v", host, got, want)
		}
	}
}

// TestAnonymousInvocationsAudited: POST /invoke and A2A message/send
// without a signature are audited with the caller's address, the
// capability and the outcome.
func TestAnonymousInvocationsAudited(t *testing.T) {
	cfg := testConfig()
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		return events.InvocationAnswer{Result: map[string]any{"summary": "sun"}}
	})
	d := start(t, cfg)
	if r := do(t, "POST", d.url+"/invoke", "application/json", []byte(`{"action": "weather.forecast", "input": {"city": "Porto"}}`)); r.status != 200 {
		t.Fatalf("invoke: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", d.url+"/invoke", "application/json", []byte(`{"action": "calendar.availability"}`)); r.status != 403 {
		t.Fatalf("invoke: %d %s", r.status, r.body)
	}
	do(t, "POST", d.url+"/a2a", "application/json", []byte(`{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message", "role": "user",
		"messageId": "m1", "parts": [{"kind": "data", "data": {"skill": "weather.forecast", "input": {}}}]}}}`))

	convs, err := d.n.Audit().Conversations()
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct{ via, capability, request, answer string }
	var got []outcome
	for _, c := range convs {
		entries, err := d.n.Audit().Entries(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2 {
			t.Fatalf("conversation %s has %d entries, want the request and its outcome", c.ID, len(entries))
		}
		req, ans := entries[0], entries[1]
		if req.Direction != gossip.Received || ans.Direction != gossip.Sent || req.Peer != "anonymous" || ans.Peer != "anonymous" {
			t.Errorf("entries %+v / %+v", req, ans)
		}
		if !strings.Contains(req.Note, "from 127.0.0.1:") || !strings.Contains(ans.Note, "from 127.0.0.1:") {
			t.Errorf("the caller's address is not recorded: %q / %q", req.Note, ans.Note)
		}
		if ans.Message.Headers.Thread == nil || ans.Message.Headers.Thread.InReplyTo != req.Message.Headers.MessageID {
			t.Errorf("the outcome does not answer the request: %+v", ans.Message.Headers)
		}
		got = append(got, outcome{req.Transport, req.Message.Headers.Capabilities.Request[0], req.Note, ans.Note})
	}
	want := map[string]string{
		"https weather.forecast":      ": answered",
		"https calendar.availability": ": refused: conditions_not_met",
		"a2a weather.forecast":        ": refused: invalid_params",
	}
	if len(got) != len(want) {
		t.Fatalf("audited %d anonymous requests, want %d: %+v", len(got), len(want), got)
	}
	for _, o := range got {
		suffix, ok := want[o.via+" "+o.capability]
		if !ok || !strings.HasSuffix(o.answer, suffix) {
			t.Errorf("%s %s: outcome %q, want it to end %q", o.via, o.capability, o.answer, suffix)
		}
	}
}
