package converse

import (
	"fmt"
	"testing"

	"github.com/ifaced/ifaced/gossip"
)

// TestWhatIsAnAcknowledgement holds ackOf and wantsAck to node/wire's
// Acknowledgements: only a context message in reply to a message, with a
// "delivered" part naming that same message, is one; anything else is an
// ordinary message, acknowledged when (and only when) the peer said acks.
func TestWhatIsAnAcknowledgement(t *testing.T) {
	msg := func(phase gossip.Phase, inReplyTo string, parts ...gossip.Part) *gossip.Message {
		m := &gossip.Message{Headers: gossip.Headers{MessageID: "msg:x", Phase: phase}, Body: gossip.Body{Parts: parts}}
		if inReplyTo != "" {
			m.Headers.Thread = &gossip.Thread{InReplyTo: inReplyTo}
		}
		return m
	}
	delivered := func(content any) gossip.Part {
		return gossip.Part{ContentType: "application/json", Name: PartDelivered, Content: content}
	}
	for _, tc := range []struct {
		name  string
		m     *gossip.Message
		isAck bool
	}{
		{"an acknowledgement", msg(gossip.PhaseContext, "msg:a", delivered(map[string]any{"message_id": "msg:a"})), true},
		{"with text and other parts beside", func() *gossip.Message {
			m := msg(gossip.PhaseContext, "msg:a", gossip.Part{Name: "note", Content: "hi"}, delivered(map[string]any{"message_id": "msg:a"}))
			m.Body.Text = "got it"
			return m
		}(), true},
		{"naming another message than it replies to", msg(gossip.PhaseContext, "msg:a", delivered(map[string]any{"message_id": "msg:b"})), false},
		{"a part that is not an object", msg(gossip.PhaseContext, "msg:a", delivered("msg:a")), false},
		{"a message_id that is not a string", msg(gossip.PhaseContext, "msg:a", delivered(map[string]any{"message_id": 7.0})), false},
		{"in reply to nothing", msg(gossip.PhaseContext, "", delivered(map[string]any{"message_id": ""})), false},
		{"in another phase", msg(gossip.PhaseProbe, "msg:a", delivered(map[string]any{"message_id": "msg:a"})), false},
		{"a plain context message", msg(gossip.PhaseContext, "msg:a"), false},
	} {
		id, ok := ackOf(tc.m)
		if ok != tc.isAck || ok && id != tc.m.Headers.Thread.InReplyTo {
			t.Errorf("%s: ackOf = %q, %v; want an acknowledgement: %v", tc.name, id, ok, tc.isAck)
		}
		for _, peerAcks := range []bool{false, true} {
			c := &conv{}
			c.peerAcks.Store(peerAcks)
			want := peerAcks && !tc.isAck && tc.m.Headers.Phase == gossip.PhaseContext
			if got := c.wantsAck(tc.m); got != want {
				t.Errorf("%s, peer said acks %v: wantsAck %v, want %v", tc.name, peerAcks, got, want)
			}
		}
	}
}

// TestAwaitedAcknowledgementsAreBoundedAndOnce: what a conversation said
// lets one acknowledgement each in free of the peer's rate, for its last
// maxAwaitedAcks messages, and only when the peer said acks.
func TestAwaitedAcknowledgementsAreBoundedAndOnce(t *testing.T) {
	said := func(id string) *gossip.Message {
		return &gossip.Message{Headers: gossip.Headers{MessageID: id, Phase: gossip.PhaseContext}}
	}
	ack := func(id string) *gossip.Message {
		return &gossip.Message{Headers: gossip.Headers{Phase: gossip.PhaseContext, Thread: &gossip.Thread{InReplyTo: id}},
			Body: gossip.Body{Parts: []gossip.Part{{Name: PartDelivered, Content: map[string]any{"message_id": id}}}}}
	}
	c := &conv{}
	c.saidForAck(said("msg:before"))
	if c.ackAwaited(ack("msg:before")) {
		t.Error("an acknowledgement let in free from a peer that never said acks")
	}
	c.peerAcks.Store(true)
	for i := range maxAwaitedAcks + 1 {
		c.saidForAck(said(fmt.Sprintf("msg:%d", i)))
	}
	first, last := "msg:0", fmt.Sprintf("msg:%d", maxAwaitedAcks)
	if c.ackAwaited(ack(first)) {
		t.Errorf("the oldest of %d said still awaited past the bound of %d", maxAwaitedAcks+1, maxAwaitedAcks)
	}
	if !c.ackAwaited(ack(last)) {
		t.Error("the newest said is not awaited")
	}
	if c.ackAwaited(ack(last)) {
		t.Error("a second acknowledgement of one message let in free")
	}
	c.saidForAck(ack("msg:x")) // an acknowledgement this side sends awaits nothing
	if c.ackAwaited(ack("msg:x")) {
		t.Error("an acknowledgement of an acknowledgement awaited")
	}
}
