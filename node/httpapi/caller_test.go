package httpapi

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// getFrom sends GET path from client c with an X-Forwarded-For header
// (none when xff is "").
func getFrom(t *testing.T, c *http.Client, url, xff string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if xff != "" {
		req.Header.Set(forwardedFor, xff)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// spend sends requests from c, naming xff, until the binding refuses one
// for its client's budget; it returns how many were served.
func spend(t *testing.T, c *http.Client, url, xff string) int {
	t.Helper()
	for served := 0; served <= 2*perClientBurst; served++ {
		if st := getFrom(t, c, url, xff); st == http.StatusTooManyRequests {
			return served
		} else if st != http.StatusOK {
			t.Fatalf("request %d: %d", served, st)
		}
	}
	t.Fatalf("more than %d requests served to one client", 2*perClientBurst)
	return 0
}

// TestForwardedForOnlyFromTrustedProxies: with http.trusted_proxies =
// ["127.0.0.1/32"], a request from 127.0.0.1 is counted and audited as
// the client its X-Forwarded-For names, so each forwarded client has its
// own budget; from 127.0.0.2, which is not a trusted proxy, the header is
// ignored, so naming other clients in it gains nothing; and without the
// setting no one's header is read. (Before, the header was ignored from
// everyone: behind a proxy, every caller was one client.)
func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	cfg := testConfig()
	cfg.HTTP.TrustedProxies = []string{"127.0.0.1/32"}
	d := start(t, cfg)
	url := d.url + "/.well-known/iface/identity"
	proxy, other := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")

	// Through the trusted proxy: each forwarded client has its own budget.
	if n := spend(t, proxy, url, "198.51.100.7"); n != perClientBurst {
		t.Fatalf("a forwarded client was served %d requests at once, want its burst of %d", n, perClientBurst)
	}
	if st := getFrom(t, proxy, url, "198.51.100.8"); st != http.StatusOK {
		t.Fatalf("another client forwarded by the trusted proxy, after the first spent its budget: %d", st)
	}
	if st := getFrom(t, proxy, url, "203.0.113.1, 198.51.100.9"); st != http.StatusOK {
		t.Fatalf("a client forwarded through two proxies (the rightmost untrusted one counts): %d", st)
	}
	if st := getFrom(t, proxy, url, "198.51.100.8, 198.51.100.7"); st != http.StatusTooManyRequests {
		t.Fatalf("the spent client, named rightmost: %d, want 429", st)
	}
	// The proxy's own requests (no header) are the proxy's.
	if st := getFrom(t, proxy, url, ""); st != http.StatusOK {
		t.Fatalf("the proxy's own request: %d", st)
	}

	// From an address that is not a trusted proxy the header is ignored:
	// whatever it names, every request is 127.0.0.2's.
	served := 0
	for i := 0; i <= 2*perClientBurst; i++ {
		st := getFrom(t, other, url, "192.0.2."+string(rune('0'+i%10)))
		if st == http.StatusTooManyRequests {
			break
		}
		served++
	}
	if served != perClientBurst {
		t.Fatalf("an untrusted peer naming a new client in each X-Forwarded-For was served %d requests at once, want its own burst of %d", served, perClientBurst)
	}

	// The audit names the forwarded client and the proxy.
	r := doFrom(t, proxy, "POST", d.url+"/invoke", `{"action": "ping"}`, forwardedFor, "198.51.100.20")
	if r.status != http.StatusOK {
		t.Fatalf("ping through the proxy: %d %s", r.status, r.body)
	}
	r = doFrom(t, clientFrom(t, "127.0.0.3"), "POST", d.url+"/invoke", `{"action": "ping"}`, forwardedFor, "198.51.100.21")
	if r.status != http.StatusOK {
		t.Fatalf("ping from 127.0.0.3: %d %s", r.status, r.body)
	}
	notes := auditNotes(t, d)
	if !containsWith(notes, "from 198.51.100.20 (forwarded by 127.0.0.1:") {
		t.Errorf("no audit entry names the forwarded client and its proxy: %q", notes)
	}
	if containsWith(notes, "198.51.100.21") || !containsWith(notes, "from 127.0.0.3:") {
		t.Errorf("an untrusted peer's X-Forwarded-For reached the audit: %q", notes)
	}

	// Without trusted_proxies, 127.0.0.1's header is ignored too.
	plain := start(t, testConfig())
	if n := spend(t, proxy, plain.url+"/.well-known/iface/identity", "198.51.100.30"); n != perClientBurst {
		t.Fatalf("without trusted proxies: %d served", n)
	}
	if st := getFrom(t, proxy, plain.url+"/.well-known/iface/identity", "198.51.100.31"); st != http.StatusTooManyRequests {
		t.Fatalf("without trusted proxies, naming another client in X-Forwarded-For: %d, want 429", st)
	}
}

func doFrom(t *testing.T, c *http.Client, method, url, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return response{res.StatusCode, res.Header, []byte(b.String())}
}

func auditNotes(t *testing.T, d *daemon) []string {
	t.Helper()
	convs, err := d.n.Audit().Conversations()
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, c := range convs {
		entries, err := d.n.Audit().Entries(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

func containsWith(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestForwardedClient: the walk from the right, hop by hop, past trusted
// proxies only, stopping at what is not an address.
func TestForwardedClient(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	many := strings.Repeat("10.0.0.9, ", 40) + "10.0.0.8"
	for _, c := range []struct {
		name, remote string
		values       []string
		want         string
		hops         int
	}{
		{"one hop", "10.0.0.1", []string{"192.0.2.7"}, "192.0.2.7", 1},
		{"no header", "10.0.0.1", nil, "10.0.0.1", 0},
		{"rightmost untrusted wins", "10.0.0.1", []string{"198.51.100.1, 192.0.2.7"}, "192.0.2.7", 1},
		{"through a second trusted proxy", "10.0.0.1", []string{"192.0.2.7, 10.0.0.2"}, "192.0.2.7", 2},
		{"two headers in order", "10.0.0.1", []string{"192.0.2.7", "10.0.0.2"}, "192.0.2.7", 2},
		{"with ports and brackets", "::1", []string{"[2001:db8::5]:443"}, "2001:db8::5", 1},
		{"IPv4 with port", "10.0.0.1", []string{"192.0.2.7:5000"}, "192.0.2.7", 1},
		{"quoted", "10.0.0.1", []string{`"192.0.2.7"`}, "192.0.2.7", 1},
		{"mapped", "10.0.0.1", []string{"::ffff:192.0.2.7"}, "192.0.2.7", 1},
		{"garbage stops at the proxy", "10.0.0.1", []string{"192.0.2.7, unknown"}, "10.0.0.1", 0},
		{"garbage behind a trusted hop", "10.0.0.1", []string{"nonsense, 10.0.0.2"}, "10.0.0.2", 1},
		{"a zone is not an address", "10.0.0.1", []string{"fe80::1%eth0"}, "10.0.0.1", 0},
		{"bounded walk", "10.0.0.1", []string{many}, "10.0.0.9", maxForwardedHops},
	} {
		got, hops := forwardedClient(netip.MustParseAddr(c.remote), c.values, isTrusted)
		if got != netip.MustParseAddr(c.want) || hops != c.hops {
			t.Errorf("%s: %s after %d hops, want %s after %d", c.name, got, hops, c.want, c.hops)
		}
	}
}
