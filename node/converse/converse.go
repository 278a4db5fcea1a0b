package converse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/ifaced/ifaced/node/keys"
	"github.com/ifaced/ifaced/node/p2phost"

	"github.com/ifaced/ifaced/node/admit"

	"github.com/ifaced/ifaced/node/events"

	"github.com/ifaced/ifaced/node/internal/peerid"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// The path of a greeting through these functions is in the comment of
// Conversations (conversations.go); the admission steps are the door's
// (node/admit).

// Body part names of ifaced messages.
const (
	partError = "error" // the error body of an error phase message
)

// conv is an open conversation on a stream.
type conv struct {
	*gossip.Conversation
	peer   peer.ID
	stream *wire.Stream
	wmu    sync.Mutex // one writer at a time
	order  uint64     // when it opened, among this daemon's conversations (the newest is picked)

	gmu        sync.Mutex
	granted    negotiate.Granted     // what this daemon grants the peer
	categories []string              // ACP tool categories the peer asked for, put first in its views
	peerHas    string                // have_view of the peer's greeting: the hash of our view it holds
	lastView   []byte                // content of the last view sent, without seq and signature
	greeted    *negotiate.SignedView // the view this daemon's greeting carried (noteSent)
	peerAcks   atomic.Bool           // the peer's last greeting said acks (acks.go)
	ackDue     []string              // IDs of messages said that await the peer's acknowledgement, oldest first (acks.go)

	doneOnce, endOnce sync.Once
	done              chan struct{} // closed when the conversation ends
}

func (c *conv) doneChan() chan struct{} {
	c.doneOnce.Do(func() { c.done = make(chan struct{}) })
	return c.done
}

// ended is closed when the conversation ends.
func (c *conv) ended() <-chan struct{} { return c.doneChan() }

// end marks the conversation ended; later calls do nothing.
func (c *conv) end() { c.endOnce.Do(func() { close(c.doneChan()) }) }

// viewChanged records the content key of the view sent and reports
// whether it differs from the last one sent in this conversation.
func (c *conv) viewChanged(key []byte) bool {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	changed := !bytes.Equal(key, c.lastView)
	c.lastView = key
	return changed
}

func (c *conv) grant() negotiate.Granted {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	return c.granted
}

// raiseLevel raises the authentication level to one established since the
// greeting (a pin, a binding); nothing else changes.
func (c *conv) raiseLevel(level conditions.Level) negotiate.Granted {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	c.granted.AuthLevel = max(c.granted.AuthLevel, level)
	return c.granted
}

// raise applies a later grant; nothing goes down inside a conversation.
func (c *conv) raise(next negotiate.Granted, order *conditions.TierOrder) negotiate.Granted {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	c.granted = c.granted.Raise(next, order)
	return c.granted
}

// GreetResult is what a greeting established.
type GreetResult struct {
	ConversationID string              `json:"conversation_id"`
	Peer           string              `json:"peer"`
	Granted        negotiate.Granted   `json:"granted"`       // what this daemon grants the peer
	GrantedToUs    negotiate.Granted   `json:"granted_to_us"` // what the peer says it grants this daemon
	View           *negotiate.Document `json:"view"`          // the peer's view for this daemon, verified
}

// Greet opens a conversation with a connected (or dialable) peer: it sends
// a signed greeting carrying this daemon's view for the peer and the
// proposal, and returns once the peer's greeting has been verified, audited
// and its view cached. The conversation stays open for Say.
func (cs *Conversations) Greet(ctx context.Context, pid peer.ID, prop negotiate.Proposal) (*GreetResult, error) {
	return cs.greetOn(ctx, pid, wire.Conversation, prop)
}

// QueryCapabilities asks a peer for its view for this daemon without
// opening a conversation: the same signed greeting exchange on the
// capabilities protocol, after which both sides close the stream. The
// view is verified and cached.
func (cs *Conversations) QueryCapabilities(ctx context.Context, pid peer.ID, prop negotiate.Proposal) (*GreetResult, error) {
	return cs.greetOn(ctx, pid, wire.Capabilities, prop)
}

func (cs *Conversations) greetOn(ctx context.Context, pid peer.ID, proto protocol.ID, prop negotiate.Proposal) (_ *GreetResult, result error) {
	defer func() { cs.figures.greeted(dirOut, proto, result) }()
	if proto == wire.Capabilities {
		if ws := cs.kept.take(pid); ws != nil {
			r, err := cs.greetOnce(ctx, pid, proto, prop, ws)
			if !errors.Is(err, errStaleStream) {
				return r, err
			}
			// The peer closed the kept stream (idle, or an older daemon
			// that answers one query per stream): a new one.
		}
	}
	return cs.greetOnce(ctx, pid, proto, prop, nil)
}

