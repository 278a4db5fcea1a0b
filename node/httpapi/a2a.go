package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/wire"
)

// The A2A endpoint the agent card names (JSON-RPC 2.0, A2A 0.3). It
// serves message/send only, as a way to run one skill: the message names
// the skill in its metadata ("skill") or in a data part {"skill", "input"},
// and the answer is an agent message with the result in a data part.
// Everything A2A builds on tasks (streaming, tasks/get, push
// notifications) is answered "unsupported operation": a capability here
// answers at once or not at all. The caller is anonymous, exactly as on
// POST /invoke.

// JSON-RPC and A2A error codes.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
	rpcInternal       = -32603
	a2aUnsupported    = -32004
)

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

type rpcResponse struct {
	JSONRPC string    `json:"jsonrpc"`
	ID      any       `json:"id"`
	Result  any       `json:"result,omitempty"`
	Error   *rpcError `json:"error,omitempty"`
}

type a2aPart struct {
	Kind string         `json:"kind"`
	Text string         `json:"text,omitempty"`
	Data map[string]any `json:"data,omitempty"`
}

type a2aMessage struct {
	Kind      string         `json:"kind"`
	Role      string         `json:"role"`
	MessageID string         `json:"messageId"`
	ContextID string         `json:"contextId,omitempty"`
	Parts     []a2aPart      `json:"parts"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

func (s *Binding) a2a(w http.ResponseWriter, r *http.Request) {
	// JSON only: a web page can send text/plain across origins without
	// asking, and must not be able to run skills that way.
	if !isJSON(r) {
		writeError(w, http.StatusUnsupportedMediaType, CodeInvalidFormat, fmt.Sprintf("Content-Type is %q; send application/json", r.Header.Get("Content-Type")))
		return
	}
	body, decoded, ok := s.readBody(w, r)
	if !ok {
		return
	}
	defer decoded()
	var req rpcRequest
	answer := func(res any, e *rpcError) {
		writeJSON(w, http.StatusOK, rpcResponse{JSONRPC: "2.0", ID: req.ID, Result: res, Error: e})
	}
	if err := json.Unmarshal(body, &req); err != nil {
		answer(nil, &rpcError{Code: rpcParseError, Message: "not JSON: " + err.Error()})
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		answer(nil, &rpcError{Code: rpcInvalidRequest, Message: `want a JSON-RPC 2.0 request: {"jsonrpc": "2.0", "id", "method", "params"}`})
		return
	}
	switch req.Method {
	case "message/send":
	case "message/stream", "tasks/get", "tasks/cancel", "tasks/resubscribe", "tasks/pushNotificationConfig/set",
		"tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete":
		answer(nil, &rpcError{Code: a2aUnsupported, Message: req.Method + " is not supported: skills here answer at once, without tasks"})
		return
	default:
		answer(nil, &rpcError{Code: rpcMethodNotFound, Message: fmt.Sprintf("no method %q (this agent serves message/send)", req.Method)})
		return
	}
	var params struct {
		Message  a2aMessage     `json:"message"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(req.Params, &params); err != nil {
		answer(nil, &rpcError{Code: rpcInvalidParams, Message: "params: " + err.Error()})
		return
	}
	skill, input := skillOf(params.Message, params.Metadata)
	if skill == "" {
		answer(nil, &rpcError{Code: rpcInvalidParams, Message: `name the skill to run: message.metadata.skill, or a data part {"skill": ID, "input": {...}}`})
		return
	}
	decoded() // the skill's run is bounded by the invocation limit, not the decoding budget
	release, ok := s.invocation(w)
	if !ok {
		return
	}
	defer release()
	out, err := s.n.Inbox().ExecuteAnonymous("a2a", r.RemoteAddr, params.Message.MessageID, skill, input)
	if err != nil {
		body := wire.NewErrorBody(err)
		code := rpcInternal
		if body.Code == wire.CodeInvalidParams || body.Code == wire.CodeUnknownCapability || body.Code == wire.CodeConditionsNotMet {
			code = rpcInvalidParams
		}
		answer(nil, &rpcError{Code: code, Message: body.Message, Data: body})
		return
	}
	answer(a2aMessage{Kind: "message", Role: "agent", MessageID: gossip.NewID("msg", time.Now()), ContextID: params.Message.ContextID,
		Parts: []a2aPart{{Kind: "data", Data: map[string]any{"skill": skill, "output": out}}}}, nil)
}

// skillOf finds the skill a message asks for, and its input.
func skillOf(m a2aMessage, meta map[string]any) (string, any) {
	for _, md := range []map[string]any{m.Metadata, meta} {
		if name, ok := md["skill"].(string); ok && name != "" {
			var input any
			for _, p := range m.Parts {
				if p.Kind == "data" {
					input = p.Data
					if in, ok := p.Data["input"]; ok {
						input = in
					}
					break
				}
			}
			return name, input
		}
	}
	for _, p := range m.Parts {
		if name, ok := p.Data["skill"].(string); ok && p.Kind == "data" && name != "" {
			return name, p.Data["input"]
		}
	}
	return "", nil
}
