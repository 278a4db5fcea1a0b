package node

import (
	"context"
	"fmt"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Update push. When the owner's document changes, every peer in an open
// conversation is sent its new view on /ifp/7/update/1.0.0: one signed
// context-phase message in that conversation (so the audit keeps it with
// the conversation) whose sequence is the document's seq — updates are
// ordered by seq, not by the conversation's turn-taking — answered by one
// signed acknowledgement or error. The receiver caches the view only if
// its seq is higher than the one it holds.

// updatePush is the capability-update push of the conversation table: it
// sends each open conversation's peer its new view when the owner's
// document changes, and answers the pushes peers send (the protocol is
// above). It has no state of its own: the conversations are the table's.
type updatePush struct{ cs *Conversations }

func newUpdatePush(cs *Conversations) *updatePush { return &updatePush{cs: cs} }

// pushAll sends the current view to every open conversation's peer, each
// in the background.
func (up *updatePush) pushAll() {
	cs := up.cs
	cs.mu.Lock()
	convs := make([]*conv, 0, len(cs.convs))
	for _, c := range cs.convs {
		convs = append(convs, c)
	}
	cs.mu.Unlock()
	for _, c := range convs {
		cs.spawn(func() {
			ctx, cancel := context.WithTimeout(cs.ctx, cs.streamTimeout)
			defer cancel()
			if err := up.push(ctx, c); err != nil {
				cs.log.Warn("pushing capability update", "peer", cs.named(c.peer), "conversation", c.ID, "err", err)
			}
		})
	}
}

func (up *updatePush) push(ctx context.Context, c *conv) error {
	cs := up.cs
	v, err := cs.docs.view(c.grant().Facts(c.peer.String(), 0))
	if err != nil {
		return err
	}
	if !c.viewChanged(v.Key) {
		// Nothing this peer can see changed: a push would only tell it that
		// something it cannot see did.
		return nil
	}
	s, err := cs.host.NewStream(network.WithAllowLimitedConn(ctx, "ifaced update"), c.peer, wire.Update)
	if err != nil {
		return fmt.Errorf("opening update stream: %w", err)
	}
	if err := s.Scope().SetService(wire.ServiceName); err != nil {
		s.Reset()
		return err
	}
	u := &conv{Conversation: c.Conversation, peer: c.peer, stream: wire.NewStream(s, cs.streamTimeout).WithBudget(cs.door.budget, c.peer)}
	now := cs.now()
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: c.Local, To: []gossip.Agent{c.Remote}, ConversationID: c.ID,
		Sequence: int64(v.Doc.Seq), Phase: gossip.PhaseContext, ContentType: gossip.DefaultContentType,
		Subject: "capability update",
	}, Body: gossip.Body{
		Text:  fmt.Sprintf("My capabilities changed (seq %d); my new signed view for you is attached.", v.Doc.Seq),
		Parts: []gossip.Part{v.Part()},
	}}
	if err := m.Sign(cs.id, now); err != nil {
		s.Reset()
		return err
	}
	if err := cs.recordSent(viaLibp2p, c.peer, m, "capability update", nil); err != nil {
		s.Reset()
		return err
	}
	if err := u.stream.Write(m); err != nil {
		s.Reset()
		return err
	}
	cs.noteSent(c.peer, v, c.grant(), c.ID, SentInUpdate)
	s.CloseWrite()
	ack, release, err := u.stream.ReadHeld()
	if err != nil {
		s.Reset()
		return fmt.Errorf("reading update acknowledgement: %w", err)
	}
	_, err = cs.door.admit(&arrival{via: viaLibp2p, msg: ack, stream: c.peer, note: "capability update answer", uncharged: true, release: release,
		fit: func(peer.ID) error {
			if ack.Headers.Phase == gossip.PhaseError && ack.Headers.ConversationID == m.Headers.ConversationID {
				return nil // a refusal of the update: reported below
			}
			if ack.Headers.Thread == nil || ack.Headers.Thread.InReplyTo != m.Headers.MessageID || ack.Headers.ConversationID != m.Headers.ConversationID {
				return fmt.Errorf("%w: the answer to update %s does not reply to it", gossip.ErrWrongConversation, m.Headers.MessageID)
			}
			return nil
		}})
	s.Close()
	if err != nil {
		return fmt.Errorf("reading update acknowledgement: %w", err)
	}
	if ack.Headers.Phase == gossip.PhaseError {
		return remoteError(c.peer, ack)
	}
	return nil
}

// handleUpdate receives a pushed view. The update belongs to an open
// conversation with its sender and counts against that conversation's
// rate like any other message, but is numbered by the document's seq, not
// the conversation's turns, so it does not take a turn in it.
func (up *updatePush) handle(s network.Stream) {
	cs := up.cs
	ws, pid, remote, ok := cs.openInbound(s)
	if !ok {
		return
	}
	m, release, err := ws.ReadHeld()
	if err != nil {
		cs.refuseFrame(ws, pid, remote, err)
		return
	}
	c := &conv{Conversation: gossip.NewConversation(m.Headers.ConversationID, cs.localAgent(), remote), peer: pid, stream: ws}
	open := cs.conversation(m.Headers.ConversationID)
	if open != nil && open.peer != pid {
		open = nil
	}
	var pv pendingView
	_, err = cs.door.admit(&arrival{via: viaLibp2p, msg: m, stream: pid, note: "capability update", views: []gossip.Phase{gossip.PhaseContext}, release: release,
		validate: func() error {
			if p := m.Headers.Phase; p != gossip.PhaseContext {
				return fmt.Errorf("%w: an update push is a context message (phase context, the new view in a %q part), not a %s; greetings and the rest of a conversation go on %s",
					gossip.ErrUnexpectedPhase, partCapabilities, p, wire.Conversation)
			}
			return nil
		},
		temperature: func(peer.ID) string {
			if open != nil {
				return open.grant().Temperature
			}
			return ""
		},
		verify: func(peer.ID) (err error) {
			if m.Headers.Phase == gossip.PhaseContext {
				pv, err = cs.checkView(pid, m, "", true, nil)
			}
			return err
		},
		fit: func(peer.ID) error {
			if open == nil {
				return fmt.Errorf("%w: no open conversation %s with you; greet first", gossip.ErrWrongConversation, m.Headers.ConversationID)
			}
			return nil
		}})
	if err != nil {
		cs.answerRefusal(c, err)
		return
	}
	if _, err := cs.keepView(pid, m, pv); err != nil {
		cs.answerRefusal(c, err)
		return
	}
	now := cs.now()
	ack := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: cs.localAgent(), To: []gossip.Agent{remote}, ConversationID: m.Headers.ConversationID,
		Sequence: m.Headers.Sequence, Phase: gossip.PhaseContext, ContentType: gossip.DefaultContentType,
		Thread: &gossip.Thread{InReplyTo: m.Headers.MessageID},
	}, Body: gossip.Body{Text: fmt.Sprintf("Thank you; I now hold your capabilities at seq %d.", m.Headers.Sequence)}}
	if err := cs.send(c, ack); err != nil {
		cs.log.Debug("acknowledging update", "peer", cs.named(pid), "err", err)
	}
	s.Close()
}