// greetOnce is greetOn on ws, a kept query stream, or on a new stream
// (ws nil). On a kept stream that the peer had closed before answering,
// the error wraps errStaleStream.
func (cs *Conversations) greetOnce(ctx context.Context, pid peer.ID, proto protocol.ID, prop negotiate.Proposal, ws *wire.Stream) (_ *GreetResult, result error) {
	remote, err := peerid.Agent(pid)
	if err != nil {
		return nil, err
	}
	reused := ws != nil
	if !reused {
		p2phost.DialHints(cs.host, cs.store, pid)
		// No wait for identify: the protocol choice rides with the greeting.
		s, err := p2phost.OpenStream(network.WithAllowLimitedConn(ctx, "ifaced conversation"), cs.host, pid, proto)
		if err != nil {
			return nil, fmt.Errorf("opening conversation with %s: %w", pid, err)
		}
		if err := s.Scope().SetService(wire.ServiceName); err != nil {
			s.Reset()
			return nil, fmt.Errorf("opening conversation with %s: %w", pid, err)
		}
		ws = wire.NewStream(s, cs.streamTimeout).WithBudget(cs.door.Budget(), pid)
	}
	s := ws
	c := &conv{
		Conversation: gossip.NewConversation(gossip.NewID("conv", cs.now()), cs.localAgent(), remote),
		peer:         pid,
		stream:       ws,
		// What this daemon grants the peer comes from its own map, under
		// the persona it proposes; the peer's answer can only raise the
		// level this daemon establishes for it.
		granted: cs.grant(pid, nil, "", negotiate.Proposal{Persona: prop.Persona}),
	}
	// The new ID is this daemon's until the conversation opens (or the
	// exchange ends): a greeting that names it meanwhile is refused.
	if err := cs.claim(c); err != nil {
		s.Reset()
		return nil, fmt.Errorf("opening conversation with %s: %w", pid, err)
	}
	opened := false
	defer func() {
		if !opened {
			cs.unclaim(c)
		}
	}()
	// Holding the peer's view, say so: an unchanged view need not come
	// again. And when the peer said it holds ours, ours need not either.
	held, holding := cs.peerViews.Get(pid)
	if holding {
		prop.HaveView = hex.EncodeToString(held.Sum[:])
	}
	c.peerHas, _ = cs.peersHold.Get(pid)
	greeting, err := cs.greeting(c, prop, nil)
	if err == nil {
		err = cs.send(c, greeting)
	}
	if err != nil {
		s.Reset()
		if reused && isStreamEnd(err) {
			return nil, fmt.Errorf("%w: %w", errStaleStream, err)
		}
		return nil, err
	}
	cs.noteGreeted(c, proto)
	var heldView *HeldView
	if holding {
		heldView = &held
	}
	// The answer's view is verified at the door, before the answer is
	// admitted: an answer whose view fails is refused, never audited as
	// taken.
	var answer negotiate.Greeting
	var pv pendingView
	reply, err := cs.receiveOnly(c, func(m *gossip.Message) error {
		if p := m.Headers.Phase; p != gossip.PhaseGreeting && p != gossip.PhaseError {
			return fmt.Errorf("%w: answered a greeting with %s", gossip.ErrUnexpectedPhase, p)
		}
		return nil
	}, func(m *gossip.Message) error {
		if m.Headers.Phase != gossip.PhaseGreeting {
			return nil // an error: reported below, once admitted
		}
		var err error
		if answer, err = negotiate.ReadGreeting(m); err != nil {
			return err
		}
		pv, err = cs.checkView(pid, m, answer.ViewUnchanged, true, heldView)
		return err
	})
	if err != nil {
		s.Reset()
		if reused && isStreamEnd(err) {
			return nil, fmt.Errorf("%w: greeting %s: %w", errStaleStream, pid, err)
		}
		if errors.Is(err, p2phost.ErrProtocolNotSupported) {
			// The peer's libp2p answered "na" to the protocol: a relay, a
			// DHT node or another program, not an ifaced that can talk.
			return nil, fmt.Errorf("greeting %s: it does not speak %s, so it is not an ifaced daemon (a relay, a DHT node or another libp2p program), "+
				"or one too old for this request; greet the peer ID of an ifaced daemon (ifaced peers lists those this daemon knows): %w", pid, proto, err)
		}
		return nil, fmt.Errorf("greeting %s: %w", pid, err)
	}
	if reply.Headers.Phase == gossip.PhaseError {
		s.Reset()
		return nil, remoteError(pid, reply)
	}
	view, err := cs.keepView(pid, reply, pv)
	if err != nil {
		cs.sendError(c, err, true)
		s.Reset()
		return nil, fmt.Errorf("greeting %s: %w", pid, err)
	}
	if has := answer.HaveView; has != "" {
		cs.peersHold.Add(pid, has)
	} else {
		cs.peersHold.Remove(pid)
	}
	cs.markGreeted(pid)
	c.peerAcks.Store(answer.Acks)
	var theirs negotiate.Granted
	if answer.Granted != nil {
		theirs = *answer.Granted
	}
	// The peer's greeting states what it proposes for our side.
	level, _ := cs.trust.LevelOf(pid, reply, pv.agentID())
	granted := c.raiseLevel(level)
	if proto == wire.Conversation {
		opened = true
		cs.open(c)
	} else {
		cs.kept.put(pid, s)
	}
	return &GreetResult{ConversationID: c.ID, Peer: peerid.String(pid), Granted: granted, GrantedToUs: theirs, View: view}, nil
}

// markGreeted tags pid, for the connection manager and the decoding
// budget, as a peer this daemon exchanged verified greetings with
// (GreetedTag).
func (cs *Conversations) markGreeted(pid peer.ID) {
	cs.host.ConnManager().TagPeer(pid, admit.GreetedTag, 10)
}

// handleConversation answers a greeting and serves the conversation until
// it closes.
func (cs *Conversations) handleConversation(s network.Stream) { cs.answerGreeting(s, true) }

// handleCapabilities answers capabilities queries: each greeting answered
// with this daemon's view, on one stream until the peer closes it or it
// stays idle (wire: Idle streams), or after one answer when this daemon
// keeps as many query streams as it may (maxKeptQueries; strangers half).
func (cs *Conversations) handleCapabilities(s network.Stream) {
	ws, pid, remote, ok := cs.openInbound(s)
	if !ok {
		cs.figures.greeted(dirIn, s.Protocol(), errBrokeOff)
		return
	}
	slot, stranger := false, false
	defer func() {
		if slot {
			cs.keptIn.give(stranger)
		}
	}()
	for first := true; ; first = false {
		if !first && !slot {
			// Known or not as of now: the owner may have made the peer
			// known in the meantime.
			stranger = cs.door.Stranger(pid)
			if !cs.keptIn.take(stranger) {
				s.Close()
				return
			}
			slot = true
		}
		if !cs.answerOn(ws, pid, remote, false, first) {
			return
		}
	}
}

