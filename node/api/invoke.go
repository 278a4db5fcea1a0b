package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/invoke"
	"github.com/libp2p/go-libp2p/core/peer"
)

// InvokeRequest asks a peer to run one of its capabilities.
type InvokeRequest struct {
	Peer       string          `json:"peer"`
	Capability string          `json:"capability"`
	Params     json.RawMessage `json:"params,omitempty"`
	// ConversationID names the open conversation with the peer to ask in;
	// without it, the newest open one (or a new one, by a greeting).
	ConversationID string `json:"conversation_id,omitempty"`
}

// invoke handles POST /v1/invoke: the request goes to the peer in the
// conversation named, or the newest open one (or a new one) and the peer's answer comes back; a refusal
// is a 502 carrying the peer's explanation.
func (g *conversationRoutes) invoke(w http.ResponseWriter, r *http.Request) {
	var req InvokeRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Capability == "" {
		writeError(w, badField("capability", "is required: the name of one of the peer's capabilities"))
		return
	}
	var params any
	if len(req.Params) > 0 {
		if err := json.Unmarshal(req.Params, &params); err != nil {
			writeError(w, badField("params", "is not JSON: %v", err))
			return
		}
	}
	pid, e := g.livePeer(req.Peer)
	if e != nil {
		writeError(w, e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
	defer cancel()
	res, err := g.table.InvokeIn(ctx, pid, req.ConversationID, req.Capability, params)
	if errors.Is(err, converse.ErrNoConversation) {
		writeError(w, notFound("conversation_id: %v", err))
		return
	}
	if err != nil {
		writeError(w, peerFailure(err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// livePeer resolves a peer reference and checks that it can be reached.
func (g *conversationRoutes) livePeer(ref string) (peer.ID, *Error) {
	pid, e := g.names.resolve(ref)
	if e == nil {
		e = reachable(g.talk, pid)
	}
	return pid, e
}

// answerInvocation handles POST /v1/invocations/{id}: the local agent's
// answer to an invocation it received on the event stream.
func (g *eventRoutes) answerInvocation(w http.ResponseWriter, r *http.Request) {
	var ans events.InvocationAnswer
	if e := decodeBody(r, &ans); e != nil {
		writeError(w, e)
		return
	}
	if ans.Error != nil && ans.Error.Message == "" {
		writeError(w, badField("error.message", "is required when answering with an error"))
		return
	}
	err := g.hub.AnswerInvocation(r.PathValue("id"), ans)
	switch {
	case errors.Is(err, invoke.ErrNoSuchInvocation):
		writeError(w, notFound("%v (it may have timed out)", err))
	case err != nil:
		writeError(w, internal(err))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// Invoke asks a peer to run a capability.
func (c *Client) Invoke(ctx context.Context, req InvokeRequest) (*converse.InvokeResult, error) {
	var out converse.InvokeResult
	return &out, c.call(ctx, http.MethodPost, "/v1/invoke", req, &out)
}

// AnswerInvocation answers an invocation received on the event stream.
func (c *Client) AnswerInvocation(ctx context.Context, id string, ans events.InvocationAnswer) error {
	if id == "" {
		return fmt.Errorf("answering an invocation: empty ID")
	}
	return c.call(ctx, http.MethodPost, "/v1/invocations/"+id, ans, nil)
}
