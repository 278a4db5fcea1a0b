package httpapi

import (
	"net/http"
	"testing"
	"time"
)

func TestLimiterPerAddressAndInTotal(t *testing.T) {
	l := newLimiter()
	now := time.Now()
	for i := 0; i < perClientBurst; i++ {
		if ok, _ := l.allow("192.0.2.1:1000", now); !ok {
			t.Fatalf("request %d of a burst refused", i)
		}
	}
	ok, wait := l.allow("192.0.2.1:2000", now)
	if ok || wait <= 0 {
		t.Fatalf("past the burst, from another port of the same address: ok=%v wait=%s", ok, wait)
	}
	if ok, _ := l.allow("192.0.2.2:1000", now); !ok {
		t.Fatal("another address was refused")
	}
	if ok, _ := l.allow("192.0.2.1:1000", now.Add(time.Second)); !ok {
		t.Fatal("the address was not allowed again after a second")
	}
	// Everyone together: many addresses, each within its own budget.
	refused := 0
	for i := 0; i < 3*totalBurst; i++ {
		if ok, _ := l.allow("198.51.100."+string(rune('0'+i%10))+":1", now.Add(time.Second)); !ok {
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
