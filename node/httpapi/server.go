// Package httpapi is the daemon's public HTTP binding: the face it shows
// agents that are not on the libp2p network. Every endpoint is a
// projection of the one IFP-7 document, cut to the view the caller may
// see, and every request goes through the same checks as over libp2p:
//
//	GET  /.well-known/iface/identity      IFP-5 identity document
//	GET  /.well-known/iface/capabilities  the signed view for an anonymous caller (ETag, Cache-Control)
//	POST /.well-known/iface/inbox         IFP-6 delivery of a signed IFP-4 message (202, or an IFP-6 error)
//	GET  /capabilities                    AG-UI AgentCapabilities merged with the orchestrator contract
//	POST /invoke                          run a capability: {"action", "input"} (orchestrator contract),
//	                                      or a signed IFP-4 capability request, decided for its signer
//	GET  /.well-known/agent-card.json     A2A agent card, JWS-signed
//	POST /a2a                             A2A JSON-RPC, 1.0 and 0.3 (also at /a2a/): a message naming a skill
//	                                      runs it, a text message goes to the local agent, tasks polled,
//	                                      listed or followed, replies streamed (see a2a.go)
//
// An HTTP caller proves nothing by connecting, so it has no
// authentication level: a capability with any min_auth_level is not
// available to it, and a capability hidden from strangers appears in none
// of these answers. Errors are IFP-6 JSON ({"status": "error", "code",
// "message"}) with the IFP-6 status codes; bodies over 1 MB get 413.
//
// The binding is a separate listener from the control API and shares
// nothing with it: no route here changes the daemon. Plain HTTP is allowed
// on loopback only (the config refuses anything else without TLS), and on
// loopback only requests naming the binding in Host are answered
// (hostGuard, against DNS rebinding). Web pages of other origins may read
// the read-only views (CORS, as http.cors_origins says; see cors.go) and
// nothing else. Requests are limited per client and
// in total before any work (limiter; a client behind a trusted proxy is
// the one it forwards for, caller.go), requests that wait on the local
// agent share bounded slots that no one client can fill (slots.go), and
// invocations, signed or anonymous, are audited with the caller, the
// capability and the outcome with its decision.
//
// Listen takes the daemon (a *node.Node, which cmd/ifaced builds) and
// keeps only what the binding uses, as small interfaces declared here:
// the daemon's key and identity document (self); of the HTTP inbox
// (converse.Inbox), the view a caller is shown (viewSource), the door its
// messages enter (door) and what a caller that proved nothing may run
// (anonymousAgent); and the decoding budget (decodingBudget, admit.Budget).
// The concrete node stays in Listen's signature because its caller holds
// it and the binding needs few of its methods; a test can build a Binding
// from a real daemon's components.
package httpapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/libp2p/go-libp2p/core/peer"
)

// MaxBody is the IFP-6 §5 message size limit.
const MaxBody = 1 << 20

// Binding is a running HTTP binding.
type Binding struct {
	self   self           // the daemon's key and identity document
	views  viewSource     // the view an HTTP caller is shown
	door   door           // where what a caller sends enters the daemon
	agent  anonymousAgent // what a caller that proved nothing may run
	budget decodingBudget // bounds the bodies decoding at once

	cfg  config.HTTPConfig
	log  *slog.Logger
	srv  *http.Server
	addr string
	url  string // how callers reach it
	tls  bool

	limit   *limiter
	hosts   *hostGuard       // nil unless the binding is on loopback
	cors    *cors            // nil when http.cors_origins is empty
	tasks   *a2aTasks        // A2A tasks (a2atask.go)
	streams *a2aStreams      // A2A streams open (a2astream.go)
	now     func() time.Time // the limiter's clock
	slots   *slots           // requests waiting on the local agent (slots.go)
	proxies []netip.Prefix   // http.trusted_proxies (caller.go)

	// streamGrace is how much longer than agent.timeout an A2A stream
	// may live (a2aStreamGrace; tests shorten it).
	streamGrace time.Duration

	cardMu  sync.Mutex
	card    *negotiate.AgentCard // signed, for the view tagged cardTag
	cardTag string
}

// self is this daemon's key, which signs the agent card, and its IFP-5
// identity document (node.Node).
type self interface {
	ID() *identity.Identity
	IdentityDocument() *identity.Document
}

// viewSource is the view an HTTP caller is shown, and the agent's name in
// the projections (converse.Inbox).
type viewSource interface {
	HTTPFacts() conditions.Facts
	ViewFor(f conditions.Facts) (*negotiate.Document, string, error)
	DisplayName() string
}

// door is where a message an HTTP caller sends enters the daemon: the
// one admission pipeline, which also records what could not be decoded
// (converse.Inbox).
type door interface {
	Deliver(m *gossip.Message, transport string) (*converse.Delivered, error)
	ExecuteSigned(m *gossip.Message) (name string, out any, err error)
	RecordUndecoded(transport string, raw []byte, cause error)
}

// anonymousAgent runs what a caller that proved nothing asks: a
// capability, or text for the local agent, each audited, and how long the
// local agent may take (converse.Inbox).
type anonymousAgent interface {
	ExecuteAnonymous(via, caller, ref, name string, params any) (any, error)
	AskAnonymous(via, caller, ref, convID, text string, data []any) (any, error)
	AgentTimeout() time.Duration
}