func (cs *Conversations) answerGreeting(s network.Stream, conversation bool) {
	ws, pid, remote, ok := cs.openInbound(s)
	if !ok {
		cs.figures.greeted(dirIn, s.Protocol(), errBrokeOff)
		return
	}
	cs.answerOn(ws, pid, remote, conversation, true)
}

// answerOn answers the next greeting on ws (the first of the stream when
// first), and serves the conversation when it opens one. It reports
// whether the stream is still open for another query: false once it has
// closed or reset it. opening says this is the stream's first greeting.
func (cs *Conversations) answerOn(ws *wire.Stream, pid peer.ID, remote gossip.Agent, conversation, opening bool) (more bool) {
	s := ws.Stream
	// How the exchange ended, for the figures (it broke off unless said
	// otherwise below), counted once: a refusal before its answer goes
	// out, so that a peer reading the answer finds it counted; a greeting
	// answered once the answer went out, before the conversation is
	// opened and served.
	result, counted := errBrokeOff, false
	count := func() {
		if !counted {
			counted = true
			cs.figures.greeted(dirIn, s.Protocol(), result)
		}
	}
	defer count()
	first, release, err := ws.ReadHeld()
	if err != nil && !opening && (errors.Is(err, io.EOF) || isStreamFailure(err)) {
		// The end of a kept query stream: closed, or idle.
		counted = true
		if errors.Is(err, io.EOF) || wire.IsIdle(err) {
			s.Close()
		} else {
			s.Reset()
		}
		return false
	}
	if err != nil {
		result = err
		count()
		cs.refuseFrame(ws, pid, remote, err)
		return
	}
	c := &conv{
		Conversation: gossip.NewConversation(first.Headers.ConversationID, cs.localAgent(), remote),
		peer:         pid,
		stream:       ws,
	}
	var heldView *HeldView
	if held, ok := cs.peerViews.Get(pid); ok {
		heldView = &held
	}
	var prop negotiate.Greeting
	var pv pendingView
	// The fit step claims the conversation ID (claim): whichever greeting
	// naming it gets there first; the claim is given up unless the
	// conversation opens.
	opened := false
	defer func() {
		if !opened {
			cs.unclaim(c)
		}
	}()
	in, err := cs.door.Admit(&admit.Arrival{Via: admit.ViaLibp2p, Msg: first, Stream: pid, Views: []gossip.Phase{gossip.PhaseGreeting}, Release: release,
		Validate: func() (err error) {
			prop, err = negotiate.ReadGreeting(first)
			return err
		},
		Verify: func(peer.ID) (err error) {
			pv, err = cs.checkView(pid, first, prop.ViewUnchanged, false, heldView)
			return err
		},
		Fit: func(peer.ID) error {
			if first.Headers.Phase != gossip.PhaseGreeting {
				return fmt.Errorf("%w: %s before any greeting", gossip.ErrUnexpectedPhase, first.Headers.Phase)
			}
			if err := c.Check(first); err != nil {
				return err
			}
			return cs.claim(c)
		},
		Commit: func(peer.ID) error { return c.Accept(first) }})
	if err != nil {
		result = err
		count()
		cs.answerRefusal(c, err)
		return
	}
	if _, err := cs.keepView(pid, first, pv); err != nil {
		if refusal := admit.Unstored(err); refusal != err {
			// A full disk: the peer is told unavailable, and why.
			cs.log.Warn("could not keep a greeting's view in the store: its disk is full; the greeting is refused until there is room", "peer", cs.named(pid), "err", err)
			err = refusal
		}
		result = err
		count()
		cs.answerRefusal(c, err)
		return
	}
	cs.door.Publish(in, c.ID, "")
	cs.markGreeted(pid)
	c.granted = cs.grant(pid, first, pv.agentID(), prop.Proposal)
	// ReadGreeting keeps a have_view only when it names a view, and a few
	// requested categories: a peer's lists cost memory per conversation.
	c.peerHas = prop.HaveView
	c.categories = prop.ToolCategories
	c.peerAcks.Store(prop.Acks)
	answer := negotiate.Proposal{Disclosure: c.granted.Disclosure, Persona: c.granted.Persona, Temperature: c.granted.Temperature}
	if held, ok := cs.peerViews.Get(pid); ok {
		answer.HaveView = hex.EncodeToString(held.Sum[:]) // the greeter's view, which it need not send again
	}
	reply, err := cs.greeting(c, answer, &c.granted)
	if err != nil {
		result = err
		cs.log.Warn("answering greeting", "peer", cs.named(pid), "err", err)
		s.Reset()
		return
	}
	// The conversation is in the table before its answer leaves: the peer
	// may act on the answer at once (an update naming the conversation,
	// on a stream of its own), and must not find it missing here. Until
	// the answer is written nothing else is (the write lock), and the
	// local agent is told once it is out.
	c.wmu.Lock() // nothing said in the conversation can go before the answer
	if conversation {
		opened = true
		cs.enter(c)
	}
	err = cs.writeHeld(c, reply, true, nil)
	c.wmu.Unlock()
	if err != nil {
		result = err
		cs.log.Warn("answering greeting", "peer", cs.named(pid), "err", err)
		// A full disk (the answer's audit entry could not be written):
		// the peer is told so, as a stranger is at the door, rather than
		// left with a reset stream.
		told := false
		if refusal := cs.door.Unrecorded(err); errors.Is(refusal, admit.ErrAnswerUnrecorded) {
			result = refusal
			count()
			told = cs.sendError(c, refusal, false)
		}
		if conversation {
			cs.closeConv(c)
		}
		if told {
			s.Close() // not reset: a reset may discard the refusal before the peer reads it
		} else {
			s.Reset()
		}
		return
	}
	result = nil
	count()
	cs.noteGreeted(c, s.Protocol())
	if !conversation {
		return true
	}
	cs.announce(c)
	cs.serve(c)
	return false
}

