package converse

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ifaced/ifaced/node/internal/peerid"
	"github.com/ifaced/ifaced/node/invoke"

	"github.com/ifaced/ifaced/node/admit"

	"github.com/ifaced/ifaced/node/owner"

	"github.com/ifaced/ifaced/node/policy"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Messages that arrive outside a libp2p stream (the IFP-6 HTTPS inbox)
// go through Deliver, which applies the same checks in the same order as
// a stream does, with one difference: the sender is whoever holds the key
// the signature names (a did:key key_id), since no secure channel vouches
// for it. The seen-set is shared and keyed the same way (signer and
// message_id), so one signed message delivered over libp2p and then over
// HTTP (or twice over HTTP) is processed once; the second delivery is a
// duplicate, which IFP-6 §4.2 answers with 202 and no reprocessing.
//
// A message in a conversation open on a libp2p stream with the same peer
// joins it (sequence, audit, events, and a capability request is answered
// on the stream). Any other message belongs to an inbox conversation:
// greeting first, in sequence, nothing after close, audited with
// transport "https", its view cached. Replies are not sent back over HTTP
// (IFP-6 §4.1 would post them to the sender's own inbox); the local agent
// sees every accepted message on the event stream and answers as it
// chooses.

// Inbox is the door-facing side of the public HTTP binding: messages that
// arrive without a libp2p stream (the IFP-6 inbox, a signed POST /invoke)
// and requests from callers that proved nothing (A2A message/send, the
// actions contract), the view an HTTP caller is shown, and the inbox
// conversations. Its messages pass the same door as a stream's; only the
// way the signer is established differs.
type Inbox struct {
	door    *admit.Door
	convs   *Conversations
	docs    *owner.Document
	policy  *policy.Book
	invoker *invoke.Invoker
	audit   *gossip.AuditLog
	commit  func() error // makes what was recorded durable before the sender lets go (node: durability.go)
	spawn   func(func()) bool
	now     func() time.Time
	log     *slog.Logger
	table   inboxConvs
}

func newInbox(d *admit.Door, convs *Conversations, docs *owner.Document, pb *policy.Book, inv *invoke.Invoker, audit *gossip.AuditLog,
	commit func() error, spawn func(func()) bool, now func() time.Time, log *slog.Logger) *Inbox {
	return &Inbox{door: d, convs: convs, docs: docs, policy: pb, invoker: inv, audit: audit, commit: commit,
		spawn: spawn, now: now, log: log}
}

// ErrUnknownSender: the message names no key this daemon can resolve.
var ErrUnknownSender = wire.ErrUnknownSender

// ErrDuplicate: the message was processed before (IFP-6 idempotency).
var ErrDuplicate = errors.New("message already received")

// maxInboxConversations bounds the inbox conversations kept in memory;
// past it, closed ones go first, then the oldest.
const maxInboxConversations = 4096

// inboxConvs are the conversations held through the inbox.
type inboxConvs struct {
	mu    sync.Mutex
	convs map[string]*gossip.Conversation
	order []string
}

// lookup returns the inbox conversation under key, or nil.
func (ic *inboxConvs) lookup(key string) *gossip.Conversation {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return ic.convs[key]
}

// put keeps c under key (a no-op when it is there already); past
// maxInboxConversations, closed ones go first, then the oldest.
func (ic *inboxConvs) put(key string, c *gossip.Conversation) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.convs == nil {
		ic.convs = map[string]*gossip.Conversation{}
	}
	if _, ok := ic.convs[key]; ok {
		ic.convs[key] = c
		return
	}
	if len(ic.order) >= maxInboxConversations {
		victim := 0
		for i, old := range ic.order {
			if ic.convs[old].Closed() {
				victim = i
				break
			}
		}
		delete(ic.convs, ic.order[victim])
		ic.order = append(ic.order[:victim], ic.order[victim+1:]...)
	}
	ic.convs[key] = c
	ic.order = append(ic.order, key)
}

// Delivered says what became of a message given to Deliver.
type Delivered struct {
	MessageID string  `json:"message_id"`
	Peer      peer.ID `json:"peer"`
	// Refused is set when the message was received but did not fit its
	// conversation (IFP-6: a protocol error, not a transport one).
	Refused error `json:"-"`
}