// decodingBudget is the daemon-wide budget of bodies decoding at once
// (admit.Budget).
type decodingBudget interface {
	Acquire(ctx context.Context, from peer.ID, n int64) (release func(), err error)
}

// Listen serves the binding of n as cfg says. cfg.Listen must be set.
func Listen(n *node.Node, cfg config.HTTPConfig, log *slog.Logger) (*Binding, error) {
	var tlsCfg *tls.Config
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("starting HTTP binding: loading http.cert_file and http.key_file: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	var proxies []netip.Prefix
	for i, p := range cfg.TrustedProxies {
		pr, err := config.ParseProxy(p)
		if err != nil {
			return nil, fmt.Errorf("starting HTTP binding: http.trusted_proxies[%d]: %w", i, err)
		}
		proxies = append(proxies, pr)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("starting HTTP binding on %s: %w", cfg.Listen, err)
	}
	inbox := n.Inbox()
	s := &Binding{self: n, views: inbox, door: inbox, agent: inbox, budget: n.Budget(), cfg: cfg, log: log, addr: ln.Addr().String(), tls: tlsCfg != nil,
		limit: newLimiter(), now: time.Now, slots: newSlots(), proxies: proxies}
	s.url = cfg.URL
	s.hosts = newHostGuard(s.addr, cfg.URL, cfg.AllowedHosts)
	s.cors = newCORS(cfg.CORSOrigins)
	s.tasks = newA2ATasks(func() time.Time { return s.now() })
	s.streams, s.streamGrace = newA2AStreams(), a2aStreamGrace
	if s.url == "" {
		scheme := "http"
		if s.tls {
			scheme = "https"
		}
		s.url = scheme + "://" + s.addr
	}
	s.srv = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      s.agent.AgentTimeout() + 30*time.Second, // /invoke waits for the local agent
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    32 << 10,
		TLSConfig:         tlsCfg,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		var err error
		if s.tls {
			err = s.srv.ServeTLS(ln, "", "")
		} else {
			err = s.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP binding stopped", "err", err)
		}
	}()
	log.Info("HTTP binding listening", "url", s.url)
	return s, nil
}

// Addr is the bound host:port.
func (s *Binding) Addr() string { return s.addr }

// URL is the base URL callers use.
func (s *Binding) URL() string { return s.url }

// Close stops serving, letting requests in flight finish for a few seconds.
func (s *Binding) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	return nil
}

func (s *Binding) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/iface/identity", s.identity)
	mux.HandleFunc("GET /.well-known/iface/capabilities", s.wellKnownCapabilities)
	mux.HandleFunc("POST /.well-known/iface/inbox", s.inbox)
	mux.HandleFunc("GET /capabilities", s.capabilities)
	mux.HandleFunc("POST /invoke", s.invoke)
	mux.HandleFunc("GET /.well-known/agent-card.json", s.agentCard)
	mux.HandleFunc("POST /a2a", s.a2a)
	mux.HandleFunc("POST /a2a/{$}", s.a2a) // exactly /a2a/: clients that join the card's URL and "/" send it
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allowed := allowedMethods(mux, r); allowed != "" {
			w.Header().Set("Allow", allowed)
			writeError(w, http.StatusMethodNotAllowed, CodeInvalidFormat, fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path))
			return
		}
		writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("no endpoint %s (see /.well-known/iface/capabilities)", r.URL.Path))
	})
	return s.hosts.guard(s.cors.handle(s.limited(limitBody(mux))))
}

// allowedMethods lists the methods the path has a route for, if any.
func allowedMethods(mux *http.ServeMux, r *http.Request) string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		alt := r.Clone(r.Context())
		alt.Method = m
		if _, pattern := mux.Handler(alt); pattern != "/" {
			allowed = append(allowed, m)
		}
	}
	return strings.Join(allowed, ", ")
}

// limitBody caps every request body at MaxBody.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBody {
			writeError(w, http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
				fmt.Sprintf("the body is %d bytes; at most %d (IFP-6 §5)", r.ContentLength, MaxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		next.ServeHTTP(w, r)
	})
}

// IFP-6 §3.2 error codes, and the few this binding adds.
const (
	CodeInvalidFormat    = "invalid_format"
	CodeInvalidSignature = "invalid_signature"
	CodeUnknownSender    = "unknown_sender"
	CodeRateLimited      = "rate_limited"
	CodePayloadTooLarge  = "payload_too_large"
	CodeInternal         = "internal_error"
	CodeNotFound         = "not_found"
	CodeMisdirected      = "misdirected_request" // 421: the Host does not name this binding (hostGuard)
	CodeForbiddenOrigin  = "forbidden_origin"    // 403: a POST from a web page of another origin (hostGuard)
)

// Error is the IFP-6 error body, with the wire error body when a
// capability request was refused (which condition, what would meet it).
type Error struct {
	Status  string `json:"status"` // "error"
	Code    string `json:"code"`
	Message string `json:"message"`
	Detail  any    `json:"detail,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, Error{Status: "error", Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"status":"error","code":"internal_error","message":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
