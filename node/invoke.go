package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ifaced/ifaced/node/owner"

	"github.com/ifaced/ifaced/node/events"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Capability requests travel in a conversation: a probe whose
// headers.capabilities.request names one capability, with the parameters
// in a "parameters" part; the answer is a probe in reply to it with a
// "result" part, or an error message in reply to it. Neither closes the
// conversation: a refused request is a turn in the negotiation.
//
// The owner decides, in this order, each step audited: rate limit (by the
// conversation's temperature) → the capability exists for this requester
// and its conditions hold on the facts this daemon established (a hidden
// capability answers as a missing one) → workload (max_concurrent) → the
// parameters match the capability's schema → the local agent answers
// within agent.timeout → the result matches output_schema → signed reply.
//
// Why it decided so goes in the owner's audit log, on the entry of the
// answer or refusal (gossip.Decision, written in the same Record as the
// message): the facts this daemon established (level and how, tier,
// temperature, persona), each condition evaluated, met or not, the
// outcome and the wire code. A signed POST /invoke and an anonymous HTTP
// request, answered over HTTP rather than with a message, get an outcome
// entry in reply to the request that carries it. The decision never goes
// on the wire: a hidden capability's refusal says to the requester only
// what a missing one does, and to the owner why.

const (
	partParameters = "parameters"
	partResult     = "result"
)

// busyRetry is the wait suggested to a requester when a capability is at
// its max_concurrent.
const busyRetry = 5 * time.Second

// invocations tracks, per capability, how many run now, and, per request
// this daemon sent, who waits for the answer.
type invocations struct {
	mu       sync.Mutex
	inFlight map[string]int
	pending  map[string]waiter // by request message ID
}

type waiter struct {
	convID string
	ch     chan *gossip.Message
}

func newInvocations() *invocations {
	return &invocations{inFlight: map[string]int{}, pending: map[string]waiter{}}
}

// start counts one more running invocation of name unless that would pass
// max; it returns the count seen and whether it started.
func (iv *invocations) start(name string, limit int) (int, bool) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	n := iv.inFlight[name]
	if limit > 0 && n >= limit {
		return n, false
	}
	iv.inFlight[name] = n + 1
	return n, true
}

func (iv *invocations) done(name string) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	iv.inFlight[name]--
}

func (iv *invocations) running(name string) int {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	return iv.inFlight[name]
}

// answerTo returns the request m answers, when m is an answer: an error,
// or a probe with a result, in reply to a request.
func answerTo(m *gossip.Message) (string, bool) {
	h := &m.Headers
	if h.Thread == nil || h.Thread.InReplyTo == "" {
		return "", false
	}
	if h.Phase == gossip.PhaseError {
		return h.Thread.InReplyTo, true
	}
	if _, ok := m.Body.Part(partResult); ok && h.Phase == gossip.PhaseProbe {
		return h.Thread.InReplyTo, true
	}
	return "", false
}

// awaits reports whether m answers a request this daemon sent in
// conversation convID and still waits for.
func (iv *invocations) awaits(convID string, m *gossip.Message) bool {
	id, ok := answerTo(m)
	if !ok {
		return false
	}
	iv.mu.Lock()
	defer iv.mu.Unlock()
	w, ok := iv.pending[id]
	return ok && w.convID == convID
}

// deliver hands an answer to whoever waits for it; it reports whether
// someone did. Only an answer in the request's own conversation counts.
func (iv *invocations) deliver(convID string, m *gossip.Message) bool {
	id, ok := answerTo(m)
	if !ok {
		return false
	}
	iv.mu.Lock()
	w, ok := iv.pending[id]
	if ok && w.convID == convID {
		delete(iv.pending, id)
	}
	iv.mu.Unlock()
	if !ok || w.convID != convID {
		return false
	}
	w.ch <- m
	return true
}

// InvokeResult is a peer's answer to a capability request.
type InvokeResult struct {
	ConversationID string `json:"conversation_id"`
	RequestID      string `json:"request_id"`
	Result         any    `json:"result"`
}

// Invoke asks pid to run a capability with params (a JSON value, nil for
// none), in the newest open conversation with pid or, when there is none,
// in a new one opened by a greeting. A refusal comes back as
// *wire.RemoteError carrying the peer's explanation.
func (cs *Conversations) Invoke(ctx context.Context, pid peer.ID, capability string, params any) (*InvokeResult, error) {
	return cs.InvokeIn(ctx, pid, "", capability, params)
}

