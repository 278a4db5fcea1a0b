package invoke

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/tally"
	"github.com/ifaced/ifaced/node/wire"
)

const (
	PartParameters = "parameters"
	PartResult     = "result"
)

// BusyRetry is the wait suggested to a requester when a capability is at
// its max_concurrent.
const BusyRetry = 5 * time.Second

// workload counts, per capability, the invocations running now
// (max_concurrent).
type workload struct {
	mu       sync.Mutex
	inFlight map[string]int
}

// start counts one more running invocation of name unless that would pass
// max; it returns the count seen and whether it started.
func (w *workload) start(name string, limit int) (int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.inFlight[name]
	if limit > 0 && n >= limit {
		return n, false
	}
	w.inFlight[name] = n + 1
	return n, true
}

func (w *workload) done(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight[name]--
}

func (w *workload) running(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inFlight[name]
}

// Invoker runs capabilities for requesters the door admitted: it decides
// on the facts the daemon established (conditions, parameter schema,
// workload), asks the local agent through the bridge, and checks the
// output. Every transport's requests come through execute, so none can
// skip a check.
type Invoker struct {
	docs     Documents
	standard *standardAnswers // the IFP-7 capabilities the daemon answers itself
	order    *conditions.TierOrder
	work     *workload // running invocations per capability (max_concurrent)
	bridge   *bridge
	timeout  time.Duration // agent.timeout
	ctx      context.Context
	now      func() time.Time
	served   *tally.Table // requests executed, by outcome (Served)
}

// Documents is the owner's document as the invoker reads it
// (node/owner's Document is one): the capabilities and their compiled
// schemas, and the requester's signed view (capabilities.get).
type Documents interface {
	Current() *negotiate.Document
	WithSchemas() (*negotiate.Document, *negotiate.Schemas)
	View(conditions.Facts) (*negotiate.SignedView, error)
}

// Deps is what New builds the invoker from.
type Deps struct {
	Docs   Documents
	Order  *conditions.TierOrder
	Agent  config.AgentConfig // the local agent: its webhook and agent.timeout
	Tools  ToolServer         // an MCP server as the local agent; nil without [agent.mcp]
	Events *events.Hub        // invocations go to the agent as events when it has no webhook
	Log    *slog.Logger
	Ctx    context.Context // ends when the daemon closes: every invocation with it
	Now    func() time.Time
}

// New builds the invoker.
func New(d Deps) *Invoker {
	return &Invoker{docs: d.Docs, standard: newStandardAnswers(d.Docs), order: d.Order, work: &workload{inFlight: map[string]int{}},
		bridge: newBridge(d.Agent, d.Tools, d.Events, d.Log), timeout: d.Agent.Timeout.Duration, ctx: d.Ctx, now: d.Now,
		served: tally.NewTable(tally.Outcomes())}
}

// Served counts the capability requests Execute ran, every transport's,
// by outcome: "ok", or the wire code the requester was answered with
// (node/metrics reads it).
func (iv *Invoker) Served() tally.Counts { return iv.served }

// Execute runs capability name for a requester the daemon granted g: the
// conditions on those facts, the parameters against the schema, the
// workload limit, the local agent (or the daemon itself, for the standard
// capabilities it answers: standardAnswers), and the output against its
// schema.
// Every transport's requests come through here, so none can skip a check.
// requester is the peer ID, or "" for an anonymous HTTP caller.
//
// It also returns the decision (never nil) for the owner's audit: the
// facts, each condition evaluated in the order above (a step not reached
// is not listed), the outcome and the wire code. The caller fills in
// Facts.LevelHow, which only it knows, and records the decision with the
// answer or refusal it sends.
func (iv *Invoker) Execute(name string, params any, g negotiate.Granted, requester, convID string) (result any, d *gossip.Decision, err error) {
	doc, schemas := iv.docs.WithSchemas()
	facts := func(inFlight int) conditions.Facts {
		f := g.Facts(requester, inFlight)
		if requester == "" {
			f.AuthLevel = conditions.NoLevel
		}
		return f
	}
	f := facts(iv.work.running(name))
	d = NewDecision(name, f, "")
	defer func() {
		Settle(d, err)
		iv.served.Add(tally.AnsweredWith(err))
	}()
	cap, err := doc.Decide(name, f, iv.order, BusyRetry)
	iv.explain(d, doc, name, f, err)
	if err != nil {
		return nil, d, err
	}
	err = schemas.CheckParams(name, params)
	if cap.Parameters != nil {
		d.Conditions = append(d.Conditions, schemaCondition(PartParameters, err, "the parameters match the capability's parameters schema"))
	}
	if err != nil {
		return nil, d, err
	}
	checkOutput := func(result any) (any, *gossip.Decision, error) {
		err := schemas.CheckOutput(name, result)
		if cap.OutputSchema != nil {
			d.Conditions = append(d.Conditions, schemaCondition("output_schema", err, "the result matches the capability's output_schema"))
		}
		if err != nil {
			return nil, d, err
		}
		return result, d, nil
	}
	if result, ok, err := iv.standard.answer(name, g, requester); ok {
		if err != nil {
			return nil, d, err
		}
		return checkOutput(result)
	}
	seen, ok := iv.work.start(name, cap.Conds().MaxConcurrent)
	if !ok {
		// Another request took the last slot since Decide counted.
		f = facts(seen)
		_, err := doc.Decide(name, f, iv.order, BusyRetry)
		// The same conditions, in the same order, ahead of the parameters.
		copy(d.Conditions, decisionConditions(conditions.Explain(cap.Conds(), f, iv.order, BusyRetry)))
		return nil, d, err
	}
	defer iv.work.done(name)
	timeout := iv.timeout
	ctx, cancel := context.WithTimeout(iv.ctx, timeout)
	defer cancel()
	inv := events.Invocation{ID: gossip.NewID("inv", iv.now()), Capability: name, Version: cap.VersionOrDefault(), Params: params,
		Peer: requester, ConversationID: convID, Granted: g, Deadline: iv.now().Add(timeout)}
	result, err = iv.bridge.invoke(ctx, inv, iv.now())
	if err != nil {
		return nil, d, err
	}
	return checkOutput(result)
}

