package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
)

// MaxBody bounds a request body.
const MaxBody = 1 << 20

// timeouts bound the server's work; tests shorten them.
type timeouts struct {
	readHeader time.Duration // reading a request's headers
	read       time.Duration // reading a whole request
	write      time.Duration // from the end of the headers to the end of the answer (not the event stream)
	idle       time.Duration // keep-alive between requests
	peer       time.Duration // one exchange with a peer (connect, greet, query); below write
	heartbeat  time.Duration // between comment lines on an idle event stream
}

func defaultTimeouts() timeouts {
	// A greeting is a write and a read of up to limits.stream_timeout
	// (30 s by default) each; the answer must still fit in the write
	// timeout after that.
	return timeouts{readHeader: 10 * time.Second, read: 30 * time.Second, write: 90 * time.Second,
		idle: 2 * time.Minute, peer: 70 * time.Second, heartbeat: 15 * time.Second}
}

// Server is a running control API.
type Server struct {
	groups  routeGroups // the endpoints, by what they need of the daemon (groups.go)
	home    config.Home
	log     *slog.Logger
	token   []byte
	addr    string
	sock    string // the Unix socket's path; "" when the API listens on TCP only
	uid     uint32 // the user whose processes may connect over TCP (peeruid.go)
	srv     *http.Server
	handler http.Handler
	// listeners are what srv serves (TCP, and the socket when there is
	// one), so that a test can stop listening as a crash would, before
	// srv's goroutines have run.
	listeners []net.Listener
	mux       *http.ServeMux
	ui        atomic.Pointer[http.Handler] // the console (MountUI), nil until mounted

	done chan struct{}
	once sync.Once
	err  error
}

// Listen serves the control API of n on addr, which must be a loopback
// host:port (port 0 picks one), and on the Unix socket in home. It writes a
// new token file before it listens, then the bound address to the address
// file; Close removes the address file and the socket.
func Listen(n *node.Node, home config.Home, addr string, log *slog.Logger) (*Server, error) {
	return listen(n, home, addr, log, defaultTimeouts())
}

func listen(n *node.Node, home config.Home, addr string, log *slog.Logger, t timeouts) (*Server, error) {
	// Checked before binding, so the API never listens on a network even
	// for a moment, and again after, for what the name resolved to.
	if err := checkLoopback(addr); err != nil {
		return nil, fmt.Errorf("starting control API: %w", err)
	}
	sockPath := SocketFile(home)
	switch err := clearSocket(sockPath); {
	case errors.Is(err, errSocketPathTooLong):
		log.Warn("control API on TCP only", "err", err)
		sockPath = ""
	case err != nil:
		return nil, fmt.Errorf("starting control API: %w", err)
	}
	// A token per run, written before anything listens: the previous
	// run's token opens nothing once this one starts.
	token, err := newToken(TokenFile(home))
	if err != nil {
		return nil, fmt.Errorf("starting control API: %w", err)
	}
	var unixLn *net.UnixListener
	if sockPath != "" {
		if unixLn, err = listenSocket(sockPath); err != nil {
			return nil, fmt.Errorf("starting control API: %w", err)
		}
	}
	closeUnix := func() {
		if unixLn != nil {
			unixLn.Close()
			os.Remove(sockPath)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		closeUnix()
		return nil, fmt.Errorf("starting control API on %s: %w", addr, err)
	}
	bound := ln.Addr().String()
	if ap, err := netip.ParseAddrPort(bound); err != nil || !ap.Addr().IsLoopback() {
		ln.Close()
		closeUnix()
		return nil, fmt.Errorf("starting control API: %s bound to %s, which is not loopback", addr, bound)
	}
	s := &Server{home: home, log: log, token: token, addr: bound, sock: sockPath, uid: daemonUID(),
		done: make(chan struct{})}
	s.groups = groupsFor(n, home.Dir, bound, log, t, s.done)
	if !ownerCheck {
		log.Info("control API: this system does not say which local user opens a TCP connection, so any local user's process may reach the loopback listener (the token and the console's session cookie still apply)")
	}
	s.handler = s.guard(s.routes())
	s.srv = &http.Server{
		Handler:           s.handler,
		ConnContext:       connContext,
		ReadHeaderTimeout: t.readHeader,
		ReadTimeout:       t.read,
		WriteTimeout:      t.write, // the event stream lifts it for itself
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if err := writeAddr(AddrFile(home), bound); err != nil {
		ln.Close()
		closeUnix()
		return nil, err
	}
	serve := func(ln net.Listener) {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("control API stopped", "err", err)
		}
	}
	s.listeners = append(s.listeners, ln)
	go serve(ln)
	if unixLn != nil {
		s.listeners = append(s.listeners, unixLn)
		go serve(unixLn)
	}
	return s, nil
}

// Addr is the address the API listens on.
func (s *Server) Addr() string { return s.addr }

// Socket is the path of the Unix socket the API listens on, "" when its
// path would be too long and it listens on TCP only.
func (s *Server) Socket() string { return s.sock }

// Close ends the event streams, stops serving (letting requests in flight
// finish for a few seconds) and removes the address file and the socket.
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
		}
		// Shutdown closes only the listeners Serve has begun to track; one
		// whose Serve goroutine has not run yet would accept until it does.
		for _, ln := range s.listeners {
			ln.Close()
		}
		var errs []error
		if err := os.Remove(AddrFile(s.home)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing API address file: %w", err))
		}
		if s.sock != "" {
			if err := os.Remove(s.sock); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing API socket: %w", err))
			}
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

