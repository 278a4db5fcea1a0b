package gossip

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// refusedDecision is a decision as the daemon writes one for a refused
// request: the facts, a met and an unmet condition.
func refusedDecision() *Decision {
	return &Decision{Capability: "calendar.availability", Outcome: DecisionRefused, Code: "conditions_not_met",
		Facts: DecisionFacts{Level: 1, LevelHow: "signed only", Tier: "public", Temperature: "cool", Persona: "default"},
		Conditions: []DecisionCondition{
			{Condition: "min_disclosure", Met: false, Detail: "required professional, have public; ask the owner to raise your disclosure tier"},
			{Condition: "min_auth_level", Met: true, Detail: "required 1 (signed), have 1 (signed)"},
		}}
}

// TestAuditDecisionRecorded: the decision rides on the answer's entry:
// in the .jsonl under "decision", with the names another reader relies
// on, and in the .md as a short block under the message, after which the
// message's own rendering still parses back to the message.
func TestAuditDecisionRecorded(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	bobPeer := bob.PeerID().String()
	dir := t.TempDir()
	a := openAudit(t, dir)
	req := auditMessage(t, bob, alice, auditConvID, 1, "")
	ans := auditMessage(t, alice, bob, auditConvID, 2, req.Headers.MessageID)
	d := refusedDecision()
	for _, e := range []AuditEntry{
		{At: testNow, Direction: Received, Peer: bobPeer, Transport: "libp2p", Message: req},
		{At: testNow.Add(time.Second), Direction: Sent, Peer: bobPeer, Transport: "libp2p", Message: ans, Decision: d},
	} {
		if err := a.Record(e); err != nil {
			t.Fatal(err)
		}
	}

	// The .jsonl: the request has no decision; the answer has it, by name.
	raw, err := os.ReadFile(peerFile(dir, testDay, bobPeer, ".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	if bytes.Contains(lines[0], []byte(`"decision"`)) {
		t.Errorf("the request's entry has a decision: %s", lines[0])
	}
	var generic struct {
		Decision map[string]any `json:"decision"`
	}
	if err := json.Unmarshal(lines[1], &generic); err != nil {
		t.Fatal(err)
	}
	facts, _ := generic.Decision["facts"].(map[string]any)
	conds, _ := generic.Decision["conditions"].([]any)
	if generic.Decision["capability"] != "calendar.availability" || generic.Decision["outcome"] != "refused" || generic.Decision["code"] != "conditions_not_met" ||
		facts["level"] != 1.0 || facts["level_how"] != "signed only" || facts["tier"] != "public" || facts["temperature"] != "cool" || facts["persona"] != "default" ||
		len(conds) != 2 {
		t.Fatalf("decision as written: %s", lines[1])
	}
	if c0, _ := conds[0].(map[string]any); c0["condition"] != "min_disclosure" || c0["met"] != false || c0["detail"] == "" {
		t.Errorf("first condition as written: %v", conds[0])
	}
	entries, err := a.Entries(auditConvID)
	if err != nil || len(entries) != 2 || entries[0].Decision != nil || !reflect.DeepEqual(entries[1].Decision, d) {
		t.Fatalf("read back: %v, %+v", err, entries)
	}

	// The .md: the decision under the answer, the request untouched.
	flushAudit(t, a)
	md := peerFile(dir, testDay, bobPeer, ".md")
	_, got := splitAuditMD(t, md)
	if len(got) != 2 {
		t.Fatalf("%d entries in the .md, want 2", len(got))
	}
	if bytes.Contains(got[0].body, []byte(decisionMarker)) {
		t.Errorf("the request's entry shows a decision:\n%s", got[0].body)
	}
	rendering, block, ok := bytes.Cut(got[1].body, []byte("\n"+decisionMarker))
	if !ok {
		t.Fatalf("the answer's entry has no decision block:\n%s", got[1].body)
	}
	wantBlock := "Decision: refused calendar.availability (conditions_not_met)\n" +
		"Facts: level 1 (signed only); tier public; temperature cool; persona default\n" +
		"- unmet min_disclosure: required professional, have public; ask the owner to raise your disclosure tier\n" +
		"- met min_auth_level: required 1 (signed), have 1 (signed)\n"
	if string(block) != wantBlock {
		t.Errorf("decision block:\n%s\nwant:\n%s", block, wantBlock)
	}
	back, err := ParseIFP3(rendering, func(int64) (string, bool) { return req.Headers.MessageID, true })
	if err != nil {
		t.Fatalf("the answer's rendering above its decision: %v\n%s", err, rendering)
	}
	if !bytes.Equal(cborOf(t, back), cborOf(t, ans)) {
		t.Error("the rendering above the decision is not the answer")
	}
}

// TestAuditDecisionRendering: the facts of a caller with no level, a
// note, no condition evaluated; and a message shown as JSON (no IFP-3
// rendering) still gets its decision under it.
func TestAuditDecisionRendering(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	dir := t.TempDir()
	a := openAudit(t, dir)
	m := auditMessage(t, alice, bob, auditConvID, 2, "msg:req")
	m.Body.Text = "a carriage\rreturn" // no IFP-3 rendering keeps it
	d := &Decision{Capability: "diary.read", Outcome: DecisionRefused, Code: "unknown_capability",
		Note:       "hidden from this requester (advertise = when-eligible): refused as an unknown capability",
		Facts:      DecisionFacts{Level: -1, LevelHow: "none: an unsigned request", Tier: "public", Temperature: "cool", Persona: "default"},
		Conditions: []DecisionCondition{}}
	if err := a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: "anonymous", Transport: "https", Message: m, Decision: d}); err != nil {
		t.Fatal(err)
	}
	flushAudit(t, a)
	_, got := splitAuditMD(t, peerFile(dir, testDay, "anonymous", ".md"))
	if len(got) != 1 {
		t.Fatalf("%d entries", len(got))
	}
	json, block, ok := bytes.Cut(got[0].body, []byte("\n"+decisionMarker))
	if !ok || !bytes.Contains(json, []byte("```json\n")) || !bytes.HasSuffix(json, []byte("\n```\n")) {
		t.Fatalf("the message as JSON, then its decision:\n%s", got[0].body)
	}
	want := "Decision: refused diary.read (unknown_capability)\n" +
		"Facts: level none (none: an unsigned request); tier public; temperature cool; persona default\n" +
		"Note: hidden from this requester (advertise = when-eligible): refused as an unknown capability\n" +
		"- no condition evaluated\n"
	if string(block) != want {
		t.Errorf("decision block:\n%s\nwant:\n%s", block, want)
	}
}

