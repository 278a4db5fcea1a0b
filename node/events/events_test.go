package events

import (
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
)

// TestSubscriberHoldsBoundedBytes: a subscriber that does not keep up is
// dropped (told events_lost) once the events waiting for it hold more
// than subscriberBytes — a flood of large messages is not kept in memory
// for it, whatever the count — and what it had not read goes with it.
func TestSubscriberHoldsBoundedBytes(t *testing.T) {
	h := NewHub()
	ch, stop := h.Subscribe(AsObserver())
	defer stop()
	big := strings.Repeat("x", 1<<20)
	const sent = 2 * SubscriberBytes >> 20 // twice the bound, far below subscriberBuffer events
	for i := range sent {
		h.Publish(Event{Type: EventMessage, At: time.Now(), Message: &gossip.Message{Body: gossip.Body{Text: big}}, Detail: string(rune('a' + i%26))})
	}
	if n := len(h.subs); n != 0 {
		t.Fatalf("%d subscribers still held after %d MiB of events nobody read, over the %d MiB bound", n, sent, SubscriberBytes>>20)
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
