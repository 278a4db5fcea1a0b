package converse

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/internal/tally"
	"github.com/ifaced/ifaced/node/invoke"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// awaited is the table of answers this daemon's own capability requests
// wait for, and of the acknowledgements its said messages wait for
// (acks.go), by the message ID they answer.
type awaited struct {
	mu      sync.Mutex
	pending map[string]waiter
}

func newAwaited() *awaited { return &awaited{pending: map[string]waiter{}} }

// expect registers a request sent in conversation convID, awaiting its
// answer on the channel returned; done forgets it.
func (aw *awaited) expect(requestID, convID string) (answer <-chan *gossip.Message, done func()) {
	ch := make(chan *gossip.Message, 1)
	aw.mu.Lock()
	aw.pending[requestID] = waiter{convID: convID, ch: ch}
	aw.mu.Unlock()
	return ch, func() {
		aw.mu.Lock()
		delete(aw.pending, requestID)
		aw.mu.Unlock()
	}
}

type waiter struct {
	convID string
	ch     chan *gossip.Message
}

// answerTo returns the message m answers, when m is an answer: an
// error, a probe with a result, or an acknowledgement, in reply to it.
func answerTo(m *gossip.Message) (string, bool) {
	h := &m.Headers
	if h.Thread == nil || h.Thread.InReplyTo == "" {
		return "", false
	}
	if h.Phase == gossip.PhaseError {
		return h.Thread.InReplyTo, true
	}
	if _, ok := m.Body.Part(invoke.PartResult); ok && h.Phase == gossip.PhaseProbe {
		return h.Thread.InReplyTo, true
	}
	return ackOf(m) // an acknowledgement of a message said (acks.go)
}

// awaits reports whether m answers a request this daemon sent in
// conversation convID and still waits for.
func (iv *awaited) awaits(convID string, m *gossip.Message) bool {
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
func (iv *awaited) deliver(convID string, m *gossip.Message) bool {
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
func (cs *Conversations) InvokeIn(ctx context.Context, pid peer.ID, convID, capability string, params any) (_ *InvokeResult, result error) {
	defer func() { cs.figures.requested.Add(tally.OutcomeOf(result)) }()
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
		m.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: invoke.PartParameters, Content: negotiate.MustJSONValue(params)}}
	}
	ch, done := cs.awaited.expect(m.Headers.MessageID, c.ID)
	defer done()
	if err := cs.send(c, m); err != nil {
		return nil, err
	}
	select {
	case reply := <-ch:
		if reply.Headers.Phase == gossip.PhaseError {
			return nil, remoteError(pid, reply)
		}
		res := &InvokeResult{ConversationID: c.ID, RequestID: m.Headers.MessageID}
		if p, ok := reply.Body.Part(invoke.PartResult); ok {
			res.Result = p.Content
		}
		return res, nil
	case <-c.ended():
		return nil, fmt.Errorf("invoking %s on %s: the conversation ended before an answer came", capability, pid)
	case <-ctx.Done():
		return nil, fmt.Errorf("invoking %s on %s: no answer: %w", capability, pid, ctx.Err())
	}
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
		Parts: []gossip.Part{{ContentType: "application/json", Name: invoke.PartResult, Content: negotiate.MustJSONValue(result)}}}
	if err := cs.write(c, m, true, d); err != nil {
		cs.log.Info("answering capability request", "peer", cs.named(c.peer), "capability", name, "err", err)
		rd.unrecorded(c, req, err)
	}
}

// unrecorded tells the requester, when the answer to req could not be
// sent because its audit entry could not be written for a full disk,
// why (admit.ErrAnswerUnrecorded), instead of leaving it waiting.
func (rd *requestDesk) unrecorded(c *conv, req *gossip.Message, err error) {
	if refusal := rd.cs.door.Unrecorded(err); errors.Is(refusal, admit.ErrAnswerUnrecorded) {
		if err := rd.writeError(c, req, refusal, nil, false); err != nil {
			rd.cs.log.Debug("sending error answer", "peer", rd.cs.named(c.peer), "err", err)
		}
	}
}

func (rd *requestDesk) run(c *conv, req *gossip.Message) (any, string, *gossip.Decision, error) {
	cs := rd.cs
	names := req.Headers.Capabilities.Request
	if len(names) != 1 {
		err := fmt.Errorf("%w: a request names exactly one capability, got %d", gossip.ErrInvalidMessage, len(names))
		g := c.grant()
		d := invoke.NewDecision(strings.Join(names, ", "), g.Facts(c.peer.String(), 0), levelHow(cs.trust.Peer(c.peer), g.AuthLevel))
		d.Note = "the request does not name exactly one capability"
		invoke.Settle(d, err)
		return nil, "", d, err
	}
	name := names[0]
	// A level established since the greeting (a pin, a binding) counts now;
	// nothing goes down.
	level, _ := cs.trust.LevelOf(c.peer, nil, "")
	g := c.raiseLevel(level)
	how := levelHow(cs.trust.Peer(c.peer), g.AuthLevel)
	var params any
	if p, ok := req.Body.Part(invoke.PartParameters); ok {
		params = p.Content
	}
	result, d, err := cs.invoker.Execute(name, params, g, c.peer.String(), c.ID)
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
	if _, again := cs.docs.Current().Decide(name, now.Facts(c.peer.String(), 0), cs.order, invoke.BusyRetry); again != nil {
		return err
	}
	return &regrantError{error: err, hint: fmt.Sprintf("greet again: the owner now grants you disclosure %q, temperature %q, "+
		"but conversation %s keeps the grant it opened with (%q, %q)", now.Disclosure, now.Temperature, c.ID, g.Disclosure, g.Temperature),
		owner: fmt.Sprintf("refused under the grant the conversation opened with (disclosure %q, temperature %q); the policy now grants "+
			"disclosure %q, temperature %q, which would meet the conditions: the requester was told to greet again",
			g.Disclosure, g.Temperature, now.Disclosure, now.Temperature)}
}

// answerError sends an error message in reply to req without closing the
// conversation; d, the decision, goes on its audit entry.
func (rd *requestDesk) answerError(c *conv, req *gossip.Message, cause error, d *gossip.Decision) {
	if err := rd.writeError(c, req, cause, d, true); err != nil {
		rd.cs.log.Debug("sending error answer", "peer", rd.cs.named(c.peer), "err", err)
		rd.unrecorded(c, req, err)
	}
}

// writeError sends the error answering req, recorded with d when audit.
func (rd *requestDesk) writeError(c *conv, req *gossip.Message, cause error, d *gossip.Decision, audit bool) error {
	cs := rd.cs
	body := wire.NewErrorBody(cause)
	if rg := (*regrantError)(nil); errors.As(cause, &rg) {
		body.Hint = rg.hint
	}
	e, err := c.Next(gossip.PhaseError, cs.now())
	if err != nil {
		return err
	}
	e.Headers.Thread = &gossip.Thread{InReplyTo: req.Headers.MessageID}
	e.Body = gossip.Body{Text: errorText(body), Parts: []gossip.Part{{ContentType: "application/json", Name: partError, Content: negotiate.MustJSONValue(body)}}}
	return cs.write(c, e, audit, d)
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
		d = invoke.NewDecision(strings.Join(m.Headers.Capabilities.Request, ", "), g.Facts(c.peer.String(), 0), levelHow(cs.trust.Peer(c.peer), g.AuthLevel))
		d.Note = "refused at the door, before its conditions were evaluated: the peer sent faster than the conversation's temperature allows"
		invoke.Settle(d, cause)
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
