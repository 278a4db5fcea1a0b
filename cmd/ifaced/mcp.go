package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/mail"
	"github.com/ifaced/ifaced/node/mcpserve"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runMCP serves the running daemon to one MCP client on standard input
// and output (node/mcpserve); it logs to standard error only, since
// standard output carries the protocol.
func runMCP(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "mcp", "", false)
	verbose := f.Bool("verbose", false, "log at debug level (to standard error)")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("mcp takes no arguments, got %q (it serves MCP on standard input and output)", f.Args())
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	c := newRedialer(h)
	defer c.Close()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	svc := mcpserve.New(c, versionString(), log)
	ctx, cancel := context.WithCancel(ctx)
	followed := make(chan struct{})
	ready := make(chan struct{})
	go func() {
		defer close(followed)
		svc.Follow(ctx, ready)
	}()
	// An MCP host starts this server once and may list the tools only
	// once: with a daemon running, the peers' tools are in place before
	// the first request is read. Without one, the server serves at once
	// (every tool says no daemon runs, and how to start it), follows the
	// daemon when it starts, and tells the client its tools changed.
	if c.running() {
		select {
		case <-ready:
		case <-time.After(mcpReadyWait):
			log.Warn("the daemon's peers are not all read yet; serving, and adding their tools as they come", "waited", mcpReadyWait)
		case <-ctx.Done():
		}
	} else {
		log.Warn("no ifaced is running for this data directory yet: serving, and waiting for it (tools say so until it starts)",
			"home", h.Dir, "start", e.hint("`ifaced run`"))
	}
	err = svc.Server().Run(ctx, &mcp.StdioTransport{})
	cancel()
	<-followed
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serving MCP on standard input: %w", err)
	}
	return nil
}

// mountMCP serves MCP over streamable HTTP at api.MCPPath on the control API
// srv, through a client of that same API, so each call passes its guard
// and handlers as the command line's do. The returned stop ends the event
// follower and the client.
func mountMCP(srv *api.Server, h config.Home, log *slog.Logger) (stop func(), err error) {
	c, err := api.Dial(h)
	if err != nil {
		return nil, fmt.Errorf("starting the MCP endpoint: %w", err)
	}
	svc := mcpserve.New(c, versionString(), log.With("component", "mcp"))
	srv.MountMCP(svc.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		svc.Follow(ctx, nil)
	}()
	return func() {
		cancel()
		<-followed
		c.Close()
	}, nil
}

// redialer is the control API client of `ifaced mcp`, which an MCP host
// starts once and keeps: when the daemon was restarted (a new token, 401)
// or is not there (a failed dial), it finds the daemon again and retries
// the call once. Only those two failures are retried: in both the daemon
// never handled the request, so an invocation is not sent twice.
type redialer struct {
	home config.Home
	mu   sync.Mutex
	c    *api.Client
}

// mcpReadyWait bounds how long `ifaced mcp` waits for the peers' tools
// before it serves its first request.
const mcpReadyWait = 10 * time.Second

// newRedialer is a client of the daemon of h, which need not run yet: the
// first call finds it.
func newRedialer(h config.Home) *redialer {
	r := &redialer{home: h}
	if c, err := api.Dial(h); err == nil {
		r.c = c
	}
	return r
}

// running tells whether the daemon answered when the client was made.
func (r *redialer) running() bool { return r.client() != nil }

func (r *redialer) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c != nil {
		r.c.Close()
	}
}

func (r *redialer) client() *api.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c
}

// unsent reports whether err means the daemon did not handle the request.
func unsent(err error) bool {
	var ae *api.Error
	var op *net.OpError
	return errors.As(err, &ae) && ae.Status == http.StatusUnauthorized ||
		errors.As(err, &op) && op.Op == "dial" || errors.Is(err, api.ErrNoDaemon)
}