// openInbound attaches an inbound stream to the ifaced service. When it
// reports false it has already reset the stream.
func (cs *Conversations) openInbound(s network.Stream) (*wire.Stream, peer.ID, gossip.Agent, bool) {
	pid := s.Conn().RemotePeer()
	if err := s.Scope().SetService(wire.ServiceName); err != nil {
		cs.log.Debug("refusing stream", "peer", cs.named(pid), "err", err)
		s.Reset()
		return nil, pid, gossip.Agent{}, false
	}
	remote, err := peerid.Agent(pid)
	if err != nil {
		s.Reset()
		return nil, pid, gossip.Agent{}, false
	}
	return wire.NewStream(s, cs.streamTimeout).WithBudget(cs.door.Budget(), pid), pid, remote, true
}

// grant computes what this daemon grants pid, on the level and agent ID it
// established itself; the greeting contributes only a proposal, which can
// lower but never raise the grant.
func (cs *Conversations) grant(pid peer.ID, greeting *gossip.Message, presented string, prop negotiate.Proposal) negotiate.Granted {
	level, agentID := cs.trust.LevelOf(pid, greeting, presented)
	return cs.policy.InForce().GrantTo(cs.requester(pid, level, agentID), prop)
}

// requester is what the daemon established about pid for its policy:
// its peer ID, the agent ID and level trust established, and the
// introductions admitted for it.
func (cs *Conversations) requester(pid peer.ID, level conditions.Level, agentID string) negotiate.Requester {
	return negotiate.Requester{PeerID: peerid.String(pid), AgentID: agentID, Level: level, Introductions: cs.trust.Introductions(pid)}
}

// act does what an admitted message of an open conversation asks, however
// it came (the stream, or the HTTPS inbox): a later greeting renegotiates
// (its view kept, nothing it grants going down), a request is run in the
// background, an answer reaches the request waiting for it. It reports
// whether the message was a request or an answer (handled), and false in
// alive when the daemon is closing.
func (cs *Conversations) act(c *conv, m *gossip.Message, pv pendingView, prop negotiate.Proposal) (alive, handled bool) {
	if m.Headers.Phase == gossip.PhaseGreeting {
		if _, err := cs.keepView(c.peer, m, pv); err != nil {
			cs.log.Info("keeping a renegotiating greeting's view", "peer", cs.named(c.peer), "err", err)
		}
		c.raise(cs.grant(c.peer, m, pv.agentID(), prop), cs.order)
		c.peerAcks.Store(prop.Acks)
	}
	if c.wantsAck(m) {
		// Off the reading goroutine: the acknowledgement waits for a
		// commit and for the write lock, which a local Say blocked on
		// the peer's flow control may hold while the peer waits for this
		// side to read.
		cs.spawn(func() { cs.acknowledge(c, m) })
	}
	if isRequest(m) {
		return cs.spawn(func() { cs.requests.handle(c, m) }), true
	}
	return true, cs.awaited.deliver(c.ID, m)
}

// serve reads the rest of a conversation until close, error or EOF.
func (cs *Conversations) serve(c *conv) {
	defer cs.closeConv(c)
	for {
		var pv pendingView
		var again negotiate.Greeting
		m, err := cs.receive(c, func(m *gossip.Message) error {
			if m.Headers.Phase != gossip.PhaseGreeting {
				return nil
			}
			// A later greeting may carry a changed view: verified at the
			// door like the first.
			var err error
			if again, err = negotiate.ReadGreeting(m); err != nil {
				return err
			}
			pv, err = cs.checkView(c.peer, m, again.ViewUnchanged, false, nil)
			return err
		})
		switch {
		case errors.Is(err, errSkipped):
			continue
		case errors.Is(err, io.EOF):
			return
		case errors.Is(err, network.ErrReset), errors.Is(err, context.Canceled):
			return
		case isStreamFailure(err):
			// An idle conversation closes quietly (node/wire: idle conversation).
			cs.log.Debug("conversation ended", "peer", cs.named(c.peer), "conversation", c.ID, "err", err)
			return
		case err != nil:
			cs.log.Info("conversation ended", "peer", cs.named(c.peer), "conversation", c.ID, "err", err)
			return
		}
		alive, handled := cs.act(c, m, pv, again.Proposal)
		if !alive {
			return
		}
		if handled {
			continue
		}
		if m.Headers.Phase == gossip.PhaseClose || m.Headers.Phase == gossip.PhaseError && c.Closed() {
			return
		}
	}
}

// Say sends a message of the given phase in an open conversation.
func (cs *Conversations) Say(convID string, phase gossip.Phase, text string, parts ...gossip.Part) (*gossip.Message, error) {
	c := cs.conversation(convID)
	if c == nil {
		return nil, fmt.Errorf("saying %s: no open conversation %s (greet the peer first)", phase, convID)
	}
	if phase == gossip.PhaseGreeting {
		return nil, fmt.Errorf("saying %s: use greet to send a greeting", phase)
	}
	m, err := c.Next(phase, cs.now())
	if err != nil {
		return nil, err
	}
	m.Body = gossip.Body{Text: text, Parts: parts}
	if err := cs.send(c, m); err != nil {
		return nil, err
	}
	if phase == gossip.PhaseClose {
		c.stream.CloseWrite()
	}
	return m, nil
}

