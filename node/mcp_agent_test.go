package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/interop/jsdeps"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/mcpagent"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// exampleLine is a line of TOML in a commented-out example (a table or a
// key), not prose.
var exampleLine = regexp.MustCompile(`^(\[[a-z.-]+\]|[a-z_]+ = )`)

// TestExampleMCPConfigLoads uncomments the [agent.mcp] example in
// config.example.toml and loads it, so the example stays true.
func TestExampleMCPConfigLoads(t *testing.T) {
	src, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	var example strings.Builder
	example.WriteString("version = 1\n")
	on := false
	for l := range strings.Lines(string(src)) {
		if strings.HasPrefix(l, "# [agent.mcp]") {
			on = true
		}
		if on && !strings.HasPrefix(l, "#") {
			break
		}
		if line := strings.TrimPrefix(l, "# "); on && exampleLine.MatchString(line) {
			example.WriteString(line)
		}
	}
	c, err := config.ParseConfig([]byte(example.String()))
	if err != nil {
		t.Fatalf("the [agent.mcp] example does not load: %v\n%s", err, example.String())
	}
	m := c.Agent.MCP
	if m == nil || m.Command != "npx" || m.Prefix != "everything" || m.Tools["get-sum"].Price == nil ||
		m.Tools["get-env"].Name != "host.environment" || m.Default == nil || m.Default.Conditions["min_auth_level"] == nil ||
		!slices.Equal(m.InheritEnv, mcpagent.DefaultInheritEnv) {
		t.Fatalf("the example loads as %+v", m)
	}

	// A mistake names the key and its line.
	_, err = config.ParseConfig([]byte("version = 1\n[agent.mcp]\ncommand = \"s\"\n\n[agent.mcp.tools.echo]\nadvertise = \"never\"\n"))
	if err == nil || !strings.Contains(err.Error(), "line 6") || !strings.Contains(err.Error(), "agent.mcp.tools.echo.advertise") {
		t.Errorf("a bad overlay: %v", err)
	}
	_, err = config.ParseConfig([]byte("version = 1\n[agent.mcp]\nprefix = \"x\"\n"))
	if err == nil || !strings.Contains(err.Error(), "agent.mcp: names no server") {
		t.Errorf("no server: %v", err)
	}
}

type forecastIn struct {
	City string `json:"city"`
}
type forecastOut struct {
	City  string  `json:"city"`
	TempC float64 `json:"temp_c"`
}