// InvokeIn is Invoke in the open conversation convID with pid; with convID
// empty, in the newest one (or a new one). A named conversation that is
// not open is ErrNoConversation: it is never replaced by another.
func (cs *Conversations) InvokeIn(ctx context.Context, pid peer.ID, convID, capability string, params any) (*InvokeResult, error) {
	c, err := cs.pick(pid, convID)
	if err != nil {
		return nil, fmt.Errorf("invoking %s: %w", capability, err)
	}
	if c == nil {
		r, err := cs.Greet(ctx, pid, negotiate.Proposal{})
		if err != nil {
			return nil, err
		}
		if c = cs.conversation(r.ConversationID); c == nil {
			return nil, fmt.Errorf("invoking %s: the conversation with %s closed at once", capability, pid)
		}
	}
	m, err := c.Next(gossip.PhaseProbe, cs.now())
	if err != nil {
		return nil, err
	}
	m.Headers.Capabilities = &gossip.CapabilityHeaders{Request: []string{capability}}
	m.Body.Text = fmt.Sprintf("Request: %s.", capability)
	if params != nil {
		m.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: partParameters, Content: negotiate.MustJSONValue(params)}}
	}
	ch := make(chan *gossip.Message, 1)
	cs.invocations.mu.Lock()
	cs.invocations.pending[m.Headers.MessageID] = waiter{convID: c.ID, ch: ch}
	cs.invocations.mu.Unlock()
	defer func() {
		cs.invocations.mu.Lock()
		delete(cs.invocations.pending, m.Headers.MessageID)
		cs.invocations.mu.Unlock()
	}()
	if err := cs.send(c, m); err != nil {
		return nil, err
	}
	select {
	case reply := <-ch:
		if reply.Headers.Phase == gossip.PhaseError {
			return nil, remoteError(pid, reply)
		}
		res := &InvokeResult{ConversationID: c.ID, RequestID: m.Headers.MessageID}
		if p, ok := reply.Body.Part(partResult); ok {
			res.Result = p.Content
		}
		return res, nil
	case <-c.ended():
		return nil, fmt.Errorf("invoking %s on %s: the conversation ended before an answer came", capability, pid)
	case <-ctx.Done():
		return nil, fmt.Errorf("invoking %s on %s: no answer: %w", capability, pid, ctx.Err())
	}
}

// AnswerInvocation delivers the local agent's answer to an invocation it
// received as an event.
func (n *Node) AnswerInvocation(id string, ans events.InvocationAnswer) error {
	return n.bridge.answer(id, ans)
}

// isRequest tells a capability request from other probes.
func isRequest(m *gossip.Message) bool {
	h := &m.Headers
	return h.Phase == gossip.PhaseProbe && h.Capabilities != nil && len(h.Capabilities.Request) > 0
}

// requestDesk is the serving side of capability requests in the
// conversation table: it decides each request on the facts the
// conversation established, has it run, and answers it (the result, or an
// error that says what would work). The asking side is Conversations'
// Invoke.
type requestDesk struct{ cs *Conversations }

func newRequestDesk(cs *Conversations) *requestDesk { return &requestDesk{cs: cs} }

// handle decides and answers one capability request. It runs in
// its own goroutine so that a slow agent does not hold up the
// conversation. The decision (gossip.Decision) goes on the audit entry
// of the answer or refusal, written as that message is sent.
func (rd *requestDesk) handle(c *conv, req *gossip.Message) {
	cs := rd.cs
	result, name, d, err := rd.run(c, req)
	if err != nil {
		cs.log.Info("refused capability request", "peer", cs.named(c.peer), "capability", name, "code", wire.CodeOf(err), "err", err)
		rd.answerError(c, req, err, d)
		return
	}
	m, err := c.Next(gossip.PhaseProbe, cs.now())
	if err != nil {
		cs.log.Info("answering capability request", "peer", cs.named(c.peer), "capability", name, "err", err)
		return
	}
	m.Headers.Thread = &gossip.Thread{InReplyTo: req.Headers.MessageID}
	m.Headers.Capabilities = &gossip.CapabilityHeaders{Offer: []string{name}}
	m.Body = gossip.Body{Text: fmt.Sprintf("Result of %s.", name),
		Parts: []gossip.Part{{ContentType: "application/json", Name: partResult, Content: negotiate.MustJSONValue(result)}}}
	if err := cs.write(c, m, true, d); err != nil {
		cs.log.Info("answering capability request", "peer", cs.named(c.peer), "capability", name, "err", err)
	}
}