// MCPPath is where the daemon serves MCP over streamable HTTP.
const MCPPath = "/v1/mcp"

// MountMCP serves h (the MCP server, node/mcpserve) at MCPPath, every
// method, behind the same guard as every endpoint: loopback or the
// socket, the token, bounded bodies. This package need not know MCP; the
// route is fixed here so that openapi.json describes it.
func (s *Server) MountMCP(h http.Handler) { s.mux.Handle(MCPPath, h) }

// UIPath is where the daemon serves the owner's console (node/console),
// on the loopback TCP listener.
const UIPath = "/ui/"

// UILoginCodePath is the endpoint, behind the token, at which the
// mounted console mints a one-time login code (`ifaced ui`).
const UILoginCodePath = "/v1/ui/login-code"

// MountUI serves h, the console, at UIPath and at UILoginCodePath (which
// it answers to POST only). The login code endpoint is an API call behind
// the same guard as every other. Under UIPath, which a browser calls
// without the token, the guard keeps the loopback check and the bounded
// bodies, answers 421 to a
// request whose Host is not this listener's loopback address (127.0.0.1,
// localhost or [::1] with its port: a page that reached the port through
// DNS rebinding names its own host), and 403 to a request other than GET
// or HEAD whose Origin is present and not the console's; and h itself
// admits only requests with its session cookie, in place of the token.
func (s *Server) MountUI(h http.Handler) {
	s.mux.Handle(UILoginCodePath, h)
	s.ui.Store(&h)
}

// isUIPath reports whether path is the console's.
func isUIPath(path string) bool { return path == "/ui" || strings.HasPrefix(path, UIPath) }

