package httpapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// daemon is a node with its HTTP binding on loopback.
type daemon struct {
	n   *node.Node
	url string
	b   *Binding
}

func testConfig() *config.Config {
	c := nodetest.LoopbackConfig()
	c.HTTP.Listen = "127.0.0.1:0"
	c.Identity.Display = "Alice's agent"
	c.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "weather.forecast", "description": "Forecast the weather", "categories": []string{"search"},
			"parameters":    map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}},
			"output_schema": map[string]any{"type": "object", "properties": map[string]any{"summary": map[string]any{"type": "string"}}, "required": []any{"summary"}}},
		{"name": "calendar.availability", "description": "Share calendar availability windows",
			"conditions": map[string]any{"min_auth_level": 1}},
		{"name": "diary.read", "description": "Read the diary", "advertise": "when-eligible",
			"conditions": map[string]any{"min_disclosure": "close"}},
	}
	return c
}

func start(t *testing.T, cfg *config.Config) *daemon {
	t.Helper()
	h, id := nodetest.Home(t)
	n := nodetest.StartIn(t, cfg, h, id)
	s, err := Listen(n, cfg.HTTP, nodetest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &daemon{n: n, url: s.URL(), b: s}
}

// agent is a webhook local agent answering weather.forecast.
func agent(t *testing.T, answer func(events.Invocation) events.InvocationAnswer) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var inv events.Invocation
		json.NewDecoder(r.Body).Decode(&inv)
		json.NewEncoder(w).Encode(answer(inv))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, url, contentType string, body []byte, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}
}

func (r response) errorCode(t *testing.T) string {
	t.Helper()
	var e Error
	if err := json.Unmarshal(r.body, &e); err != nil || e.Status != "error" {
		t.Fatalf("not an IFP-6 error body (%v): %s", err, r.body)
	}
	return e.Code
}

