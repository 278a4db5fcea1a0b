package gossip

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Conversation state. Sequence numbers count the messages of a whole
// conversation: each side sends one more than the highest number it has
// sent or received, so a turn-taking exchange reads 1, 2, 3, … as in IFP-3.
// A receiver requires each message from the peer to carry a number higher
// than the last one it received from that peer; both sides sending at
// once may then produce equal numbers, which is allowed.
//
// Sequence numbers run from 1 to MaxSequence. A conversation whose numbers
// are used up cannot go on: Next and TryStamp refuse with ErrOutOfSequence
// rather than number past MaxSequence, and Accept refuses any number
// outside 1..MaxSequence, so no arithmetic on them can overflow.
//
// The first message of a conversation is a greeting. A greeting may come
// again later (IFP-12: tier changes are proposed in a greeting); nothing
// but an error may follow a close.

var (
	// ErrOutOfSequence: a message whose sequence does not follow the last one.
	ErrOutOfSequence = errors.New("message out of sequence")
	// ErrWrongConversation: a message of another conversation or between other agents.
	ErrWrongConversation = errors.New("message belongs to another conversation")
	// ErrConversationClosed: a message after the conversation was closed.
	ErrConversationClosed = errors.New("conversation is closed")
	// ErrUnexpectedPhase: a phase not allowed at this point (e.g. no greeting first).
	ErrUnexpectedPhase = errors.New("unexpected phase")
)

// Conversation tracks one conversation with one peer. It is safe for
// concurrent use.
type Conversation struct {
	ID     string
	Local  Agent // this daemon
	Remote Agent // the peer

	mu           sync.Mutex
	lastSent     int64
	lastReceived int64
	lastID       string // the last message received, for in_reply_to
	started      bool
	closed       bool
	seqByID      map[string]int64
	idBySeq      map[int64]string
}

// NewConversation starts tracking conversation id between local and remote.
func NewConversation(id string, local, remote Agent) *Conversation {
	return &Conversation{ID: id, Local: local, Remote: remote, seqByID: map[string]int64{}, idBySeq: map[int64]string{}}
}

// Next builds the next outgoing message of the given phase, unsigned: ids,
// date, agents, sequence and threading are filled in; the caller adds the
// body and optional headers, signs it, then calls Sent.
func (c *Conversation) Next(phase Phase, now time.Time) (*Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed && phase != PhaseError {
		return nil, fmt.Errorf("sending %s in conversation %s: %w", phase, c.ID, ErrConversationClosed)
	}
	if !c.started && phase != PhaseGreeting && phase != PhaseError {
		return nil, fmt.Errorf("sending %s in conversation %s: %w: the first message is a greeting", phase, c.ID, ErrUnexpectedPhase)
	}
	seq := nextSeq(c.lastSent, c.lastReceived)
	if seq > MaxSequence {
		return nil, fmt.Errorf("sending %s in conversation %s: %w: every sequence number up to %d is used; start a new conversation", phase, c.ID, ErrOutOfSequence, MaxSequence)
	}
	m := &Message{IFP: Version, Headers: Headers{
		MessageID:      NewID("msg", now),
		Date:           FormatDate(now),
		From:           c.Local,
		To:             []Agent{c.Remote},
		ConversationID: c.ID,
		Sequence:       seq,
		Phase:          phase,
		ContentType:    DefaultContentType,
	}}
	if c.lastID != "" {
		m.Headers.Thread = &Thread{InReplyTo: c.lastID}
	}
	return m, nil
}

// Stamp raises m's sequence number past every number already sent or
// received in the conversation (never lowering the one it was built with)
// and counts it as sent. Next numbers a message when it is built; when
// several goroutines answer in one conversation (concurrent requests), two
// could be built with one number, or written in another order than
// numbered, and the peer would refuse the second as out of sequence. The
// sender stamps under the lock that orders its writes, right before
// signing.
//
// When the conversation's numbers are used up, Stamp numbers m
// MaxSequence+1, which every receiver refuses; TryStamp says so instead.
func (c *Conversation) Stamp(m *Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.Headers.Sequence = max(m.Headers.Sequence, nextSeq(c.lastSent, c.lastReceived))
	c.lastSent = m.Headers.Sequence
}

