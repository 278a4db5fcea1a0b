package converse

import (
	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/internal/tally"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// figures are what the conversations count as they go (node/metrics
// reads them): greetings by direction, kind and outcome, and the
// capability requests this daemon made by outcome. The requests it
// served are node/invoke's to count.
type figures struct {
	greetings *tally.Table // direction, kind, outcome
	requested *tally.Table // outcome
}

// The values of the greeting figures' labels.
var (
	directions = []string{"in", "out"}
	kinds      = []string{"conversation", "query"} // /ifp/4/conversation, /ifp/7/capabilities
)

const (
	dirIn = iota
	dirOut
)

func newFigures() figures {
	return figures{greetings: tally.NewTable(directions, kinds, tally.Outcomes()), requested: tally.NewTable(tally.Outcomes())}
}

// greeted counts a greeting exchange that ended with err (nil: ok).
func (f figures) greeted(dir int, proto protocol.ID, err error) {
	kind := 0
	if proto == wire.Capabilities {
		kind = 1
	}
	f.greetings.Add(dir, kind, tally.OutcomeOf(err))
}

// Greetings counts greeting exchanges by direction ("in": a peer greeted
// this daemon; "out": this daemon greeted), kind ("conversation", or
// "query" for a capabilities query) and outcome ("ok", the wire code it
// was refused with, sent or received, or "failed" when the exchange broke
// off without one).
func (cs *Conversations) Greetings() tally.Counts { return cs.figures.greetings }

// Requested counts the capability requests this daemon sent (Invoke) by
// outcome: "ok" once the answer came, the wire code of a refusal, or
// "failed" (no conversation, no answer in time).
func (cs *Conversations) Requested() tally.Counts { return cs.figures.requested }

// OpenCount is the number of open conversations (those Open lists).
func (cs *Conversations) OpenCount() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n := 0
	for _, c := range cs.convs {
		if !c.Closed() {
			n++
		}
	}
	return n
}

// GreetedPeers is the number of connected peers this daemon has exchanged
// verified greetings with on their current connections (admit.GreetedTag).
func (cs *Conversations) GreetedPeers() int {
	cm := cs.host.ConnManager()
	n := 0
	for _, p := range cs.host.Network().Peers() {
		if ti := cm.GetTagInfo(p); ti != nil && ti.Tags[admit.GreetedTag] > 0 {
			n++
		}
	}
	return n
}