func TestWellKnownEndpoints(t *testing.T) {
	d := start(t, testConfig())
	r := do(t, "GET", d.url+"/.well-known/iface/identity", "", nil)
	var ident identity.Document
	if r.status != 200 || json.Unmarshal(r.body, &ident) != nil || ident.AgentID != d.n.ID().DID() {
		t.Fatalf("identity: %d %s", r.status, r.body)
	}

	r = do(t, "GET", d.url+"/.well-known/iface/capabilities", "", nil)
	if r.status != 200 || r.header.Get("ETag") == "" || !strings.Contains(r.header.Get("Cache-Control"), "public") {
		t.Fatalf("capabilities: %d %v", r.status, r.header)
	}
	view, err := negotiate.DecodeView(mustJSON(t, r.body))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := identity.PublicKeyFromPeerID(d.n.ID().PeerID())
	if _, err := view.VerifyCanonical(pub); err != nil {
		t.Fatalf("the served view does not verify: %v", err)
	}
	if strings.Contains(string(r.body), "diary") {
		t.Fatal("the hidden capability is in the anonymous view")
	}
	// Unchanged: 304. Changed: a new tag.
	if again := do(t, "GET", d.url+"/.well-known/iface/capabilities", "", nil, "If-None-Match", r.header.Get("ETag")); again.status != http.StatusNotModified {
		t.Fatalf("If-None-Match with the current tag: %d", again.status)
	}
	if _, err := d.n.UpdateDocument(func(doc *negotiate.Document) error {
		doc.Capabilities = append(doc.Capabilities, negotiate.Capability{Name: "news.read", Description: "Read the news"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if changed := do(t, "GET", d.url+"/.well-known/iface/capabilities", "", nil, "If-None-Match", r.header.Get("ETag")); changed.status != 200 ||
		changed.header.Get("ETag") == r.header.Get("ETag") || !strings.Contains(string(changed.body), "news.read") {
		t.Fatalf("after a change: %d etag %s", changed.status, changed.header.Get("ETag"))
	}

	if r := do(t, "GET", d.url+"/nope", "", nil); r.status != 404 || r.errorCode(t) != CodeNotFound {
		t.Fatalf("unknown path: %d %s", r.status, r.body)
	}
	if r := do(t, "DELETE", d.url+"/capabilities", "", nil); r.status != 405 {
		t.Fatalf("wrong method: %d %s", r.status, r.body)
	}
}

func mustJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCapabilitiesServeAGUIAndOrchestrator(t *testing.T) {
	d := start(t, testConfig())
	r := do(t, "GET", d.url+"/capabilities", "", nil)
	var obj struct {
		Identity struct{ Name string }                   `json:"identity"`
		Tools    struct{ Items []struct{ Name string } } `json:"tools"`
		Message  string                                  `json:"message"`
		Actions  []negotiate.Action                      `json:"actions"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &obj) != nil {
		t.Fatalf("GET /capabilities: %d %s", r.status, r.body)
	}
	var tools, actions []string
	for _, it := range obj.Tools.Items {
		tools = append(tools, it.Name)
	}
	for _, a := range obj.Actions {
		actions = append(actions, a.Name)
		if a.InputSchema == nil || a.OutputSchema == nil {
			t.Errorf("action %s lacks a schema: %+v", a.Name, a)
		}
	}
	// An HTTP caller has no authentication level, so the min_auth_level
	// capability is not usable, and the hidden one is not there at all.
	want := "ping,weather.forecast"
	if strings.Join(tools, ",") != want || strings.Join(actions, ",") != want {
		t.Fatalf("tools %v actions %v, want %s", tools, actions, want)
	}
	if obj.Message == "" || obj.Identity.Name != "Alice's agent" {
		t.Fatalf("message %q identity %q", obj.Message, obj.Identity.Name)
	}
	if strings.Contains(string(r.body), "diary") || strings.Contains(string(r.body), "calendar") {
		t.Fatalf("a capability the caller cannot use is listed: %s", r.body)
	}
	// ACP: the requested category comes first.
	r = do(t, "GET", d.url+"/capabilities?requested_tool_categories=search,no-such-category", "", nil)
	if err := json.Unmarshal(r.body, &obj); err != nil || obj.Actions[0].Name != "weather.forecast" {
		t.Fatalf("requested category not first: %s", r.body)
	}
}

func TestInvokeGoesThroughTheSameChecks(t *testing.T) {
	cfg := testConfig()
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		if inv.Capability == "weather.forecast" {
			city, _ := inv.Params.(map[string]any)["city"].(string)
			if city == "Atlantis" {
				return events.InvocationAnswer{Result: map[string]any{"wrong": true}}
			}
			return events.InvocationAnswer{Result: map[string]any{"summary": "sunny in " + city}}
		}
		return events.InvocationAnswer{Result: "pong"}
	})
	d := start(t, cfg)
	invoke := func(body string) response { return do(t, "POST", d.url+"/invoke", "application/json", []byte(body)) }

	r := invoke(`{"action": "weather.forecast", "input": {"city": "Lisbon"}}`)
	if r.status != 200 || !strings.Contains(string(r.body), "sunny in Lisbon") {
		t.Fatalf("invoke: %d %s", r.status, r.body)
	}
	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"bad params", `{"action": "weather.forecast", "input": {"town": "Lisbon"}}`, 400, "invalid_params"},
		{"output violating the schema", `{"action": "weather.forecast", "input": {"city": "Atlantis"}}`, 502, "agent_error"},
		{"needs a level an HTTP caller lacks", `{"action": "calendar.availability"}`, 403, "conditions_not_met"},
		{"hidden", `{"action": "diary.read"}`, 404, "unknown_capability"},
		{"unknown", `{"action": "no.such"}`, 404, "unknown_capability"},
		{"no action", `{"input": {}}`, 400, CodeInvalidFormat},
		{"unknown field", `{"action": "ping", "extra": 1}`, 400, CodeInvalidFormat},
		{"not JSON", `{"action": `, 400, CodeInvalidFormat},
	}
	var hidden, unknown string
	for _, c := range cases {
		r := invoke(c.body)
		if r.status != c.status || r.errorCode(t) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
		switch c.name {
		case "hidden":
			hidden = strings.ReplaceAll(string(r.body), "diary.read", "X")
		case "unknown":
			unknown = strings.ReplaceAll(string(r.body), "no.such", "X")
		}
	}
	if hidden != unknown {
		t.Errorf("a hidden capability is answered differently from an unknown one:\n%s\n%s", hidden, unknown)
	}
	if r := do(t, "POST", d.url+"/invoke", "text/plain", []byte(`{"action":"ping"}`)); r.status != 400 {
		t.Errorf("wrong content type: %d", r.status)
	}
}

func TestInvokeWithoutAgentIsUnavailable(t *testing.T) {
	d := start(t, testConfig())
	r := do(t, "POST", d.url+"/invoke", "application/json", []byte(`{"action":"weather.forecast","input":{"city":"Porto"}}`))
	if r.status != 503 || r.errorCode(t) != "agent_unavailable" {
		t.Fatalf("no agent: %d %s", r.status, r.body)
	}
	// ping is the daemon's own (the README's example), agent or not.
	r = do(t, "POST", d.url+"/invoke", "application/json", []byte(`{"action":"ping"}`))
	var out struct {
		Action string `json:"action"`
		Output any    `json:"output"`
	}
	if err := json.Unmarshal(r.body, &out); r.status != 200 || err != nil || out.Action != "ping" || out.Output != "pong" {
		t.Fatalf("ping without an agent: %d %s, want 200 {\"action\": \"ping\", \"output\": \"pong\"}", r.status, r.body)
	}
}

// greeting is a signed greeting from id to the daemon, as another ifaced
// (or any IFP-6 sender) would post it.
func greeting(t *testing.T, from *identity.Identity, to peer.ID, text string) *gossip.Message {
	t.Helper()
	pub, _ := identity.PublicKeyFromPeerID(to)
	c := gossip.NewConversation(gossip.NewID("conv", time.Now()), gossip.Agent{Agent: from.DID()}, gossip.Agent{Agent: identity.DIDKey(pub)})
	m, err := c.Next(gossip.PhaseGreeting, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m.Body.Text = text
	if err := m.Sign(from, time.Now()); err != nil {
		t.Fatal(err)
	}
	return m
}

func post(t *testing.T, d *daemon, m *gossip.Message) response {
	t.Helper()
	b, err := gossip.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, "POST", d.url+"/.well-known/iface/inbox", "application/json; charset=utf-8", b)
}

func TestInbox(t *testing.T) {
	cfg := testConfig()
	cfg.Rates.Cool = 5
	d := start(t, cfg)
	evs, stop := d.n.Subscribe()
	defer stop()
	sender, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	to := d.n.ID().PeerID()

	m := greeting(t, sender, to, "Hello over HTTPS.")
	r := post(t, d, m)
	var acc InboxAccepted
	if r.status != 202 || json.Unmarshal(r.body, &acc) != nil || acc.Status != "accepted" || acc.MessageID != m.Headers.MessageID {
		t.Fatalf("inbox: %d %s", r.status, r.body)
	}
	waitMessage(t, evs, m.Headers.MessageID)
	// The same message again: accepted, not processed again.
	if r := post(t, d, m); r.status != 202 || !strings.Contains(string(r.body), `"duplicate": true`) {
		t.Fatalf("second delivery: %d %s", r.status, r.body)
	}
	// Audited, with transport https.
	convs, err := d.n.Audit().Conversations()
	if err != nil || len(convs) != 1 || convs[0].ID != m.Headers.ConversationID {
		t.Fatalf("audit: %+v %v", convs, err)
	}

	// The next message of that conversation is accepted; one out of
	// sequence is received but refused in the conversation.
	next := greeting(t, sender, to, "")
	next.Headers.ConversationID, next.Headers.Sequence, next.Headers.Phase = m.Headers.ConversationID, 1, gossip.PhaseContext
	next.Body.Text = "out of sequence"
	next.Security = nil
	next.Sign(sender, time.Now())
	if r := post(t, d, next); r.status != 202 || !strings.Contains(string(r.body), `"out_of_sequence"`) {
		t.Fatalf("out of sequence: %d %s", r.status, r.body)
	}

	tampered := greeting(t, sender, to, "original")
	tampered.Body.Text = "altered"
	unsigned := greeting(t, sender, to, "x")
	unsigned.Security = nil
	badKey := greeting(t, sender, to, "x")
	badKey.Security.Signatures[0].KeyID = "https://example.invalid/keys#1"
	stale := greeting(t, sender, to, "x")
	stale.Headers.Date = gossip.FormatDate(time.Now().Add(-48 * time.Hour))
	stale.Security = nil
	stale.Sign(sender, time.Now())
	for _, c := range []struct {
		name   string
		m      *gossip.Message
		status int
		code   string
	}{
		{"altered after signing", tampered, 401, CodeInvalidSignature},
		{"unsigned", unsigned, 401, CodeInvalidSignature},
		{"a key_id that names no key", badKey, 401, CodeUnknownSender},
		// The code is the wire's for the same refusal over libp2p (one
		// table, wire.HTTPStatus); it was invalid_format here before.
		{"dated two days ago", stale, 400, string(wire.CodeReplay)},
	} {
		if r := post(t, d, c.m); r.status != c.status || r.errorCode(t) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
	}
	raw := func(ct string, body []byte, headers ...string) response {
		return do(t, "POST", d.url+"/.well-known/iface/inbox", ct, body, headers...)
	}
	if r := raw("application/json", []byte(`{"ifp": 4, "headers": `)); r.status != 400 || r.errorCode(t) != CodeInvalidFormat {
		t.Errorf("truncated JSON: %d %s", r.status, r.body)
	}
	if r := raw("text/plain", []byte(`{}`)); r.status != 400 {
		t.Errorf("wrong content type: %d", r.status)
	}
	if r := raw("application/json", bytes.Repeat([]byte(" "), MaxBody+1)); r.status != 413 || r.errorCode(t) != CodePayloadTooLarge {
		t.Errorf("oversized: %d %s", r.status, r.body)
	}
	b, _ := gossip.EncodeJSON(greeting(t, sender, to, "x"))
	if r := raw("application/json", b, "Idempotency-Key", "something-else"); r.status != 400 {
		t.Errorf("an Idempotency-Key other than the message_id: %d %s", r.status, r.body)
	}
	// Rate: five a minute at cool; the sender has used some; flood it.
	var limited response
	for i := 0; i < 10; i++ {
		if limited = post(t, d, greeting(t, sender, to, fmt.Sprint(i))); limited.status == 429 {
			break
		}
	}
	if limited.status != 429 || limited.header.Get("Retry-After") == "" || limited.errorCode(t) != CodeRateLimited {
		t.Fatalf("flood: %d %v %s", limited.status, limited.header, limited.body)
	}
}

func waitMessage(t *testing.T, evs <-chan events.Event, id string) events.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-evs:
			if e.Type == events.EventMessage && e.Message != nil && e.Message.Headers.MessageID == id {
				return e
			}
		case <-timeout:
			t.Fatalf("no message event for %s", id)
		}
	}
}

func TestSameMessageOverLibp2pAndHTTPIsProcessedOnce(t *testing.T) {
	bob := start(t, testConfig())
	alice := start(t, testConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := alice.n.Connect(ctx, bob.n.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	res, err := alice.n.Greet(ctx, bob.n.ID().PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	evs, stop := bob.n.Subscribe()
	defer stop()
	m, err := alice.n.Say(res.ConversationID, gossip.PhaseContext, "said once")
	if err != nil {
		t.Fatal(err)
	}
	waitMessage(t, evs, m.Headers.MessageID)
	// The same signed message through Bob's inbox: a duplicate.
	if r := post(t, bob, m); r.status != 202 || !strings.Contains(string(r.body), `"duplicate": true`) {
		t.Fatalf("the libp2p message posted to the inbox: %d %s", r.status, r.body)
	}
	// A new message of the same conversation through the inbox joins the
	// libp2p conversation: it takes the next sequence number there.
	next, err := gossip.DecodeJSON(mustEncode(t, m))
	if err != nil {
		t.Fatal(err)
	}
	next.Headers.MessageID = gossip.NewID("msg", time.Now())
	next.Headers.Sequence = m.Headers.Sequence + 1
	next.Body.Text = "and once more over HTTPS"
	next.Security = nil
	if err := next.Sign(alice.n.ID(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := post(t, bob, next); r.status != 202 || strings.Contains(string(r.body), "refused") {
		t.Fatalf("joining the conversation over HTTPS: %d %s", r.status, r.body)
	}
	e := waitMessage(t, evs, next.Headers.MessageID)
	if e.ConversationID != res.ConversationID {
		t.Fatalf("joined %s, want %s", e.ConversationID, res.ConversationID)
	}
}

func mustEncode(t *testing.T, m *gossip.Message) []byte {
	t.Helper()
	b, err := gossip.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAgentCardVerifies(t *testing.T) {
	d := start(t, testConfig())
	r := do(t, "GET", d.url+"/.well-known/agent-card.json", "", nil)
	if r.status != 200 {
		t.Fatalf("agent card: %d %s", r.status, r.body)
	}
	card, err := negotiate.VerifyAgentCard(r.body, func(kid string) (ed25519.PublicKey, error) {
		return identity.PublicKeyFromKeyID(kid)
	})
	if err != nil {
		t.Fatalf("the served card does not verify: %v", err)
	}
	if card.URL == "" || card.ProtocolVersion == "" || len(card.Skills) != 2 || strings.Contains(string(r.body), "diary") {
		t.Fatalf("card: %s", r.body)
	}
	// The card is signed once per view: a changed document gives a new one.
	if _, err := d.n.UpdateDocument(func(doc *negotiate.Document) error {
		doc.Capabilities = append(doc.Capabilities, negotiate.Capability{Name: "news.read", Description: "Read the news"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r = do(t, "GET", d.url+"/.well-known/agent-card.json", "", nil)
	card, err = negotiate.VerifyAgentCard(r.body, func(kid string) (ed25519.PublicKey, error) { return identity.PublicKeyFromKeyID(kid) })
	if err != nil || len(card.Skills) != 3 {
		t.Fatalf("the card after a change: %v %s", err, r.body)
	}
}

// request is a signed IFP-4 capability request from id to the daemon.
func request(t *testing.T, from *identity.Identity, to peer.ID, capability string, params any) *gossip.Message {
	t.Helper()
	m := greeting(t, from, to, "please")
	m.Headers.Phase = gossip.PhaseProbe
	m.Headers.Capabilities = &gossip.CapabilityHeaders{Request: []string{capability}}
	if params != nil {
		m.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: "parameters", Content: params}}
	}
	m.Security = nil
	if err := m.Sign(from, time.Now()); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSignedInvokeGetsTheSignersLevel(t *testing.T) {
	cfg := testConfig()
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		return events.InvocationAnswer{Result: map[string]any{"free": "Tuesday", "asked_by": inv.Peer}}
	})
	d := start(t, cfg)
	sender, _ := identity.Generate(nil)
	to := d.n.ID().PeerID()
	send := func(m *gossip.Message) response {
		return do(t, "POST", d.url+"/invoke", "application/json", mustEncode(t, m))
	}
	// Anonymous: no level, so min_auth_level 1 is not met.
	if r := do(t, "POST", d.url+"/invoke", "application/json", []byte(`{"action": "calendar.availability"}`)); r.status != 403 {
		t.Fatalf("anonymous: %d %s", r.status, r.body)
	}
	// Signed: level 1, met; the agent learns who asked.
	m := request(t, sender, to, "calendar.availability", nil)
	r := send(m)
	if r.status != 200 || !strings.Contains(string(r.body), sender.PeerID().String()) {
		t.Fatalf("signed request: %d %s", r.status, r.body)
	}
	if r := send(m); r.status != 400 || r.errorCode(t) != string(wire.CodeReplay) {
		t.Errorf("the same request again (a replay): %d %s", r.status, r.body)
	}
	altered := request(t, sender, to, "calendar.availability", nil)
	altered.Body.Text = "altered"
	if r := send(altered); r.status != 401 || r.errorCode(t) != CodeInvalidSignature {
		t.Errorf("altered: %d %s", r.status, r.body)
	}
	other, _ := identity.Generate(nil)
	if r := send(request(t, sender, other.PeerID(), "calendar.availability", nil)); r.status != 400 {
		t.Errorf("addressed to another daemon: %d %s", r.status, r.body)
	}
	// A hidden capability is as unknown to a signed stranger as to anyone.
	if r := send(request(t, sender, to, "diary.read", nil)); r.status != 404 || r.errorCode(t) != "unknown_capability" {
		t.Errorf("hidden, signed: %d %s", r.status, r.body)
	}
	notProbe := greeting(t, sender, to, "hello")
	if r := send(notProbe); r.status != 400 {
		t.Errorf("a greeting sent to /invoke: %d %s", r.status, r.body)
	}
}

func TestA2AMessageSendRunsASkill(t *testing.T) {
	cfg := testConfig()
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		city, _ := inv.Params.(map[string]any)["city"].(string)
		return events.InvocationAnswer{Result: map[string]any{"summary": "rain in " + city}}
	})
	d := start(t, cfg)
	rpc := func(body string) map[string]any {
		t.Helper()
		r := do(t, "POST", d.url+"/a2a", "application/json", []byte(body))
		var out map[string]any
		if r.status != 200 || json.Unmarshal(r.body, &out) != nil {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		return out
	}
	out := rpc(`{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message", "role": "user",
		"messageId": "m1", "parts": [{"kind": "data", "data": {"skill": "weather.forecast", "input": {"city": "Porto"}}}]}}}`)
	if !strings.Contains(fmt.Sprint(out["result"]), "rain in Porto") {
		t.Fatalf("message/send: %v", out)
	}
	code := func(out map[string]any) float64 {
		e, _ := out["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	for body, want := range map[string]float64{
		`{"jsonrpc": "2.0", "id": 2, "method": "tasks/pushNotificationConfig/get", "params": {}}`:                                          a2aPushNotSupported,
		`{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {}}`:                                                                 rpcInvalidParams,
		`{"jsonrpc": "2.0", "id": 3, "method": "nope"}`:                                                                                    rpcMethodNotFound,
		`{"jsonrpc": "2.0", "id": 4, "method": "message/send", "params": {"message": {"parts": []}}}`:                                      rpcInvalidParams,
		`{"jsonrpc": "2.0", "id": 5, "method": "message/send", "params": {"message": {"metadata": {"skill": "diary.read"}, "parts": []}}}`: rpcInvalidParams,
		`{"id": 6}`:    rpcInvalidRequest,
		`{"jsonrpc": `: rpcParseError,
	} {
		if got := code(rpc(body)); got != want {
			t.Errorf("%s: code %v, want %v", body, got, want)
		}
	}
}

func TestIntroductionProofOverHTTP(t *testing.T) {
	cfg := testConfig()
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		return events.InvocationAnswer{Result: map[string]any{"level": fmt.Sprint(inv.Granted.AuthLevel), "tier": inv.Granted.Disclosure}}
	})
	cfg.Capabilities = append(cfg.Capabilities, map[string]any{"name": "files.share", "description": "Share files",
		"conditions": map[string]any{"min_disclosure": "professional", "min_auth_level": 0}})
	d := start(t, cfg)
	minted, err := d.n.TrustBook().Introduce(trust.IntroRequest{Label: "Bob from the conference", Disclosure: "professional"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := identity.ParseIntroduction(minted.Token)
	if err != nil {
		t.Fatal(err)
	}
	bob, _ := identity.Generate(nil)
	to := d.n.ID().PeerID()
	// Without the proof, bob is a signed stranger at the public tier.
	if r := do(t, "POST", d.url+"/invoke", "application/json", mustEncode(t, request(t, bob, to, "files.share", nil))); r.status != 403 {
		t.Fatalf("without the introduction: %d %s", r.status, r.body)
	}
	// A greeting to the inbox carrying the proof binds the token to bob.
	g := greeting(t, bob, to, "Hello, we met at the conference.")
	if err := g.AddIntroProof(tok, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r := post(t, d, g); r.status != 202 {
		t.Fatalf("introduced greeting: %d %s", r.status, r.body)
	}
	info := d.n.TrustBook().Peer(bob.PeerID())
	if len(info.Intros) != 1 {
		t.Fatalf("bob's trust record after the introduced greeting: %+v", info)
	}
	// Now the token's tier applies to bob's signed requests.
	r := do(t, "POST", d.url+"/invoke", "application/json", mustEncode(t, request(t, bob, to, "files.share", nil)))
	if r.status != 200 || !strings.Contains(string(r.body), "professional") {
		t.Fatalf("after the introduction: %d %s", r.status, r.body)
	}
	// The token is bound: another key presenting it gets nothing.
	mallory, _ := identity.Generate(nil)
	g2 := greeting(t, mallory, to, "I am Bob too.")
	if err := g2.AddIntroProof(tok, time.Now()); err != nil {
		t.Fatal(err)
	}
	post(t, d, g2)
	if r := do(t, "POST", d.url+"/invoke", "application/json", mustEncode(t, request(t, mallory, to, "files.share", nil))); r.status != 403 {
		t.Fatalf("a second key with the same token: %d %s", r.status, r.body)
	}
}
