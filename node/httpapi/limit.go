package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// Limits on the binding, applied before any work. The inbox and signed
// requests are also limited per signer (rates.*), but a new key costs a
// caller nothing, so the address a request comes from and the binding as
// a whole are limited too; and invocations hold a local agent's time, so
// only so many run at once.
//
// A client is an IPv4 address or an IPv6 /64: one subscriber, or one
// host, usually holds a whole /64 and can send from any of its 2^64
// addresses, so keying IPv6 by address would let one host be a million
// clients. The global bucket is charged first, before a client is looked
// up or remembered: a flood from fresh addresses is refused by the global
// bucket without touching the client table, and it can replace entries of
// the table no faster than totalRate a second. The table holds at most
// maxClients entries and forgets the least recently seen one to make room,
// so a new client is always served (the old table refused every new
// client for a minute once full). A forgotten client comes back with a
// full bucket, which gains it at most perClientBurst requests, and only
// after maxClients/totalRate seconds (200 s) of everyone's traffic.
const (
	perClientRate   = 2   // requests per second from one client (120 a minute)
	perClientBurst  = 60  // requests one client may send at once
	totalRate       = 50  // requests per second for everyone
	totalBurst      = 200 // requests at once for everyone
	maxClients      = 10000
	retryAfterLimit = 1 // seconds a limited caller is told to wait, at least
)

// limiter is the binding's request budget: one global token bucket and
// one per client (IPv4 address or IPv6 /64), the clients in a bounded
// least-recently-used table.
type limiter struct {
	total *rate.Limiter

	mu      sync.Mutex
	clients *simplelru.LRU[netip.Prefix, *rate.Limiter]
}

func newLimiter() *limiter {
	clients, err := simplelru.NewLRU[netip.Prefix, *rate.Limiter](maxClients, nil)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &limiter{total: rate.NewLimiter(totalRate, totalBurst), clients: clients}
}

// clientOf is the client a request's remote address belongs to: the
// address itself for IPv4 (an IPv4-mapped IPv6 address counts as IPv4),
// its /64 for IPv6. An address that does not parse (not host:port, as
// in some tests' RemoteAddr) counts as one client, the invalid prefix.
func clientOf(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// allow reports whether a request from remote may proceed now, and if
// not, how long to wait and whose budget is spent ("everyone's", or the
// client's). A refusal costs nothing: the tokens the global bucket
// reserved for it are given back.
func (l *limiter) allow(remote string, now time.Time) (ok bool, wait time.Duration, whose string) {
	all := l.total.ReserveN(now, 1)
	if d := all.DelayFrom(now); !all.OK() || d > 0 {
		all.CancelAt(now)
		return false, d, "everyone's"
	}
	key := clientOf(remote)
	l.mu.Lock()
	c, ok := l.clients.Get(key)
	if !ok {
		c = rate.NewLimiter(perClientRate, perClientBurst)
		l.clients.Add(key, c) // evicts the least recently seen client when full
	}
	l.mu.Unlock()
	if r := c.ReserveN(now, 1); !r.OK() || r.DelayFrom(now) > 0 {
		d := r.DelayFrom(now)
		r.CancelAt(now)
		all.CancelAt(now)
		if key.Addr().Is6() {
			return false, d, "this IPv6 /64's"
		}
		return false, d, "this address's"
	}
	return true, 0, ""
}

// limited answers 429 with Retry-After to callers over their budget.
func (s *Binding) limited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, wait, whose := s.limit.allow(s.callerOf(r).remote, s.now()); !ok {
			secs := max(retryAfterLimit, int(min(wait, time.Hour)+time.Second-1)/int(time.Second))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			writeError(w, http.StatusTooManyRequests, CodeRateLimited, fmt.Sprintf("too many requests: %s budget is spent; retry after %d s", whose, secs))
			return
		}
		next.ServeHTTP(w, r)
	})
}
