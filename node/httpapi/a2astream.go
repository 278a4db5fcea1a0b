package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/ifaced/ifaced/node/wire"
)

// Streaming over server-sent events (A2A 1.0 §3.1.2, §3.1.6, §9.4.2,
// §9.4.6; A2A 0.3 message/stream and tasks/resubscribe). The response is
// HTTP 200 with Content-Type text/event-stream; each event is one line
// "data: " followed by a JSON-RPC response carrying the request's id, then
// a blank line. A request refused before its stream opens (bad params, an
// unknown task, no room) gets a plain JSON-RPC error instead, as SendMessage
// would.
//
//   - SendStreamingMessage / message/stream, by default: the agent's
//     message is the one event (a message-only stream, §3.1.2), sent once
//     the agent has answered; a failure is one error event instead.
//   - With returnImmediately (1.0) or blocking false (0.3): a task stream.
//     The first event is the working task, sent at once; the last is its
//     status update when it ends (completed with the reply in
//     status.message, or failed with the reason), final: true in 0.3.
//   - SubscribeToTask / tasks/resubscribe {"id"} on a working task: the
//     task as it is now, then its status update when it ends. A task that
//     has ended is not subscribed to (-32004; read it with GetTask). A 0.3
//     tasks/resubscribe is answered with a stream even when it is refused:
//     one error event.
//
// While a stream waits it sends an SSE comment every a2aStreamHeartbeat,
// so that proxies keep the connection; then it closes.
//
// Bounds. Anyone who can reach the binding can open a stream, so streams
// are bounded like every other thing a stranger can hold open, on top of
// the binding's request limiter (a stream is one request to it):
//
//   - at most maxA2AStreamsPerClient streams open per client (IPv4 address
//     or IPv6 /64, as the limiter counts clients) and maxA2AStreams in all;
//     past either the request is refused (-32603 with the daemon's busy
//     error, retry after 1 s) before anything runs;
//   - a streamed message runs like any message: it takes one of the
//     maxInvocations slots (refused when none is free) and its agent has
//     agent.timeout;
//   - a stream lives at most agent.timeout plus a2aStreamGrace (its write
//     deadline is a2aStreamLastWrite later, to write the last event): past
//     it the stream ends with an error event saying the task is still
//     working (a task ends within agent.timeout, so this is a backstop);
//   - a stream writes at most maxA2AStreamBytes and one short error event:
//     an event that would pass the budget is replaced by an error event
//     saying so (a reply is at most 1 MiB, the agent's answer bound, so
//     this too is a backstop).
const (
	maxA2AStreams          = 64
	maxA2AStreamsPerClient = 4
	maxA2AStreamBytes      = 4 << 20
	a2aStreamGrace         = 10 * time.Second
	a2aStreamHeartbeat     = 15 * time.Second
	a2aStreamLastWrite     = 5 * time.Second // to write the event that ends a stream at its lifetime
)

// a2aStreams counts the open streams, per client and in all.
type a2aStreams struct {
	mu        sync.Mutex
	open      int
	perClient map[netip.Prefix]int // at most maxA2AStreams entries: one goes at zero
}

func newA2AStreams() *a2aStreams { return &a2aStreams{perClient: map[netip.Prefix]int{}} }

// take counts a stream for client, or says why there is no room.
func (ss *a2aStreams) take(client netip.Prefix) (release func(), e *a2aError) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var why string
	switch {
	case ss.perClient[client] >= maxA2AStreamsPerClient:
		why = fmt.Sprintf("this client has %d streams open, its most", ss.perClient[client])
	case ss.open >= maxA2AStreams:
		why = fmt.Sprintf("%d streams are open, the most this agent serves", ss.open)
	}
	if why != "" {
		body := wire.ErrorBody{Code: wire.CodeBusy, Message: "no room for another stream: " + why + "; close one, retry shortly, or send the message without streaming", RetryAfterSeconds: 1}
		return nil, &a2aError{code: rpcInternal, msg: body.Message, detail: &body}
	}
	ss.open++
	ss.perClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			ss.open--
			if ss.perClient[client]--; ss.perClient[client] <= 0 {
				delete(ss.perClient, client)
			}
		})
	}, nil
}

