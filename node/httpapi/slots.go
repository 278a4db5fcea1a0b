package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/invoke"
	"github.com/ifaced/ifaced/node/wire"
)

// Invocation slots. A request that waits on the local agent (POST
// /invoke, signed or anonymous; an A2A message, blocking or as a task)
// holds one of maxInvocations slots while it runs, since each holds the
// agent's time and a connection for up to agent.timeout. The slots are
// shared so that one client cannot take them all:
//
//   - A client holds at most perClientInvocations slots at once. A client
//     is its address (IPv4, or IPv6 /64, as the limiter counts clients;
//     behind a trusted proxy the forwarded client's, caller.go), and for a
//     signed request also its signer: the request must fit under both,
//     because a new key costs nothing, so one address sending from fresh
//     keys is still one client, while one signer sending from many
//     addresses is one too.
//   - The last reservedInvocations free slots are kept for clients with
//     none running: a client that already holds a slot gets another only
//     while more than that many are free. So a few clients at their cap
//     leave room for everyone else's first request; to leave none, a flood
//     needs that many more clients, each with a request running.
//   - What the daemon answers itself (ping, capabilities.get and the other
//     standard answers, node.AnsweredByDaemon) never waits on the agent
//     and takes no slot, so it is never refused busy: the rate limits
//     bound it.
//
// A refusal is busy (503) with Retry-After and a message that says which
// bound it met and what would work.
const (
	maxInvocations       = 32                 // requests waiting on the local agent at once, for everyone
	perClientInvocations = maxInvocations / 4 // at once for one client
	reservedInvocations  = maxInvocations / 4 // free slots kept for clients with none running
	busyRetry            = time.Second        // the Retry-After of a busy refusal
)

// slotKey is one of the clients a request counts against.
type slotKey struct {
	id   string // "addr " + the client prefix, or "signer " + the signer
	name string // how a refusal names it
}

// slots are the binding's invocation slots (see above).
type slots struct {
	mu   sync.Mutex
	used int
	held map[string]int // slots held per client key; a key holding none is not kept
}

func newSlots() *slots { return &slots{held: map[string]int{}} }

// take takes a slot for a request counted against every one of keys, or
// returns the busy error that says why not. release gives it back (once).
func (sl *slots) take(keys []slotKey) (release func(), err error) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	free := maxInvocations - sl.used
	if free <= 0 {
		return nil, busy("all %d invocation slots are taken; retry shortly", maxInvocations)
	}
	running := 0
	for _, k := range keys {
		n := sl.held[k.id]
		if n >= perClientInvocations {
			return nil, busy("%s has %d invocations running, the most one client may have at once (of %d for everyone); retry when one of them has ended",
				k.name, n, maxInvocations)
		}
		running = max(running, n)
	}
	if running > 0 && free <= reservedInvocations {
		return nil, busy("only %d of %d invocation slots are free, kept for clients with none running, and this client already has %d running; retry when one of them has ended",
			free, maxInvocations, running)
	}
	sl.used++
	for _, k := range keys {
		sl.held[k.id]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			sl.mu.Lock()
			defer sl.mu.Unlock()
			sl.used--
			for _, k := range keys {
				if sl.held[k.id]--; sl.held[k.id] <= 0 {
					delete(sl.held, k.id)
				}
			}
		})
	}, nil
}

// busy is a busy refusal with its retry hint.
func busy(format string, args ...any) error {
	return &wire.RetryAfterError{After: busyRetry, Err: fmt.Errorf("%w: %s (requests the daemon answers itself, such as ping, take no slot and are never refused for this)",
		conditions.ErrBusy, fmt.Sprintf(format, args...))}
}

// addrKey is the client key of a caller's address.
func addrKey(c caller) slotKey {
	p := clientOf(c.remote)
	name := "the address " + p.Addr().String()
	if p.Addr().Is6() {
		name = "the IPv6 /64 " + p.String()
	}
	if !p.IsValid() {
		name = "this address"
	}
	return slotKey{id: "addr " + p.String(), name: name}
}

// signerKey is the client key of a signed request's signer, as its
// headers.from names it (the door refuses a request not signed by it).
func signerKey(m *gossip.Message) slotKey {
	who := m.Headers.From.Agent
	return slotKey{id: "signer " + who, name: "the signer " + strconv.Quote(gossip.Clip(who, 100))}
}

// needsSlot reports whether a request for capability name waits on the
// local agent.
func needsSlot(name string) bool { return !invoke.AnsweredByDaemon(name) }

// invocation takes a slot for keys, or answers the busy refusal.
func (s *Binding) invocation(w http.ResponseWriter, keys ...slotKey) (release func(), ok bool) {
	release, err := s.slots.take(keys)
	if err != nil {
		s.refuse(w, err)
		return nil, false
	}
	return release, true
}