// greeting builds a signed-ready greeting for c: this daemon's view for
// the peer, the proposal, and, when answering, the context granted.
func (cs *Conversations) greeting(c *conv, prop negotiate.Proposal, granted *negotiate.Granted) (*gossip.Message, error) {
	m, err := c.Next(gossip.PhaseGreeting, cs.now())
	if err != nil {
		return nil, err
	}
	v, err := cs.docs.View(c.grant().Facts(peerid.String(c.peer), 0))
	if err != nil {
		return nil, err
	}
	if len(c.categories) > 0 {
		var honoured []string
		if v, honoured, err = cs.docs.Ordered(v, c.categories); err != nil {
			return nil, err
		}
		if granted != nil {
			granted.ToolCategories = honoured
		}
	}
	c.viewChanged(v.Key)
	c.gmu.Lock()
	c.greeted = v
	c.gmu.Unlock()
	prop.IFPSupport = v.Doc.IFPSupport
	prop.Acks = true // this daemon acknowledges, and reads acknowledgements (acks.go)
	// The view is left out only when the peer holds this very view: any
	// change (seq, grant, order) changes the hash.
	attached := "my signed view for you is attached"
	if c.peerHas != "" && c.peerHas == v.Sum {
		prop.ViewUnchanged = v.Sum
		attached = "my signed view for you is the one you hold (sha256 " + v.Sum[:16] + "…)"
	}
	negotiate.Greeting{Proposal: prop, Granted: granted}.Write(m, v)
	m.Body.Text = fmt.Sprintf("Greetings from %s. I offer you %d of my %d capabilities; %s.",
		cs.displayName(), len(v.Offer()), len(v.Doc.Capabilities), attached)
	if granted != nil {
		m.Body.Text += fmt.Sprintf(" You are granted disclosure %q (%s), authentication level %s, temperature %q.",
			granted.Disclosure, granted.DisclosureOutcome, granted.AuthLevel, granted.Temperature)
	}
	// This daemon's commitment to its next key, so that every peer it
	// meets observes it before any succession (node/keys).
	m.Body.Parts = append(m.Body.Parts, keys.CommitmentParts(cs.trust, cs.id.PeerID())...)
	// The proof covers the finished body, like the signature made in send.
	if err := cs.trust.Held().Attach(c.peer, m); err != nil {
		return nil, err
	}
	return m, nil
}

// send numbers m, signs it, records it in the audit log, then writes it:
// all under the conversation's write lock, so that messages leave in the
// order of their sequence numbers however many goroutines answer at once.
// A message that already carries a proof (a greeting with an
// introduction) keeps the number it was proved with.
func (cs *Conversations) send(c *conv, m *gossip.Message) error { return cs.write(c, m, true, nil) }

// write is send, with the audit entry optional: an answer to a refused
// message is covered by the refusal's record, and must not enter the
// conversation the refused message claimed. d, when m answers a
// capability request, is the decision its audit entry carries.
func (cs *Conversations) write(c *conv, m *gossip.Message, audit bool, d *gossip.Decision) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return cs.writeHeld(c, m, audit, d)
}

// writeHeld is write for a caller that holds c.wmu.
func (cs *Conversations) writeHeld(c *conv, m *gossip.Message, audit bool, d *gossip.Decision) error {
	if m.Security == nil {
		if err := c.TryStamp(m); err != nil {
			return fmt.Errorf("sending %s to %s: %w", m.Headers.Phase, c.peer, err)
		}
	}
	if err := m.Sign(cs.id, cs.now()); err != nil {
		return err
	}
	if audit {
		if err := cs.recordSent(admit.ViaLibp2p, c.peer, m, "", d); err != nil {
			return err
		}
	}
	c.saidForAck(m) // before the write: the acknowledgement may come at once
	if err := c.stream.Write(m); err != nil {
		return fmt.Errorf("sending %s to %s: %w", m.Headers.Phase, c.peer, err)
	}
	c.Sent(m)
	return nil
}

// receive reads the next message of c and takes it through the door,
// with verify (nil for none) checking the documents it carries. A refused
// message is answered with an error phase message and its error returned;
// a message refused for coming too fast is answered and the conversation
// goes on (errSkipped). An idle or broken stream ends quietly.
func (cs *Conversations) receive(c *conv, verify func(m *gossip.Message) error) (*gossip.Message, error) {
	return cs.receiveOnly(c, nil, verify)
}

// receiveOnly is receive with expect (nil: anything the conversation
// takes) judging, at the door's fit step, whether the message is one the
// caller can take now.
func (cs *Conversations) receiveOnly(c *conv, expect func(m *gossip.Message) error, verify func(m *gossip.Message) error) (*gossip.Message, error) {
	m, release, err := c.stream.ReadHeld()
	if err != nil {
		if errors.Is(err, io.EOF) || isStreamFailure(err) {
			return nil, err
		}
		cs.door.Refused(admit.ViaLibp2p, c.peer, false, nil, nil, err)
		cs.answerRefusal(c, err)
		return nil, err
	}
	a := &admit.Arrival{Via: admit.ViaLibp2p, Msg: m, Stream: c.peer, Release: release,
		Temperature: func(peer.ID) string { return c.grant().Temperature },
		// Answers to this daemon's own requests are not charged: refusing
		// them would leave the request waiting for an answer that already
		// came.
		Uncharged: c.ackAwaited(m) || cs.awaited.awaits(c.ID, m),
		Views:     []gossip.Phase{gossip.PhaseGreeting},
		Fit: func(peer.ID) error {
			if expect != nil {
				if err := expect(m); err != nil {
					return err
				}
			}
			return c.Check(m)
		},
		Commit: func(peer.ID) error { return c.Accept(m) }}
	if verify != nil {
		a.Verify = func(peer.ID) error { return verify(m) }
	}
	in, err := cs.door.Admit(a)
	if errors.Is(err, wire.ErrRateLimited) {
		// Too fast is a turn in the negotiation, not the end of it.
		cs.requests.refuseTooFast(c, m, err)
		return nil, errSkipped
	}
	if err != nil {
		if isRequest(m) || c.wantsAck(m) {
			// A refused capability request, or a context message whose
			// sender waits for its acknowledgement, is answered in reply
			// to it (node/wire: Errors, Acknowledgements), so that the
			// sender waiting for its answer reads why (a full disk, say)
			// rather than only that the conversation ended, and does not
			// take the refusal for a lost message.
			cs.answerRefusalTo(c, err, m.Headers.MessageID)
		} else {
			cs.answerRefusal(c, err)
		}
		return nil, err
	}
	if m.Headers.Phase == gossip.PhaseError {
		cs.log.Info("peer sent an error", "peer", cs.named(c.peer), "conversation", c.ID, "error", remoteError(c.peer, m))
	}
	if _, isAck := ackOf(m); !isAck {
		// An acknowledgement is the conversation's mechanics, recorded
		// but not the local agent's to read.
		cs.door.Publish(in, c.ID, "")
	}
	return m, nil
}