// Deliver takes a message that arrived by transport (for the audit log,
// e.g. "https") through the door and hands it to its conversation. The
// error wraps a validation error (an unreadable greeting part, a view
// outside a greeting, headers.to not naming this daemon), ErrUnknownSender,
// a signature error (wrong key included: headers.from must be the signer),
// key_revoked, a refused view (its signature, stale_seq), a replay-window
// error, ErrDuplicate, a rate limit (*wire.RetryAfterError), or errAudit
// when the audit log could not be written; a message that passes those but
// does not fit its conversation is recorded as refused and returned with
// Refused set.
func (ib *Inbox) Deliver(m *gossip.Message, transport string) (*Delivered, error) {
	var (
		c       *conv                // the libp2p conversation with the signer it joins, if any
		ic      *gossip.Conversation // else its inbox conversation
		icKey   string
		pv      pendingView
		misfit  bool
		convID  = m.Headers.ConversationID
		joining = func(from peer.ID) *conv {
			if c := ib.convs.conversation(convID); c != nil && c.peer == from {
				return c
			}
			return nil // another peer's conversation ID: this message cannot join it
		}
	)
	var gr negotiate.Greeting
	in, err := ib.door.Admit(&admit.Arrival{Via: transport, Msg: m, Addressed: true, Views: []gossip.Phase{gossip.PhaseGreeting},
		Validate: func() (err error) {
			if m.Headers.Phase == gossip.PhaseGreeting {
				gr, err = negotiate.ReadGreeting(m)
			}
			return err
		},
		Temperature: func(from peer.ID) string {
			if c := joining(from); c != nil {
				return c.grant().Temperature
			}
			return conditions.Cool
		},
		Verify: func(from peer.ID) (err error) {
			if m.Headers.Phase == gossip.PhaseGreeting {
				pv, err = ib.convs.checkView(from, m, gr.ViewUnchanged, false, nil)
			}
			return err
		},
		Fit: func(from peer.ID) error {
			if c = joining(from); c != nil {
				err := c.Check(m)
				misfit = err != nil
				return err
			}
			remote, err := peerid.Agent(from)
			if err != nil {
				return err
			}
			// Keyed by signer too: the first to use a conversation ID must
			// not take it from its owner. A new inbox conversation joins
			// the table only once its first message is admitted.
			icKey = from.String() + " " + convID
			if ic = ib.table.lookup(icKey); ic == nil {
				ic = gossip.NewConversation(convID, ib.convs.localAgent(), remote)
			}
			err = ic.Check(m)
			misfit = err != nil
			return err
		},
		Commit: func(peer.ID) error {
			if c != nil {
				return c.Accept(m)
			}
			return ic.Accept(m)
		}})
	switch {
	case errors.Is(err, identity.ErrReplay):
		// Answered as taken (IFP-6 idempotency): so it must be on disk,
		// whatever failed the first time.
		if cerr := ib.commit(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("%w: %s", ErrDuplicate, m.Headers.MessageID)
	case err != nil && misfit:
		return &Delivered{MessageID: m.Headers.MessageID, Peer: in.From(), Refused: err}, nil
	case err != nil:
		return nil, err
	}
	from := in.From()
	d := &Delivered{MessageID: m.Headers.MessageID, Peer: from}
	detail := "via " + transport
	if c != nil {
		if _, isAck := ackOf(m); !isAck { // as over libp2p (receiveOnly)
			ib.door.Publish(in, c.ID, detail)
		}
		ib.convs.act(c, m, pv, gr.Proposal)
	} else {
		ib.table.put(icKey, ic)
		if m.Headers.Phase == gossip.PhaseGreeting {
			if _, err := ib.convs.keepView(from, m, pv); err != nil {
				ib.log.Info("keeping an inbox greeting's view", "peer", from, "err", err)
			}
			// As over libp2p: an introduction proof is checked and bound,
			// and an agent ID's document is checked in the background.
			ib.convs.trust.LevelOf(from, m, pv.agentID())
		}
		if isRequest(m) {
			detail += "; capability requests are answered over libp2p or POST /invoke, not through the inbox"
		}
		ib.door.Publish(in, convID, detail)
	}
	// The sender lets go of the message once told it was taken. The
	// message is recorded and acted on either way; if the commit fails,
	// the sender's retry is a duplicate, committed again.
	if err := ib.commit(); err != nil {
		return nil, err
	}
	return d, nil
}

// RecordUndecoded records, for a transport's bounded decode step, a
// message that did not decode: a refusal summarised from the bytes as
// received (their size, SHA-256 and an excerpt of at most
// gossip.RefusalExcerpt), within the door's refusal budget. Nobody is
// established as its sender.
func (ib *Inbox) RecordUndecoded(transport string, raw []byte, cause error) {
	ib.door.Refused(transport, "", false, nil, raw, cause)
}

// anonymousParamsKept bounds the parameters of an anonymous request that
// the audit log keeps as they are: a caller that proved nothing is audited
// before its request is decided (an unknown capability included), so
// larger parameters are kept as a summary (size, SHA-256, the start of
// their JSON), enough to match them against what was acted on.
const anonymousParamsKept = 64 << 10

// auditedParams is what the audit log keeps of an anonymous request's
// parameters.
func auditedParams(params any) any {
	js, err := json.Marshal(params)
	if err != nil || len(js) <= anonymousParamsKept {
		return params
	}
	sum := sha256.Sum256(js)
	return map[string]any{"omitted": fmt.Sprintf("parameters of %d bytes, over the %d kept for an anonymous request", len(js), anonymousParamsKept),
		"size": len(js), "sha256": hex.EncodeToString(sum[:]), "excerpt": gossip.Clip(string(js[:gossip.RefusalExcerpt+utf8.UTFMax]), gossip.RefusalExcerpt)}
}

// HTTPFacts are the facts of an HTTP caller that proved nothing: no
// authentication level (it meets no min_auth_level, not even 0), the
// default tier, cool, the default persona.
func (ib *Inbox) HTTPFacts() conditions.Facts {
	return conditions.Facts{AuthLevel: conditions.NoLevel, Disclosure: ib.policy.InForce().DefaultTier, Temperature: conditions.Cool}
}

// ViewFor is the owner's signed view for facts, and a tag that changes
// whenever the view's content or seq does (an HTTP ETag).
func (ib *Inbox) ViewFor(f conditions.Facts) (*negotiate.Document, string, error) {
	v, err := ib.docs.View(f)
	if err != nil {
		return nil, "", err
	}
	return v.Doc, fmt.Sprintf("%d-%x", v.Doc.Seq, v.Key[:8]), nil
}

// ExecuteAnonymous runs a capability for an HTTP caller that proved
// nothing (A2A message/send, the actions contract's POST /invoke): no
// signer is established, so there is nothing to verify, replay or charge
// to a key (the binding limits callers by address), and the caller meets
// no min_auth_level. The request is audited before it is decided, as an
// unsigned probe from "anonymous" (one audit file a day) whose note names
// the transport and the caller's address and reference; then it goes
// through the same checks as a libp2p request (conditions, parameter
// schema, workload, local agent, output schema).
//
// Each anonymous request is a conversation of its own with a stranger, so
// it is refused (wire code unavailable) while the audit log has no room
// for one (gossip.AuditLog.StrangerRoom). Its outcome is audited after
// it, in the same conversation: "answered" or "refused: <wire code>",
// never the output itself.
func (ib *Inbox) ExecuteAnonymous(via, caller, ref, name string, params any) (any, error) {
	if err := ib.audit.StrangerRoom(); err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrUnavailable, err)
	}
	req, err := ib.recordAnonymous(via, caller, ref, name, params)
	if err != nil {
		return nil, err
	}
	f := ib.HTTPFacts()
	g := negotiate.Granted{Disclosure: f.Disclosure, AuthLevel: f.AuthLevel, Temperature: f.Temperature, Persona: f.Persona}
	out, d, err := ib.invoker.Execute(name, params, g, "", "")
	d.Facts.LevelHow = "none: an unsigned request through " + via + " proves no key"
	ib.recordAnonymousOutcome(via, caller, req, "request", err, d)
	return out, err
}

