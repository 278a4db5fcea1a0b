package api

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// UILogin is the answer of POST UILoginCodePath: the URL that logs a
// browser into the console once, before ExpiresAt, and the page file
// that leads to it, when one was asked for.
type UILogin struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
	// Page is the path of an HTML file (mode 0600, in the daemon's data
	// directory) that takes a browser to the login; the daemon removes it
	// once the code is used or expires (node/console, login pages).
	Page string `json:"page,omitempty"`
}

// UILoginRequest is the body of POST UILoginCodePath; it may be left out.
type UILoginRequest struct {
	// Page asks for the login as a page file too (UILogin.Page), so that
	// a browser can be handed a path rather than the URL: whatever is on
	// a command line, such as an opener's, every local user can read.
	Page bool `json:"page,omitempty"`
}

// UILogin asks the daemon's console for a one-time login URL. A daemon
// without a console answers 404.
func (c *Client) UILogin(ctx context.Context) (*UILogin, error) {
	var out UILogin
	return &out, c.call(ctx, http.MethodPost, UILoginCodePath, nil, &out)
}

// UILoginPage asks for a one-time login URL and a page file that leads a
// browser to it (UILogin.Page), for `ifaced ui` to hand to the desktop's
// opener.
func (c *Client) UILoginPage(ctx context.Context) (*UILogin, error) {
	var out UILogin
	return &out, c.call(ctx, http.MethodPost, UILoginCodePath, UILoginRequest{Page: true}, &out)
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
