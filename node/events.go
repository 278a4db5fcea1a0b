package node

import (
	"sync"
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

// StandingChanged tells the event stream that the owner changed what this
// daemon holds of peer (a peer ID, an agent ID, or "" when the change
// names no one peer): the control API calls it after pinning or revoking
// a key, changing a disclosure tier or temperature cap, or revoking an
// introduction, so that followers (the MCP server's per-peer tools)
// recompute at once.
func (n *Node) StandingChanged(peer, detail string) {
	n.events.publish(Event{Type: EventTrust, At: n.now(), Peer: peer, Detail: detail})
}

// hub fans events out to subscribers. A subscriber that falls more than
// its buffer behind is sent events_lost and dropped, rather than slowing
// the daemon or silently missing events; it reconnects and catches up
// from the audit log. A subscriber is the local agent (the bridge sends
// invocations its way and waits for an answer) unless it subscribed as an
// observer: a tool that follows events (the MCP endpoint, a console) must
// not make the daemon wait agent.timeout for an answer nobody will give.
type hub struct {
	mu   sync.Mutex
	subs map[chan Event]bool // → is an agent
}

const subscriberBuffer = 256

func newHub() *hub { return &hub{subs: map[chan Event]bool{}} }

// subscribe returns a channel of events and a function to stop; agent
// says whether the subscriber answers invocations.
func (h *hub) subscribe(agent bool) (<-chan Event, func()) {
	ch := make(chan Event, subscriberBuffer)
	h.mu.Lock()
	h.subs[ch] = agent
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// agents is the number of subscribers that answer invocations.
func (h *hub) agents() int {
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

// SubscribeOption qualifies a subscription (Node.Subscribe).
type SubscribeOption func(*subscription)

type subscription struct{ observer bool }

// AsObserver subscribes to the events without being the local agent:
// invocations are not waited for on this subscriber's account.
func AsObserver() SubscribeOption { return func(s *subscription) { s.observer = true } }

func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- e:
		default:
			// Make room for one notice, then drop the subscriber.
			select {
			case <-ch:
			default:
			}
			ch <- Event{Type: EventEventsLost, At: e.At, Detail: "this subscriber fell behind; events after this were not delivered (read the audit log, then subscribe again)"}
			delete(h.subs, ch)
			close(ch)
		}
	}
}
