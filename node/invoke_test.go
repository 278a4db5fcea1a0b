package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/examples/agent"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/invoke"
	"github.com/ifaced/ifaced/node/policy"
	"github.com/ifaced/ifaced/node/wire"
)

// agentConfig is a loopback config offering the example agent's
// capabilities plus a hidden one and a busy-prone one, with webhook as the
// local agent ("" for none).
func agentConfig(t *testing.T, webhook string, extra string) *config.Config {
	t.Helper()
	src := "version = 1\n" + agent.Capabilities + `
[[capabilities]]
name = "diary.read"
description = "Read the diary"
advertise = "when-eligible"
conditions = { min_disclosure = "close" }

[[capabilities]]
name = "slow.job"
description = "One at a time"
conditions = { max_concurrent = 1 }
` + extra
	c, err := config.ParseConfig([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"}
	c.API.Listen = "127.0.0.1:0"
	quietDiscovery(c)
	c.Agent.Webhook = webhook
	return c
}

func remoteCode(t *testing.T, err error) wire.ErrorBody {
	t.Helper()
	var re *wire.RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a refusal from the peer", err)
	}
	return re.Body
}

func TestInvokeThroughWebhookAgent(t *testing.T) {
	hook := httptest.NewServer(agent.Handler(nil))
	defer hook.Close()
	alice := startDaemon(t, agentConfig(t, hook.URL, ""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	pid := alice.id.PeerID()

	res, err := bob.Invoke(ctx, pid, "doc.summarize", map[string]any{"text": "one two three four five", "max_words": 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Result.(map[string]any); got["summary"] != "one two three" || got["word_count"] != 3.0 {
		t.Fatalf("result %+v", got)
	}

	// Conditions not met: each unmet condition, what bob has, how to meet it.
	_, err = bob.Invoke(ctx, pid, "calendar.availability", map[string]any{"days": 5})
	body := remoteCode(t, err)
	if body.Code != wire.CodeConditionsNotMet || len(body.Unmet) != 2 ||
		body.Unmet[0].Required != "professional" || body.Unmet[0].Have != "public" ||
		body.Unmet[1].Condition != conditions.CondMinAuthLevel || !strings.Contains(body.Unmet[1].HowToMeet, "ifaced trust") {
		t.Fatalf("calendar refusal: %+v", body)
	}

	// A hidden capability answers exactly as a missing one.
	_, hidden := bob.Invoke(ctx, pid, "diary.read", nil)
	_, missing := bob.Invoke(ctx, pid, "diary.wrte", nil)
	hb, mb := remoteCode(t, hidden), remoteCode(t, missing)
	if hb.Code != wire.CodeUnknownCapability || strings.ReplaceAll(hb.Message, "diary.read", "X") != strings.ReplaceAll(mb.Message, "diary.wrte", "X") || hb.Hint != mb.Hint {
		t.Fatalf("hidden %+v\nmissing %+v", hb, mb)
	}

	// Parameters failing the schema: the failing location is named.
	_, err = bob.Invoke(ctx, pid, "doc.summarize", map[string]any{"text": "", "max_words": 0})
	body = remoteCode(t, err)
	if body.Code != wire.CodeInvalidParams || !strings.Contains(body.Message, "/text") || !strings.Contains(body.Message, "/max_words") {
		t.Fatalf("invalid params: %+v", body)
	}

	// The conversation survives every refusal.
	if _, err := bob.Invoke(ctx, pid, "echo", map[string]any{"still": "here"}); err != nil {
		t.Fatalf("after refusals: %v", err)
	}
	// Every step is in both audit logs.
	convs, _ := alice.Audit().Conversations()
	if len(convs) != 1 || convs[0].Messages < 12 {
		t.Fatalf("alice's audit: %+v", convs)
	}
}

func TestInvokeAgentFailures(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var inv events.Invocation
		json.NewDecoder(r.Body).Decode(&inv)
		switch inv.Capability {
		case "doc.summarize": // violates output_schema
			json.NewEncoder(w).Encode(events.InvocationAnswer{Result: map[string]any{"summary": 5}})
		case "echo": // hangs past the timeout
			<-r.Context().Done()
		case "slow.job":
			entered <- struct{}{}
			<-release
			json.NewEncoder(w).Encode(events.InvocationAnswer{Result: "done"})
		default:
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	defer hook.Close()
	defer close(release)
	cfg := agentConfig(t, hook.URL, "")
	cfg.Agent.Timeout = config.Duration{Duration: 300 * time.Millisecond}
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	pid := alice.id.PeerID()

	_, err := bob.Invoke(ctx, pid, "doc.summarize", map[string]any{"text": "x"})
	if b := remoteCode(t, err); b.Code != wire.CodeAgentError || !strings.Contains(b.Message, "output_schema") {
		t.Errorf("bad output: %+v", b)
	}
	_, err = bob.Invoke(ctx, pid, "echo", nil)
	if b := remoteCode(t, err); b.Code != wire.CodeAgentTimeout {
		t.Errorf("hung agent: %+v", b)
	}

	// max_concurrent: the second call while the first runs is busy, with a retry hint.
	cfg2 := agentConfig(t, hook.URL, "")
	cfg2.Agent.Timeout = config.Duration{Duration: 10 * time.Second}
	carol := startDaemon(t, cfg2)
	connect(t, bob, carol)
	first := make(chan error, 1)
	go func() {
		_, err := bob.Invoke(ctx, carol.id.PeerID(), "slow.job", nil)
		first <- err
	}()
	<-entered
	_, err = bob.Invoke(ctx, carol.id.PeerID(), "slow.job", nil)
	if b := remoteCode(t, err); b.Code != wire.CodeBusy || b.RetryAfterSeconds < 1 {
		t.Errorf("second concurrent call: %+v", b)
	}
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
}

func TestInvokeWithoutAgentAndThroughEvents(t *testing.T) {
	alice := startDaemon(t, agentConfig(t, "", ""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	pid := alice.id.PeerID()

	_, err := bob.Invoke(ctx, pid, "echo", map[string]any{"a": 1})
	if b := remoteCode(t, err); b.Code != wire.CodeAgentUnavailable {
		t.Fatalf("no agent: %+v", b)
	}
	// An observer of the event stream (the MCP endpoint, a console) is not
	// the agent: the requester is still told agent_unavailable at once,
	// not agent_timeout after agent.timeout.
	watching, stopWatching := alice.Subscribe(events.AsObserver())
	go func() {
		for range watching {
		}
	}()
	_, err = bob.Invoke(ctx, pid, "echo", map[string]any{"a": 1})
	if b := remoteCode(t, err); b.Code != wire.CodeAgentUnavailable {
		t.Fatalf("with only an observer subscribed: %+v, want agent_unavailable", b)
	}
	stopWatching()

	// An agent on the event stream answers through AnswerInvocation.
	evs, stop := alice.Subscribe()
	defer stop()
	go func() {
		for e := range evs {
			if e.Type == events.EventInvocation {
				alice.AnswerInvocation(e.Invocation.ID, events.InvocationAnswer{Result: map[string]any{"got": e.Invocation.Params}})
				return
			}
		}
	}()
	res, err := bob.Invoke(ctx, pid, "echo", map[string]any{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Result.(map[string]any)["got"].(map[string]any)["a"]; got != 1.0 {
		t.Fatalf("result %+v", res.Result)
	}
	if err := alice.AnswerInvocation("inv:nope", events.InvocationAnswer{}); !errors.Is(err, invoke.ErrNoSuchInvocation) {
		t.Fatalf("answer to nothing: %v", err)
	}
}

func TestRateLimitByTemperature(t *testing.T) {
	hook := httptest.NewServer(agent.Handler(nil))
	defer hook.Close()
	cfg := agentConfig(t, hook.URL, "")
	cfg.Rates = config.RatesConfig{Cool: 3, Warm: 30, Hot: 60}
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	// The greeting is the first of three messages a minute at cool.
	for i := 0; i < 2; i++ {
		if _, err := bob.Invoke(ctx, alice.id.PeerID(), "echo", nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	_, err := bob.Invoke(ctx, alice.id.PeerID(), "echo", nil)
	if b := remoteCode(t, err); b.Code != wire.CodeRateLimited || b.RetryAfterSeconds < 1 {
		t.Fatalf("fourth message: %+v", b)
	}
}

// TestLyingGreetingGetsNothingMore: a peer that proposes the highest tier
// and temperature is granted only what the owner's map allows, and its
// requests are decided on that.
func TestLyingGreetingGetsNothingMore(t *testing.T) {
	hook := httptest.NewServer(agent.Handler(nil))
	defer hook.Close()
	alice := startDaemon(t, agentConfig(t, hook.URL, ""))
	mallory := startDaemon(t, nil)
	connect(t, mallory, alice)
	ctx := context.Background()
	r, err := mallory.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{Disclosure: "close", Temperature: "hot", Persona: "researcher"})
	if err != nil {
		t.Fatal(err)
	}
	// A persona is the owner's to establish (issue "One door in"): the
	// claim gets mallory the default persona, as it gets him nothing else.
	if g := r.GrantedToUs; g.Disclosure != "public" || g.Temperature != "cool" || g.AuthLevel != conditions.Signed || g.Persona != "" {
		t.Fatalf("mallory was granted %+v", g)
	}
	_, err = mallory.Invoke(ctx, alice.id.PeerID(), "diary.read", nil)
	if b := remoteCode(t, err); b.Code != wire.CodeUnknownCapability {
		t.Fatalf("close-only capability: %+v", b)
	}
}

// TestDisclosureSetAtRunTime: the owner raises a peer's tier through the
// API's node method; the next greeting is granted it, a request that was
// refused now reaches the agent, and the change survives a restart.
func TestDisclosureSetAtRunTime(t *testing.T) {
	hook := httptest.NewServer(agent.Handler(nil))
	defer hook.Close()
	cfg := agentConfig(t, hook.URL, "")
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	bobID := bob.id.PeerID().String()

	if err := alice.Policy().SetDisclosure("", bobID, "profesional"); !errors.Is(err, policy.ErrInvalidPolicy) {
		t.Fatalf("unknown tier: %v", err)
	}
	if err := alice.Policy().SetDisclosure("", bobID, "close"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Policy().SetMaxTemperature(bobID, "warm"); err != nil {
		t.Fatal(err)
	}
	r, err := bob.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{Disclosure: "close", Temperature: "hot"})
	if err != nil {
		t.Fatal(err)
	}
	if r.GrantedToUs.Disclosure != "close" || r.GrantedToUs.Temperature != "warm" {
		t.Fatalf("granted %+v", r.GrantedToUs)
	}
	if _, err := bob.Invoke(ctx, alice.id.PeerID(), "diary.read", nil); err == nil {
		t.Fatal("diary.read has no agent implementation and should fail in the agent")
	} else if b := remoteCode(t, err); b.Code != wire.CodeAgentError {
		t.Fatalf("diary.read now reaches the agent: %+v", b)
	}
	alice.Close()
	alice = restartDaemon(t, alice)
	if p := alice.Policy().Current(); p.Map["default"][bobID] != "close" || p.MaxTemp[bobID] != "warm" {
		t.Fatalf("policy after restart: %+v", p)
	}
	if err := alice.Policy().SetDisclosure("", bobID, ""); err != nil {
		t.Fatal(err)
	}
	if p := alice.Policy().Current(); p.Map["default"][bobID] != "" {
		t.Fatalf("override not removed: %+v", p.Map)
	}
}

// After the owner raises a peer's tier and the peer greets again, a
// request goes in the newest conversation, under the new grant, however
// many older conversations are still open; a request in an older one
// (named) is refused with a hint to greet again; a conversation that is
// not open is never replaced by another.
func TestInvokeUsesNewestConversation(t *testing.T) {
	hook := httptest.NewServer(agent.Handler(nil))
	defer hook.Close()
	cfg := aliceConfig("")
	cfg.Agent.Webhook = hook.URL
	cfg.Rates.Cool = 600
	alice := startDaemon(t, cfg)
	bob, carol := startDaemon(t, nil), startDaemon(t, nil)
	connect(t, bob, alice)
	connect(t, bob, carol)
	ctx := context.Background()
	pid := alice.id.PeerID()

	var old []string
	for range 6 {
		old = append(old, greet(t, bob, alice).ConversationID)
	}
	if _, err := bob.Invoke(ctx, pid, "calendar.availability", map[string]any{"days": 5}); remoteCode(t, err).Code != wire.CodeConditionsNotMet {
		t.Fatalf("before the owner raised the tier: %v", err)
	}
	if err := alice.Policy().SetDisclosure("default", bob.id.PeerID().String(), "professional"); err != nil {
		t.Fatal(err)
	}
	newest := greet(t, bob, alice).ConversationID
	for i := range 3 {
		res, err := bob.Invoke(ctx, pid, "calendar.availability", map[string]any{"days": 5})
		if err != nil {
			t.Fatalf("invoke %d after greeting again: %v", i, err)
		}
		if res.ConversationID != newest {
			t.Fatalf("invoke %d went in %s, want the newest conversation %s", i, res.ConversationID, newest)
		}
	}
	sent, err := bob.Send(ctx, pid, "in the newest")
	if err != nil || sent.ConversationID != newest {
		t.Fatalf("send: %+v, %v; want it said in %s", sent, err, newest)
	}

	// Named: an old conversation keeps its grant, and says how to get the new one.
	_, err = bob.Conversations().InvokeIn(ctx, pid, old[0], "calendar.availability", map[string]any{"days": 5})
	body := remoteCode(t, err)
	if body.Code != wire.CodeConditionsNotMet || !strings.Contains(body.Hint, "greet again") {
		t.Fatalf("in the old conversation: %+v, want conditions_not_met with a hint to greet again", body)
	}
	if sent, err := bob.Mail().SendIn(ctx, pid, old[1], "in an old one"); err != nil || sent.ConversationID != old[1] {
		t.Fatalf("send in a named conversation: %+v, %v", sent, err)
	}
	withCarol := greet(t, bob, carol).ConversationID
	for _, id := range []string{"conv:01NOSUCHCONVERSATION000000", withCarol} {
		if _, err := bob.Conversations().InvokeIn(ctx, pid, id, "ping", nil); !errors.Is(err, converse.ErrNoConversation) {
			t.Fatalf("invoking in %s: %v, want ErrNoConversation", id, err)
		}
		if _, err := bob.Mail().SendIn(ctx, pid, id, "lost?"); !errors.Is(err, converse.ErrNoConversation) {
			t.Fatalf("sending in %s: %v, want ErrNoConversation", id, err)
		}
	}
}

// The IFP-7 standard capabilities the daemon declares are answered by the
// daemon itself, with no local agent, under their declared conditions;
// the others still go to the agent.
func TestStandardCapabilitiesAnsweredByTheDaemon(t *testing.T) {
	cfg := loopbackConfig()
	cfg.Capabilities = append(config.StandardCapabilities(),
		map[string]any{"name": "calendar.availability", "description": "Share calendar availability windows"},
		map[string]any{"name": "diary.read", "description": "Read the diary", "advertise": "when-eligible",
			"conditions": map[string]any{"min_disclosure": "close"}})
	alice := startDaemon(t, cfg) // no local agent
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	pid := alice.id.PeerID()

	res, err := bob.Invoke(ctx, pid, "ping", nil)
	if err != nil || res.Result != "pong" {
		t.Fatalf("ping: %+v, %v; want pong", res, err)
	}
	res, err = bob.Invoke(ctx, pid, "capabilities.get", nil)
	if err != nil {
		t.Fatalf("capabilities.get: %v", err)
	}
	raw, _ := json.Marshal(res.Result)
	var view negotiate.Document
	if err := json.Unmarshal(raw, &view); err != nil {
		t.Fatalf("capabilities.get answered %s: %v", raw, err)
	}
	greeted := greet(t, bob, alice).View
	if testkit.CapNames(&view) != testkit.CapNames(greeted) || view.AgentID != greeted.AgentID || strings.Contains(string(raw), "diary.read") {
		t.Fatalf("capabilities.get: %s\nwant bob's view, as greeted: %s", testkit.CapNames(&view), testkit.CapNames(greeted))
	}
	res, err = bob.Invoke(ctx, pid, "identity.verify", nil)
	if got, _ := res.Result.(map[string]any); err != nil || got["supported"] != true {
		t.Fatalf("identity.verify: %+v, %v", res, err)
	}
	// The rest is the agent's, and alice has none.
	if _, err := bob.Invoke(ctx, pid, "calendar.availability", nil); remoteCode(t, err).Code != wire.CodeAgentUnavailable {
		t.Fatalf("calendar without an agent: %v, want agent_unavailable", err)
	}
}
