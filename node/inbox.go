package node

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Messages that arrive outside a libp2p stream (the IFP-6 HTTPS inbox)
// go through Deliver, which applies the same checks in the same order as
// a stream does, with one difference: the sender is whoever holds the key
// the signature names (a did:key key_id), since no secure channel vouches
// for it. The seen-set is shared and keyed the same way (signer and
// message_id), so one signed message delivered over libp2p and then over
// HTTP (or twice over HTTP) is processed once; the second delivery is a
// duplicate, which IFP-6 §4.2 answers with 202 and no reprocessing.
//
// A message in a conversation open on a libp2p stream with the same peer
// joins it (sequence, audit, events, and a capability request is answered
// on the stream). Any other message belongs to an inbox conversation:
// greeting first, in sequence, nothing after close, audited with
// transport "https", its view cached. Replies are not sent back over HTTP
// (IFP-6 §4.1 would post them to the sender's own inbox); the local agent
// sees every accepted message on the event stream and answers as it
// chooses.

// ErrUnknownSender: the message names no key this daemon can resolve.
var ErrUnknownSender = errors.New("unknown sender")

// ErrDuplicate: the message was processed before (IFP-6 idempotency).
var ErrDuplicate = errors.New("message already received")

// maxInboxConversations bounds the inbox conversations kept in memory;
// past it, closed ones go first, then the oldest.
const maxInboxConversations = 4096

// inboxConvs are the conversations held through the inbox.
type inboxConvs struct {
	mu    sync.Mutex
	convs map[string]*gossip.Conversation
	order []string
}

func (ic *inboxConvs) get(key, id string, local, remote gossip.Agent) *gossip.Conversation {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.convs == nil {
		ic.convs = map[string]*gossip.Conversation{}
	}
	if c, ok := ic.convs[key]; ok {
		return c
	}
	if len(ic.order) >= maxInboxConversations {
		victim := 0
		for i, old := range ic.order {
			if ic.convs[old].Closed() {
				victim = i
				break
			}
		}
		delete(ic.convs, ic.order[victim])
		ic.order = append(ic.order[:victim], ic.order[victim+1:]...)
	}
	c := gossip.NewConversation(id, local, remote)
	ic.convs[key] = c
	ic.order = append(ic.order, key)
	return c
}

// Delivered says what became of a message given to Deliver.
type Delivered struct {
	MessageID string  `json:"message_id"`
	Peer      peer.ID `json:"peer"`
	// Refused is set when the message was received but did not fit its
	// conversation (IFP-6: a protocol error, not a transport one).
	Refused error `json:"-"`
}

