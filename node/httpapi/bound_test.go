package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
)

// bombBody is a signed greeting to d with a part of tiny containers,
// [[{},{},…]], filling a JSON body of about size bytes.
func bombBody(t *testing.T, d *daemon, size int) []byte {
	t.Helper()
	sender, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := greeting(t, sender, d.n.ID().PeerID(), "Hello.")
	shell, err := gossip.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	maps := strings.Repeat(`{},`, (size-len(shell)-128)/3)
	part := `{"content_type":"application/json","name":"x","content":[[` + maps + `{}]]}`
	b := bytes.Replace(shell, []byte(`"body":{`), []byte(`"body":{"parts":[`+part+`],`), 1)
	if bytes.Equal(b, shell) || bytes.Contains(shell, []byte(`"parts"`)) {
		t.Fatalf("cannot place the part in %s", shell)
	}
	return b
}

// TestInboxContainerBomb: a 1 MB JSON body of tiny nested containers is
// refused before it is decoded, 400 invalid_format naming the bound;
// the log gives what the daemon allocated meanwhile (before the bound,
// such a body cost some 43 MiB).
func TestInboxContainerBomb(t *testing.T) {
	d := start(t, testConfig())
	b := bombBody(t, d, 1_000_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := do(t, "POST", d.url+"/.well-known/iface/inbox", "application/json", b)
	runtime.ReadMemStats(&after)
	if r.status != http.StatusBadRequest || r.errorCode(t) != CodeInvalidFormat || !strings.Contains(string(r.body), "at most 16384") {
		t.Fatalf("a container bomb: %d %s", r.status, r.body)
	}
	t.Logf("a %d-byte container bomb to the inbox: refused; %.1f MiB allocated in the process while it was sent, read and refused",
		len(b), float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
	// The same through POST /invoke, which reads signed requests.
	if r := do(t, "POST", d.url+"/invoke", "application/json", b); r.status != http.StatusBadRequest || r.errorCode(t) != CodeInvalidFormat {
		t.Fatalf("a container bomb to /invoke: %d %s", r.status, r.body)
	}
}

// TestBodyWaitsForTheBudget: a body takes its cost from the daemon's
// decoding budget before it is decoded; with the budget all taken, it
// waits until its request ends and is refused, 429 rate_limited; with
// the budget free it is read, and its cost given back when released.
func TestBodyWaitsForTheBudget(t *testing.T) {
	d := start(t, testConfig())
	s := &Binding{door: d.n.Inbox(), budget: d.n.Budget()}
	body := []byte(`{"action":"ping","input":{}}`)
	read := func(ctx context.Context) (*httptest.ResponseRecorder, func(), bool) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/invoke", bytes.NewReader(body)).WithContext(ctx)
		got, release, ok := s.readBody(w, r)
		if ok && !bytes.Equal(got, body) {
			t.Fatalf("read %q, want %q", got, body)
		}
		return w, release, ok
	}
	all, err := d.n.Budget().Acquire(context.Background(), d.n.ID().PeerID(), 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	w, _, ok := read(ctx)
	if ok || w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), CodeRateLimited) {
		t.Fatalf("with the budget taken: %v, %d %s; want 429 rate_limited", ok, w.Code, w.Body)
	}
	all()
	_, release, ok := read(context.Background())
	if !ok {
		t.Fatal("with the budget free, the body was refused")
	}
	release()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second) // not given back: fails then
	defer cancel()
	if all, err = d.n.Budget().Acquire(ctx, d.n.ID().PeerID(), 1<<40); err != nil {
		t.Fatalf("the body's cost was not given back: %v", err)
	}
	all()
}
