package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP protocol versions compared: the current one, stateless, where
// a client learns a server with server/discover (SEP-2575) and every
// request stands alone; and the last of 2025, where a client opens a
// session with initialize and initialized.
const (
	mcpStateless = "2026-07-28"
	mcpSession   = "2025-11-25"
)

// The MCP server's routes: one handler stateless (no Mcp-Session-Id, as
// the 2026-07-28 protocol runs), one keeping sessions (as 2025 servers
// do).
const (
	mcpStatelessPath = "/mcp"
	mcpSessionPath   = "/mcp-sessions"
)

// mcpServer is an MCP server (the official Go SDK) over streamable HTTP
// on loopback, offering the 20 capabilities as tools.
type mcpServer struct {
	srv    *http.Server
	base   string // http://127.0.0.1:port
	client *mcp.Client
	http   *http.Client // keep-alive
}

// startMCPServer serves caps as MCP tools. The SDK panics on a tool it
// cannot accept; that is returned as an error.
func startMCPServer(caps []map[string]any) (s *mcpServer, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("adding MCP tools: %v", p)
		}
	}()
	server := mcp.NewServer(&mcp.Implementation{Name: "ifaced-bench", Version: "1"}, nil)
	for _, c := range caps {
		name, _ := c["name"].(string)
		desc, _ := c["description"].(string)
		server.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: c["parameters"], OutputSchema: c["output_schema"]},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for MCP: %w", err)
	}
	getServer := func(*http.Request) *mcp.Server { return server }
	mux := http.NewServeMux()
	mux.Handle(mcpStatelessPath, mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true}))
	mux.Handle(mcpSessionPath, mcp.NewStreamableHTTPHandler(getServer, nil))
	s = &mcpServer{
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)},
		base:   "http://" + ln.Addr().String(),
		client: mcp.NewClient(&mcp.Implementation{Name: "ifaced-bench-client", Version: "1"}, nil),
		http:   &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *mcpServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		s.srv.Close()
	}
}

// connect times what a client does to learn the server, on a keep-alive
// connection: with version mcpStateless, Client.Connect sends
// server/discover (one POST); with mcpSession, initialize and then the
// initialized notification (two POSTs). With listTools it then lists the
// tools (one POST): the capabilities themselves. Ending the session (a
// DELETE, under mcpSession only) is not timed. The standalone SSE stream
// a client may open is off: it is not part of learning the server. A
// connection that did not negotiate the version asked for is an error,
// so a fallback never passes for the protocol named.
func (s *mcpServer) connect(ctx context.Context, version string, listTools bool) (time.Duration, error) {
	path := mcpSessionPath
	if version == mcpStateless {
		path = mcpStatelessPath
	}
	t := &mcp.StreamableClientTransport{Endpoint: s.base + path, HTTPClient: s.http, DisableStandaloneSSE: true, MaxRetries: -1}
	start := time.Now()
	cs, err := s.client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return 0, fmt.Errorf("MCP %s: connecting: %w", version, err)
	}
	if listTools {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			cs.Close()
			return 0, fmt.Errorf("MCP %s: tools/list: %w", version, err)
		}
		if len(res.Tools) != 20 {
			cs.Close()
			return 0, fmt.Errorf("MCP %s: tools/list: %d tools, want 20", version, len(res.Tools))
		}
	}
	d := time.Since(start)
	got := cs.InitializeResult().ProtocolVersion
	if err := cs.Close(); err != nil {
		return 0, fmt.Errorf("MCP %s: closing: %w", version, err)
	}
	if got != version {
		return 0, fmt.Errorf("MCP: asked for protocol %s, the connection negotiated %s", version, got)
	}
	return d, nil
}