// TestAuditDecisionCannotForgeEntries: whatever the decision holds (a
// capability name the peer chose, a schema error quoting its parameters)
// stays on its line and opens no marker.
func TestAuditDecisionCannotForgeEntries(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	dir := t.TempDir()
	a := openAudit(t, dir)
	forged := "x\n<!-- ifaced audit: sent 2026-03-04T23:58:12Z peer p via libp2p conversation c -->\n---"
	d := refusedDecision()
	d.Capability = forged
	d.Conditions = append(d.Conditions, DecisionCondition{Condition: "parameters\r\n- met " + forged, Detail: forged})
	d.Facts.LevelHow = forged
	m := auditMessage(t, alice, bob, auditConvID, 2, "msg:req")
	if err := a.Record(AuditEntry{At: testNow, Direction: Sent, Peer: "p", Transport: "libp2p", Message: m, Decision: d}); err != nil {
		t.Fatal(err)
	}
	flushAudit(t, a)
	md := peerFile(dir, testDay, "p", ".md")
	if _, got := splitAuditMD(t, md); len(got) != 1 {
		t.Fatalf("%d entries in the .md, want 1", len(got))
	}
	b, _ := os.ReadFile(md)
	if n := bytes.Count(b, []byte("\n"+auditMarkerPrefix)); n != 2 {
		t.Errorf("%d lines open an audit marker, want the entry's and its decision's:\n%s", n, b)
	}
	if n := bytes.Count(b, []byte(auditMarkerPrefix)); n != 3 {
		t.Errorf("%d audit markers, want the entry's, its decision's and the title's mention:\n%s", n, b)
	}
	_, block, _ := bytes.Cut(b, []byte(decisionMarker))
	for _, line := range strings.Split(strings.TrimSpace(string(block)), "\n") {
		if !strings.HasPrefix(line, "Decision: ") && !strings.HasPrefix(line, "Facts: ") && !strings.HasPrefix(line, "- met ") && !strings.HasPrefix(line, "- unmet ") {
			t.Errorf("a line of the decision starts with text not its own: %q", line)
		}
	}
}

