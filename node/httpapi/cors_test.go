package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// browser sends what a browser sends for a page at origin: a preflight
// (OPTIONS with Access-Control-Request-Method and -Headers) or the request
// itself, with Origin.
func browser(t *testing.T, d *daemon, method, path, origin string, headers ...string) response {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = bytes.NewReader([]byte(`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"parts": [{"text": "hi"}]}}}`))
	}
	req, err := http.NewRequest(method, d.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, b}
}

// TestCORSPreflightFromABrowserOrigin: a page at another origin may read
// the read-only views — the preflight an A2A client's card fetch causes
// (it sends A2A-Version) is answered — and nothing else.
func TestCORSPreflightFromABrowserOrigin(t *testing.T) {
	d := start(t, testConfig())
	const page = "https://app.example.com"
	for _, path := range []string{"/.well-known/agent-card.json", "/.well-known/iface/capabilities", "/.well-known/iface/identity", "/capabilities"} {
		r := browser(t, d, http.MethodOptions, path, page, "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "a2a-version")
		h := r.header
		if r.status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "GET") ||
			!strings.EqualFold(h.Get("Access-Control-Allow-Headers"), "a2a-version") || h.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("preflight of %s: %d %v", path, r.status, h)
		}
		r = browser(t, d, http.MethodGet, path, page, "A2A-Version", "1.0")
		if r.status != http.StatusOK || r.header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "ETag") {
			t.Errorf("GET %s from %s: %d %v", path, page, r.status, r.header)
		}
	}
	// Nothing that acts is opened: the preflight of a POST gets no CORS
	// header, and the POST itself is refused on a loopback binding.
	if r := browser(t, d, http.MethodOptions, "/a2a", page, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type"); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of POST /a2a: %d %v", r.status, r.header)
	}
	if r := browser(t, d, http.MethodOptions, "/.well-known/agent-card.json", page, "Access-Control-Request-Method", "POST"); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of a POST to a view: %d %v", r.status, r.header)
	}
	for _, path := range []string{"/a2a", "/invoke", "/.well-known/iface/inbox"} {
		r := browser(t, d, http.MethodPost, path, page)
		if r.status != http.StatusForbidden || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("POST %s from %s: %d %v", path, page, r.status, r.header)
		}
	}
	// The binding's own pages may still POST.
	if r := browser(t, d, http.MethodPost, "/a2a", "http://localhost"); r.status != http.StatusOK {
		t.Errorf("POST /a2a from the binding's own origin: %d %s", r.status, r.body)
	}
}

// TestCORSOriginsConfigured: a list of origins answers those only (echoing
// the origin, with Vary), and an empty list sends no CORS header.
func TestCORSOriginsConfigured(t *testing.T) {
	cfg := testConfig()
	cfg.HTTP.CORSOrigins = []string{"https://App.Example.com", "http://localhost:5173"}
	d := start(t, cfg)
	for origin, want := range map[string]string{"https://app.example.com": "https://app.example.com", "http://localhost:5173": "http://localhost:5173", "https://evil.example": ""} {
		r := browser(t, d, http.MethodOptions, "/capabilities", origin, "Access-Control-Request-Method", "GET")
		if r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != want || !strings.Contains(strings.Join(r.header.Values("Vary"), ","), "Origin") {
			t.Errorf("preflight from %s: %d %v, want Allow-Origin %q", origin, r.status, r.header, want)
		}
		r = browser(t, d, http.MethodGet, "/capabilities", origin)
		if r.status != http.StatusOK || r.header.Get("Access-Control-Allow-Origin") != want {
			t.Errorf("GET from %s: %d %v", origin, r.status, r.header)
		}
	}

	cfg = testConfig()
	cfg.HTTP.CORSOrigins = []string{}
	off := start(t, cfg)
	r := browser(t, off, http.MethodGet, "/.well-known/agent-card.json", "https://app.example.com")
	if r.status != http.StatusOK || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS off: %d %v", r.status, r.header)
	}
}
