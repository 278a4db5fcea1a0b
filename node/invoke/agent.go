package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/ifaced/ifaced/node/events"

	"github.com/ifaced/ifaced/node/config"

	"github.com/ifaced/ifaced/node/wire"
)

// The local agent contract. A permitted invocation of one of the tools of
// the MCP server named by [agent.mcp] becomes its tools/call
// (node/mcpagent). Any other reaches the agent
// either as an HTTP POST to agent.webhook, or — without a webhook — as an
// "invocation" event on the control API's event stream, answered with
// POST /v1/invocations/{id}. Both carry an Invocation and expect an
// InvocationAnswer. Without a webhook and with nobody subscribed, the
// requester is told agent_unavailable at once; without an answer by the
// deadline, agent_timeout.
//
// A message that asks for a reply (a plain A2A text message from an HTTP
// caller) takes the same way: an Invocation whose capability is empty and
// whose message holds the IFP-4 message as received (body.text, and the
// caller's data in parts). On the event stream it arrives as a "message"
// event, the message as the event's message and the invocation (without
// it) saying what to answer; the webhook receives the Invocation itself. The answer's result is the reply: a string for text,
// any other JSON for data.

// ErrNoSuchInvocation: an answer for an invocation that is not waiting
// (unknown, already answered, or timed out).
var ErrNoSuchInvocation = errors.New("no invocation is waiting under that ID")

// maxAgentAnswer bounds what the agent may return, like any message.
const maxAgentAnswer = 1 << 20

// ToolServer is an MCP server acting as the local agent for the
// capabilities it Handles (node/mcpagent.Agent). Its errors wrap the
// wire.ErrAgent* sentinels.
type ToolServer interface {
	Handles(capability string) bool
	Call(ctx context.Context, capability string, params any) (any, error)
}

// bridge hands invocations to the local agent.
type bridge struct {
	log     *slog.Logger
	tools   ToolServer // nil without agent.mcp
	webhook string
	client  *http.Client
	events  *events.Hub

	mu      sync.Mutex
	waiting map[string]chan events.InvocationAnswer
}

func newBridge(cfg config.AgentConfig, tools ToolServer, hub *events.Hub, log *slog.Logger) *bridge {
	return &bridge{log: log, tools: tools, webhook: cfg.Webhook, client: &http.Client{}, events: hub, waiting: map[string]chan events.InvocationAnswer{}}
}

// invoke asks the agent and waits for its answer until ctx ends.
func (b *bridge) invoke(ctx context.Context, inv events.Invocation, now time.Time) (any, error) {
	if b.tools != nil && b.tools.Handles(inv.Capability) {
		return b.tools.Call(ctx, inv.Capability, inv.Params)
	}
	var ans events.InvocationAnswer
	var err error
	switch {
	case b.webhook != "":
		ans, err = b.post(ctx, inv)
	case b.events.Agents() > 0:
		ans, err = b.viaEvents(ctx, inv, now)
	default:
		return nil, fmt.Errorf("%w: no webhook is configured and no agent is subscribed to the event stream", wire.ErrAgentUnavailable)
	}
	if err != nil {
		return nil, err
	}
	if ans.Error != nil {
		return nil, fmt.Errorf("%w: %s", wire.ErrAgentFailed, ans.Error.Message)
	}
	return ans.Result, nil
}

func (b *bridge) post(ctx context.Context, inv events.Invocation) (events.InvocationAnswer, error) {
	body, err := json.Marshal(inv)
	if err != nil {
		return events.InvocationAnswer{}, fmt.Errorf("encoding invocation: %w", err)
	}
	// Errors here reach the requester, so they say what happened but never
	// where: the webhook's address (and any secret in it) stays local.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.webhook, bytes.NewReader(body))
	if err != nil {
		b.log.Warn("building the webhook request", "err", err)
		return events.InvocationAnswer{}, fmt.Errorf("%w: the webhook could not be called", wire.ErrAgentUnavailable)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if resp != nil {
		defer resp.Body.Close()
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return events.InvocationAnswer{}, fmt.Errorf("%w (webhook)", wire.ErrAgentTimeout)
	case err != nil:
		b.log.Warn("calling the agent's webhook", "err", err)
		return events.InvocationAnswer{}, fmt.Errorf("%w: the webhook could not be reached", wire.ErrAgentUnavailable)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAgentAnswer+1))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return events.InvocationAnswer{}, fmt.Errorf("%w (webhook)", wire.ErrAgentTimeout)
		}
		b.log.Warn("reading the agent's webhook answer", "err", err)
		return events.InvocationAnswer{}, fmt.Errorf("%w: the webhook's answer could not be read", wire.ErrAgentFailed)
	}
	if len(raw) > maxAgentAnswer {
		return events.InvocationAnswer{}, fmt.Errorf("%w: the webhook's answer is over %d bytes", wire.ErrAgentFailed, maxAgentAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		return events.InvocationAnswer{}, fmt.Errorf("%w: the webhook answered HTTP %d", wire.ErrAgentFailed, resp.StatusCode)
	}
	var ans events.InvocationAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		b.log.Warn("decoding the agent's webhook answer", "err", err)
		return events.InvocationAnswer{}, fmt.Errorf("%w: the webhook's answer is not an invocation answer", wire.ErrAgentFailed)
	}
	return ans, nil
}

func (b *bridge) viaEvents(ctx context.Context, inv events.Invocation, now time.Time) (events.InvocationAnswer, error) {
	ch := make(chan events.InvocationAnswer, 1)
	b.mu.Lock()
	b.waiting[inv.ID] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.waiting, inv.ID)
		b.mu.Unlock()
	}()
	e := events.Event{Type: events.EventInvocation, At: now, Peer: inv.Peer, ConversationID: inv.ConversationID, Invocation: &inv}
	if inv.Message != nil {
		// The message once, as the event's: the invocation says whom to answer.
		bare := inv
		bare.Message = nil
		e.Type, e.Message, e.Invocation = events.EventMessage, inv.Message, &bare
		e.Detail = "this message asks for a reply: answer it with POST /v1/invocations/{invocation_id}, the reply as result"
	}
	b.events.Publish(e)
	select {
	case ans := <-ch:
		return ans, nil
	case <-ctx.Done():
		return events.InvocationAnswer{}, fmt.Errorf("%w (event stream)", wire.ErrAgentTimeout)
	}
}

// answer delivers the agent's answer to a waiting invocation.
func (b *bridge) answer(id string, ans events.InvocationAnswer) error {
	b.mu.Lock()
	ch, ok := b.waiting[id]
	delete(b.waiting, id)
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("answering invocation %s: %w", id, ErrNoSuchInvocation)
	}
	ch <- ans
	return nil
}