// Deliver checks a message that arrived by transport (for the audit log,
// e.g. "https") and hands it to its conversation. The error wraps
// ErrUnknownSender, a signature error, a replay-window error,
// ErrDuplicate, or a rate limit (*wire.RetryAfterError); a message that
// passes those but does not fit its conversation is audited as refused and
// returned with Refused set.
func (n *Node) Deliver(m *gossip.Message, transport string) (*Delivered, error) {
	from, err := senderOf(m)
	if err != nil {
		return nil, err
	}
	if err := n.verifySigner(m, from); err != nil {
		return nil, err
	}
	c := n.conversation(m.Headers.ConversationID)
	if c != nil && c.peer != from {
		c = nil // another peer's conversation ID: this message cannot join it
	}
	temperature := conditions.Cool
	if c != nil {
		temperature = c.grant().Temperature
	}
	if err := n.rates.allow(from, temperature); err != nil {
		return nil, err
	}
	if err := n.checkReplay(from, m); err != nil {
		if errors.Is(err, identity.ErrReplay) {
			// Answered as taken (IFP-6 idempotency): so it must be on disk,
			// whatever failed the first time.
			if cerr := n.commitRecords(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("%w: %s", ErrDuplicate, m.Headers.MessageID)
		}
		return nil, err
	}
	d := &Delivered{MessageID: m.Headers.MessageID, Peer: from}
	if c != nil {
		if err := c.Accept(m); err != nil {
			d.Refused = err
			return d, n.refuseDelivered(transport, from, m, err)
		}
		if err := n.recordVia(transport, gossip.Received, from, m, ""); err != nil {
			n.unsee(from, m)
			return nil, err
		}
		n.events.publish(Event{Type: EventMessage, At: n.now(), Peer: from.String(), ConversationID: c.ID, Message: m, Detail: "via " + transport})
		if isRequest(m) {
			n.spawn(func() { n.handleRequest(c, m) })
		}
		// The sender lets go of the message once told it was taken. The
		// message is recorded and acted on either way; if the commit
		// fails, the sender's retry is a duplicate, committed again.
		if err := n.commitRecords(); err != nil {
			return nil, err
		}
		return d, nil
	}
	remote, err := agentOf(from)
	if err != nil {
		return nil, err
	}
	// Keyed by signer too: the first to use a conversation ID must not
	// take it from its owner.
	ic := n.inbox.get(from.String()+" "+m.Headers.ConversationID, m.Headers.ConversationID, n.localAgent(), remote)
	if err := ic.Accept(m); err != nil {
		d.Refused = err
		return d, n.refuseDelivered(transport, from, m, err)
	}
	if m.Headers.Phase == gossip.PhaseGreeting {
		if _, err := n.acceptView(from, m, proposalOf(m).ViewUnchanged, false, nil); err != nil {
			d.Refused = err
			return d, n.refuseDelivered(transport, from, m, err)
		}
		// As over libp2p: an introduction proof is checked and bound, and
		// an agent ID's document is checked in the background.
		n.trustOf(from, m)
	}
	if err := n.recordVia(transport, gossip.Received, from, m, ""); err != nil {
		n.unsee(from, m)
		return nil, err
	}
	detail := "via " + transport
	if isRequest(m) {
		detail += "; capability requests are answered over libp2p or POST /invoke, not through the inbox"
	}
	n.events.publish(Event{Type: EventMessage, At: n.now(), Peer: from.String(), ConversationID: m.Headers.ConversationID, Message: m, Detail: detail})
	if err := n.commitRecords(); err != nil {
		return nil, err
	}
	return d, nil
}

// refuseDelivered audits a delivered message that did not fit, and tells
// the local agent. It returns nil unless the audit log failed.
func (n *Node) refuseDelivered(transport string, from peer.ID, m *gossip.Message, cause error) error {
	if err := n.recordVia(transport, gossip.Received, from, m, "refused: "+cause.Error()); err != nil {
		n.unsee(from, m)
		return err
	}
	n.events.publish(Event{Type: EventRefused, At: n.now(), Peer: from.String(), ConversationID: m.Headers.ConversationID, Detail: cause.Error()})
	return nil
}

// HTTPFacts are the facts of an HTTP caller that proved nothing: no
// authentication level (it meets no min_auth_level, not even 0), the
// default tier, cool, the default persona.
func (n *Node) HTTPFacts() conditions.Facts {
	return conditions.Facts{AuthLevel: conditions.NoLevel, Disclosure: n.currentPolicy().DefaultTier, Temperature: conditions.Cool}
}

// ViewFor is the owner's signed view for facts, and a tag that changes
// whenever the view's content or seq does (an HTTP ETag).
func (n *Node) ViewFor(f conditions.Facts) (*negotiate.Document, string, error) {
	v, err := n.view(f)
	if err != nil {
		return nil, "", err
	}
	return v.doc, fmt.Sprintf("%d-%x", v.doc.Seq, v.key[:8]), nil
}

// Execute runs a capability for an HTTP caller with facts f, through the
// same checks as a libp2p request (conditions, parameter schema,
// workload, local agent, output schema).
func (n *Node) Execute(name string, params any, f conditions.Facts) (any, error) {
	g := negotiate.Granted{Disclosure: f.Disclosure, AuthLevel: f.AuthLevel, Temperature: f.Temperature, Persona: f.Persona}
	return n.execute(name, params, g, f.Peer, "")
}

// DisplayName is the agent's display name, or its did:key.
func (n *Node) DisplayName() string { return n.displayName() }

// AgentTimeout is how long the local agent may take per invocation.
func (n *Node) AgentTimeout() time.Duration { return n.cfg.Agent.Timeout.Duration }

// ExecuteSigned runs the capability request m (a probe naming one
// capability in headers.capabilities.request, its parameters in a
// "parameters" part) for whoever signed it: the signature is checked as
// for any inbox message, and the signer is granted what this daemon grants
// that peer (its trust level, the disclosure map, the temperature cap),
// so a signed HTTP request is decided exactly like one over libp2p. It
// returns the capability's name and result.
func (n *Node) ExecuteSigned(m *gossip.Message) (string, any, error) {
	from, err := senderOf(m)
	if err != nil {
		return "", nil, err
	}
	if err := n.verifySigner(m, from); err != nil {
		return "", nil, err
	}
	if !slices.ContainsFunc(m.Headers.To, func(a gossip.Agent) bool { return a.Agent == n.id.DID() }) {
		return "", nil, fmt.Errorf("%w: the request is addressed to someone else", gossip.ErrInvalidMessage)
	}
	if err := n.rates.allow(from, conditions.Cool); err != nil {
		return "", nil, err
	}
	if err := n.checkReplay(from, m); err != nil {
		return "", nil, err
	}
	if !isRequest(m) || len(m.Headers.Capabilities.Request) != 1 {
		return "", nil, fmt.Errorf("%w: a request is a probe naming exactly one capability in headers.capabilities.request", gossip.ErrInvalidMessage)
	}
	name := m.Headers.Capabilities.Request[0]
	var params any
	if p, ok := m.Body.Part(partParameters); ok {
		params = p.Content
	}
	if err := n.recordVia("https", gossip.Received, from, m, "capability request through POST /invoke"); err != nil {
		n.unsee(from, m)
		return "", nil, err
	}
	// An introduction proof on the request counts as on a greeting.
	g := n.grant(from, m, proposalOf(m))
	result, err := n.execute(name, params, g, from.String(), m.Headers.ConversationID)
	return name, result, err
}
