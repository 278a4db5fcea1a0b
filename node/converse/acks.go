package converse

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ifaced/ifaced/gossip"
)

// Acknowledgements (node/wire: Acknowledgements). A write into a
// conversation's stream succeeds as soon as the bytes are in the local
// buffers: when the path dies in that moment (the relay carrying a
// circuit, before the connection is seen to close), the message is lost
// while the sender believes it said. So a side that said acks in its
// greeting answers each context message the other side says, once the
// door has admitted and recorded it, with an acknowledgement; and a side
// whose peer said acks waits for it (SayAcknowledged). A side that said
// nothing of acks is neither sent one nor waited on: it is an older
// daemon, and goes on as before.

// PartDelivered names the part that makes a context message an
// acknowledgement: {"message_id": the acknowledged message's ID}, which
// thread.in_reply_to names too.
const PartDelivered = "delivered"

// AckWait bounds the wait for an acknowledgement: a round trip, and an
// audit write and a commit (shared with whoever else commits then) on the
// peer's side, milliseconds on a good path and disk, some hundreds
// through a distant relay. Past it the message counts as not delivered,
// and the caller leaves the same signed message at the peer's mailbox,
// where a copy that did arrive is dropped as a replay while the peer
// remembers its ID (replay.window): so within 10 s of a relay's death the
// message is at the peer (issue 27's bar), and a slow path costs a
// redundant copy, not a message read twice.
const AckWait = 4 * time.Second

// ErrUnacknowledged: a message said in a conversation whose peer
// acknowledges messages got no acknowledgement within AckWait, or the
// conversation ended first. It may or may not have arrived.
var ErrUnacknowledged = errors.New("said in the conversation, but not acknowledged")

// ackOf returns the message m acknowledges, when m is an
// acknowledgement: a context message in reply to it carrying a
// "delivered" part that names it.
func ackOf(m *gossip.Message) (string, bool) {
	h := &m.Headers
	if h.Phase != gossip.PhaseContext || h.Thread == nil || h.Thread.InReplyTo == "" {
		return "", false
	}
	p, ok := m.Body.Part(PartDelivered)
	if !ok {
		return "", false
	}
	content, _ := p.Content.(map[string]any)
	if id, _ := content["message_id"].(string); id != h.Thread.InReplyTo {
		return "", false
	}
	return h.Thread.InReplyTo, true
}

// maxAwaitedAcks bounds the said messages of one conversation whose
// acknowledgement is let in free of the peer's rate (ackAwaited): the
// oldest is forgotten first, and its acknowledgement, if it still comes,
// is charged like any message.
const maxAwaitedAcks = 64

// saidForAck notes m, just said in c, as awaiting the peer's
// acknowledgement when the peer acknowledges messages: whoever said it
// (SayAcknowledged, or a plain Say that does not wait), the
// acknowledgement answers this daemon's own message, and is not charged
// to the peer's rate.
func (c *conv) saidForAck(m *gossip.Message) {
	if m.Headers.Phase != gossip.PhaseContext || !c.peerAcks.Load() {
		return
	}
	if _, isAck := ackOf(m); isAck {
		return
	}
	c.gmu.Lock()
	defer c.gmu.Unlock()
	if len(c.ackDue) == maxAwaitedAcks {
		c.ackDue = append(c.ackDue[:0], c.ackDue[1:]...)
	}
	c.ackDue = append(c.ackDue, m.Headers.MessageID)
}

// ackAwaited reports whether m acknowledges a message said in c that
// awaits it, and forgets that message: one free acknowledgement each.
func (c *conv) ackAwaited(m *gossip.Message) bool {
	id, ok := ackOf(m)
	if !ok {
		return false
	}
	c.gmu.Lock()
	defer c.gmu.Unlock()
	i := slices.Index(c.ackDue, id)
	if i < 0 {
		return false
	}
	c.ackDue = slices.Delete(c.ackDue, i, i+1)
	return true
}