// Ask hands the local agent m, a message that asks for a reply (an
// Invocation with no capability, in conversation convID, for a requester
// granted g), and waits for its answer within agent.timeout.
func (iv *Invoker) Ask(convID string, m *gossip.Message, g negotiate.Granted) (any, error) {
	now := iv.now()
	ctx, cancel := context.WithTimeout(iv.ctx, iv.timeout)
	defer cancel()
	inv := events.Invocation{ID: gossip.NewID("inv", now), ConversationID: convID, Deadline: now.Add(iv.timeout), Message: m, Granted: g}
	return iv.bridge.invoke(ctx, inv, now)
}

// AgentTimeout is agent.timeout: how long the local agent has to answer.
func (iv *Invoker) AgentTimeout() time.Duration { return iv.timeout }

// Answer delivers the local agent's answer to an invocation it received
// as an event.
func (iv *Invoker) Answer(id string, ans events.InvocationAnswer) error {
	return iv.bridge.answer(id, ans)
}

// explain puts in d each condition of capability name evaluated on f
// (conditions.Explain), and, when decided (Decide's error) refused a
// capability the document has as unknown, why: the requester is told
// nothing of it, the owner is.
func (iv *Invoker) explain(d *gossip.Decision, doc *negotiate.Document, name string, f conditions.Facts, decided error) {
	c, ok := doc.Capability(name)
	if !ok {
		d.Note = "the owner's document has no capability by that name"
		return
	}
	checks := conditions.Explain(c.Conds(), f, iv.order, BusyRetry)
	d.Conditions = decisionConditions(checks)
	if !errors.Is(decided, negotiate.ErrUnknownCapability) {
		return
	}
	if slices.ContainsFunc(checks, func(ch conditions.Check) bool { return ch.Condition == conditions.CondPersona && !ch.Met }) {
		d.Note = "absent under the owner's persona in this conversation: refused as an unknown capability, so the requester learns nothing of it"
		return
	}
	d.Note = `hidden from requesters who do not meet its conditions (advertise = "when-eligible"): refused as an unknown capability, so the requester learns nothing of it`
}

// NewDecision starts the owner's record of how a request for name is
// decided on facts f, the requester's level established as levelHow.
func NewDecision(name string, f conditions.Facts, levelHow string) *gossip.Decision {
	return &gossip.Decision{Capability: name, Conditions: []gossip.DecisionCondition{}, Facts: gossip.DecisionFacts{
		Level: int(f.AuthLevel), LevelHow: levelHow, Tier: f.Disclosure,
		Temperature: cmp.Or(f.Temperature, conditions.Cool), Persona: cmp.Or(f.Persona, negotiate.DefaultPersona)}}
}

// Settle sets d's outcome from how the request ended: answered, or
// refused with the wire code the requester is sent.
func Settle(d *gossip.Decision, err error) {
	if err == nil {
		d.Outcome, d.Code = gossip.DecisionAnswered, ""
		return
	}
	d.Outcome, d.Code = gossip.DecisionRefused, string(wire.CodeOf(err))
}

// decisionConditions words conditions' checks for the owner's audit.
func decisionConditions(checks []conditions.Check) []gossip.DecisionCondition {
	out := make([]gossip.DecisionCondition, len(checks))
	for i, ch := range checks {
		detail := fmt.Sprintf("required %s, have %s", ch.Required, ch.Have)
		if !ch.Met {
			detail += "; " + ch.HowToMeet
		}
		out[i] = gossip.DecisionCondition{Condition: string(ch.Condition), Met: ch.Met, Detail: detail}
	}
	return out
}

// schemaCondition is a schema check (the parameters, the output) as a
// condition of the decision: met with the detail ok, or unmet with what
// failed where.
func schemaCondition(name string, err error, ok string) gossip.DecisionCondition {
	if err != nil {
		return gossip.DecisionCondition{Condition: name, Detail: err.Error()}
	}
	return gossip.DecisionCondition{Condition: name, Met: true, Detail: ok}
}
