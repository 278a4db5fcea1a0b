package admit

import (
	"time"

	"github.com/ifaced/ifaced/node/internal/tally"
)

// step is a step of the pipeline, as the door's figures name it.
type step int

// The steps, in the pipeline's order. decode (the transport's bounded
// decode) and commit (the message taking its place in its conversation,
// after the audit) are counted in refusals only: the door times the
// steps between them.
const (
	stepDecode step = iota
	stepRoom
	stepValidate
	stepEstablish
	stepVerify
	stepStrangersRoom
	stepReplay
	stepRate
	stepFit
	stepAudit
	stepCommit
)

// stepNames are the steps' names, the values of the step label.
var stepNames = []string{"decode", "room", "validate", "establish", "verify", "strangers_room", "replay", "rate", "fit", "audit", "commit"}

// Latencies is how long each step the door times took (room, validate,
// establish, verify, strangers_room, replay, rate, fit, audit), for every
// message the step applied to — refused there or passed on: room and
// strangers_room apply to greetings only, rate to charged messages, fit
// where the transport fits messages. verify is the signature and the
// documents the message carries together.
func (d *Door) Latencies() tally.Latencies { return d.latencies }

// Refusals counts the door's refusals by step (decode … commit) and wire
// code, each once, whether or not the record of refusals had room to
// write it.
func (d *Door) Refusals() tally.Counts { return d.refusalCounts }

// stopwatch times the steps of one message, one after the other.
type stopwatch struct {
	d    *Door
	last time.Time
}

func (d *Door) stopwatch() stopwatch { return stopwatch{d: d, last: time.Now()} }

// lap ends s's step: the time since the last lap (or the start) is its.
// A step that does not apply is not lapped, and its few nanoseconds go to
// the next step's.
func (w *stopwatch) lap(s step) {
	now := time.Now()
	w.d.latencies.Observe(int(s-stepRoom), now.Sub(w.last))
	w.last = now
}

// reset starts the next step now.
func (w *stopwatch) reset() { w.last = time.Now() }