// AskAnonymous hands a message from an HTTP caller that proved nothing
// to the local agent and returns the agent's reply: a plain A2A text
// message, which names no capability. It reaches the agent as an
// Invocation that carries the message and no capability (node/invoke: agent.go), on
// the event stream as a "message" event, and the agent's answer is the
// reply. text is the message's text, data its data parts; ref is the
// caller's reference for the audit (its messageId) and convID the
// conversation ID the agent is shown (the A2A contextId, so that the
// agent can tell one caller's exchanges apart).
//
// It is held to what ExecuteAnonymous is: refused (unavailable) while the
// audit log has no room for a stranger, audited before the agent sees it
// and after with its outcome (never the reply), and the agent has
// agent.timeout to answer. No condition applies: a document declares
// conditions on capabilities, not on talking, so whoever may reach the
// binding may talk to the agent, and the agent decides what to answer.
func (ib *Inbox) AskAnonymous(via, caller, ref, convID, text string, data []any) (any, error) {
	if err := ib.audit.StrangerRoom(); err != nil {
		return nil, fmt.Errorf("%w: %w", wire.ErrUnavailable, err)
	}
	now := ib.now()
	if convID == "" {
		convID = gossip.NewID("anon", now)
	}
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: anonymousPeer}, To: []gossip.Agent{ib.convs.localAgent()},
		ConversationID: convID, Sequence: 1, Phase: gossip.PhaseContext, ContentType: gossip.DefaultContentType,
	}, Body: gossip.Body{Text: text}}
	for _, d := range data {
		m.Body.Parts = append(m.Body.Parts, gossip.Part{ContentType: "application/json", Name: "data", Content: d})
	}
	// The audit keeps the message as it keeps an anonymous request's
	// parameters: whole up to anonymousParamsKept, else a summary; and,
	// like each anonymous request, as a conversation of its own (the
	// request and its outcome), naming the agent's conversation.
	kept := *m
	kept.Headers.ConversationID = gossip.NewID("anon", now)
	kept.Body.Text = auditedText(text)
	kept.Body.Parts = nil
	for _, p := range m.Body.Parts {
		p.Content = auditedParams(p.Content)
		kept.Body.Parts = append(kept.Body.Parts, p)
	}
	if err := ib.recordStranger(via, caller, ref, &kept, "message", "; the agent's conversation "+convID); err != nil {
		return nil, err
	}
	f := ib.HTTPFacts()
	out, err := ib.invoker.Ask(convID, m, negotiate.Granted{Disclosure: f.Disclosure, AuthLevel: f.AuthLevel, Temperature: f.Temperature, Persona: f.Persona})
	ib.recordAnonymousOutcome(via, caller, &kept, "message", err, nil)
	return out, err
}