// count is the number of streams open, in all and for client.
func (ss *a2aStreams) count(client netip.Prefix) (all, mine int) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.open, ss.perClient[client]
}

// sse writes one stream's events.
type sse struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	v    a2aVersion
	id   json.RawMessage
	left int // bytes the stream may still write
}

// openSSE answers with the event stream's headers; the stream lives until
// deadline.
func openSSE(w http.ResponseWriter, v a2aVersion, id json.RawMessage, deadline time.Time) *sse {
	rc := http.NewResponseController(w)
	// The server's WriteTimeout counts from the request; this stream's own
	// bound replaces it, with room to write the event that ends it.
	rc.SetWriteDeadline(deadline.Add(a2aStreamLastWrite))
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies: do not hold events back
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return &sse{w: w, rc: rc, v: v, id: id, left: maxA2AStreamBytes}
}

// event writes one JSON-RPC response, a result or an error, as an event.
func (s *sse) event(result any, e *a2aError) error {
	b, err := s.encode(result, e)
	if err == nil && len(b) > s.left {
		b, err = s.encode(nil, rpcErr(rpcInternal, "the next event is %d bytes, over the %d a stream carries; read the task with %s, or send the message with %s",
			len(b), maxA2AStreamBytes, methodName(opGetTask, s.v), methodName(opSend, s.v)))
	}
	if err != nil {
		return err
	}
	s.left -= len(b)
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("writing an A2A stream event: %w", err)
	}
	return s.rc.Flush()
}

// encode is one event: "data: " and the response on one line, then a
// blank line. The JSON has no raw newline, so one data line holds it.
func (s *sse) encode(result any, e *a2aError) ([]byte, error) {
	resp := rpcResponse{JSONRPC: "2.0", ID: s.id, Result: result}
	if e != nil {
		resp.Result, resp.Error = nil, rpcErrorOf(s.v, e)
	}
	var buf bytes.Buffer
	buf.WriteString("data: ")
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		return nil, fmt.Errorf("encoding an A2A stream event: %w", err)
	}
	buf.WriteString("\n") // Encode ended the line; this is the blank one
	return buf.Bytes(), nil
}

