package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/mcpserve"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpPath is where the daemon serves MCP over streamable HTTP, on its
// control API listener and behind its token.
const mcpPath = "/v1/mcp"

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
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	svc := mcpserve.New(c, version, log)
	ctx, cancel := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		svc.Follow(ctx, nil)
	}()
	err = svc.Server().Run(ctx, &mcp.StdioTransport{})
	cancel()
	<-followed
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serving MCP on standard input: %w", err)
	}
	return nil
}

// mountMCP serves MCP over streamable HTTP at mcpPath on the control API
// srv, through a client of that same API, so each call passes its guard
// and handlers as the command line's do. The returned stop ends the event
// follower and the client.
func mountMCP(srv *api.Server, h node.Home, log *slog.Logger) (stop func(), err error) {
	c, err := api.Dial(h)
	if err != nil {
		return nil, fmt.Errorf("starting the MCP endpoint: %w", err)
	}
	svc := mcpserve.New(c, version, log.With("component", "mcp"))
	srv.Mount(mcpPath, svc.Handler())
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