func (rd *requestDesk) run(c *conv, req *gossip.Message) (any, string, *gossip.Decision, error) {
	cs := rd.cs
	names := req.Headers.Capabilities.Request
	if len(names) != 1 {
		err := fmt.Errorf("%w: a request names exactly one capability, got %d", gossip.ErrInvalidMessage, len(names))
		g := c.grant()
		d := newDecision(strings.Join(names, ", "), g.Facts(c.peer.String(), 0), levelHow(cs.trust.Peer(c.peer), g.AuthLevel))
		d.Note = "the request does not name exactly one capability"
		settle(d, err)
		return nil, "", d, err
	}
	name := names[0]
	// A level established since the greeting (a pin, a binding) counts now;
	// nothing goes down.
	level, _ := cs.trust.LevelOf(c.peer, nil, "")
	g := c.raiseLevel(level)
	how := levelHow(cs.trust.Peer(c.peer), g.AuthLevel)
	var params any
	if p, ok := req.Body.Part(partParameters); ok {
		params = p.Content
	}
	result, d, err := cs.invoker.execute(name, params, g, c.peer.String(), c.ID)
	d.Facts.LevelHow = how
	if err != nil {
		err = rd.regrant(c, name, g, err)
		if rg := (*regrantError)(nil); errors.As(err, &rg) {
			d.Note = rg.owner
		}
	}
	return result, name, d, err
}

// levelHow says how a requester's authentication level was established:
// the trust book's account of the peer (info), and, when the
// conversation holds a level above the peer's standing now (one reached
// earlier, kept because levels never go down inside a conversation),
// that too.
func levelHow(info trust.Info, level conditions.Level) string {
	how := strings.Join(info.How, "; ")
	if level > info.Level {
		how = fmt.Sprintf("level %d reached earlier in this conversation and kept (levels never go down inside one); now: %s", int(level), how)
	}
	return how
}

// regrantError is a refusal in a conversation whose grant the owner has
// since raised: the request would be taken in a conversation opened now.
// Its hint says so (a conversation keeps the grant it opened with; only
// the authentication level rises inside one).
type regrantError struct {
	error
	hint  string // for the requester
	owner string // for the owner's audit (gossip.Decision.Note)
}

func (e *regrantError) Unwrap() error { return e.error }

// regrant turns a refusal for unmet conditions into a regrantError when
// what the owner's policy grants pid now (the most it grants, under the
// conversation's persona) would meet them.
func (rd *requestDesk) regrant(c *conv, name string, g negotiate.Granted, err error) error {
	cs := rd.cs
	var nm *conditions.NotMetError
	if !errors.As(err, &nm) {
		return err
	}
	now := g.Raise(cs.grant(c.peer, nil, "", negotiate.Proposal{Persona: g.Persona, Temperature: conditions.Hot}), cs.order)
	if now.Disclosure == g.Disclosure && now.Temperature == g.Temperature && now.AuthLevel == g.AuthLevel {
		return err
	}
	if _, again := cs.docs.Current().Decide(name, now.Facts(c.peer.String(), 0), cs.order, busyRetry); again != nil {
		return err
	}
	return &regrantError{error: err, hint: fmt.Sprintf("greet again: the owner now grants you disclosure %q, temperature %q, "+
		"but conversation %s keeps the grant it opened with (%q, %q)", now.Disclosure, now.Temperature, c.ID, g.Disclosure, g.Temperature),
		owner: fmt.Sprintf("refused under the grant the conversation opened with (disclosure %q, temperature %q); the policy now grants "+
			"disclosure %q, temperature %q, which would meet the conditions: the requester was told to greet again",
			g.Disclosure, g.Temperature, now.Disclosure, now.Temperature)}
}

// invoker runs capabilities for requesters the door admitted: it decides
// on the facts the daemon established (conditions, parameter schema,
// workload), asks the local agent through the bridge, and checks the
// output. Every transport's requests come through execute, so none can
// skip a check.
type invoker struct {
	docs     *owner.Document
	standard *standardAnswers // the IFP-7 capabilities the daemon answers itself
	order    *conditions.TierOrder
	work     *invocations // running invocations per capability (max_concurrent)
	bridge   *bridge
	timeout  time.Duration // agent.timeout
	ctx      context.Context
	now      func() time.Time
}

func newInvoker(docs *owner.Document, order *conditions.TierOrder, work *invocations, b *bridge, timeout time.Duration,
	ctx context.Context, now func() time.Time) *invoker {
	return &invoker{docs: docs, standard: newStandardAnswers(docs), order: order, work: work, bridge: b, timeout: timeout, ctx: ctx, now: now}
}