// TestAuditDecided: a decision is found by the request's ID or by the
// answer's; the newest wins; a message without one, an unknown ID and
// an empty one are errors that say which; an answer recorded the day
// after its request is found either way.
func TestAuditDecided(t *testing.T) {
	alice, bob := testIdentity(t, 1), testIdentity(t, 2)
	dir := t.TempDir()
	a := openAudit(t, dir)
	newID := func(at time.Time) string { return "msg:" + ulid.MustNew(ulid.Timestamp(at), nil).String() }

	// A request late on one day, answered after midnight.
	req := auditMessage(t, bob, alice, auditConvID, 1, "")
	req.Headers.MessageID = newID(testNow)
	ans := auditMessage(t, alice, bob, auditConvID, 2, req.Headers.MessageID)
	ans.Headers.MessageID = newID(testNow.Add(2 * time.Minute))
	answered := &Decision{Capability: "echo", Outcome: DecisionAnswered, Facts: DecisionFacts{Level: 1, LevelHow: "signed only", Tier: "public", Temperature: "cool", Persona: "default"},
		Conditions: []DecisionCondition{{Condition: "parameters", Met: true, Detail: "no parameters schema"}}}
	// A peer-chosen request ID (no ULID), refused, then asked and
	// answered again under the same ID in another conversation.
	plain := auditMessage(t, bob, alice, "conv:other", 1, "")
	refused := auditMessage(t, alice, bob, "conv:other", 2, plain.Headers.MessageID)
	again := auditMessage(t, alice, bob, "conv:other", 3, plain.Headers.MessageID)
	again.Headers.MessageID = "msg:again"
	greeting := auditMessage(t, bob, alice, "conv:greeting", 1, "")
	for _, e := range []AuditEntry{
		{At: testNow, Direction: Received, Peer: "p", Transport: "libp2p", Message: req},
		{At: testNow.Add(2 * time.Minute), Direction: Sent, Peer: "p", Transport: "libp2p", Message: ans, Decision: answered},
		{At: testNow, Direction: Received, Peer: "q", Transport: "https", Message: plain},
		{At: testNow.Add(time.Second), Direction: Sent, Peer: "q", Transport: "https", Message: refused, Decision: refusedDecision()},
		{At: testNow.Add(3 * time.Minute), Direction: Sent, Peer: "q", Transport: "https", Message: again, Decision: answered},
		{At: testNow, Direction: Received, Peer: "p", Transport: "libp2p", Message: greeting},
	} {
		if err := a.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(peerFile(dir, "2026-03-05", "p", ".jsonl")); err != nil {
		t.Fatalf("the answer is not in the next day's file: %v", err)
	}
	for _, log := range []*AuditLog{a, openAudit(t, dir)} {
		for _, id := range []string{req.Headers.MessageID, ans.Headers.MessageID} {
			e, err := log.Decided(id)
			if err != nil || e.Message.Headers.MessageID != ans.Headers.MessageID || !reflect.DeepEqual(e.Decision, answered) {
				t.Errorf("Decided(%s): %v, %+v", id, err, e)
			}
		}
		e, err := log.Decided(plain.Headers.MessageID)
		if err != nil || e.Message.Headers.MessageID != "msg:again" {
			t.Errorf("Decided(%s): %v, %+v; want the newest answer", plain.Headers.MessageID, err, e)
		}
		if e, err := log.Decided(refused.Headers.MessageID); err != nil || e.Decision.Outcome != DecisionRefused {
			t.Errorf("Decided(the refusal's own ID): %v, %+v", err, e)
		}
		_, err = log.Decided(greeting.Headers.MessageID)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "but no decision") {
			t.Errorf("a greeting: %v, want not found, saying it holds no decision", err)
		}
		_, err = log.Decided(newID(testNow.Add(time.Hour)))
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "has no message") {
			t.Errorf("an unknown ID: %v, want not found, saying there is no such message", err)
		}
		if _, err := log.Decided(""); err == nil || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("no ID: %v, want an error of its own", err)
		}
	}
}
