package api

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/ifaced/ifaced/gossip"
)

// AuditWhy is the answer of GET /v1/audit/why/{message_id}: the audit
// entry that holds the decision on a capability request (the answer or
// refusal this daemon sent), and that decision.
type AuditWhy struct {
	MessageID string            `json:"message_id"` // as asked: the request's ID or the answer's
	Entry     gossip.AuditEntry `json:"entry"`
	Decision  *gossip.Decision  `json:"decision"`
}

// whyRoutes answers why a capability request was answered or refused
// (GET /v1/audit/why/{message_id}), from the decisions the audit log
// records (gossip.AuditLog.Decided).
type whyRoutes struct{ log decisionLog }

// decisionLog finds the decision on a capability request in the audit
// log (gossip.AuditLog).
type decisionLog interface {
	Decided(messageID string) (gossip.AuditEntry, error)
}

func (wr *whyRoutes) why(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("message_id")
	if err := checkMessageID(id); err != nil {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: "message_id", Message: err.Error()})
		return
	}
	e, err := wr.log.Decided(id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, notFound("no decision for message %q: %v (look up the ID of a capability request, or of the answer or refusal to one; "+
			"`ifaced audit --conversation ID` lists a conversation's messages)", id, err))
	case err != nil:
		writeError(w, internal(err))
	default:
		writeJSON(w, http.StatusOK, AuditWhy{MessageID: id, Entry: e, Decision: e.Decision})
	}
}

// checkMessageID refuses what no message_id can be (IFP-4: printable, no
// white space, at most gossip.MaxIDLen bytes), before the log is read.
func checkMessageID(id string) error {
	switch {
	case id == "":
		return errors.New("message_id is empty: give the ID of a capability request or of its answer (e.g. msg:01J…)")
	case len(id) > gossip.MaxIDLen:
		return fmt.Errorf("message_id is %d bytes; a message ID has at most %d", len(id), gossip.MaxIDLen)
	case strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("message_id %q holds white space or control characters, which no message ID has", id)
	}
	return nil
}

// AuditWhy returns the decision on a capability request, by the
// request's message ID or by its answer's.
func (c *Client) AuditWhy(ctx context.Context, messageID string) (*AuditWhy, error) {
	var out AuditWhy
	return &out, c.call(ctx, http.MethodGet, "/v1/audit/why/"+url.PathEscape(messageID), nil, &out)
}
