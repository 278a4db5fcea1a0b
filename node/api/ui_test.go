package api

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMountUI: under UIPath the guard lets a browser in without the token
// but only at this listener's loopback Host, refuses a foreign Origin on a
// change, and bounds the body; the login code endpoint stays behind the
// token, and nothing else opens. The handler mounted here stands in for
// the console (node/console, whose own tests mount the real one): it
// records what reached it.
func TestMountUI(t *testing.T) {
	ctx := testContext(t)
	d := startDaemon(t, nil)
	base := "http://" + d.srv.Addr()
	_, port, _ := net.SplitHostPort(d.srv.Addr())

	do := func(method, path, host, origin, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// Not mounted: /ui/ is behind the token like any path, and there is
	// no login code to mint.
	if st, _ := do(http.MethodGet, "/ui/", "", "", ""); st != http.StatusUnauthorized {
		t.Errorf("/ui/ before MountUI: %d, want 401", st)
	}
	_, err := d.c.UILogin(ctx)
	apiError(t, err, http.StatusNotFound)

	var reached atomic.Int32
	d.srv.MountUI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if _, err := io.ReadAll(r.Body); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				w.WriteHeader(http.StatusRequestEntityTooLarge)
				return
			}
		}
		if r.URL.Path == UILoginCodePath {
			json.NewEncoder(w).Encode(UILogin{URL: "http://" + r.Host + "/ui/login?code=x", ExpiresAt: time.Now()})
			return
		}
		io.WriteString(w, "console "+r.URL.Path)
	}))
	mustReach := func(what string, st int, body string) {
		t.Helper()
		if st != http.StatusOK || !strings.HasPrefix(body, "console ") {
			t.Errorf("%s: %d %q, want the console's answer", what, st, body)
		}
	}
	mustRefuse := func(what string, st, want int, body string) {
		t.Helper()
		if st != want || strings.HasPrefix(body, "console ") || !strings.HasPrefix(body, "refused: ") {
			t.Errorf("%s: %d %q, want %d and a refusal", what, st, body, want)
		}
	}
	before := reached.Load()
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port} {
		st, body := do(http.MethodGet, "/ui/peers", host, "", "")
		mustReach("Host "+host, st, body)
	}
	st, body := do(http.MethodGet, "/ui", "", "", "")
	mustReach("/ui", st, body)
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1", "127.0.0.1:1", "localhost.evil.example:" + port} {
		st, body := do(http.MethodGet, "/ui/", host, "", "")
		mustRefuse("Host "+host, st, http.StatusMisdirectedRequest, body)
		if !strings.Contains(body, "DNS rebinding") {
			t.Errorf("Host %s: the refusal does not say why: %q", host, body)
		}
	}
	st, body = do(http.MethodPost, "/ui/policy/disclosure", "", "", "peer=x")
	mustReach("a POST without Origin", st, body)
	st, body = do(http.MethodPost, "/ui/policy/disclosure", "", "http://127.0.0.1:"+port, "peer=x")
	mustReach("a POST from the console's origin", st, body)
	for _, origin := range []string{"http://evil.example", "null", "https://127.0.0.1:" + port, "http://127.0.0.1:1"} {
		st, body := do(http.MethodPost, "/ui/policy/disclosure", "", origin, "peer=x")
		mustRefuse("a POST from "+origin, st, http.StatusForbidden, body)
	}
	// A GET carries no change, so a page linked from elsewhere may load.
	st, body = do(http.MethodGet, "/ui/", "", "http://evil.example", "")
	mustReach("a GET with a foreign Origin", st, body)
	if st, _ := do(http.MethodPost, "/ui/caps/add", "", "", strings.Repeat("x", MaxBody+1)); st != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over MaxBody reached the console whole: %d", st)
	}
	if got := reached.Load() - before; got != 9 {
		t.Errorf("the console was reached %d times, want 9 (every refusal stops at the guard)", got)
	}

	// The login code: behind the token.
	st, body = do(http.MethodPost, UILoginCodePath, "", "", "")
	if st != http.StatusUnauthorized || strings.Contains(body, "code=") {
		t.Errorf("a login code without the token: %d %q", st, body)
	}
	login, err := d.c.UILogin(ctx)
	if err != nil || !strings.Contains(login.URL, "/ui/login?code=") {
		t.Errorf("a login code with the token: %+v, %v", login, err)
	}
	// The rest of the API is not opened by the console.
	if st, _ := do(http.MethodGet, "/v1/status", "", "", ""); st != http.StatusUnauthorized {
		t.Errorf("/v1/status without the token once the console is mounted: %d", st)
	}
	if st, _ := do(http.MethodGet, "/uix", "", "", ""); st != http.StatusUnauthorized {
		t.Errorf("/uix without the token: %d", st)
	}
}

// TestGetJSON: a client's own types for an answer, from an API path only.
func TestGetJSON(t *testing.T) {
	ctx := testContext(t)
	d := startDaemon(t, nil)
	var st struct {
		PeerID string `json:"peer_id"`
	}
	if err := d.c.GetJSON(ctx, "/v1/status", &st); err != nil || st.PeerID != d.peerID() {
		t.Errorf("GetJSON /v1/status: %+v, %v", st, err)
	}
	e := apiError(t, d.c.GetJSON(ctx, "/ui/", &st), http.StatusBadRequest)
	if !strings.Contains(e.Message, "not a control API path") {
		t.Errorf("GetJSON of a page: %q", e.Message)
	}
	apiError(t, d.c.GetJSON(ctx, "/v1/audit/why/msg:nope", &st), http.StatusNotFound)
}
