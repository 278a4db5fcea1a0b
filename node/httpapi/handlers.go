package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/wire"
)

// viewMaxAge is how long a shared cache may keep the anonymous view: long
// enough to spare the daemon, short enough that a change shows soon.
const viewMaxAge = 60 * time.Second

func (s *Binding) identity(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(viewMaxAge/time.Second)))
	writeJSON(w, http.StatusOK, s.self.IdentityDocument())
}

// view is the signed view for an HTTP caller, with its ETag. The caller
// proved nothing, so every caller gets the same view, and shared caches
// may keep it.
func (s *Binding) view(w http.ResponseWriter, r *http.Request) (*negotiate.Document, bool) {
	doc, tag, err := s.views.ViewFor(s.views.HTTPFacts())
	if err != nil {
		writeError(w, http.StatusInternalServerError, CodeInternal, "building the view failed")
		s.log.Error("building the HTTP view", "err", err)
		return nil, false
	}
	etag := `"` + tag + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(viewMaxAge/time.Second)))
	w.Header().Set("Vary", "Accept")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil, false
	}
	return doc, true
}

func (s *Binding) wellKnownCapabilities(w http.ResponseWriter, r *http.Request) {
	if doc, ok := s.view(w, r); ok {
		writeJSON(w, http.StatusOK, doc)
	}
}

// aguiIdentity is what the projections say of the agent.
func (s *Binding) aguiIdentity() negotiate.AGUIIdentity {
	return negotiate.AGUIIdentity{DisplayName: s.views.DisplayName()}
}

func (s *Binding) capabilities(w http.ResponseWriter, r *http.Request) {
	doc, ok := s.view(w, r)
	if !ok {
		return
	}
	v := doc
	if cats := r.URL.Query().Get("requested_tool_categories"); cats != "" {
		v, _ = negotiate.OrderByCategories(doc, strings.Split(cats, ","))
	}
	writeJSON(w, http.StatusOK, v.CapabilitiesObject(s.aguiIdentity()))
}

func (s *Binding) agentCard(w http.ResponseWriter, r *http.Request) {
	doc, ok := s.view(w, r)
	if !ok {
		return
	}
	// The card changes only with the view (its ETag), and signing means
	// canonicalizing the whole card: sign once per view, not per request.
	tag := w.Header().Get("ETag")
	s.cardMu.Lock()
	defer s.cardMu.Unlock()
	if s.cardTag != tag {
		card := doc.AgentCard(negotiate.A2AOptions{Identity: s.aguiIdentity(), URL: s.url + "/a2a"})
		if err := card.Sign(s.self.ID()); err != nil {
			writeError(w, http.StatusInternalServerError, CodeInternal, "signing the agent card failed")
			s.log.Error("signing the agent card", "err", err)
			return
		}
		s.card, s.cardTag = card, tag
	}
	writeJSON(w, http.StatusOK, s.card)
}

// InboxAccepted is the IFP-6 §3.1 answer.
type InboxAccepted struct {
	Status    string `json:"status"` // "accepted"
	MessageID string `json:"message_id"`
	// Refused says why a message that arrived intact did not fit its
	// conversation (IFP-6: a protocol error is not a transport error).
	Refused *wire.ErrorBody `json:"refused,omitempty"`
	// Duplicate marks a message received before and not processed again.
	Duplicate bool `json:"duplicate,omitempty"`
}

func (s *Binding) inbox(w http.ResponseWriter, r *http.Request) {
	if !isJSON(r) {
		writeError(w, http.StatusBadRequest, CodeInvalidFormat, fmt.Sprintf("Content-Type is %q; send application/json; charset=utf-8 (IFP-6 §2.2)", r.Header.Get("Content-Type")))
		return
	}
	body, release, ok := s.readBody(w, r)
	if !ok {
		return
	}
	defer release()
	m, err := gossip.DecodeJSON(body)
	if err != nil {
		// The code of what failed (unsupported_version for an ifp other
		// than 4, else invalid_format), as over libp2p and in the vectors.
		s.door.RecordUndecoded("https", body, err)
		s.refuse(w, err)
		return
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" && key != m.Headers.MessageID {
		// The seen-set is keyed by signer and message_id, which IFP-6 §4.2
		// recommends as the key; another key would promise a second,
		// different deduplication this daemon does not keep.
		err := fmt.Errorf("%w: Idempotency-Key %q differs from the message_id %q; use the message_id", gossip.ErrInvalidMessage, key, m.Headers.MessageID)
		s.door.RecordUndecoded("https", body, err)
		writeError(w, http.StatusBadRequest, CodeInvalidFormat, err.Error())
		return
	}
	d, err := s.door.Deliver(m, "https")
	switch {
	case errors.Is(err, converse.ErrDuplicate):
		writeJSON(w, http.StatusAccepted, InboxAccepted{Status: "accepted", MessageID: m.Headers.MessageID, Duplicate: true})
	case err != nil:
		s.refuse(w, err)
	default:
		out := InboxAccepted{Status: "accepted", MessageID: d.MessageID}
		if d.Refused != nil {
			body := wire.NewErrorBody(d.Refused)
			out.Refused = &body
		}
		writeJSON(w, http.StatusAccepted, out)
	}
}

// InvokeRequest is the body of POST /invoke: the action named in the
// actions list, and its input (matching input_schema).
type InvokeRequest struct {
	Action string `json:"action"`
	Input  any    `json:"input"`
}

