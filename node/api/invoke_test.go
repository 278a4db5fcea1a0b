package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/ifaced/ifaced/node/wire"
)

// TestInvokeAnsweredByAnEventStreamAgent: Bob invokes Alice's capability
// through his API; Alice's local agent, subscribed to her event stream,
// answers through her API.
func TestInvokeAnsweredByAnEventStreamAgent(t *testing.T) {
	bob := startDaemon(t, nil)
	cfg := nodetest.LoopbackConfig()
	cfg.Capabilities = append(cfg.Capabilities, map[string]any{"name": "echo", "description": "Send the parameters back",
		"parameters": map[string]any{"type": "object", "required": []any{"say"}}})
	alice := startDaemon(t, cfg)
	ctx := testContext(t)
	if _, err := bob.c.Connect(ctx, alice.n.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	evs, err := alice.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	agentErr := make(chan error, 1)
	go func() {
		e := waitFor(t, evs, "an invocation", func(e events.Event) bool { return e.Type == events.EventInvocation })
		agentErr <- alice.c.AnswerInvocation(ctx, e.Invocation.ID, events.InvocationAnswer{Result: e.Invocation.Params})
	}()
	res, err := bob.c.Invoke(ctx, InvokeRequest{Peer: alice.peerID(), Capability: "echo", Params: json.RawMessage(`{"say":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-agentErr; err != nil {
		t.Fatalf("the agent's answer: %v", err)
	}
	if got := res.Result.(map[string]any)["say"]; got != "hi" {
		t.Fatalf("result %+v", res.Result)
	}

	// Parameters failing the schema come back as the peer's explanation.
	_, err = bob.c.Invoke(ctx, InvokeRequest{Peer: alice.peerID(), Capability: "echo", Params: json.RawMessage(`{}`)})
	e := apiError(t, err, http.StatusBadGateway)
	if e.PeerError == nil || e.PeerError.Code != wire.CodeInvalidParams {
		t.Fatalf("invalid params: %+v", e)
	}
	// Answers to nothing, and malformed requests, are refused clearly.
	apiError(t, alice.c.AnswerInvocation(ctx, "inv:gone", events.InvocationAnswer{Result: 1}), http.StatusNotFound)
	_, err = bob.c.Invoke(ctx, InvokeRequest{Peer: alice.peerID()})
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "capability" {
		t.Fatalf("no capability: %+v", e)
	}
}
