package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/mail"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// SendRequest is the body of POST /v1/send.
type SendRequest struct {
	Peer string `json:"peer"`
	Text string `json:"text"`
	// ConversationID names the open conversation with the peer to say it
	// in; without it, the newest open one (or a new one, or the mailbox).
	ConversationID string `json:"conversation_id,omitempty"`
}

// OutboxItem is one message waiting to be left at a peer's mailbox.
type OutboxItem struct {
	MessageID   string    `json:"message_id"`
	To          string    `json:"to"`
	Queued      time.Time `json:"queued"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt"`
	LastError   string    `json:"last_error,omitempty"`
}

// Outbox is the answer of GET /v1/outbox.
type Outbox struct {
	Messages []OutboxItem `json:"messages"`
}

// mailRoutes serve text to a peer, said in a conversation or left at its
// mailbox (POST /v1/send), and what waits for a mailbox (GET /v1/outbox).
type mailRoutes struct {
	mail    mailer
	names   peerNames
	timeout time.Duration // one exchange with a peer
}

// mailer says text to a peer, or queues it for the peer's mailbox relays
// (mail.Mail).
type mailer interface {
	SendIn(ctx context.Context, pid peer.ID, convID, text string) (*mail.SendResult, error)
	Outbox() ([]store.OutboxItem, error)
}

// send handles POST /v1/send: text to a peer, in a conversation if it can
// be reached, else queued for its mailbox relays.
func (g *mailRoutes) send(w http.ResponseWriter, r *http.Request) {
	var req SendRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Peer == "" {
		writeError(w, badField("peer", "is required"))
		return
	}
	if strings.TrimSpace(req.Text) == "" {
		writeError(w, badField("text", "is required"))
		return
	}
	pid, e := g.names.resolve(req.Peer)
	if e != nil {
		writeError(w, e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
	defer cancel()
	res, err := g.mail.SendIn(ctx, pid, req.ConversationID, req.Text)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, res)
	case errors.Is(err, converse.ErrNoConversation):
		writeError(w, notFound("conversation_id: %v", err))
	case errors.Is(err, mail.ErrUnreachable):
		writeError(w, &Error{Status: http.StatusBadGateway, Code: CodePeerFailed, Message: err.Error()})
	default:
		writeError(w, peerFailure(err))
	}
}

// outbox handles GET /v1/outbox.
func (g *mailRoutes) outbox(w http.ResponseWriter, r *http.Request) {
	items, err := g.mail.Outbox()
	if err != nil {
		writeError(w, internal(err))
		return
	}
	out := Outbox{Messages: []OutboxItem{}}
	for _, it := range items {
		out.Messages = append(out.Messages, OutboxItem{MessageID: it.ID, To: it.To, Queued: it.Queued,
			Attempts: it.Attempts, NextAttempt: it.NextAttempt, LastError: it.LastError})
	}
	writeJSON(w, http.StatusOK, out)
}

// Send says text to a peer, or queues it for the peer's mailbox.
func (c *Client) Send(ctx context.Context, req SendRequest) (*mail.SendResult, error) {
	var out mail.SendResult
	return &out, c.call(ctx, http.MethodPost, "/v1/send", req, &out)
}

// Outbox lists the messages waiting for a peer's mailbox.
func (c *Client) Outbox(ctx context.Context) (*Outbox, error) {
	var out Outbox
	return &out, c.call(ctx, http.MethodGet, "/v1/outbox", nil, &out)
}
