package api

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// UILogin is the answer of POST UILoginCodePath: the URL that logs a
// browser into the console once, before ExpiresAt.
type UILogin struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// UILogin asks the daemon's console for a one-time login URL. A daemon
// without a console answers 404.
func (c *Client) UILogin(ctx context.Context) (*UILogin, error) {
	var out UILogin
	return &out, c.call(ctx, http.MethodPost, UILoginCodePath, nil, &out)
}

// GetJSON sends GET path, an endpoint of this API (it starts with /v1/),
// and decodes its answer into out: for a client that keeps its own types
// for an answer (the console reads decisions this way), or an endpoint
// this client has no method for. A failure is the daemon's *Error.
func (c *Client) GetJSON(ctx context.Context, path string, out any) error {
	if !strings.HasPrefix(path, "/v1/") {
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "GetJSON: " + path + " is not a control API path (/v1/…)"}
	}
	return c.call(ctx, http.MethodGet, path, nil, out)
}