// auditedText is what the audit log keeps of an anonymous message's text.
func auditedText(text string) string {
	if len(text) <= anonymousParamsKept {
		return text
	}
	sum := sha256.Sum256([]byte(text))
	return fmt.Sprintf("[a text of %d bytes, over the %d kept for an anonymous message; sha256 %s] %s",
		len(text), anonymousParamsKept, hex.EncodeToString(sum[:]), gossip.Clip(text, gossip.RefusalExcerpt))
}

// anonymousPeer is the audit log's name for callers that proved nothing.
const anonymousPeer = "anonymous"

// recordAnonymous audits an anonymous request as the IFP-4 probe it
// amounts to.
func (ib *Inbox) recordAnonymous(via, caller, ref, name string, params any) (*gossip.Message, error) {
	now := ib.now()
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: anonymousPeer}, To: []gossip.Agent{ib.convs.localAgent()},
		ConversationID: gossip.NewID("anon", now), Sequence: 1, Phase: gossip.PhaseProbe, ContentType: gossip.DefaultContentType,
		Capabilities: &gossip.CapabilityHeaders{Request: []string{name}},
	}, Body: gossip.Body{Text: fmt.Sprintf("Request: %s (unsigned, through %s).", name, via)}}
	if params != nil {
		m.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: invoke.PartParameters, Content: auditedParams(params)}}
	}
	if err := ib.recordStranger(via, caller, ref, m, "request", ""); err != nil {
		return nil, err
	}
	return m, nil
}

// recordStranger audits m, an anonymous request or message (what), as
// received from the caller through via; more ends the note.
func (ib *Inbox) recordStranger(via, caller, ref string, m *gossip.Message, what, more string) error {
	note := fmt.Sprintf("anonymous %s through %s from %s", what, via, caller)
	if ref != "" {
		note += " (caller's reference " + strconv.Quote(gossip.Clip(ref, 200)) + ")"
	}
	note += more
	err := ib.audit.Record(gossip.AuditEntry{At: ib.now().UTC(), Direction: gossip.Received, Peer: anonymousPeer, Transport: via, Note: note, Message: m, Stranger: true})
	if err != nil {
		return fmt.Errorf("%w: recording an anonymous %s: %w", admit.ErrAudit, what, err)
	}
	return nil
}

// recordAnonymousOutcome audits how the anonymous request req ended, as
// this daemon's reply in its conversation, with d, the decision on it
// (nil for a message, which names no capability). A failure to record
// is logged: the request was recorded before it ran.
func (ib *Inbox) recordAnonymousOutcome(via, caller string, req *gossip.Message, what string, failed error, d *gossip.Decision) {
	now := ib.now()
	m, name, outcome := outcomeOf(req, failed, ib.convs.localAgent(), now)
	note := fmt.Sprintf("anonymous %s through %s from %s: %s", what, via, caller, outcome)
	if err := ib.audit.Record(gossip.AuditEntry{At: now.UTC(), Direction: gossip.Sent, Peer: anonymousPeer, Transport: via, Note: note, Message: m,
		Decision: d, Stranger: true}); err != nil {
		ib.log.Warn("recording an anonymous "+what+"'s outcome", "via", via, "capability", name, "err", err)
	}
}

