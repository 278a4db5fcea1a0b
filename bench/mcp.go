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

// mcpServer is an MCP server (the official Go SDK) over streamable HTTP
// on loopback, offering the 20 capabilities as tools.
type mcpServer struct {
	srv    *http.Server
	url    string
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
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	s = &mcpServer{
		srv:    &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)},
		url:    "http://" + ln.Addr().String() + "/mcp",
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

// connect times one MCP session: Connect (initialize, then initialized),
// and with listTools also tools/list. Closing the session (a DELETE) is
// not timed. The standalone SSE stream a client may open after
// initialize is off: it is not part of the handshake.
func (s *mcpServer) connect(ctx context.Context, listTools bool) (time.Duration, error) {
	t := &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: s.http, DisableStandaloneSSE: true, MaxRetries: -1}
	start := time.Now()
	cs, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		return 0, fmt.Errorf("MCP initialize: %w", err)
	}
	if listTools {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			cs.Close()
			return 0, fmt.Errorf("MCP tools/list: %w", err)
		}
		if len(res.Tools) != 20 {
			cs.Close()
			return 0, fmt.Errorf("MCP tools/list: %d tools, want 20", len(res.Tools))
		}
	}
	d := time.Since(start)
	if err := cs.Close(); err != nil {
		return 0, fmt.Errorf("closing the MCP session: %w", err)
	}
	return d, nil
}
