package httpapi

import (
	"net/http"
	"strings"
)

// cors lets web pages of other origins read the binding's read-only
// views — GET of /.well-known/iface/identity, /.well-known/iface/capabilities,
// /capabilities and /.well-known/agent-card.json — so that a browser AG-UI
// or A2A client served from elsewhere can discover the agent. Which
// origins is http.cors_origins: "*" (the default) for any, or a list of
// origins (scheme://host[:port]); an empty list sends no CORS header at
// all. These views are what any caller is shown anyway, signed, and no
// credentials are ever allowed (no Access-Control-Allow-Credentials), so
// a page learns nothing through them that curl would not.
//
// A preflight (OPTIONS with Access-Control-Request-Method GET or HEAD) of
// a view is answered 204, allowing GET and HEAD and whatever request
// headers it asks for (A2A clients send A2A-Version; a poller sends
// If-None-Match); answers expose ETag and Retry-After.
//
// Nothing else gets CORS: not POST /invoke, /a2a or the inbox, which act,
// and never the control API, which is another listener. So a page of
// another origin cannot make the agent do anything: on a loopback
// binding its POST is refused outright (hostGuard, 403), and on a public
// one its preflight for a POST gets 405 without CORS headers, so the
// browser never sends the POST. A web app that should message the agent
// is served from one of the binding's own names (http.allowed_hosts, or a
// reverse proxy in front of both).
type cors struct {
	any     bool
	origins []string // lower case, as a browser writes Origin
}

// newCORS is the policy for http.cors_origins, or nil when it is empty.
func newCORS(origins []string) *cors {
	if len(origins) == 0 {
		return nil
	}
	c := &cors{}
	for _, o := range origins {
		if o == "*" {
			c.any = true
			continue
		}
		c.origins = append(c.origins, strings.ToLower(strings.TrimSuffix(o, "/")))
	}
	return c
}

// readOnlyViews are the paths whose GET is a read-only view.
var readOnlyViews = map[string]bool{
	"/.well-known/iface/identity":     true,
	"/.well-known/iface/capabilities": true,
	"/capabilities":                   true,
	"/.well-known/agent-card.json":    true,
}

// allowOrigin is the Access-Control-Allow-Origin for a request from
// origin, or "".
func (c *cors) allowOrigin(origin string) string {
	if c.any {
		return "*"
	}
	lo := strings.ToLower(origin)
	for _, o := range c.origins {
		if o == lo {
			return origin
		}
	}
	return ""
}

// handle adds CORS headers to the read-only views and answers their
// preflights; everything else passes through untouched. A nil policy
// adds nothing.
func (c *cors) handle(next http.Handler) http.Handler {
	if c == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !readOnlyViews[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		if !c.any {
			h.Add("Vary", "Origin") // the answer depends on it, for caches
		}
		origin := r.Header.Get("Origin")
		allow := ""
		if origin != "" {
			allow = c.allowOrigin(origin)
		}
		switch {
		case r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "":
			// A preflight: answered here, before the limiter (it costs
			// nothing and changes nothing).
			h.Set("Allow", "GET, HEAD, OPTIONS")
			if m := r.Header.Get("Access-Control-Request-Method"); allow != "" && (m == http.MethodGet || m == http.MethodHead) {
				h.Set("Access-Control-Allow-Origin", allow)
				h.Set("Access-Control-Allow-Methods", "GET, HEAD")
				if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
					h.Set("Access-Control-Allow-Headers", req)
				}
				h.Set("Access-Control-Max-Age", "600")
			}
			if !c.any {
				h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
			}
			w.WriteHeader(http.StatusNoContent)
			return
		case (r.Method == http.MethodGet || r.Method == http.MethodHead) && allow != "":
			h.Set("Access-Control-Allow-Origin", allow)
			h.Set("Access-Control-Expose-Headers", "ETag, Retry-After")
		}
		next.ServeHTTP(w, r)
	})
}
