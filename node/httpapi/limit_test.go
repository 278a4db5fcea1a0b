package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLimiterPerAddressAndInTotal(t *testing.T) {
	l := newLimiter()
	now := time.Now()
	for i := 0; i < perClientBurst; i++ {
		if ok, _, _ := l.allow("192.0.2.1:1000", now); !ok {
			t.Fatalf("request %d of a burst refused", i)
		}
	}
	ok, wait, _ := l.allow("192.0.2.1:2000", now)
	if ok || wait <= 0 {
		t.Fatalf("past the burst, from another port of the same address: ok=%v wait=%s", ok, wait)
	}
	if ok, _, _ := l.allow("192.0.2.2:1000", now); !ok {
		t.Fatal("another address was refused")
	}
	if ok, _, _ := l.allow("192.0.2.1:1000", now.Add(time.Second)); !ok {
		t.Fatal("the address was not allowed again after a second")
	}
	// Everyone together: many addresses, each within its own budget.
	refused := 0
	for i := 0; i < 3*totalBurst; i++ {
		if ok, _, _ := l.allow("198.51.100."+string(rune('0'+i%10))+":1", now.Add(time.Second)); !ok {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("the total limit never applied")
	}
}

func TestFloodFromOneAddressGets429(t *testing.T) {
	d := start(t, testConfig())
	var limited response
	for i := 0; i < perClientBurst+20; i++ {
		if limited = do(t, "GET", d.url+"/.well-known/iface/identity", "", nil); limited.status == http.StatusTooManyRequests {
			break
		}
	}
	if limited.status != http.StatusTooManyRequests || limited.header.Get("Retry-After") == "" || limited.errorCode(t) != CodeRateLimited {
		t.Fatalf("flood: %d %v %s", limited.status, limited.header, limited.body)
	}
}

// TestLimiterKeysIPv6By64: every address of one IPv6 /64 is one client,
// whatever address it sends from; the next /64 is another.
func TestLimiterKeysIPv6By64(t *testing.T) {
	l := newLimiter()
	now := time.Now()
	served := 0
	for i := range 10000 {
		now = now.Add(time.Second / totalRate) // within the global budget
		addr := fmt.Sprintf("[2001:db8:1:2:%x:%x::1]:443", i/65536, i%65536)
		if ok, _, _ := l.allow(addr, now); ok {
			served++
		}
	}
	// One client: its burst, then perClientRate a second for the 200 s
	// the 10,000 requests took.
	if want := perClientBurst + 200*perClientRate; served > want {
		t.Errorf("10,000 addresses of one /64 were served %d requests; one client gets at most %d", served, want)
	}
	if got := l.clients.Len(); got != 1 {
		t.Errorf("one /64 takes %d entries in the client table", got)
	}
	ok, _, whose := l.allow("[2001:db8:1:2::9]:1", now)
	if ok || whose != "this IPv6 /64's" {
		t.Errorf("past the /64's budget: ok=%v, %q", ok, whose)
	}
	if ok, _, _ := l.allow("[2001:db8:1:3::1]:1", now); !ok {
		t.Error("the neighbouring /64 was refused")
	}
	if ok, _, _ := l.allow("[::ffff:192.0.2.1]:1", now); !ok || l.clients.Len() != 3 {
		t.Error("an IPv4-mapped address is not its own IPv4 client")
	}
}

// TestLimiterServesNewClientsWhenTheTableIsFull: the old table refused
// every new client for a minute once 10,000 addresses had been seen. Now
// the least recently seen is forgotten, and a new client is served.
func TestLimiterServesNewClientsWhenTheTableIsFull(t *testing.T) {
	l := newLimiter()
	now := time.Now()
	for i := range maxClients + 500 {
		now = now.Add(time.Second / totalRate)
		addr := fmt.Sprintf("10.%d.%d.%d:80", i>>16&255, i>>8&255, i&255)
		if ok, _, whose := l.allow(addr, now); !ok {
			t.Fatalf("client %d (%s) refused: %s budget is spent", i, addr, whose)
		}
	}
	if got := l.clients.Len(); got != maxClients {
		t.Fatalf("the client table holds %d entries, want the cap %d", got, maxClients)
	}
	for i := range 50 {
		addr := fmt.Sprintf("192.0.2.%d:80", i)
		if ok, wait, whose := l.allow(addr, now); !ok {
			t.Fatalf("a new client %s after the table filled: refused for %s (%s budget)", addr, wait, whose)
		}
	}
	if got := l.clients.Len(); got != maxClients {
		t.Fatalf("the client table grew to %d", got)
	}
}

// TestLimiterChargesEveryoneFirst: a flood from fresh addresses beyond the
// global budget is refused without remembering its clients, and a client
// refused for its own budget does not spend everyone's.
func TestLimiterChargesEveryoneFirst(t *testing.T) {
	l := newLimiter()
	now := time.Now()
	refused := 0
	for i := range 5 * totalBurst {
		if ok, _, whose := l.allow(fmt.Sprintf("198.51.%d.%d:1", i/250, i%250), now); !ok {
			refused++
			if whose != "everyone's" {
				t.Fatalf("request %d refused for %s budget", i, whose)
			}
		}
	}
	if refused != 4*totalBurst {
		t.Errorf("%d refused, want %d beyond the global burst", refused, 4*totalBurst)
	}
	if got := l.clients.Len(); got != totalBurst {
		t.Errorf("the table holds %d clients; only the %d served are remembered", got, totalBurst)
	}

	l = newLimiter()
	for range perClientBurst {
		l.allow("192.0.2.1:1", now)
	}
	for range 10 * totalBurst {
		if ok, _, _ := l.allow("192.0.2.1:1", now); ok {
			t.Fatal("a client past its burst was served")
		}
	}
	if ok, _, whose := l.allow("192.0.2.2:1", now); !ok {
		t.Fatalf("after one client's refused flood, another was refused (%s budget)", whose)
	}
	if got := l.total.TokensAt(now); got < totalBurst-perClientBurst-2 {
		t.Errorf("one client's refused requests spent everyone's budget: %.0f tokens left", got)
	}
}

// TestManySourceAddressesKeepNewClientsServed: through the binding's
// middleware, requests from 10,500 addresses (RemoteAddr as the server
// sets it), then one more client, which gets 200.
func TestManySourceAddressesKeepNewClientsServed(t *testing.T) {
	now := time.Now()
	s := &Binding{limit: newLimiter(), now: func() time.Time { return now }}
	h := s.limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	get := func(remote string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/.well-known/iface/identity", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range maxClients + 500 {
		now = now.Add(time.Second / totalRate)
		if rec := get(fmt.Sprintf("10.0.%d.%d:4000", i>>8&255, i&255)); rec.Code != http.StatusOK && i < 65536 {
			// 10.0.x.y repeats past 65,536; below it every client is new.
			t.Fatalf("client %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	for _, addr := range []string{"192.0.2.77:5555", "[2001:db8:77::1]:5555"} {
		if rec := get(addr); rec.Code != http.StatusOK {
			t.Fatalf("a new client %s after 10,500 others: %d %s", addr, rec.Code, rec.Body)
		}
	}
	// The flood's own excess is still refused, and says whose budget.
	for range perClientBurst {
		get("192.0.2.78:1")
	}
	rec := get("192.0.2.78:1")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "this address's budget") {
		t.Fatalf("past one client's burst: %d %s", rec.Code, rec.Body)
	}
}
