package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/httpapi"
	"github.com/ifaced/ifaced/node/mcpagent"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncBuffer is a log sink safe for the daemon's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type readFileIn struct {
	Path string `json:"path"`
}

// filesServer is an MCP server over streamable HTTP with a tool that
// reads any file it is given, as a filesystem server does, and an
// harmless one.
func filesServer(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "readFile", Description: "Read a file"}, func(_ context.Context, _ *mcp.CallToolRequest, in readFileIn) (*mcp.CallToolResult, any, error) {
		b, err := os.ReadFile(in.Path)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// startAgentDaemon runs a daemon whose local agent is the MCP server
// described by m, with its HTTP binding on loopback; it returns the node,
// the binding's URL and the daemon's log.
func startAgentDaemon(t *testing.T, m *mcpagent.Config) (*node.Node, string, *syncBuffer) {
	t.Helper()
	cfg := nodetest.LoopbackConfig()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Agent.MCP = m
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	n, err := node.New(cfg, id, h, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	b, err := httpapi.Listen(n, cfg.HTTP, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return n, b.URL(), logs
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	return string(b)
}

// anonymousInvoke posts an unsigned POST /invoke and returns the status,
// the error code (when refused) and the body.
func anonymousInvoke(t *testing.T, base, action string, input any) (int, string, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"action": action, "input": input})
	res, err := http.Post(base+"/invoke", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var e struct {
		Code string `json:"code"`
	}
	json.Unmarshal(b, &e)
	return res.StatusCode, e.Code, string(b)
}

// TestMCPAgentFailsClosed: an [agent.mcp] tool without an overlay and
// without [agent.mcp.default] is offered to nobody — it is not in the
// document, the public view, the HTTP binding's actions or the A2A card,
// and an anonymous POST /invoke of it is refused as unknown without
// reaching the server (which would read a 0600 file) — and the log says
// so, naming the tool and how to offer it. With [agent.mcp.default] it is
// offered under the default's conditions, which an anonymous caller does
// not meet.
func TestMCPAgentFailsClosed(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("the owner's private key material"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := filesServer(t)
	params := map[string]any{"path": secret}

	n, base, logs := startAgentDaemon(t, &mcpagent.Config{URL: url, Prefix: "files", Tools: map[string]mcpagent.Overlay{"echo": {}}})
	if _, ok := n.Document().Capability("files.read_file"); ok {
		t.Fatal("files.read_file, without an overlay, is in the document")
	}
	if _, ok := n.Document().Capability("files.echo"); !ok {
		t.Fatal("files.echo, with an (empty) overlay, is not in the document")
	}
	for _, path := range []string{"/.well-known/iface/capabilities", "/capabilities", "/.well-known/agent-card.json"} {
		if body := httpGet(t, base+path); strings.Contains(body, "read_file") || strings.Contains(body, "readFile") || !strings.Contains(body, "files.echo") {
			t.Errorf("GET %s: the held-back tool is there, or the offered one is not:\n%.2000s", path, body)
		}
	}
	status, code, body := anonymousInvoke(t, base, "files.read_file", params)
	if code != string(wire.CodeUnknownCapability) || strings.Contains(body, "private key material") {
		t.Errorf("anonymous POST /invoke of the held-back tool: %d %s", status, body)
	}
	var held []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "MCP tools held back") {
			held = append(held, l)
		}
	}
	if len(held) != 1 || !strings.Contains(held[0], "tools=readFile") || !strings.Contains(held[0], "[agent.mcp.default]") {
		t.Errorf("the log does not say once which tool is held back and how to offer it:\n%s", logs)
	}

	// With a default: offered, under the default's conditions.
	n, base, _ = startAgentDaemon(t, &mcpagent.Config{URL: url, Prefix: "files", Tools: map[string]mcpagent.Overlay{"echo": {}},
		Default: &mcpagent.Overlay{Conditions: map[string]any{"min_auth_level": 2}}})
	c, ok := n.Document().Capability("files.read_file")
	if !ok || c.Conds().MinAuthLevel == nil || *c.Conds().MinAuthLevel != 2 {
		t.Fatalf("with [agent.mcp.default], files.read_file: %v %+v", ok, c)
	}
	if body := httpGet(t, base+"/.well-known/iface/capabilities"); !strings.Contains(body, "files.read_file") {
		t.Errorf("with [agent.mcp.default], the public view does not list files.read_file:\n%.2000s", body)
	}
	status, code, body = anonymousInvoke(t, base, "files.read_file", params)
	if code != string(wire.CodeConditionsNotMet) || strings.Contains(body, "private key material") {
		t.Errorf("anonymous POST /invoke under min_auth_level 2: %d %s", status, body)
	}
}
