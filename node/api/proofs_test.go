package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/nodetest"
)

// What the console shows of the tamper-evident log, through the control
// API: a conversation verified, its bundle verifying with nothing else,
// the decision's inclusion on the why page, and a receipt for the peer
// of its own message only (a message this daemon sent has none).
func TestAuditProofsThroughTheAPI(t *testing.T) {
	ctx := testContext(t)
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nodetest.LoopbackConfig())
	if _, err := bob.c.Connect(ctx, alice.n.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	g, err := bob.c.Greet(ctx, GreetRequest{Peer: alice.peerID()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := alice.c.AuditProof(ctx, gossip.BundleSelect{ConversationID: g.ConversationID})
	if err != nil || st.State != gossip.ProofVerified || st.Records < 2 || len(st.Checkpoints) == 0 || st.Checkpoints[0].Signer != alice.n.ID().DID() {
		t.Fatalf("the conversation's proof: %+v, %v; want verified, signed by alice's key", st, err)
	}
	b, err := alice.c.AuditBundle(ctx, gossip.BundleSelect{ConversationID: g.ConversationID})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(b)
	if rep, err := gossip.VerifyBundle(raw, func(d string) bool { return d == alice.n.ID().DID() }); err != nil || len(rep.Records) != st.Records {
		t.Fatalf("the bundle from the API: %+v, %v", rep, err)
	}
	entries, err := alice.c.AuditEntries(ctx, g.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	var received, sent string
	for _, e := range entries.Entries {
		if e.Direction == gossip.Received {
			received = e.Message.Headers.MessageID
		} else {
			sent = e.Message.Headers.MessageID
		}
	}
	one, err := alice.c.AuditProof(ctx, gossip.BundleSelect{MessageID: sent})
	if err != nil || one.State != gossip.ProofVerified || one.Leaf == nil || one.Origin == "" {
		t.Fatalf("one message's inclusion: %+v, %v", one, err)
	}
	rc, err := alice.c.AuditReceipt(ctx, received)
	if err != nil || len(rc.Records) != 1 || rc.MessageID != received {
		t.Fatalf("the receipt of bob's message: %+v, %v", rc, err)
	}
	var e gossip.AuditEntry
	if err := json.Unmarshal([]byte(rc.Records[0].Record), &e); err != nil || e.Peer != bob.peerID() || e.Decision != nil {
		t.Fatalf("the receipt holds %+v (%v), want bob's message only", e, err)
	}
	var apiErr *Error
	if _, err := alice.c.AuditReceipt(ctx, sent); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Fatalf("a receipt of a message alice sent: %v, want 409", err)
	}
}
