package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/discovery"
)

// Finding agents by capability:
//
//	GET /v1/find/{capability}[?min_version=V&limit=N]   → FindAnswer
//
// The daemon looks up the capability's provider records in the DHT (at
// most limit, default discovery.DefaultFindLimit, at most discovery.MaxFindLimit)
// and asks each provider for its view for this daemon; every provider is
// listed with a status (eligible, ineligible with why, below_min_version,
// not_offered, unreachable), eligible ones first. A malformed capability
// name, min_version or limit is a 400 naming it; a daemon with the DHT
// off, or with no DHT peer yet, answers 503 dht_unavailable, unless an
// imported agent lists the capability: then the answer lists the imports
// and says in dht why the DHT was not searched. A lookup that ran out of
// time is a 504.

// CodeDHTUnavailable: the daemon cannot search the DHT (it is off, or no
// DHT peer is known yet); the message says which.
const CodeDHTUnavailable = "dht_unavailable"

// FindAnswer is the answer of GET /v1/find/{capability}.
type FindAnswer struct {
	Capability string                 `json:"capability"`
	MinVersion string                 `json:"min_version,omitempty"`
	Providers  []discovery.FindResult `json:"providers"`
	// DHT says why the DHT was not searched, when providers found
	// elsewhere (imports) are listed all the same.
	DHT string `json:"dht,omitempty"`
}

// findRoutes answer GET /v1/find/{capability}.
type findRoutes struct {
	finder  providerFinder
	timeout time.Duration // the whole lookup
}

// providerFinder looks up a capability's providers and what each offers
// this daemon (the daemon's discovery).
type providerFinder interface {
	Find(ctx context.Context, capability, minVersion string, limit int) ([]discovery.FindResult, error)
}

// find handles GET /v1/find/{capability}.
func (g *findRoutes) find(w http.ResponseWriter, r *http.Request) {
	name, q := r.PathValue("capability"), r.URL.Query()
	ans := FindAnswer{Capability: name, MinVersion: q.Get("min_version"), Providers: []discovery.FindResult{}}
	limit := 0
	if v := q.Get("limit"); v != "" {
		var err error
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > discovery.MaxFindLimit {
			writeError(w, badField("limit", "%q: want a number from 1 to %d", v, discovery.MaxFindLimit))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
	defer cancel()
	found, err := g.finder.Find(ctx, name, ans.MinVersion, limit)
	switch {
	case err != nil && len(found) > 0 && (errors.Is(err, discovery.ErrDHTOff) || errors.Is(err, discovery.ErrNoDHTPeers)):
		ans.DHT = err.Error()
	case err != nil:
		writeError(w, findFailure(err))
		return
	}
	ans.Providers = append(ans.Providers, found...)
	writeJSON(w, http.StatusOK, ans)
}

// findFailure maps an error of node.Find to its answer.
func findFailure(err error) *Error {
	bad := func(field string) *Error {
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: field, Message: err.Error()}
	}
	switch {
	case errors.Is(err, negotiate.ErrInvalidName):
		return bad("capability")
	case errors.Is(err, negotiate.ErrInvalidVersion):
		return bad("min_version")
	case errors.Is(err, discovery.ErrDHTOff), errors.Is(err, discovery.ErrNoDHTPeers):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeDHTUnavailable, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Code: CodePeerTimeout, Message: err.Error()}
	}
	return internal(err)
}

// Find looks up the providers of a capability and what each offers this
// daemon; minVersion "" and limit 0 leave them to the daemon.
func (c *Client) Find(ctx context.Context, capability, minVersion string, limit int) (*FindAnswer, error) {
	if capability == "" {
		return nil, fmt.Errorf("finding providers: %w: the name is empty", negotiate.ErrInvalidName)
	}
	q := url.Values{}
	if minVersion != "" {
		q.Set("min_version", minVersion)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/find/" + url.PathEscape(capability)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out FindAnswer
	return &out, c.call(ctx, http.MethodGet, path, nil, &out)
}