// errBrokeOff: an exchange ended without a message or an answer (the
// stream could not be taken, or broke).
var errBrokeOff = errors.New("the exchange broke off")

// errSkipped: a message was refused but the conversation goes on.
var errSkipped = errors.New("message refused; conversation continues")

// viaLibp2p is the transport the audit log names for libp2p streams.

// maxHeldViewBytes bounds the verified-view memory by bytes (heldCost):
// about 550 views of 20 capabilities (14.5 KB canonical) held without
// their documents. The least recently used goes first; a peer pushed out
// is verified again at its next greeting (some 100 µs of CPU). The
// budget is part of the 64 KB per greeted idle peer at 5,000 peers
// (DESIGN.md §8, bench row 4).
const maxHeldViewBytes = 8 << 20

// maxPeersHold bounds the peers whose word that they hold this daemon's
// view is remembered (a hash each).
const maxPeersHold = 1024

// verifiedView is a view a peer sent, decoded and verified as received
// (negotiate.VerifiedView): the same content (the SHA-256 of its RFC 8785
// form) from the same peer needs neither again. A peer re-sends its view
// in every greeting, so this is most of what a warm greeting would
// otherwise cost.
type verifiedView = negotiate.VerifiedView

// HeldView is what the verified-view memory keeps of a view a peer sent:
// its RFC 8785 bytes (what have_view names and the peer cache stores) and
// the few fields a greeting reads, not the decoded document, which costs
// about six times the bytes. The document is kept only with the views this
// daemon asked for (the answers to its own greetings and update pushes,
// whose callers read it); a responder, which most peers meet, reads only
// the fields.
// HeldView is what the verified-view memory keeps of a peer's view.
type HeldView struct {
	Sum     [32]byte // SHA-256 of Canon
	Canon   []byte   // shared, never to be changed
	DocHash string   // verifiedView.DocHash
	Seq     uint64
	AgentID string
	Caps    int                 // how many capabilities the view shows
	Doc     *negotiate.Document // nil unless kept (see above); shared, never to be changed
}

// held is what the verified-view memory keeps of vv; withDoc keeps the
// decoded document too.
func held(vv verifiedView, withDoc bool) HeldView {
	h := HeldView{Sum: vv.Sum, Canon: vv.Canon, DocHash: vv.DocHash, Seq: vv.Doc.Seq, AgentID: vv.Doc.AgentID, Caps: len(vv.Doc.Capabilities)}
	if withDoc {
		h.Doc = vv.Doc
	}
	return h
}

// heldCost is what h is counted as in the verified-view memory: its bytes,
// the decoded document at six times them when kept, and the entry.
func heldCost(h HeldView) int64 {
	cost := len(h.Canon) + len(h.DocHash) + len(h.AgentID) + 256
	if h.Doc != nil {
		cost += 6 * len(h.Canon)
	}
	return int64(cost)
}

// agentID is the agent ID the view presents ("" without a view).
func (pv pendingView) agentID() string { return pv.view.AgentID }

// pendingView is a view checked at the door and not yet kept: keepView
// keeps it once the message that carried it is admitted. A zero
// pendingView carries no view.
type pendingView struct {
	view HeldView // Doc set when the content arrived in this message, or when the view is wanted (want)
	ok   bool     // a view is carried (or named unchanged)
	new  bool     // the content arrived in this message (not the held one named unchanged)
	want bool     // the caller reads the document: keep it with the view
}

// checkView verifies the peer's view in m (signed by the key of pid, the
// message's established signer) without keeping it: the door's verify
// step. The initiator requires one in the answer to its greeting, or, when
// it named held in have_view, the answer's word (said: the view_unchanged
// of m's proposal) that the view is unchanged; a responder accepts a
// greeting without one. A view older than the one the peer cache holds is
// refused (wire.ErrStaleSeq). When required, the view's document is at
// hand in the result (decoded again from the held bytes if need be).
func (cs *Conversations) checkView(pid peer.ID, m *gossip.Message, said string, required bool, held *HeldView) (pendingView, error) {
	pv, err := cs.checkViewBytes(pid, m, said, required, held)
	if err != nil || !required || !pv.ok {
		return pv, err
	}
	pv.want = true
	if pv.view.Doc == nil {
		// A view held without its document (kept while answering this
		// peer's greetings): decode the bytes verified before.
		doc, err := negotiate.DecodeViewJSON(pv.view.Canon)
		if err != nil {
			return pendingView{}, fmt.Errorf("decoding the held view of %s: %w", pid, err)
		}
		pv.view.Doc, pv.new = doc, true // keep it with its document from now on
	}
	return pv, nil
}

func (cs *Conversations) checkViewBytes(pid peer.ID, m *gossip.Message, said string, required bool, held *HeldView) (pendingView, error) {
	p, ok := m.Body.Part(negotiate.PartCapabilities)
	if !ok {
		switch {
		case said != "" && held != nil && said == hex.EncodeToString(held.Sum[:]):
			return pendingView{view: *held, ok: true}, nil
		case said != "" && !required:
			return pendingView{}, nil // a view this daemon no longer holds: it learns nothing new, and needs nothing
		case said != "":
			return pendingView{}, fmt.Errorf("%w: the answer says the view is unchanged (%.16s…), but that is not the view this daemon named", gossip.ErrInvalidMessage, said)
		case required:
			return pendingView{}, fmt.Errorf("%w: the greeting has no %q part", gossip.ErrInvalidMessage, negotiate.PartCapabilities)
		default:
			return pendingView{}, nil
		}
	}
	raw, err := p.CanonicalContent()
	if err != nil {
		return pendingView{}, fmt.Errorf("%w: %v", gossip.ErrInvalidMessage, err)
	}
	hv, known, err := cs.verifyView(pid, raw)
	if err != nil {
		return pendingView{}, err
	}
	if !known {
		// A view this daemon has not verified from pid before: it must not
		// be older than the one the peer cache holds.
		if rec, err := cs.store.Peer(peerid.String(pid)); err == nil && rec.Seq > hv.Seq {
			return pendingView{}, fmt.Errorf("%w: seq %d, this daemon holds seq %d from you", wire.ErrStaleSeq, hv.Seq, rec.Seq)
		}
	}
	return pendingView{view: hv, ok: true, new: !known}, nil
}

