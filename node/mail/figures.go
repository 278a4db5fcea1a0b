package mail

import (
	"sync/atomic"
	"time"

	"github.com/ifaced/ifaced/node/store"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
)

// RelayFigures are the relay's figures now (node/metrics reads them).
type RelayFigures struct {
	Service      bool  // this daemon serves circuit relay v2 (relay.service)
	Reservations int64 // slots peers hold on this daemon's relay service
	Circuits     int64 // relayed connections open through it
	Held         int   // slots this daemon holds on the relays it uses (relay.use)
}

// RelayFigures says what the relay service holds and this daemon holds
// on others' relays.
func (mb *Mail) RelayFigures() RelayFigures {
	f := RelayFigures{Service: mb.reach.service != nil, Reservations: mb.reach.tracer.reservations.Load(),
		Circuits: mb.reach.tracer.circuits.Load()}
	mb.reach.mu.Lock()
	f.Held = len(mb.reach.circuits)
	mb.reach.mu.Unlock()
	return f
}

// Queues counts the mail held here for others (the mailboxes of a relay)
// and this daemon's own outbox.
func (mb *Mail) Queues() (store.Queues, error) { return mb.store.Mailboxes().Queues() }

// relayTracer counts what go-libp2p's relay service reports of itself
// (relayv2.MetricsTracer): the slots held and the circuits open. Its own
// Prometheus tracer would register on a registry of go-libp2p's; this one
// keeps two atomic counters the daemon's metrics read.
type relayTracer struct {
	reservations, circuits atomic.Int64
}

var _ relayv2.MetricsTracer = (*relayTracer)(nil)

func (t *relayTracer) RelayStatus(bool)                      {}
func (t *relayTracer) ConnectionOpened()                     { t.circuits.Add(1) }
func (t *relayTracer) ConnectionClosed(time.Duration)        { t.circuits.Add(-1) }
func (t *relayTracer) ConnectionRequestHandled(pbv2.Status)  {}
func (t *relayTracer) ReservationClosed(cnt int)             { t.reservations.Add(-int64(cnt)) }
func (t *relayTracer) ReservationRequestHandled(pbv2.Status) {}
func (t *relayTracer) BytesTransferred(int)                  {}
func (t *relayTracer) ReservationAllowed(isRenewal bool) {
	if !isRenewal {
		t.reservations.Add(1)
	}
}