// heartbeat writes an SSE comment, which clients ignore.
func (s *sse) heartbeat() error {
	const beat = ": keep-alive\n\n"
	if s.left < len(beat) {
		return fmt.Errorf("writing an A2A stream heartbeat: the stream's %d bytes are spent", maxA2AStreamBytes)
	}
	s.left -= len(beat)
	if _, err := s.w.Write([]byte(beat)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// streamLifetime is how long a stream may live.
func (s *Binding) streamLifetime() time.Duration { return s.agent.AgentTimeout() + s.streamGrace }

// a2aStream answers SendStreamingMessage and message/stream.
func (s *Binding) a2aStream(w http.ResponseWriter, r *http.Request, v a2aVersion, req jsonrpcRequest, decoded func()) {
	fail := func(e *a2aError) { rpcAnswer(w, http.StatusOK, v, req.ID, nil, e) }
	p, areq, e := s.readMessage(req.Params, v)
	if e != nil {
		fail(e)
		return
	}
	decoded() // the run is bounded by the invocation and stream limits, not the decoding budget
	closeStream, e := s.streams.take(clientOf(s.callerOf(r).remote))
	if e != nil {
		fail(e)
		return
	}
	defer closeStream()
	who := s.callerOf(r)
	release, e := s.takeSlot(who, areq.skill)
	if e != nil {
		fail(e)
		return
	}
	lifetime := s.streamLifetime()
	ctx, cancel := context.WithTimeout(r.Context(), lifetime)
	defer cancel()
	if !p.blocking() {
		t, e := s.startTask(who, areq, release)
		if e != nil {
			fail(e)
			return
		}
		s.followTask(ctx, openSSE(w, v, req.ID, time.Now().Add(lifetime)), t)
		return
	}
	type result struct {
		out any
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer release() // the slot is held while the agent works, even if the client has gone
		out, err := s.a2aRun(who, areq)
		done <- result{out, err}
	}()
	st := openSSE(w, v, req.ID, time.Now().Add(lifetime))
	beat := time.NewTicker(a2aStreamHeartbeat)
	defer beat.Stop()
	for {
		select {
		case res := <-done:
			if res.err != nil {
				st.event(nil, s.a2aFailure(res.err))
				return
			}
			st.event(sendResult(v, "message", replyMessage(areq, res.out).render(v)), nil)
			return
		case <-beat.C:
			if st.heartbeat() != nil {
				return
			}
		case <-ctx.Done():
			if r.Context().Err() == nil {
				st.event(nil, rpcErr(rpcInternal, "the stream's lifetime (%s) ended before the agent answered", lifetime))
			}
			return
		}
	}
}

// a2aSubscribe answers SubscribeToTask and tasks/resubscribe. An A2A 0.3
// client reads tasks/resubscribe's answer as an event stream whatever
// happens (as @a2a-js/sdk's server answers it), so a 0.3 refusal is a
// stream of one error event; a 1.0 refusal is a plain JSON-RPC error.
func (s *Binding) a2aSubscribe(w http.ResponseWriter, r *http.Request, v a2aVersion, req jsonrpcRequest) {
	fail := func(e *a2aError) { rpcAnswer(w, http.StatusOK, v, req.ID, nil, e) }
	if v == a2a03 {
		fail = func(e *a2aError) { openSSE(w, v, req.ID, time.Now()).event(nil, e) }
	}
	id, e := taskID(req.Params)
	if e != nil {
		fail(e)
		return
	}
	t, ok := s.tasks.get(id)
	switch {
	case !ok:
		fail(taskNotFound(id))
		return
	case t.state.terminal():
		fail(rpcErr(a2aUnsupported, "task %s is %s already: a task that has ended has no updates to follow; read it with %s", id, t.state.name(v), methodName(opGetTask, v)))
		return
	}
	closeStream, e := s.streams.take(clientOf(s.callerOf(r).remote))
	if e != nil {
		fail(e)
		return
	}
	defer closeStream()
	lifetime := s.streamLifetime()
	ctx, cancel := context.WithTimeout(r.Context(), lifetime)
	defer cancel()
	s.followTask(ctx, openSSE(w, v, req.ID, time.Now().Add(lifetime)), t)
}

// followTask streams task t: as it is now, then its status update once it
// ends, or an error event if the stream's lifetime ends first.
func (s *Binding) followTask(ctx context.Context, st *sse, t *a2aTask) {
	if st.event(sendResult(st.v, "task", t.render(st.v)), nil) != nil {
		return
	}
	beat := time.NewTicker(a2aStreamHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-t.ended:
			now, ok := s.tasks.get(t.id)
			if !ok {
				st.event(nil, taskNotFound(t.id)) // evicted as it ended: the table was full of larger replies
				return
			}
			st.event(updateResult(st.v, now), nil)
			return
		case <-beat.C:
			if st.heartbeat() != nil {
				return
			}
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				st.event(nil, rpcErr(rpcInternal, "the stream's lifetime ended while task %s was still working; follow it again with %s, or read it with %s",
					t.id, methodName(opSubscribe, st.v), methodName(opGetTask, st.v)))
			}
			return
		}
	}
}

// updateResult is a status update event's result in version v.
func updateResult(v a2aVersion, t *a2aTask) any {
	if v == a2a10 {
		return map[string]any{"statusUpdate": t.renderUpdate(v)}
	}
	return t.renderUpdate(v)
}
