package api

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/url"

	"github.com/ifaced/ifaced/gossip"
)

// proofRoutes serve the tamper-evident audit log's proofs (docs/audit.md):
//
//	GET /v1/audit/proof?conversation=ID | ?message=ID   how its records stand: verified (each included in a
//	                                                   checkpoint this daemon signed), pending, untracked or failed
//	GET /v1/audit/bundle?conversation=ID | ?message=ID  the evidence bundle (the owner's: decisions included)
//	GET /v1/audit/receipt/{message_id}                  the receipt of a message a peer sent, to hand to that peer
//
// Each signs a checkpoint of what was recorded first, so a record made a
// moment ago is covered.
type proofRoutes struct{ log proofLog }

// proofLog is the tamper-evident audit log's proofs (gossip.AuditLog).
type proofLog interface {
	Proof(sel gossip.BundleSelect) (*gossip.ProofState, error)
	Bundle(sel gossip.BundleSelect) (*gossip.Bundle, error)
	Receipt(messageID string) (*gossip.Bundle, error)
}

// selection reads ?conversation= or ?message= (exactly one).
func selection(r *http.Request) (gossip.BundleSelect, *Error) {
	q := r.URL.Query()
	sel := gossip.BundleSelect{ConversationID: q.Get("conversation"), MessageID: q.Get("message")}
	if (sel.ConversationID == "") == (sel.MessageID == "") {
		return sel, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: "conversation",
			Message: "give ?conversation=ID or ?message=ID (one of them; GET /v1/audit lists conversations)"}
	}
	if sel.MessageID != "" {
		if err := checkMessageID(sel.MessageID); err != nil {
			return sel, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: "message", Message: err.Error()}
		}
	}
	return sel, nil
}

// proofError is the answer to an error of the log's proofs.
func proofError(err error) *Error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return notFound("%v", err)
	case errors.Is(err, gossip.ErrNotCheckpointed), errors.Is(err, gossip.ErrNoProofs), errors.Is(err, gossip.ErrNotAReceipt):
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}
	}
	return internal(err)
}

func (p *proofRoutes) proof(w http.ResponseWriter, r *http.Request) {
	sel, e := selection(r)
	if e != nil {
		writeError(w, e)
		return
	}
	st, err := p.log.Proof(sel)
	if err != nil {
		writeError(w, proofError(err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (p *proofRoutes) bundle(w http.ResponseWriter, r *http.Request) {
	sel, e := selection(r)
	if e != nil {
		writeError(w, e)
		return
	}
	b, err := p.log.Bundle(sel)
	if err != nil {
		writeError(w, proofError(err))
		return
	}
	w.Header().Set("Content-Disposition", `attachment; filename="ifaced-audit-bundle.json"`)
	writeJSON(w, http.StatusOK, b)
}

func (p *proofRoutes) receipt(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("message_id")
	if err := checkMessageID(id); err != nil {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: "message_id", Message: err.Error()})
		return
	}
	b, err := p.log.Receipt(id)
	if err != nil {
		writeError(w, proofError(err))
		return
	}
	w.Header().Set("Content-Disposition", `attachment; filename="ifaced-audit-receipt.json"`)
	writeJSON(w, http.StatusOK, b)
}

// AuditProof is how a conversation's records (or one message's) stand in
// the tamper-evident log.
func (c *Client) AuditProof(ctx context.Context, sel gossip.BundleSelect) (*gossip.ProofState, error) {
	var out gossip.ProofState
	return &out, c.call(ctx, http.MethodGet, "/v1/audit/proof?"+selectQuery(sel), nil, &out)
}

// AuditBundle is the evidence bundle of a conversation or a message.
func (c *Client) AuditBundle(ctx context.Context, sel gossip.BundleSelect) (*gossip.Bundle, error) {
	var out gossip.Bundle
	return &out, c.call(ctx, http.MethodGet, "/v1/audit/bundle?"+selectQuery(sel), nil, &out)
}

// AuditReceipt is the receipt of a message a peer sent.
func (c *Client) AuditReceipt(ctx context.Context, messageID string) (*gossip.Bundle, error) {
	var out gossip.Bundle
	return &out, c.call(ctx, http.MethodGet, "/v1/audit/receipt/"+url.PathEscape(messageID), nil, &out)
}

func selectQuery(sel gossip.BundleSelect) string {
	if sel.MessageID != "" {
		return "message=" + url.QueryEscape(sel.MessageID)
	}
	return "conversation=" + url.QueryEscape(sel.ConversationID)
}