// again runs call on the client, and once more on a client dialed anew
// when the first attempt was not handled.
func again[T any](r *redialer, call func(*api.Client) (T, error)) (T, error) {
	old := r.client()
	var out T
	if old != nil {
		var err error
		out, err = call(old)
		if err == nil || !unsent(err) {
			return out, err
		}
		c, derr := r.redial(old)
		if derr != nil {
			return out, fmt.Errorf("%w (finding the daemon again: %w)", err, derr)
		}
		return call(c)
	}
	c, err := r.redial(nil)
	if err != nil {
		return out, err // no daemon yet: ErrNoDaemon, saying how to start one
	}
	return call(c)
}

// redial finds the daemon again, replacing old unless another call did
// first.
func (r *redialer) redial(old *api.Client) (*api.Client, error) {
	c, err := api.Dial(r.home)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == old {
		r.c = c
		if old != nil {
			old.Close()
		}
		return c, nil
	}
	c.Close()
	return r.c, nil
}

func (r *redialer) Peers(ctx context.Context) ([]api.Peer, error) {
	return again(r, func(c *api.Client) ([]api.Peer, error) { return c.Peers(ctx) })
}
func (r *redialer) PeerCapabilities(ctx context.Context, peer string, refresh bool) (*api.PeerCaps, error) {
	return again(r, func(c *api.Client) (*api.PeerCaps, error) { return c.PeerCapabilities(ctx, peer, refresh) })
}
func (r *redialer) Find(ctx context.Context, capability, minVersion string, limit int) (*api.FindAnswer, error) {
	return again(r, func(c *api.Client) (*api.FindAnswer, error) { return c.Find(ctx, capability, minVersion, limit) })
}
func (r *redialer) Greet(ctx context.Context, req api.GreetRequest) (*converse.GreetResult, error) {
	return again(r, func(c *api.Client) (*converse.GreetResult, error) { return c.Greet(ctx, req) })
}
func (r *redialer) Invoke(ctx context.Context, req api.InvokeRequest) (*converse.InvokeResult, error) {
	return again(r, func(c *api.Client) (*converse.InvokeResult, error) { return c.Invoke(ctx, req) })
}
func (r *redialer) Send(ctx context.Context, req api.SendRequest) (*mail.SendResult, error) {
	return again(r, func(c *api.Client) (*mail.SendResult, error) { return c.Send(ctx, req) })
}
func (r *redialer) Say(ctx context.Context, req api.SayRequest) (*gossip.Message, error) {
	return again(r, func(c *api.Client) (*gossip.Message, error) { return c.Say(ctx, req) })
}
func (r *redialer) Conversations(ctx context.Context) ([]converse.ConversationInfo, error) {
	return again(r, func(c *api.Client) ([]converse.ConversationInfo, error) { return c.Conversations(ctx) })
}
func (r *redialer) AuditEntries(ctx context.Context, id string) (*api.AuditConversation, error) {
	return again(r, func(c *api.Client) (*api.AuditConversation, error) { return c.AuditEntries(ctx, id) })
}
func (r *redialer) Observe(ctx context.Context) (*api.EventStream, error) {
	return again(r, func(c *api.Client) (*api.EventStream, error) { return c.Observe(ctx) })
}
func (r *redialer) Status(ctx context.Context) (*api.Status, error) {
	return again(r, func(c *api.Client) (*api.Status, error) { return c.Status(ctx) })
}
func (r *redialer) Trust(ctx context.Context) ([]trust.Info, error) {
	return again(r, func(c *api.Client) ([]trust.Info, error) { return c.Trust(ctx) })
}
func (r *redialer) PeerTrust(ctx context.Context, peer string) (*trust.Info, error) {
	return again(r, func(c *api.Client) (*trust.Info, error) { return c.PeerTrust(ctx, peer) })
}
func (r *redialer) Policy(ctx context.Context) (*api.Policy, error) {
	return again(r, func(c *api.Client) (*api.Policy, error) { return c.Policy(ctx) })
}
