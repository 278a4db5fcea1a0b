package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/ifaced/ifaced/node/store"
)

// ImportRequest is the body of POST /v1/imports.
type ImportRequest struct {
	URL string `json:"url"`
}

// ImportList is the answer of GET /v1/imports.
type ImportList struct {
	Imports []store.ImportRecord `json:"imports"`
}

// importRoutes serves the outside agents the owner imported (POST, GET
// and DELETE /v1/imports), through the daemon's discovery.
type importRoutes struct{ agents agentImports }

// agentImports are the outside agents the owner imported (the daemon's
// discovery).
type agentImports interface {
	Import(ctx context.Context, rawURL string) (store.ImportRecord, error)
	Imports() ([]store.ImportRecord, error)
	RemoveImport(u string) error
}

// importAgent handles POST /v1/imports: fetch an outside agent's
// document and keep it (again, to refresh it).
func (s *importRoutes) importAgent(w http.ResponseWriter, r *http.Request) {
	var req ImportRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.URL == "" {
		writeError(w, badField("url", "is required"))
		return
	}
	rec, err := s.agents.Import(r.Context(), req.URL)
	if err != nil {
		writeError(w, &Error{Status: http.StatusBadGateway, Code: CodePeerFailed, Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (s *importRoutes) imports(w http.ResponseWriter, r *http.Request) {
	recs, err := s.agents.Imports()
	if err != nil {
		writeError(w, internal(err))
		return
	}
	if recs == nil {
		recs = []store.ImportRecord{}
	}
	writeJSON(w, http.StatusOK, ImportList{Imports: recs})
}

func (s *importRoutes) removeImport(w http.ResponseWriter, r *http.Request) {
	u := r.URL.Query().Get("url")
	if u == "" {
		writeError(w, badField("url", "is required (DELETE /v1/imports?url=…)"))
		return
	}
	err := s.agents.RemoveImport(u)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, notFound("%s was not imported", u))
	case err != nil:
		writeError(w, internal(err))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// Import fetches and keeps an outside agent.
func (c *Client) Import(ctx context.Context, u string) (*store.ImportRecord, error) {
	var out store.ImportRecord
	return &out, c.call(ctx, http.MethodPost, "/v1/imports", ImportRequest{URL: u}, &out)
}

// Imports lists imported agents.
func (c *Client) Imports(ctx context.Context) (*ImportList, error) {
	var out ImportList
	return &out, c.call(ctx, http.MethodGet, "/v1/imports", nil, &out)
}

// RemoveImport forgets an imported agent.
func (c *Client) RemoveImport(ctx context.Context, u string) error {
	return c.call(ctx, http.MethodDelete, "/v1/imports?url="+url.QueryEscape(u), nil, nil)
}