// keepView keeps a view checked at the door, once its message is admitted:
// the verified-view memory and the peer cache (the act step). It returns
// the view's document when the check wanted it (checkView with required),
// nil otherwise and when the message carried none.
func (cs *Conversations) keepView(pid peer.ID, m *gossip.Message, pv pendingView) (*negotiate.Document, error) {
	if !pv.ok {
		return nil, nil
	}
	view := pv.view
	if pv.new {
		if !pv.want {
			view.Doc = nil
		}
		cs.peerViews.Add(pid, view, heldCost(view))
	}
	var ctxRaw json.RawMessage
	if cp, ok := m.Body.Part(negotiate.PartContext); ok {
		ctxRaw, _ = json.Marshal(cp.Content)
	}
	now := cs.now()
	rec := store.PeerRecord{PeerID: peerid.String(pid), AgentID: view.AgentID, Display: m.Headers.From.Display,
		Addrs: p2phost.PeerAddrs(cs.host, pid), Seq: view.Seq, DocHash: view.DocHash, View: view.Canon, Context: ctxRaw,
		FetchedAt: now, ChangedAt: now}
	changed, err := cs.store.PutPeer(rec)
	if errors.Is(err, store.ErrStaleSeq) {
		return nil, fmt.Errorf("%w: %v", wire.ErrStaleSeq, err)
	}
	if errors.Is(err, store.ErrCorrupt) {
		// An unreadable cache entry must not lock the peer out for good.
		cs.log.Warn("replacing unreadable peer cache entry", "peer", cs.named(pid), "err", err)
		if err = cs.store.DeletePeer(pid.String()); err == nil {
			changed, err = cs.store.PutPeer(rec)
		}
	}
	if err != nil {
		return nil, err
	}
	if len(rec.Addrs) == 0 {
		// Identify may have finished since the addresses were read; if it
		// finished before the record existed, the address follower found
		// nothing to update, so the addresses are read again.
		if _, err := cs.store.SetPeerAddrs(rec.PeerID, p2phost.PeerAddrs(cs.host, pid)); err != nil {
			cs.log.Warn("keeping a peer's addresses", "peer", cs.named(pid), "err", err)
		}
	}
	if changed {
		cs.events.Publish(events.Event{Type: events.EventPeerView, At: now, Peer: peerid.String(pid), ConversationID: m.Headers.ConversationID,
			Detail: fmt.Sprintf("seq %d, %d capabilities", view.Seq, view.Caps)})
	}
	if !pv.want {
		return nil, nil
	}
	return pv.view.Doc, nil
}

// verifyView decodes and verifies the canonical JSON of a view pid sent,
// or finds it verified already (known). It keeps nothing: keepView does,
// once the message is admitted. The result carries the decoded document
// when it was decoded now.
func (cs *Conversations) verifyView(pid peer.ID, canon []byte) (hv HeldView, known bool, err error) {
	sum := sha256.Sum256(canon)
	if h, ok := cs.peerViews.Get(pid); ok && h.Sum == sum {
		return h, true, nil
	}
	pub, err := identity.PublicKeyFromPeerID(pid)
	if err != nil {
		return HeldView{}, false, err
	}
	vv, err := negotiate.VerifyView(pub, canon)
	if errors.Is(err, negotiate.ErrNotAView) {
		return HeldView{}, false, fmt.Errorf("%w: %w", gossip.ErrInvalidMessage, err)
	}
	if err != nil {
		return HeldView{}, false, err
	}
	return held(vv, true), false, nil
}

// refuseFrame answers a first frame that did not decode: the refusal is
// recorded (the stream's peer is established by the secure channel) and
// the error goes out in a conversation of its own, so the peer can read
// why. A stream that failed or ended has nobody to answer.
func (cs *Conversations) refuseFrame(s *wire.Stream, pid peer.ID, remote gossip.Agent, cause error) {
	if errors.Is(cause, io.EOF) || isStreamFailure(cause) {
		cs.log.Debug("inbound stream ended before a message", "peer", cs.named(pid), "err", cause)
		s.Reset()
		return
	}
	cs.door.Refused(admit.ViaLibp2p, pid, false, nil, nil, cause)
	c := &conv{Conversation: gossip.NewConversation(gossip.NewID("conv", cs.now()), cs.localAgent(), remote), peer: pid, stream: s}
	cs.answerRefusal(c, cause)
}

// isStreamFailure tells a failing stream (reset, deadline) from a bad message.
func isStreamFailure(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.Is(err, network.ErrReset) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}

// answerRefusal answers a refusal the door recorded with an error phase
// message where the peer can read one, and closes the stream.
func (cs *Conversations) answerRefusal(c *conv, cause error) { cs.answerRefusalTo(c, cause, "") }

// answerRefusalTo is answerRefusal in reply to the message inReplyTo
// ("": the last message accepted).
func (cs *Conversations) answerRefusalTo(c *conv, cause error, inReplyTo string) {
	if cs.sendErrorTo(c, cause, false, inReplyTo) {
		// Close, not reset: a reset may discard the answer before the peer reads it.
		c.stream.Close()
		return
	}
	c.stream.Reset()
}