// serveUI is the guard's part for the console: Host and Origin checks in
// place of the token (see MountUI).
func (s *Server) serveUI(h http.Handler, w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, msg string) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(status)
		io.WriteString(w, msg+"\n")
	}
	hosts := s.uiHosts()
	if !slices.Contains(hosts, strings.ToLower(r.Host)) {
		refuse(http.StatusMisdirectedRequest, fmt.Sprintf("refused: this is ifaced's console, which answers only at http://%s%s (the Host %q is not this daemon's loopback address, as when a web page reaches it through DNS rebinding)",
			hosts[0], UIPath, r.Host))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if o := r.Header.Get("Origin"); o != "" && !slices.Contains(hosts, strings.TrimPrefix(strings.ToLower(o), "http://")) {
			refuse(http.StatusForbidden, fmt.Sprintf("refused: a %s from the origin %q, which is not this console (http://%s): nothing was changed", r.Method, o, hosts[0]))
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	h.ServeHTTP(w, r)
}

// uiHosts are the Host values the console answers to: the listener's own
// address first, then its port on each loopback name.
func (s *Server) uiHosts() []string {
	_, port, _ := net.SplitHostPort(s.addr)
	own := strings.ToLower(s.addr)
	hosts := []string{own}
	for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
		if h+":"+port != own {
			hosts = append(hosts, h+":"+port)
		}
	}
	return hosts
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	s.mux = mux
	g := s.groups
	mux.HandleFunc("GET /v1/status", g.status.status)
	mux.HandleFunc("GET /v1/peers", g.peers.peers)
	mux.HandleFunc("GET /v1/peers/{peer}", g.peers.peer)
	mux.HandleFunc("POST /v1/connect", g.peers.connect)
	mux.HandleFunc("GET /v1/caps", g.caps.ownCaps)
	mux.HandleFunc("GET /v1/caps/{peer}", g.peers.peerCaps)
	mux.HandleFunc("POST /v1/caps", g.caps.addCap)
	mux.HandleFunc("DELETE /v1/caps/{name}", g.caps.removeCap)
	mux.HandleFunc("GET /v1/document", g.caps.ownDocument)
	mux.HandleFunc("GET /v1/seen", g.seen.seen)
	mux.HandleFunc("POST /v1/greet", g.convs.greet)
	mux.HandleFunc("GET /v1/conversations", g.convs.conversations)
	mux.HandleFunc("DELETE /v1/conversations/{id}", g.convs.closeConversation)
	mux.HandleFunc("POST /v1/say", g.convs.say)
	mux.HandleFunc("POST /v1/send", g.mail.send)
	mux.HandleFunc("GET /v1/outbox", g.mail.outbox)
	mux.HandleFunc("POST /v1/imports", g.imports.importAgent)
	mux.HandleFunc("GET /v1/imports", g.imports.imports)
	mux.HandleFunc("DELETE /v1/imports", g.imports.removeImport)
	mux.HandleFunc("GET /v1/audit", g.audit.audit)
	mux.HandleFunc("GET /v1/audit/why/{message_id}", g.why.why)
	mux.HandleFunc("GET /v1/audit/refusals", g.refusals.refusals)
	mux.HandleFunc("GET /v1/audit/proof", g.proofs.proof)
	mux.HandleFunc("GET /v1/audit/bundle", g.proofs.bundle)
	mux.HandleFunc("GET /v1/audit/receipt/{message_id}", g.proofs.receipt)
	mux.HandleFunc("GET /v1/events", g.events.events)
	mux.HandleFunc("POST /v1/invoke", g.convs.invoke)
	mux.HandleFunc("POST /v1/invocations/{id}", g.events.answerInvocation)
	mux.HandleFunc("GET /v1/policy", g.policy.policy)
	mux.HandleFunc("PUT /v1/policy/disclosure", g.policy.setDisclosure)
	mux.HandleFunc("PUT /v1/policy/temperature", g.policy.setTemperature)
	mux.HandleFunc("GET /v1/trust", g.trust.trustList)
	mux.HandleFunc("GET /v1/trust/{peer}", g.trust.peerTrust)
	mux.HandleFunc("POST /v1/trust/{peer}", g.trust.trustPeer)
	mux.HandleFunc("POST /v1/intros", g.intros.introduce)
	mux.HandleFunc("GET /v1/intros", g.intros.intros)
	mux.HandleFunc("DELETE /v1/intros/{id}", g.intros.revokeIntro)
	mux.HandleFunc("POST /v1/intros/accept", g.intros.acceptIntro)
	mux.HandleFunc("GET /v1/find/{capability}", g.find.find)
	mux.HandleFunc("GET /v1/openapi.json", s.openapi)
	mux.HandleFunc("GET /metrics", g.metrics.serve)
	// Everything else, including a known path with the wrong method, lands
	// here, so that those answers are JSON too.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			alt := r.Clone(r.Context())
			alt.Method = m
			if _, pattern := mux.Handler(alt); pattern != "/" && m != r.Method {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, &Error{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed,
				Message: fmt.Sprintf("%s %s: this endpoint takes %s", r.Method, r.URL.Path, strings.Join(allow, ", "))})
			return
		}
		writeError(w, &Error{Status: http.StatusNotFound, Code: CodeNotFound,
			Message: fmt.Sprintf("%s %s: no such endpoint (see the node/api package documentation)", r.Method, r.URL.Path)})
	})
	return mux
}

