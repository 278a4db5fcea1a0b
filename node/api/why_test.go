package api

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/gossip"
)

// TestAuditWhy: the decision on a request is found by the request's ID
// and by the answer's, answered or refused (a hidden capability's real
// reason included, for the owner); a message without a decision, an
// unknown ID and a malformed one are refused, each saying what was
// looked up.
func TestAuditWhy(t *testing.T) {
	bob := startDaemon(t, nil)
	alice := startDaemon(t, aliceConfig(bob.peerID()))
	ctx := testContext(t)
	if _, err := bob.c.Connect(ctx, alice.n.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}

	res, err := bob.c.Invoke(ctx, InvokeRequest{Peer: alice.peerID(), Capability: "ping"})
	if err != nil {
		t.Fatal(err)
	}
	why, err := alice.c.AuditWhy(ctx, res.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	d := why.Decision
	if why.MessageID != res.RequestID || d == nil || d.Capability != "ping" || d.Outcome != gossip.DecisionAnswered ||
		d.Facts.Level != 1 || d.Facts.Tier != "professional" || !reflect.DeepEqual(why.Entry.Decision, d) {
		t.Fatalf("why %s: %+v, decision %+v", res.RequestID, why, d)
	}
	answer := why.Entry.Message.Headers
	if why.Entry.Direction != gossip.Sent || answer.Thread == nil || answer.Thread.InReplyTo != res.RequestID {
		t.Fatalf("the entry is not the answer to %s: %+v", res.RequestID, why.Entry)
	}
	byAnswer, err := alice.c.AuditWhy(ctx, answer.MessageID)
	if err != nil || byAnswer.MessageID != answer.MessageID || byAnswer.Entry.Message.Headers.MessageID != answer.MessageID {
		t.Fatalf("why by the answer's ID: %+v, %v", byAnswer, err)
	}

	// Refused as unknown to bob, and why, to alice.
	if _, err := bob.c.Invoke(ctx, InvokeRequest{Peer: alice.peerID(), Capability: "diary.read"}); err == nil {
		t.Fatal("bob invoked the hidden capability")
	}
	conv, err := bob.c.AuditEntries(ctx, res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	var asked, greeting string
	for _, e := range conv.Entries {
		h := e.Message.Headers
		if e.Direction == gossip.Sent && h.Capabilities != nil && len(h.Capabilities.Request) == 1 && h.Capabilities.Request[0] == "diary.read" {
			asked = h.MessageID
		}
		if h.Phase == gossip.PhaseGreeting && greeting == "" {
			greeting = h.MessageID
		}
	}
	why, err = alice.c.AuditWhy(ctx, asked)
	if err != nil {
		t.Fatalf("why %s: %v", asked, err)
	}
	if d := why.Decision; d.Outcome != gossip.DecisionRefused || d.Code != "unknown_capability" || !strings.Contains(d.Note, "hidden") ||
		len(d.Conditions) != 1 || d.Conditions[0].Condition != "min_disclosure" || d.Conditions[0].Met {
		t.Errorf("the hidden capability's decision: %+v", d)
	}

	for _, tc := range []struct {
		id, says string
	}{
		{greeting, "but no decision"},
		{"msg:01NOSUCHMESSAGE0000000000", "has no message"},
		{"msg:a/b", "has no message"}, // one path segment, escaped
	} {
		_, err := alice.c.AuditWhy(ctx, tc.id)
		e := apiError(t, err, http.StatusNotFound)
		if e.Code != CodeNotFound || !strings.Contains(e.Message, `"`+tc.id+`"`) || !strings.Contains(e.Message, tc.says) {
			t.Errorf("why %q: %+v, want not_found naming the ID and saying %q", tc.id, e, tc.says)
		}
	}
	for _, id := range []string{"msg with spaces", strings.Repeat("x", gossip.MaxIDLen+1)} {
		_, err := alice.c.AuditWhy(ctx, id)
		if e := apiError(t, err, http.StatusBadRequest); e.Field != "message_id" || !strings.Contains(e.Message, "message_id") {
			t.Errorf("why %.20q…: %+v", id, e)
		}
	}
}