// sendError sends the error phase message for cause, if the stream can
// still carry one, and reports whether it did.
func (cs *Conversations) sendError(c *conv, cause error, audit bool) bool {
	return cs.sendErrorTo(c, cause, audit, "")
}

// sendErrorTo is sendError in reply to the message inReplyTo ("": the
// last message accepted).
func (cs *Conversations) sendErrorTo(c *conv, cause error, audit bool, inReplyTo string) bool {
	body := wire.NewErrorBody(cause)
	e, err := c.Next(gossip.PhaseError, cs.now())
	if err != nil {
		return false
	}
	if inReplyTo != "" {
		e.Headers.Thread = &gossip.Thread{InReplyTo: inReplyTo}
	}
	e.Body = gossip.Body{Text: errorText(body), Parts: []gossip.Part{{ContentType: "application/json", Name: partError, Content: negotiate.MustJSONValue(body)}}}
	if err := cs.write(c, e, audit, nil); err != nil {
		cs.log.Debug("could not send error phase message", "peer", cs.named(c.peer), "err", err)
		return false
	}
	return true
}

// recordSent writes a message this daemon sends to the audit log before
// it leaves, with d, the decision it carries out (nil for none).
func (cs *Conversations) recordSent(transport string, pid peer.ID, m *gossip.Message, note string, d *gossip.Decision) error {
	err := cs.audit.Record(gossip.AuditEntry{At: cs.now().UTC(), Direction: gossip.Sent, Peer: peerid.String(pid), Transport: transport, Note: note, Message: m,
		Decision: d, Stranger: cs.door.Stranger(pid)})
	if err != nil {
		return fmt.Errorf("auditing a sent %s: %w", m.Headers.Phase, err)
	}
	return nil
}

// open enters c, which holds the claim on its ID (claim), in the table
// and tells the local agent.
func (cs *Conversations) open(c *conv) {
	cs.enter(c)
	cs.announce(c)
}

// enter puts c, which holds the claim on its ID (claim), in the table,
// where messages naming it find it; nobody is told yet (announce).
func (cs *Conversations) enter(c *conv) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.opened++
	c.order = cs.opened
	if cs.claims[c.ID] == c {
		delete(cs.claims, c.ID)
	}
	cs.convs[c.ID] = c
}

// announce tells the local agent that c is open, and on the side that
// greeted, listens for the rest of the conversation.
func (cs *Conversations) announce(c *conv) {
	cs.events.Publish(events.Event{Type: events.EventConversation, At: cs.now(), Peer: peerid.String(c.peer), ConversationID: c.ID, Detail: "open"})
	if c.stream.Stat().Direction == network.DirOutbound {
		// The initiator also listens for the rest of the conversation.
		if !cs.spawn(func() { cs.serve(c) }) {
			cs.closeConv(c)
		}
	}
}

func (cs *Conversations) closeConv(c *conv) {
	cs.mu.Lock()
	if cs.convs[c.ID] == c {
		delete(cs.convs, c.ID)
	}
	cs.mu.Unlock()
	c.end()
	c.stream.Close()
	cs.events.Publish(events.Event{Type: events.EventConversation, At: cs.now(), Peer: peerid.String(c.peer), ConversationID: c.ID, Detail: "closed"})
}

// Picked is the open conversation a message to pid should travel in: the
// open conversation convID when one is named (it must be with pid), else
// the newest open one with pid; "" when there is none (the caller
// greets).
func (cs *Conversations) Picked(pid peer.ID, convID string) (string, error) {
	c, err := cs.pick(pid, convID)
	if c == nil || err != nil {
		return "", err
	}
	return c.ID, nil
}

// IsOpen says whether the conversation id is in the table.
func (cs *Conversations) IsOpen(id string) bool { return cs.conversation(id) != nil }

// Abandon resets the conversation id's stream and closes it: it looked
// open but could not carry a message (its stream died with a relay, say).
func (cs *Conversations) Abandon(id string) {
	if c := cs.conversation(id); c != nil {
		c.stream.Reset()
		cs.closeConv(c)
	}
}

// LocalAgent is this daemon as the IFP-4 agent its messages are from.
func (cs *Conversations) LocalAgent() gossip.Agent { return cs.localAgent() }

// RecordSent writes a message this daemon sends by another way (the
// mailbox) to the audit log before it leaves, with d, the decision it
// carries out (nil for none).
func (cs *Conversations) RecordSent(transport string, pid peer.ID, m *gossip.Message, note string, d *gossip.Decision) error {
	return cs.recordSent(transport, pid, m, note, d)
}

func (cs *Conversations) conversation(id string) *conv {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.convs[id]
}

// Open lists the open conversations; one that either side has closed is
// no longer open, though it stays in the table until the peer answers.
func (cs *Conversations) Open() []ConversationInfo {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]ConversationInfo, 0, len(cs.convs))
	for _, c := range cs.convs {
		if c.Closed() {
			continue // closing: one side sent close, nothing more can be said in it
		}
		out = append(out, ConversationInfo{ID: c.ID, Peer: c.peer.String(), Granted: c.grant()})
	}
	return out
}

// ConversationInfo describes an open conversation.
type ConversationInfo struct {
	ID      string            `json:"conversation_id"`
	Peer    string            `json:"peer"`
	Granted negotiate.Granted `json:"granted"`
}

func (cs *Conversations) localAgent() gossip.Agent {
	return gossip.Agent{Agent: cs.id.DID(), Display: cs.display}
}

func (cs *Conversations) displayName() string {
	if cs.display != "" {
		return cs.display
	}
	return cs.id.DID()
}

func remoteError(pid peer.ID, m *gossip.Message) error {
	e := &wire.RemoteError{Peer: pid.String(), Body: wire.ErrorBody{Code: wire.CodeInternal, Message: m.Body.Text}}
	if p, ok := m.Body.Part(partError); ok {
		_ = decodePart(p, &e.Body)
	}
	return e
}

func decodePart(p *gossip.Part, v any) error {
	raw, err := json.Marshal(p.Content)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