// guard admits callers on the socket, or on loopback from a process of
// the daemon's own user (peeruid.go), holding the token, and bounds
// bodies. The hello challenge alone needs no token: it is how the
// daemon proves itself to a client before the client sends one; and the
// console, once mounted, has its own checks in place of it (MountUI).
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(viaSocket{}) == nil && !fromLoopback(r.RemoteAddr) {
			writeError(w, &Error{Status: http.StatusForbidden, Code: CodeForbidden,
				Message: "the control API answers loopback callers only"})
			return
		}
		if !s.checkOwner(w, r) {
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == helloPath {
			s.hello(w, r)
			return
		}
		if ui := s.ui.Load(); ui != nil && isUIPath(r.URL.Path) {
			s.serveUI(*ui, w, r)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), s.token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ifaced"`)
			writeError(w, &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
				Message: "missing or wrong token: send Authorization: Bearer <the content of " + TokenFile(s.home) + ">"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		next.ServeHTTP(w, r)
	})
}

func fromLoopback(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// checkLoopback accepts host:port on a loopback address or localhost.
func checkLoopback(hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", hostport, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: the control API listens on 127.0.0.1 or [::1] only", hostport)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // the client went away, or the answer is our own plain struct: nothing to do either way
}

func writeError(w http.ResponseWriter, e *Error) {
	if e.Status == 0 {
		e.Status = http.StatusInternalServerError
	}
	writeJSON(w, e.Status, e)
}

// decodeBody reads a request body into v strictly: one JSON object, no
// unknown members, each problem naming the member.
func decodeBody(r *http.Request, v any) *Error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		return nil
	}
	bad := &Error{Status: http.StatusBadRequest, Code: CodeBadRequest}
	var tooLarge *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooLarge):
		bad.Status, bad.Code = http.StatusRequestEntityTooLarge, CodeTooLarge
		bad.Message = fmt.Sprintf("the request body is over %d bytes", MaxBody)
	case errors.Is(err, io.EOF):
		bad.Message = "the request body is empty: send a JSON object"
	case errors.As(err, &typeErr):
		bad.Field = typeErr.Field
		bad.Message = fmt.Sprintf("%s: want a JSON %s, got %s", typeErr.Field, typeErr.Type.Kind(), typeErr.Value)
	case errors.As(err, &syntaxErr):
		bad.Message = fmt.Sprintf("the request body is not JSON (byte %d): %v", syntaxErr.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		bad.Field = strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		bad.Message = fmt.Sprintf("%s: is not a known field (check its spelling)", bad.Field)
	default:
		bad.Message = "reading the request body: " + err.Error()
	}
	return bad
}

// badField is a 400 naming the member at fault.
func badField(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Field: field,
		Message: field + ": " + fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

func internal(err error) *Error {
	msg := err.Error()
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		// A store write on a full disk: its transaction was rolled back.
		msg += ": the disk holding the data directory is full, so nothing was changed; free space on it and run the command again (the daemon needs no restart)"
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: msg}
}
