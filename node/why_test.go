package node

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/wire"
)

// whyCapabilities are capabilities each of whose conditions a plain
// signed peer (public, cool, the default persona) meets or fails in one
// way, for the decision tests.
const whyCapabilities = `
[[capabilities]]
name = "open.job"
description = "Every condition set, met by a professional peer at warm"
conditions = { min_disclosure = "professional", min_auth_level = 1, temperature = "warm", max_concurrent = 4 }
[capabilities.parameters]
type = "object"
required = ["n"]
properties = { n = { type = "integer" } }
[capabilities.output_schema]
type = "object"
required = ["ok"]

[[capabilities]]
name = "tier.job"
description = "For professionals"
conditions = { min_disclosure = "professional" }

[[capabilities]]
name = "level.job"
description = "For verified peers"
conditions = { min_auth_level = 2 }

[[capabilities]]
name = "warm.job"
description = "In warm conversations"
conditions = { temperature = "warm" }

[[capabilities]]
name = "persona.job"
description = "Only under the researcher persona"
conditions = { persona = ["researcher"] }

[[capabilities]]
name = "hidden.job"
description = "Hidden from who may not use it"
advertise = "when-eligible"
conditions = { min_disclosure = "close" }

[[capabilities]]
name = "schema.job"
description = "Parameters with a schema"
[capabilities.parameters]
type = "object"
required = ["text"]
properties = { text = { type = "string", minLength = 1 } }
`

// whyAgent is a webhook agent answering every capability with {"ok":
// true}, except slow.job, which waits for release (and says so on
// entered).
func whyAgent(t *testing.T) (url string, entered <-chan struct{}, release chan<- struct{}) {
	in, out := make(chan struct{}, 4), make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var inv events.Invocation
		json.NewDecoder(r.Body).Decode(&inv)
		if inv.Capability == "slow.job" {
			in <- struct{}{}
			select {
			case <-out:
			case <-r.Context().Done():
				return
			}
		}
		json.NewEncoder(w).Encode(events.InvocationAnswer{Result: map[string]any{"ok": true}})
	}))
	t.Cleanup(hook.Close)
	return hook.URL, in, out
}

// sentDecision is the newest entry of owner's audit log that carries a
// decision on capability, and checks that the decision is found by the
// request's ID and by the answer's (AuditLog.Decided).
func sentDecision(t *testing.T, owner *testDaemon, capability string) gossip.AuditEntry {
	t.Helper()
	convs, err := owner.Audit().Conversations()
	if err != nil {
		t.Fatal(err)
	}
	var found gossip.AuditEntry
	for _, c := range convs {
		entries, err := owner.Audit().Entries(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Decision != nil && e.Decision.Capability == capability && (found.Message == nil || e.At.After(found.At)) {
				found = e
			}
		}
	}
	if found.Message == nil {
		t.Fatalf("no decision on %s in the owner's audit log", capability)
	}
	if found.Direction != gossip.Sent || found.Message.Headers.Thread == nil {
		t.Fatalf("the decision on %s is on %s %s, not on the answer to a request", capability, found.Direction, found.Message.Headers.Phase)
	}
	for _, id := range []string{found.Message.Headers.Thread.InReplyTo, found.Message.Headers.MessageID} {
		e, err := owner.Audit().Decided(id)
		if err != nil || e.Message.Headers.MessageID != found.Message.Headers.MessageID {
			t.Errorf("Decided(%s): %v, %s; want the answer %s", id, err, e.Message.Headers.MessageID, found.Message.Headers.MessageID)
		}
	}
	return found
}

// conditionsOf lists a decision's conditions as "condition met|unmet".
func conditionsOf(d *gossip.Decision) []string {
	var out []string
	for _, c := range d.Conditions {
		state := "unmet"
		if c.Met {
			state = "met"
		}
		out = append(out, c.Condition+" "+state)
	}
	return out
}