// TryStamp is Stamp, except that when no valid number is left (the
// number m would get is past MaxSequence) it leaves m and the
// conversation unchanged and returns ErrOutOfSequence.
func (c *Conversation) TryStamp(m *Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	seq := max(m.Headers.Sequence, nextSeq(c.lastSent, c.lastReceived))
	if seq > MaxSequence {
		return fmt.Errorf("numbering %s in conversation %s: %w: every sequence number up to %d is used; start a new conversation", m.Headers.Phase, c.ID, ErrOutOfSequence, MaxSequence)
	}
	m.Headers.Sequence = seq
	c.lastSent = seq
	return nil
}

// nextSeq is one more than the highest of a and b (and of 0), saturating
// at MaxSequence+1 so that no input can make it overflow.
func nextSeq(a, b int64) int64 {
	n := max(a, b, 0)
	if n >= MaxSequence {
		return MaxSequence + 1
	}
	return n + 1
}

// Sent records an outgoing message.
func (c *Conversation) Sent(m *Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastSent = max(c.lastSent, m.Headers.Sequence)
	c.record(m)
}

// Check reports whether an incoming, already verified message fits the
// conversation, without recording it: a receiver checks before it audits,
// and records (Accept) only what it admitted.
func (c *Conversation) Check(m *Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.check(m)
}

// Accept checks an incoming, already verified message against the
// conversation state and records it.
func (c *Conversation) Accept(m *Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check(m); err != nil {
		return err
	}
	c.lastReceived = m.Headers.Sequence
	c.lastID = m.Headers.MessageID
	c.record(m)
	return nil
}

func (c *Conversation) check(m *Message) error {
	h := &m.Headers
	switch {
	case h.ConversationID != c.ID:
		return fmt.Errorf("%w: conversation_id %q, this stream carries %q", ErrWrongConversation, h.ConversationID, c.ID)
	case h.From.Agent != c.Remote.Agent:
		return fmt.Errorf("%w: from %q, this conversation is with %q", ErrWrongConversation, h.From.Agent, c.Remote.Agent)
	case !addressedTo(h.To, c.Local.Agent):
		return fmt.Errorf("%w: addressed to %v, not to %q", ErrWrongConversation, agentIDs(h.To), c.Local.Agent)
	case h.Sequence < 1 || h.Sequence > MaxSequence:
		return fmt.Errorf("%w: sequence %d is outside 1 to %d", ErrOutOfSequence, h.Sequence, MaxSequence)
	case h.Sequence <= c.lastReceived:
		return fmt.Errorf("%w: sequence %d after %d; send %d or higher", ErrOutOfSequence, h.Sequence, c.lastReceived, c.lastReceived+1)
	case c.closed && h.Phase != PhaseError:
		return fmt.Errorf("%s at sequence %d: %w", h.Phase, h.Sequence, ErrConversationClosed)
	case !c.started && h.Phase != PhaseGreeting && h.Phase != PhaseError:
		return fmt.Errorf("%w: %s before any greeting; start with a greeting", ErrUnexpectedPhase, h.Phase)
	}
	return nil
}

func (c *Conversation) record(m *Message) {
	switch m.Headers.Phase {
	case PhaseGreeting:
		c.started = true
	case PhaseClose:
		c.closed = true
	}
	c.seqByID[m.Headers.MessageID] = m.Headers.Sequence
	c.idBySeq[m.Headers.Sequence] = m.Headers.MessageID
}

// Closed reports whether either side closed the conversation.
func (c *Conversation) Closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// SeqOf maps a message_id of this conversation to its sequence (for IFP-3
// reply-to).
func (c *Conversation) SeqOf(id string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.seqByID[id]
	return s, ok
}

// IDOf maps a sequence number to its message_id.
func (c *Conversation) IDOf(seq int64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.idBySeq[seq]
	return id, ok
}

func addressedTo(to []Agent, agent string) bool {
	for _, a := range to {
		if a.Agent == agent {
			return true
		}
	}
	return false
}

func agentIDs(as []Agent) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Agent
	}
	return out
}