// weatherServer is an MCP server built with the Go SDK, served over
// streamable HTTP on loopback.
func weatherServer(t *testing.T) (*mcp.Server, string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "forecast", Description: "Forecast for a city"}, func(_ context.Context, _ *mcp.CallToolRequest, in forecastIn) (*mcp.CallToolResult, forecastOut, error) {
		return nil, forecastOut{City: in.City, TempC: 21}, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "plans", Description: "Share travel plans"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Oslo in May"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "diaryRead", Description: "Read the diary"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "dear diary"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Always fails"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("the weather station is offline")
	})
	// Declares an output schema and breaks it.
	srv.AddTool(&mcp.Tool{Name: "liar", Description: "Breaks its output schema", InputSchema: map[string]any{"type": "object"},
		OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"n": "many"}, Content: []mcp.Content{&mcp.TextContent{Text: `{"n":"many"}`}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return srv, ts.URL
}

// TestMCPServerAsLocalAgent: alice's local agent is an MCP server; bob
// sees its tools under alice's conditions, invokes them, and sees a tool
// added at run time.
func TestMCPServerAsLocalAgent(t *testing.T) {
	srv, url := weatherServer(t)
	cfg := loopbackConfig()
	cfg.Agent.MCP = &mcpagent.Config{URL: url, Prefix: "weather", Default: &mcpagent.Overlay{}, Tools: map[string]mcpagent.Overlay{
		"plans":     {Conditions: map[string]any{"min_disclosure": "professional"}},
		"diaryRead": {Advertise: negotiate.AdvertiseWhenEligible, Conditions: map[string]any{"min_disclosure": "close"}},
	}}
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	pid := alice.id.PeerID()
	evs, stop := bob.Subscribe()
	defer stop()

	r, err := bob.Greet(ctx, pid, negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"weather.forecast": "+", "weather.plans": "-", "weather.fail": "+", "weather.liar": "+", "ping": "+"} {
		c, ok := r.View.Capability(name)
		if !ok || (c.Eligible != nil && *c.Eligible) != (want == "+") {
			t.Errorf("bob's view: %s missing or eligibility wrong: %s", name, testkit.CapNames(r.View))
		}
	}
	if _, ok := r.View.Capability("weather.diary_read"); ok {
		t.Errorf("a when-eligible tool bob is not eligible for is in his view: %s", testkit.CapNames(r.View))
	}
	if plans, _ := r.View.Capability("weather.plans"); len(plans.Unmet) != 1 || plans.Unmet[0].Required != "professional" {
		t.Errorf("plans shows bob no unmet condition: %+v", plans)
	}
	if fc, _ := r.View.Capability("weather.forecast"); fc.OutputSchema == nil || fc.Parameters == nil {
		t.Errorf("forecast lacks its schemas in bob's view: %+v", fc)
	}

	res, err := bob.Invoke(ctx, pid, "weather.forecast", map[string]any{"city": "Oslo"})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := res.Result.(map[string]any); !ok || m["city"] != "Oslo" || m["temp_c"] != 21.0 {
		t.Errorf("forecast: %#v", res.Result)
	}
	_, err = bob.Invoke(ctx, pid, "weather.forecast", map[string]any{"city": 7})
	if body := remoteCode(t, err); body.Code != wire.CodeInvalidParams {
		t.Errorf("parameters against the tool's inputSchema: %+v", body)
	}
	_, err = bob.Invoke(ctx, pid, "weather.plans", nil)
	if body := remoteCode(t, err); body.Code != wire.CodeConditionsNotMet {
		t.Errorf("plans: %+v", body)
	}
	_, err = bob.Invoke(ctx, pid, "weather.diary_read", nil)
	if body := remoteCode(t, err); body.Code != wire.CodeUnknownCapability {
		t.Errorf("a hidden tool: %+v", body)
	}
	_, err = bob.Invoke(ctx, pid, "weather.fail", nil)
	if body := remoteCode(t, err); body.Code != wire.CodeAgentError || !strings.Contains(body.Message, "the weather station is offline") {
		t.Errorf("a tool error: %+v", body)
	}
	_, err = bob.Invoke(ctx, pid, "weather.liar", nil)
	if body := remoteCode(t, err); body.Code != wire.CodeAgentError || !strings.Contains(body.Message, "/n") {
		t.Errorf("output against outputSchema: %+v", body)
	}

	// A tool added at run time reaches bob as an update push.
	mcp.AddTool(srv, &mcp.Tool{Name: "alerts", Description: "Weather alerts"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no alerts"}}}, nil, nil
	})
	seq := r.View.Seq
	waitEvent(t, evs, func(e events.Event) bool {
		return e.Type == events.EventPeerView && e.Peer == pid.String() && strings.HasPrefix(e.Detail, fmt.Sprintf("seq %d,", seq+1))
	})
	rec, err := bob.Store().Peer(pid.String())
	if err != nil || !strings.Contains(string(rec.View), "weather.alerts") {
		t.Fatalf("bob's cache after the push: %v", err)
	}
	res, err = bob.Invoke(ctx, pid, "weather.alerts", nil)
	if err != nil || !strings.Contains(fmt.Sprint(res.Result), "no alerts") {
		t.Fatalf("the new tool: %v, %v", res, err)
	}

	// And one removed leaves.
	srv.RemoveTools("plans")
	waitEvent(t, evs, func(e events.Event) bool {
		return e.Type == events.EventPeerView && e.Peer == pid.String() && strings.HasPrefix(e.Detail, fmt.Sprintf("seq %d,", seq+2))
	})
	if _, ok := alice.Document().Capability("weather.plans"); ok {
		t.Error("a removed tool is still in alice's document")
	}
}

// TestMCPServerThatCannotStartStopsTheDaemon: the owner hears of it at
// start, with the key that named the server.
func TestMCPServerThatCannotStartStopsTheDaemon(t *testing.T) {
	cfg := loopbackConfig()
	cfg.Agent.MCP = &mcpagent.Config{Command: filepath.Join(t.TempDir(), "no-such-server")}
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg, id, h, testLogger(t))
	if err == nil {
		n.Close()
		t.Fatal("the daemon started without its MCP server")
	}
	if !errors.Is(err, mcpagent.ErrStart) || !strings.HasPrefix(err.Error(), "agent.mcp: ") {
		t.Errorf("the error: %v", err)
	}
}