// execute runs capability name for a requester the daemon granted g: the
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
func (iv *invoker) execute(name string, params any, g negotiate.Granted, requester, convID string) (result any, d *gossip.Decision, err error) {
	doc, schemas := iv.docs.WithSchemas()
	facts := func(inFlight int) conditions.Facts {
		f := g.Facts(requester, inFlight)
		if requester == "" {
			f.AuthLevel = conditions.NoLevel
		}
		return f
	}
	f := facts(iv.work.running(name))
	d = newDecision(name, f, "")
	defer func() { settle(d, err) }()
	cap, err := doc.Decide(name, f, iv.order, busyRetry)
	iv.explain(d, doc, name, f, err)
	if err != nil {
		return nil, d, err
	}
	err = schemas.CheckParams(name, params)
	if cap.Parameters != nil {
		d.Conditions = append(d.Conditions, schemaCondition(partParameters, err, "the parameters match the capability's parameters schema"))
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
		_, err := doc.Decide(name, f, iv.order, busyRetry)
		// The same conditions, in the same order, ahead of the parameters.
		copy(d.Conditions, decisionConditions(conditions.Explain(cap.Conds(), f, iv.order, busyRetry)))
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

// explain puts in d each condition of capability name evaluated on f
// (conditions.Explain), and, when decided (Decide's error) refused a
// capability the document has as unknown, why: the requester is told
// nothing of it, the owner is.
func (iv *invoker) explain(d *gossip.Decision, doc *negotiate.Document, name string, f conditions.Facts, decided error) {
	c, ok := doc.Capability(name)
	if !ok {
		d.Note = "the owner's document has no capability by that name"
		return
	}
	checks := conditions.Explain(c.Conds(), f, iv.order, busyRetry)
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

// newDecision starts the owner's record of how a request for name is
// decided on facts f, the requester's level established as levelHow.
func newDecision(name string, f conditions.Facts, levelHow string) *gossip.Decision {
	return &gossip.Decision{Capability: name, Conditions: []gossip.DecisionCondition{}, Facts: gossip.DecisionFacts{
		Level: int(f.AuthLevel), LevelHow: levelHow, Tier: f.Disclosure,
		Temperature: cmp.Or(f.Temperature, conditions.Cool), Persona: cmp.Or(f.Persona, negotiate.DefaultPersona)}}
}

// settle sets d's outcome from how the request ended: answered, or
// refused with the wire code the requester is sent.
func settle(d *gossip.Decision, err error) {
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

// answerError sends an error message in reply to req without closing the
// conversation; d, the decision, goes on its audit entry.
func (rd *requestDesk) answerError(c *conv, req *gossip.Message, cause error, d *gossip.Decision) {
	cs := rd.cs
	body := wire.NewErrorBody(cause)
	if rg := (*regrantError)(nil); errors.As(cause, &rg) {
		body.Hint = rg.hint
	}
	e, err := c.Next(gossip.PhaseError, cs.now())
	if err != nil {
		return
	}
	e.Headers.Thread = &gossip.Thread{InReplyTo: req.Headers.MessageID}
	e.Body = gossip.Body{Text: errorText(body), Parts: []gossip.Part{{ContentType: "application/json", Name: partError, Content: negotiate.MustJSONValue(body)}}}
	if err := cs.write(c, e, true, d); err != nil {
		cs.log.Debug("sending error answer", "peer", cs.named(c.peer), "err", err)
	}
}

// refuseTooFast answers a message the door refused for coming too fast
// (rate_limited), a turn in the negotiation rather than its end. When
// the message was a capability request, the refusal carries its decision:
// refused before any condition was evaluated.
func (rd *requestDesk) refuseTooFast(c *conv, m *gossip.Message, cause error) {
	var d *gossip.Decision
	if isRequest(m) {
		cs := rd.cs
		g := c.grant()
		d = newDecision(strings.Join(m.Headers.Capabilities.Request, ", "), g.Facts(c.peer.String(), 0), levelHow(cs.trust.Peer(c.peer), g.AuthLevel))
		d.Note = "refused at the door, before its conditions were evaluated: the peer sent faster than the conversation's temperature allows"
		settle(d, cause)
	}
	rd.answerError(c, m, cause, d)
}

// errorText is the human-readable body of an error message: what went
// wrong, what was expected, and what would work (IFP-1 §6.3).
func errorText(b wire.ErrorBody) string {
	text := fmt.Sprintf("I could not accept your message: %s.", b.Message)
	for _, u := range b.Unmet {
		text += fmt.Sprintf("\n- %s: requires %s, you have %s; %s.", u.Condition, u.Required, u.Have, u.HowToMeet)
	}
	if b.Expected != "" {
		text += " I expected " + b.Expected + "."
	}
	if b.Hint != "" {
		text += " What would work: " + b.Hint + "."
	}
	if b.RetryAfterSeconds > 0 {
		text += fmt.Sprintf(" Retry after %d s.", b.RetryAfterSeconds)
	}
	return text
}
