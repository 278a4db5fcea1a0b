package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/ifaced/ifaced/gossip"
)

// closeConversation handles DELETE /v1/conversations/{id}: it sends the
// IFP-3 close phase in an open conversation and answers with the message
// sent. The conversation leaves the list once the peer has closed its
// side too (it answers a close by closing), or when it goes idle.
func (g *conversationRoutes) closeConversation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !g.open(id) {
		writeError(w, notFound("no open conversation %q (`GET /v1/conversations` lists them; `ifaced audit` lists past ones)", id))
		return
	}
	m, err := g.talk.Say(id, gossip.PhaseClose, "")
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, m)
	case errors.Is(err, gossip.ErrConversationClosed):
		writeError(w, &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "conversation " + id + " is closing already: " + err.Error()})
	case !g.open(id):
		writeError(w, notFound("conversation %q ended: %v", id, err))
	default:
		writeError(w, peerFailure(err))
	}
}

// CloseConversation sends the close phase in an open conversation and
// returns the message sent.
func (c *Client) CloseConversation(ctx context.Context, id string) (*gossip.Message, error) {
	var out gossip.Message
	return &out, c.call(ctx, http.MethodDelete, "/v1/conversations/"+url.PathEscape(id), nil, &out)
}