// wantsAck reports whether m, admitted in c, is to be acknowledged: a
// context message, not itself an acknowledgement, from a peer that said
// acks.
func (c *conv) wantsAck(m *gossip.Message) bool {
	if m.Headers.Phase != gossip.PhaseContext || !c.peerAcks.Load() {
		return false
	}
	_, isAck := ackOf(m)
	return !isAck
}

// acknowledge answers m, which the door admitted and recorded in c, with
// an acknowledgement. The record is made durable first (durability.sync),
// as before a relay is told to let go of mail: the sender lets go of the
// message when it reads the acknowledgement. It is said like any message
// (signed, recorded, numbered); one that cannot be written leaves the
// sender to fall back on the mailbox, which is what it is for.
func (cs *Conversations) acknowledge(c *conv, m *gossip.Message) {
	if cs.commit != nil {
		if err := cs.commit(); err != nil {
			cs.log.Warn("could not make a message durable; not acknowledging it", "peer", cs.named(c.peer), "conversation", c.ID, "err", err)
			return
		}
	}
	ack, err := c.Next(gossip.PhaseContext, cs.now())
	if err != nil {
		cs.log.Debug("acknowledging a message", "peer", cs.named(c.peer), "conversation", c.ID, "err", err)
		return
	}
	id := m.Headers.MessageID
	ack.Headers.Thread = &gossip.Thread{InReplyTo: id}
	ack.Body = gossip.Body{Parts: []gossip.Part{{ContentType: "application/json", Name: PartDelivered, Content: map[string]any{"message_id": id}}}}
	if err := cs.send(c, ack); err != nil {
		cs.log.Debug("acknowledging a message", "peer", cs.named(c.peer), "conversation", c.ID, "err", err)
	}
}

// SayAcknowledged says text, with parts, as a context message in the
// open conversation convID. When the peer acknowledges messages (its
// greeting said acks), it waits for the acknowledgement, at most AckWait
// or until ctx ends, and reports acked. A message written but not
// acknowledged is returned with an error wrapping ErrUnacknowledged: the
// caller may leave that same signed message at the peer's mailbox. A
// peer that refused the message answers with an error, returned as its
// *wire.RemoteError.
func (cs *Conversations) SayAcknowledged(ctx context.Context, convID, text string, parts ...gossip.Part) (m *gossip.Message, acked bool, err error) {
	c := cs.conversation(convID)
	if c == nil {
		return nil, false, fmt.Errorf("saying context: no open conversation %s (greet the peer first)", convID)
	}
	if m, err = c.Next(gossip.PhaseContext, cs.now()); err != nil {
		return nil, false, err
	}
	m.Body = gossip.Body{Text: text, Parts: parts}
	waits := c.peerAcks.Load()
	var answer <-chan *gossip.Message
	if waits {
		var done func()
		answer, done = cs.awaited.expect(m.Headers.MessageID, c.ID)
		defer done()
	}
	if err := cs.send(c, m); err != nil {
		return nil, false, err
	}
	if !waits {
		return m, false, nil
	}
	t := time.NewTimer(AckWait)
	defer t.Stop()
	var why string
	select {
	case reply := <-answer:
		return cs.acked(c, m, reply)
	case <-c.ended():
		why = "the conversation ended first"
	case <-t.C:
		why = fmt.Sprintf("none came within %s", AckWait)
	case <-ctx.Done():
		why = ctx.Err().Error()
	}
	// The acknowledgement may have come with the end: it counts.
	select {
	case reply := <-answer:
		return cs.acked(c, m, reply)
	default:
	}
	return m, false, fmt.Errorf("saying to %s: %w: %s", c.peer, ErrUnacknowledged, why)
}

// acked reads the answer to m: an acknowledgement, or the peer's refusal.
func (cs *Conversations) acked(c *conv, m, reply *gossip.Message) (*gossip.Message, bool, error) {
	if reply.Headers.Phase == gossip.PhaseError {
		return nil, false, remoteError(c.peer, reply)
	}
	return m, true, nil
}
