// Package events is the daemon's event hub and the local agent's message
// types. The hub fans each event out to its subscribers — the local agent
// (which answers invocations) and observers such as the MCP server or the
// console — each within a bound of count and bytes, past which the
// subscriber is told events_lost and dropped, so that no flood is held in
// memory for a reader that does not keep up. Invocation and
// InvocationAnswer are what the local agent receives and answers, whether
// through the event stream or its webhook. It imports no component of the
// daemon: every component that tells the owner something is given the Hub.
package events

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ifaced/ifaced/gossip"
)

// Event types delivered to the local agent.
const (
	EventMessage      = "message"      // a message was received and accepted
	EventRefused      = "refused"      // a message was refused (the error says why)
	EventPeerView     = "peer_view"    // a peer's capability view arrived or changed
	EventDocument     = "document"     // this daemon's own document changed
	EventEventsLost   = "events_lost"  // the subscriber fell behind; read the audit log
	EventConversation = "conversation" // a conversation opened or closed
	EventInvocation   = "invocation"   // a peer invoked a capability; answer with POST /v1/invocations/{id}
	EventRelay        = "relay"        // a relay slot was reserved or lost
	EventMail         = "mail"         // a message was left at a peer's mailbox, delivered, or given up on
	EventTrust        = "trust"        // the owner changed what it holds of a peer: a pin, a revocation, a tier, an introduction
	EventKey          = "key"          // a key statement was given or followed: a peer's key (or this daemon's) was rotated or revoked
)

// Event is one thing the local agent may want to know, in the order the
// daemon saw them.
type Event struct {
	Type           string          `json:"type"`
	At             time.Time       `json:"at"`
	Peer           string          `json:"peer,omitempty"`
	ConversationID string          `json:"conversation_id,omitempty"`
	Message        *gossip.Message `json:"message,omitempty"`
	Invocation     *Invocation     `json:"invocation,omitempty"`
	Detail         string          `json:"detail,omitempty"`
}

// Hub fans events out to subscribers. A subscriber that falls more than
// its buffer behind — subscriberBuffer events, or events holding more
// than subscriberBytes between them (a message event holds the decoded
// message: a greeting with a large view holds megabytes) — is sent
// events_lost and dropped, rather than slowing the daemon, holding a
// flood's messages in memory, or silently missing events; it reconnects
// and catches up from the audit log. A subscriber is the local agent (the
// bridge sends invocations its way and waits for an answer) unless it
// subscribed as an observer: a tool that follows events (the MCP
// endpoint, a console) must not make the daemon wait agent.timeout for an
// answer nobody will give.
type Hub struct {
	mu   sync.Mutex
	subs map[*subscriber]bool // → is an agent
}

const (
	SubscriberBuffer = 256
	SubscriberBytes  = 16 << 20
)

// subscriber is one subscription: events wait in queue (within its
// bounds) and a forwarder hands them to out, the subscriber's channel,
// one at a time, counting what waits in pending.
type subscriber struct {
	queue   chan Event
	out     chan Event
	done    chan struct{}
	pending atomic.Int64 // the cost (eventCost) of the events in queue and in the forwarder's hand
}

// eventCost is what an event holds in memory.
func eventCost(e Event) int64 {
	n := int64(256 + len(e.Detail))
	if e.Message != nil {
		n += e.Message.Footprint()
	}
	if e.Invocation != nil && e.Invocation.Message != nil {
		n += e.Invocation.Message.Footprint()
	}
	return n
}

func NewHub() *Hub { return &Hub{subs: map[*subscriber]bool{}} }

// Subscribe returns a channel of events and a function to stop. The
// subscriber is the local agent (it answers invocations) unless an option
// says it only observes (AsObserver).
func (h *Hub) Subscribe(opts ...SubscribeOption) (<-chan Event, func()) {
	var sub subscription
	for _, o := range opts {
		o(&sub)
	}
	agent := !sub.observer
	s := &subscriber{queue: make(chan Event, SubscriberBuffer), out: make(chan Event), done: make(chan struct{})}
	go s.forward()
	h.mu.Lock()
	h.subs[s] = agent
	h.mu.Unlock()
	var once sync.Once
	return s.out, func() {
		once.Do(func() {
			h.mu.Lock()
			if _, ok := h.subs[s]; ok {
				delete(h.subs, s)
				close(s.queue)
			}
			h.mu.Unlock()
			close(s.done) // the subscriber reads no more: the forwarder stops
		})
	}
}

// forward hands the queued events to the subscriber, then closes its
// channel (after the queue is closed, or the subscriber stopped).
func (s *subscriber) forward() {
	defer close(s.out)
	for e := range s.queue {
		select {
		case s.out <- e:
			s.pending.Add(-eventCost(e))
		case <-s.done:
			return
		}
	}
}

// Agents is the number of subscribers that answer invocations.
func (h *Hub) Agents() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, agent := range h.subs {
		if agent {
			n++
		}
	}
	return n
}

// SubscribeOption qualifies a subscription (Hub.Subscribe).
type SubscribeOption func(*subscription)

type subscription struct{ observer bool }

// AsObserver subscribes to the events without being the local agent:
// invocations are not waited for on this subscriber's account.
func AsObserver() SubscribeOption { return func(s *subscription) { s.observer = true } }

func (h *Hub) Publish(e Event) {
	cost := eventCost(e)
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.pending.Load()+cost <= SubscriberBytes {
			select {
			case s.queue <- e:
				s.pending.Add(cost)
				continue
			default:
			}
		}
		// Behind: what waits is dropped (its memory goes with it), and the
		// subscriber is told so, and dropped.
		for drained := false; !drained; {
			select {
			case <-s.queue:
			default:
				drained = true
			}
		}
		s.queue <- Event{Type: EventEventsLost, At: e.At, Detail: "this subscriber fell behind; events after this were not delivered (read the audit log, then subscribe again)"}
		delete(h.subs, s)
		close(s.queue)
	}
}
