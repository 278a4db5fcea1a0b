package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/examples/agent"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/wire"
)

func TestInvokeVerb(t *testing.T) {
	hook := httptest.NewServer(agent.Handler(nil))
	defer hook.Close()
	cfg, err := config.ParseConfig([]byte("version = 1\n" + agent.Capabilities))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Discovery.MDNS, cfg.Discovery.DHT, cfg.Discovery.Gossip = false, config.DHTOff, false
	cfg.Agent.Webhook = hook.URL
	_, alice := startDaemon(t, cfg)
	bobHome, _ := startDaemon(t, nil)
	b := bobHome.Dir
	aliceID := alice.ID().PeerID().String()
	mustRun(t, b, "connect", alice.Addrs()[0].String())

	out := mustRun(t, b, "invoke", aliceID, "doc.summarize", "--params", `{"text": "one two three", "max_words": 2}`)
	wantLines(t, "invoke", out, `"summary": "one two"`, `"word_count": 2`)

	r := ifaced(t, b, "invoke", aliceID, "calendar.availability", "--params", `{"days": 3}`)
	if r.code != 1 {
		t.Fatalf("refused invoke: exit %d", r.code)
	}
	wantLines(t, "refused invoke", r.stderr, "refused calendar.availability", "conditions_not_met",
		"- min_disclosure: requires professional, you have public", "- min_auth_level: requires 2 (verified), you have 1 (signed); ")

	r = ifaced(t, b, "invoke", aliceID, "doc.summarize", "--params", `{"text": 5}`)
	wantLines(t, "invalid params", r.stderr, "invalid_params", "at /text")
	if r := ifaced(t, b, "invoke", aliceID); r.code != 2 {
		t.Errorf("invoke without a capability: exit %d", r.code)
	}
	if r := ifaced(t, b, "invoke", aliceID, "echo", "--params", "{not json"); r.code != 2 {
		t.Errorf("invoke with bad JSON: exit %d", r.code)
	}
}

// Each unmet condition is printed once: the message's own list is left to
// the lines below it.
func TestDescribeRefusalListsEachConditionOnce(t *testing.T) {
	b := wire.ErrorBody{Code: wire.CodeConditionsNotMet,
		Message: `capability "calendar.availability": conditions not met: min_disclosure: required professional, have public (ask the owner)`,
		Unmet:   []conditions.Unmet{{Condition: "min_disclosure", Required: "professional", Have: "public", HowToMeet: "ask the owner"}},
		Hint:    "greet again: the owner now grants you disclosure \"professional\""}
	out := describeRefusal(b)
	if n := strings.Count(out, "min_disclosure"); n != 1 || !strings.Contains(out, "conditions not met\n") || !strings.Contains(out, "greet again") {
		t.Fatalf("min_disclosure printed %d times:\n%s", n, out)
	}
}
