package node

import (
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/wire"
)

// TestSubscriberHoldsBoundedBytes: a subscriber that does not keep up is
// dropped (told events_lost) once the events waiting for it hold more
// than subscriberBytes — a flood of large messages is not kept in memory
// for it, whatever the count — and what it had not read goes with it.
func TestSubscriberHoldsBoundedBytes(t *testing.T) {
	h := newHub()
	ch, stop := h.subscribe(false)
	defer stop()
	big := strings.Repeat("x", 1<<20)
	const sent = 2 * subscriberBytes >> 20 // twice the bound, far below subscriberBuffer events
	for i := range sent {
		h.publish(Event{Type: EventMessage, At: time.Now(), Message: &gossip.Message{Body: gossip.Body{Text: big}}, Detail: string(rune('a' + i%26))})
	}
	if n := len(h.subs); n != 0 {
		t.Fatalf("%d subscribers still held after %d MiB of events nobody read, over the %d MiB bound", n, sent, subscriberBytes>>20)
	}
	got, lost := 0, false
	for e := range ch {
		if e.Type == EventEventsLost {
			lost = true
			continue
		}
		got++
	}
	// At most the one event in the forwarder's hand comes before the
	// notice; the rest waiting was dropped.
	if !lost || got > 1 {
		t.Fatalf("the subscriber read %d events and events_lost %v; want events_lost after at most one (what waited was dropped)", got, lost)
	}
}

// TestDecodingBudgetHeldThroughTheAudit: a message keeps its share of the
// decoding budget after its signature is verified, until it is recorded:
// the audit step copies it twice (its JSON line, its rendering), which
// the budget must count. At the fit step, after verify and before the
// audit, the strangers' share is not whole.
func TestDecodingBudgetHeldThroughTheAudit(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	raw := newRawPeer(t, alice)
	b := alice.door.budget
	held := make(chan bool, 1)
	alice.door.beforeFit = func(a *arrival) {
		whole := b.strangers.TryAcquire(b.share)
		if whole {
			b.strangers.Release(b.share)
		}
		select {
		case held <- !whole:
		default:
		}
	}
	g := raw.greeting(alice, raw.id)
	m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, g))
	if err != nil || m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("greeting: %v %+v", err, m)
	}
	if !<-held {
		t.Fatal("at the fit step the message's share of the decoding budget was given back already")
	}
	if !b.strangers.TryAcquire(b.share) {
		t.Fatal("once the message was admitted its share of the budget was not given back")
	}
	b.strangers.Release(b.share)
}