// outcomeOf is the reply this daemon (self) records at now to a request
// or message req that it answered over HTTP (failed nil) or refused: an
// unsigned message in req's conversation, in reply to it, that says how
// it ended (never the output itself). It also returns what req asked for
// (a capability's name, or "a message") and the outcome for an audit
// note, "answered" or "refused: <wire code>".
func outcomeOf(req *gossip.Message, failed error, self gossip.Agent, now time.Time) (m *gossip.Message, name, outcome string) {
	name, phase := "a message", gossip.PhaseContext
	if req.Headers.Capabilities != nil && len(req.Headers.Capabilities.Request) > 0 {
		name, phase = req.Headers.Capabilities.Request[0], gossip.PhaseProbe
	}
	outcome, text := "answered", fmt.Sprintf("Answered: %s.", name)
	if failed != nil {
		body := wire.NewErrorBody(failed)
		outcome, phase, text = "refused: "+string(body.Code), gossip.PhaseError, fmt.Sprintf("Refused: %s (%s).", name, body.Code)
	}
	m = &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: self, To: []gossip.Agent{req.Headers.From},
		ConversationID: req.Headers.ConversationID, Sequence: req.Headers.Sequence + 1, Phase: phase, ContentType: gossip.DefaultContentType,
		Thread: &gossip.Thread{InReplyTo: req.Headers.MessageID},
	}, Body: gossip.Body{Text: text}}
	return m, name, outcome
}

// DisplayName is the agent's display name, or its did:key.
func (ib *Inbox) DisplayName() string { return ib.convs.displayName() }

// AgentTimeout is how long the local agent may take per invocation.
func (ib *Inbox) AgentTimeout() time.Duration { return ib.invoker.AgentTimeout() }

// ExecuteSigned runs the capability request m (a probe naming one
// capability in headers.capabilities.request, its parameters in a
// "parameters" part) for whoever signed it: the signature is checked as
// for any inbox message, and the signer is granted what this daemon grants
// that peer (its trust level, the disclosure map, the temperature cap),
// so a signed HTTP request is decided exactly like one over libp2p. It
// returns the capability's name and result.
func (ib *Inbox) ExecuteSigned(m *gossip.Message) (string, any, error) {
	var gr negotiate.Greeting
	in, err := ib.door.Admit(&admit.Arrival{Via: "https", Msg: m, Addressed: true, Note: "capability request through POST /invoke",
		Validate: func() (err error) {
			gr, err = negotiate.ReadGreeting(m) // a request may propose a tier, persona or temperature, as a greeting does
			return err
		},
		Fit: func(peer.ID) error {
			if !isRequest(m) || len(m.Headers.Capabilities.Request) != 1 {
				return fmt.Errorf("%w: a request is a probe naming exactly one capability in headers.capabilities.request", gossip.ErrInvalidMessage)
			}
			return nil
		}})
	if err != nil {
		return "", nil, err
	}
	name := m.Headers.Capabilities.Request[0]
	var params any
	if p, ok := m.Body.Part(invoke.PartParameters); ok {
		params = p.Content
	}
	// An introduction proof on the request counts as on a greeting; the
	// door made sure the request's signer is its from.
	g := ib.convs.grant(in.From(), m, "", gr.Proposal)
	// Durable before the agent acts, so that after a crash the same
	// signed request is a replay, not a second invocation.
	if err := ib.commit(); err != nil {
		return "", nil, err
	}
	// No conversation: the conversation ID the caller chose is its own,
	// never passed on to the agent as this daemon's.
	result, d, err := ib.invoker.Execute(name, params, g, in.From().String(), "")
	d.Facts.LevelHow = levelHow(ib.convs.trust.Peer(in.From()), g.AuthLevel)
	// The answer goes back as HTTP, not as a message of its own: what is
	// audited of it, with its decision, is how it ended (as for an
	// anonymous request), in reply to the request, in the signer's files.
	// A failure to record is logged: the request was recorded before it
	// ran.
	reply, _, outcome := outcomeOf(m, err, ib.convs.localAgent(), ib.now())
	if rerr := ib.convs.recordSent("https", in.From(), reply, "signed request through POST /invoke: "+outcome, d); rerr != nil {
		ib.log.Warn("recording a signed request's outcome", "peer", in.From(), "capability", name, "err", rerr)
	}
	return name, result, err
}
