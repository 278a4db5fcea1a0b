package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits on the binding, applied before any work. The inbox and signed
// requests are also limited per signer (rates.*), but a new key costs a
// caller nothing, so the address a request comes from and the binding as
// a whole are limited too; and invocations hold a local agent's time, so
// only so many run at once.
const (
	perClientRate   = 2   // requests per second from one IP address (120 a minute)
	perClientBurst  = 60  // requests one address may send at once
	totalRate       = 50  // requests per second for everyone
	totalBurst      = 200 // requests at once for everyone
	maxClients      = 10000
	clientIdle      = 10 * time.Minute // an address quiet this long is forgotten
	maxInvocations  = 32               // invocations through /invoke and /a2a running at once
	retryAfterLimit = 1                // seconds a limited caller is told to wait, at least
)

type limiter struct {
	total *rate.Limiter

	mu      sync.Mutex
	clients map[string]*client
}

type client struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiter() *limiter {
	return &limiter{total: rate.NewLimiter(totalRate, totalBurst), clients: map[string]*client{}}
}

// allow reports whether a request from addr may proceed now, and if not,
// how long to wait.
func (l *limiter) allow(addr string, now time.Time) (bool, time.Duration) {
	ip, _, err := net.SplitHostPort(addr)
	if err != nil {
		ip = addr
	}
	l.mu.Lock()
	c := l.clients[ip]
	if c == nil {
		if len(l.clients) >= maxClients {
			for k, old := range l.clients {
				if now.Sub(old.seen) > clientIdle {
					delete(l.clients, k)
				}
			}
		}
		if len(l.clients) >= maxClients {
			l.mu.Unlock()
			return false, time.Minute
		}
		c = &client{lim: rate.NewLimiter(perClientRate, perClientBurst)}
		l.clients[ip] = c
	}
	c.seen = now
	l.mu.Unlock()
	if r := c.lim.ReserveN(now, 1); !r.OK() || r.DelayFrom(now) > 0 {
		d := r.DelayFrom(now)
		r.CancelAt(now)
		return false, d
	}
	if r := l.total.ReserveN(now, 1); !r.OK() || r.DelayFrom(now) > 0 {
		d := r.DelayFrom(now)
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// limited answers 429 with Retry-After to callers over their budget.
func (s *Binding) limited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := s.limit.allow(r.RemoteAddr, time.Now()); !ok {
			secs := max(retryAfterLimit, int((wait+time.Second-1)/time.Second))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			writeError(w, http.StatusTooManyRequests, CodeRateLimited, fmt.Sprintf("too many requests from this address; retry after %d s", secs))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// invocation takes one of the maxInvocations slots, or answers 503.
func (s *Binding) invocation(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case s.running <- struct{}{}:
		return func() { <-s.running }, true
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "busy", fmt.Sprintf("%d invocations are running; retry shortly", maxInvocations))
		return nil, false
	}
}