// InvokeResult is the answer of a successful invocation.
type InvokeResult struct {
	Action string `json:"action"`
	Output any    `json:"output"`
}

func (s *Binding) invoke(w http.ResponseWriter, r *http.Request) {
	if !isJSON(r) {
		writeError(w, http.StatusBadRequest, CodeInvalidFormat, fmt.Sprintf("Content-Type is %q; send application/json", r.Header.Get("Content-Type")))
		return
	}
	body, decoded, ok := s.readBody(w, r)
	if !ok {
		return
	}
	defer decoded()
	var probe struct {
		IFP *int `json:"ifp"`
	}
	who := s.callerOf(r)
	if json.Unmarshal(body, &probe) == nil && probe.IFP != nil {
		s.invokeSigned(w, who, body)
		return
	}
	var req InvokeRequest
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidFormat, "reading the request: "+err.Error()+` (want {"action": NAME, "input": {...}})`)
		return
	}
	if req.Action == "" {
		writeError(w, http.StatusBadRequest, CodeInvalidFormat, `"action" is required: the name of one of the actions GET /capabilities lists`)
		return
	}
	decoded() // the action's run is bounded by the invocation slots, not the decoding budget
	if needsSlot(req.Action) {
		release, ok := s.invocation(w, addrKey(who))
		if !ok {
			return
		}
		defer release()
	}
	out, err := s.agent.ExecuteAnonymous("https", who.audit, "", req.Action, req.Input)
	if err != nil {
		s.refuse(w, err)
		return
	}
	writeJSON(w, http.StatusOK, InvokeResult{Action: req.Action, Output: out})
}

// invokeSigned runs a signed IFP-4 capability request: the signer is
// granted what the daemon grants that peer, as over libp2p.
func (s *Binding) invokeSigned(w http.ResponseWriter, who caller, body []byte) {
	m, err := gossip.DecodeJSON(body)
	if err != nil {
		// The code of what failed (unsupported_version for an ifp other
		// than 4, else invalid_format), as over libp2p and in the vectors.
		s.door.RecordUndecoded("https", body, err)
		s.refuse(w, err)
		return
	}
	if c := m.Headers.Capabilities; c == nil || len(c.Request) != 1 || needsSlot(c.Request[0]) {
		// (A request naming no capability, or several, is refused by the
		// door; counted as one waiting on the agent until then.)
		release, ok := s.invocation(w, addrKey(who), signerKey(m))
		if !ok {
			return
		}
		defer release()
	}
	name, out, err := s.door.ExecuteSigned(m)
	if err != nil {
		s.refuse(w, err)
		return
	}
	writeJSON(w, http.StatusOK, InvokeResult{Action: name, Output: out})
}

// refuse answers a refused message or invocation with the status of its
// wire code (wire.HTTPStatus: the one table every handler uses) and the
// wire error body (which condition failed, what would meet it). Unknown
// and hidden capabilities get the same answer. The daemon's own failures
// are logged and answered without their detail.
func (s *Binding) refuse(w http.ResponseWriter, err error) {
	body := wire.NewErrorBody(err)
	status := wire.HTTPStatus(body.Code)
	if body.Code == wire.CodeInternal {
		s.log.Error("answering an HTTP request", "err", err)
		body.Message = "the request could not be processed"
	}
	if body.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(body.RetryAfterSeconds))
	}
	writeJSON(w, status, Error{Status: "error", Code: string(body.Code), Message: body.Message, Detail: body})
}

func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// budgetWait is how long a request body waits, at most, for its share of the
// daemon's decoding budget before it is refused (rate_limited).
const budgetWait = 5 * time.Second

// readBody reads the whole body, answering 413 past MaxBody (a refusal
// the inbox records). Before anything decodes it, it checks the body
// against the container bounds of a message (gossip.MessageBounds: every
// body these handlers read is one JSON value of about a message's shape),
// answering 400 past them (recorded too), and takes the body's cost from
// the daemon's decoding budget (admit.Budget), waiting at most budgetWait
// (429 after). release gives the cost back; the handler calls it when it
// is done with the request (for the inbox: the message decoded, verified
// and admitted or refused), so the budget bounds the bodies decoding and
// being verified at once, whatever their number.
func (s *Binding) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool) {
	in := s.door
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		in.RecordUndecoded("https", nil, fmt.Errorf("%w: the body is over %d bytes", gossip.ErrTooLarge, MaxBody))
		writeError(w, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, fmt.Sprintf("the body is over %d bytes (IFP-6 §5)", MaxBody))
		return nil, nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, CodeInvalidFormat, "reading the body: "+err.Error())
		return nil, nil, false
	}
	counts, err := gossip.MeasureJSON(bytes.TrimSpace(b), gossip.MessageBounds)
	if err != nil {
		err = fmt.Errorf("reading the body: %w: %w", gossip.ErrMalformed, err)
		in.RecordUndecoded("https", b, err)
		writeError(w, http.StatusBadRequest, CodeInvalidFormat, err.Error())
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), budgetWait)
	defer cancel()
	release, err = s.budget.Acquire(ctx, "", counts.Cost(len(b)))
	if err != nil {
		s.refuse(w, fmt.Errorf("reading the body: %w: the daemon-wide decoding budget stayed full for %s (%v)", wire.ErrOverloaded, budgetWait, err))
		return nil, nil, false
	}
	return b, release, true
}

// decodeStrict decodes one JSON value, refusing unknown fields and
// trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}