// TestDecisionAnswered: a request that meets every condition is answered,
// and the owner's audit records why on the answer's entry: the facts the
// daemon established (the tier and temperature the owner granted, the
// level and how it was reached) and each condition met, the parameters
// and the output checked. The peer's copy of the answer carries none of it.
func TestDecisionAnswered(t *testing.T) {
	hook, _, _ := whyAgent(t)
	alice := startDaemon(t, agentConfig(t, hook, whyCapabilities))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	bobID := bob.id.PeerID().String()
	if err := alice.Policy().SetDisclosure("", bobID, "professional"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Policy().SetMaxTemperature(bobID, "warm"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{Disclosure: "professional", Temperature: "warm"}); err != nil {
		t.Fatal(err)
	}
	res, err := bob.Invoke(ctx, alice.id.PeerID(), "open.job", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := alice.Audit().Decided(res.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	d := e.Decision
	if d.Capability != "open.job" || d.Outcome != gossip.DecisionAnswered || d.Code != "" || d.Note != "" {
		t.Errorf("decision %+v", d)
	}
	if f := d.Facts; f.Level != 1 || f.LevelHow != "signed only" || f.Tier != "professional" || f.Temperature != "warm" || f.Persona != "default" {
		t.Errorf("facts %+v", f)
	}
	want := []string{"min_disclosure met", "min_auth_level met", "temperature met", "max_concurrent met", "parameters met", "output_schema met"}
	if got := conditionsOf(d); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("conditions %v, want %v", got, want)
	}
	if c := d.Conditions[0]; c.Detail != "required professional, have professional" {
		t.Errorf("min_disclosure detail %q", c.Detail)
	}
	if c := d.Conditions[3]; c.Detail != "required fewer than 4 running, have 0 running" {
		t.Errorf("max_concurrent detail %q", c.Detail)
	}
	if e.Message.Headers.Phase != gossip.PhaseProbe || e.Message.Headers.Thread.InReplyTo != res.RequestID {
		t.Errorf("the decision is on %+v", e.Message.Headers)
	}

	// The peer's copy: the same message, no decision, nothing of it.
	got, err := bob.Audit().Entries(res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	for _, be := range got {
		if be.Decision != nil {
			t.Errorf("bob's audit has a decision: %+v", be.Decision)
		}
		if be.Message.Headers.MessageID == e.Message.Headers.MessageID {
			raw, _ := json.Marshal(be.Message)
			if bytes.Contains(raw, []byte("level_how")) || bytes.Contains(raw, []byte("signed only")) {
				t.Errorf("the answer as bob received it carries the decision: %s", raw)
			}
		}
	}
}

// TestDecisionRefused: a request refused for each kind of unmet
// condition records which failed and what was met; a capability hidden
// or absent under the persona is recorded with its real reason while the
// peer's refusal is byte for byte the one for a missing capability.
func TestDecisionRefused(t *testing.T) {
	hook, entered, release := whyAgent(t)
	cfg := agentConfig(t, hook, whyCapabilities)
	cfg.Rates.Cool = 600
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	pid := alice.id.PeerID()

	for _, tc := range []struct {
		capability string
		params     any
		code       wire.Code
		conditions []string
		note       string
		detail     string // in the unmet condition's detail
	}{
		{"tier.job", nil, wire.CodeConditionsNotMet, []string{"min_disclosure unmet"}, "", "required professional, have public"},
		{"level.job", nil, wire.CodeConditionsNotMet, []string{"min_auth_level unmet"}, "", "ifaced trust"},
		{"warm.job", nil, wire.CodeConditionsNotMet, []string{"temperature unmet"}, "", "required warm, have cool"},
		{"persona.job", nil, wire.CodeUnknownCapability, []string{"persona unmet"}, "absent under the owner's persona", "required researcher, have the default persona"},
		{"hidden.job", nil, wire.CodeUnknownCapability, []string{"min_disclosure unmet"}, `advertise = "when-eligible"`, "required close, have public"},
		{"schema.job", map[string]any{"text": ""}, wire.CodeInvalidParams, []string{"parameters unmet"}, "", "/text"},
		{"nosuch.job", nil, wire.CodeUnknownCapability, nil, "no capability by that name", ""},
	} {
		t.Run(tc.capability, func(t *testing.T) {
			_, err := bob.Invoke(ctx, pid, tc.capability, tc.params)
			if b := remoteCode(t, err); b.Code != tc.code {
				t.Fatalf("refusal %+v, want %s", b, tc.code)
			}
			d := sentDecision(t, alice, tc.capability).Decision
			if d.Outcome != gossip.DecisionRefused || d.Code != string(tc.code) || !strings.Contains(d.Note, tc.note) || (tc.note == "") != (d.Note == "") {
				t.Errorf("decision %+v", d)
			}
			if f := d.Facts; f.Level != 1 || f.LevelHow != "signed only" || f.Tier != "public" || f.Temperature != "cool" || f.Persona != "default" {
				t.Errorf("facts %+v", f)
			}
			if got := conditionsOf(d); strings.Join(got, ", ") != strings.Join(tc.conditions, ", ") {
				t.Errorf("conditions %v, want %v", got, tc.conditions)
			}
			for _, c := range d.Conditions {
				if !c.Met && !strings.Contains(c.Detail, tc.detail) {
					t.Errorf("%s detail %q, want it to hold %q", c.Condition, c.Detail, tc.detail)
				}
			}
		})
	}

	// The conditions evaluated before the one that failed are listed as met.
	if _, err := bob.Invoke(ctx, pid, "doc.summarize", map[string]any{"text": "", "max_words": 0}); remoteCode(t, err).Code != wire.CodeInvalidParams {
		t.Fatalf("doc.summarize with bad parameters: %v", err)
	}
	if d := sentDecision(t, alice, "doc.summarize").Decision; strings.Join(conditionsOf(d), ", ") != "parameters unmet" ||
		!strings.Contains(d.Conditions[0].Detail, "/max_words") {
		t.Errorf("doc.summarize: %+v", d)
	}

	// Workload: the second call while the first runs.
	first := make(chan error, 1)
	go func() {
		_, err := bob.Invoke(ctx, pid, "slow.job", nil)
		first <- err
	}()
	<-entered
	_, err := bob.Invoke(ctx, pid, "slow.job", nil)
	if b := remoteCode(t, err); b.Code != wire.CodeBusy {
		t.Fatalf("the second concurrent call: %+v", b)
	}
	d := sentDecision(t, alice, "slow.job").Decision
	if d.Code != string(wire.CodeBusy) || strings.Join(conditionsOf(d), ", ") != "max_concurrent unmet" ||
		!strings.HasPrefix(d.Conditions[0].Detail, "required fewer than 1 running, have 1 running") {
		t.Errorf("busy: %+v", d)
	}
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatalf("the first call: %v", err)
	}
	if d := sentDecision(t, alice, "slow.job").Decision; d.Outcome != gossip.DecisionAnswered || strings.Join(conditionsOf(d), ", ") != "max_concurrent met" {
		t.Errorf("the first call, answered after the refusal: %+v", d)
	}

	// What bob received for the hidden and the absent capability is what
	// he received for a missing one: the same bytes, names aside (the
	// names are of one length).
	replies := map[string][]byte{}
	convs, _ := bob.Audit().Conversations()
	for _, c := range convs {
		entries, _ := bob.Audit().Entries(c.ID)
		asked := map[string]string{}
		for _, e := range entries {
			h := e.Message.Headers
			if e.Direction == gossip.Sent && h.Capabilities != nil && len(h.Capabilities.Request) == 1 {
				asked[h.MessageID] = h.Capabilities.Request[0]
			}
			if e.Direction == gossip.Received && h.Phase == gossip.PhaseError && h.Thread != nil {
				body := e.Message.Body
				raw, err := json.Marshal(body)
				if err != nil {
					t.Fatal(err)
				}
				name := asked[h.Thread.InReplyTo]
				replies[name] = bytes.ReplaceAll(raw, []byte(name), []byte("X"))
			}
		}
	}
	for _, name := range []string{"hidden.job", "persona.job"} {
		if replies[name] == nil || replies["nosuch.job"] == nil || !bytes.Equal(replies[name], replies["nosuch.job"]) {
			t.Errorf("bob's reply for %s:\n%s\nfor a missing capability:\n%s", name, replies[name], replies["nosuch.job"])
		}
	}

	// The .md shows each decision under its refusal, once the background
	// writer has rendered what the .jsonl holds.
	if err := alice.Audit().Flush(); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(alice.home.Dir, "audit", time.Now().UTC().Format("2006-01-02"), bob.id.PeerID().String()+".md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"<!-- ifaced audit: decision -->\nDecision: refused tier.job (conditions_not_met)\nFacts: level 1 (signed only); tier public; temperature cool; persona default\n- unmet min_disclosure: required professional, have public; ",
		"Decision: refused hidden.job (unknown_capability)\n",
		"Decision: answered slow.job\n",
	} {
		if !bytes.Contains(md, []byte(line)) {
			t.Errorf("the .md lacks %q", line)
		}
	}
}

// TestDecisionTooFast: a request the door refuses for coming too fast is
// answered rate_limited, and the refusal records that no condition was
// evaluated.
func TestDecisionTooFast(t *testing.T) {
	hook, _, _ := whyAgent(t)
	cfg := agentConfig(t, hook, "")
	cfg.Rates.Cool = 2 // the greeting and one request a minute
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	if _, err := bob.Invoke(ctx, alice.id.PeerID(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	_, err := bob.Invoke(ctx, alice.id.PeerID(), "echo", nil)
	if b := remoteCode(t, err); b.Code != wire.CodeRateLimited {
		t.Fatalf("the second request: %+v", b)
	}
	d := sentDecision(t, alice, "echo").Decision
	if d.Code != string(wire.CodeRateLimited) || len(d.Conditions) != 0 || !strings.Contains(d.Note, "before its conditions were evaluated") || d.Facts.LevelHow != "signed only" {
		t.Errorf("decision %+v", d)
	}
}

// TestDecisionOverHTTP: a signed POST /invoke and an anonymous request
// are decided like a libp2p request, and their outcomes, recorded in
// reply to them, carry the decision: the signer's level and how, or no
// level at all.
func TestDecisionOverHTTP(t *testing.T) {
	hook, _, _ := whyAgent(t)
	alice := startDaemon(t, agentConfig(t, hook, whyCapabilities))
	caller, _ := identity.Generate(nil)
	signed := func(capability string) *gossip.Message {
		now := time.Now()
		m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
			MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
			From: gossip.Agent{Agent: caller.DID()}, To: []gossip.Agent{{Agent: alice.id.DID()}},
			ConversationID: "conv:callers-own", Sequence: 1, Phase: gossip.PhaseProbe, ContentType: gossip.DefaultContentType,
			Capabilities: &gossip.CapabilityHeaders{Request: []string{capability}},
		}}
		if err := m.Sign(caller, now); err != nil {
			t.Fatal(err)
		}
		return m
	}

	for _, tc := range []struct {
		capability string
		err        wire.Code
		conditions string
	}{
		{"echo", "", ""},
		{"level.job", wire.CodeConditionsNotMet, "min_auth_level unmet"},
	} {
		m := signed(tc.capability)
		_, _, err := alice.Inbox().ExecuteSigned(m)
		if (tc.err == "") != (err == nil) || (err != nil && wire.CodeOf(err) != tc.err) {
			t.Fatalf("signed %s: %v, want %q", tc.capability, err, tc.err)
		}
		e, err := alice.Audit().Decided(m.Headers.MessageID)
		if err != nil {
			t.Fatalf("signed %s: %v", tc.capability, err)
		}
		d := e.Decision
		if e.Peer != caller.PeerID().String() || e.Transport != "https" || e.Message.Headers.ConversationID != "conv:callers-own" || e.Message.Headers.Sequence != 2 {
			t.Errorf("signed %s: the outcome is recorded as %+v", tc.capability, e)
		}
		if d.Capability != tc.capability || d.Code != string(tc.err) || d.Facts.Level != 1 || d.Facts.LevelHow != "signed only" ||
			strings.Join(conditionsOf(d), ", ") != tc.conditions {
			t.Errorf("signed %s: decision %+v", tc.capability, d)
		}
	}

	if _, err := alice.Inbox().ExecuteAnonymous("https", "127.0.0.1:9", "", "tier.job", nil); wire.CodeOf(err) != wire.CodeConditionsNotMet {
		t.Fatalf("anonymous tier.job: %v", err)
	}
	e := sentDecision(t, alice, "tier.job")
	if d := e.Decision; e.Peer != "anonymous" || d.Facts.Level != -1 || !strings.Contains(d.Facts.LevelHow, "unsigned") ||
		d.Code != string(wire.CodeConditionsNotMet) || strings.Join(conditionsOf(d), ", ") != "min_disclosure unmet" {
		t.Errorf("anonymous: %+v %+v", e, d)
	}
}