// TestRealMCPServerAsLocalAgent runs an MCP server nobody on this project
// wrote — the reference "everything" server, installed from
// interop/js/package-lock.json — as alice's agent: bob sees its tools
// under alice's overlays and invokes them.
func TestRealMCPServerAsLocalAgent(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "interop", "js"))
	if err != nil {
		t.Fatal(err)
	}
	jsdeps.NeedNode(t)
	jsdeps.Install(t, dir)
	cfg := loopbackConfig()
	cfg.Agent.MCP = &mcpagent.Config{Command: "node", Prefix: "everything", Default: &mcpagent.Overlay{Conditions: map[string]any{"min_auth_level": 1}},
		Args: []string{filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"},
		Tools: map[string]mcpagent.Overlay{
			"echo":    {Conditions: map[string]any{"min_disclosure": "professional"}},
			"get-env": {Advertise: negotiate.AdvertiseWhenEligible, Conditions: map[string]any{"min_disclosure": "close"}},
		}}
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	pid := alice.id.PeerID()

	r, err := bob.Greet(ctx, pid, negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bob's view of alice: %s", testkit.CapNames(r.View))
	if c, ok := r.View.Capability("everything.get-sum"); !ok || c.Eligible == nil || !*c.Eligible || c.Parameters == nil {
		t.Errorf("get-sum is not offered to bob: %s", testkit.CapNames(r.View))
	}
	if c, ok := r.View.Capability("everything.echo"); !ok || c.Eligible == nil || *c.Eligible || len(c.Unmet) == 0 {
		t.Errorf("echo is not shown with its unmet condition: %s", testkit.CapNames(r.View))
	}
	if _, ok := r.View.Capability("everything.get-env"); ok {
		t.Errorf("get-env, hidden, is in bob's view: %s", testkit.CapNames(r.View))
	}

	res, err := bob.Invoke(ctx, pid, "everything.get-sum", map[string]any{"a": 2, "b": 3})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(res.Result), "5") {
		t.Errorf("get-sum: %v", res.Result)
	}
	// A tool with an outputSchema answers with its structured content,
	// checked against output_schema.
	if c, ok := alice.Document().Capability("everything.get-structured-content"); ok && c.OutputSchema != nil {
		res, err = bob.Invoke(ctx, pid, "everything.get-structured-content", map[string]any{"location": "New York"})
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := res.Result.(map[string]any); !ok || m["temperature"] == nil {
			t.Errorf("get-structured-content: %#v", res.Result)
		}
	} else {
		t.Errorf("get-structured-content with its output schema is not offered: %s", testkit.CapNames(alice.Document()))
	}
	_, err = bob.Invoke(ctx, pid, "everything.echo", map[string]any{"message": "hi"})
	if body := remoteCode(t, err); body.Code != wire.CodeConditionsNotMet {
		t.Errorf("echo: %+v", body)
	}
}
