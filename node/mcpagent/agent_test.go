package mcpagent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// logBuffer collects log lines, safe for the agent's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startAgent starts an agent for cfg with a document holding "ping".
func startAgent(t *testing.T, cfg Config, timeout time.Duration) (*Agent, *negotiate.Document, *logBuffer, error) {
	t.Helper()
	logs := &logBuffer{}
	a := New(cfg, conditions.DefaultTierOrder(), timeout, slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { a.Close() })
	doc := &negotiate.Document{IFP: negotiate.Version, AgentID: "did:key:z6Mktest", Seq: 1,
		Capabilities: []negotiate.Capability{{Name: "ping", Description: "Respond to connectivity tests"}}}
	err := a.Start(context.Background(), doc)
	return a, doc, logs, err
}

func names(d *negotiate.Document) []string {
	var s []string
	for _, c := range d.Capabilities {
		s = append(s, c.Name)
	}
	return s
}

func TestToolsBecomeCapabilitiesUnderOverlays(t *testing.T) {
	cfg := helperConfig("sdk")
	cfg.Default = &Overlay{Conditions: map[string]any{"min_auth_level": 1}}
	cfg.Tools = map[string]Overlay{
		"echo":  {Conditions: map[string]any{"min_disclosure": "professional"}, Price: &Price{Amount: "0.01", Currency: "USD"}, Categories: []string{"custom:text"}},
		"crash": {Name: "danger.crash", Advertise: negotiate.AdvertiseWhenEligible, Conditions: map[string]any{"min_disclosure": "close"}},
	}
	a, doc, logs, err := startAgent(t, cfg, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(nil); err != nil {
		t.Fatalf("the merged document does not validate: %v", err)
	}
	want := "ping danger.crash helper.echo helper.fail helper.get_sum helper.slow" // in the server's order
	if got := strings.Join(names(doc), " "); got != want {
		t.Fatalf("capabilities %q, want %q", got, want)
	}
	// The invalid schema is left out with a line naming the tool; the
	// others stay.
	if l := logs.String(); !strings.Contains(l, "MCP tool left out") || !strings.Contains(l, "tool=broken") || !strings.Contains(l, "inputSchema") {
		t.Errorf("no log line names the tool left out:\n%s", l)
	}

	echo, _ := doc.Capability("helper.echo")
	if echo.Conds().MinDisclosure != "professional" || echo.Price == nil || echo.Price.Amount != "0.01" ||
		len(echo.Categories) != 1 || echo.Description != "Echo the text" {
		t.Errorf("echo's overlay: %+v", echo)
	}
	if echo.Conds().MinAuthLevel != nil {
		t.Errorf("an overlay replaces the default, but echo has min_auth_level %v", *echo.Conds().MinAuthLevel)
	}
	props := echo.Parameters.(map[string]any)["properties"].(map[string]any)
	if _, ok := props["text"]; !ok {
		t.Errorf("echo's parameters are not its inputSchema: %v", echo.Parameters)
	}
	sum, _ := doc.Capability("helper.get_sum")
	if sum.OutputSchema == nil || sum.Conds().MinAuthLevel == nil || *sum.Conds().MinAuthLevel != 1 {
		t.Errorf("get_sum: output schema %v, conditions %+v (want the default's min_auth_level 1)", sum.OutputSchema, sum.Conds())
	}
	crash, _ := doc.Capability("danger.crash")
	if !crash.Hidden() {
		t.Errorf("crash: advertise %q", crash.Advertise)
	}
	for capName, tool := range map[string]string{"helper.get_sum": "getSum", "danger.crash": "crash", "helper.echo": "echo"} {
		if got, ok := a.Tool(capName); !ok || got != tool {
			t.Errorf("Tool(%s) = %q, %v; want %q", capName, got, ok, tool)
		}
	}
	if a.Handles("ping") || a.Handles("helper.broken") {
		t.Error("the agent claims a capability that is not one of its tools")
	}
}

func TestCallTool(t *testing.T) {
	a, _, _, err := startAgent(t, helperConfig("sdk"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Without an output schema: the MCP result object.
	res, err := a.Call(ctx, "helper.echo", map[string]any{"text": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	content := res.(map[string]any)["content"].([]any)
	if len(content) != 1 || content[0].(map[string]any)["text"] != "hello" {
		t.Errorf("echo: %v", res)
	}
	// With one: the structured content.
	res, err = a.Call(ctx, "helper.get_sum", map[string]any{"a": 2, "b": 3})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := res.(map[string]any); !ok || m["sum"] != 5.0 || len(m) != 1 {
		t.Errorf("get_sum: %v", res)
	}
	// A tool error is agent_error with the server's message.
	_, err = a.Call(ctx, "helper.fail", nil)
	if !errors.Is(err, wire.ErrAgentFailed) || !strings.Contains(err.Error(), "the disk is full") {
		t.Errorf("fail: %v", err)
	}
	// No answer in time is agent_timeout.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = a.Call(short, "helper.slow", nil)
	if !errors.Is(err, wire.ErrAgentTimeout) {
		t.Errorf("slow: %v", err)
	}
	// The server still answers afterwards.
	if _, err := a.Call(ctx, "helper.echo", map[string]any{"text": "still here"}); err != nil {
		t.Errorf("after a timeout: %v", err)
	}
}

func TestServerThatCrashesIsStartedAgain(t *testing.T) {
	a, _, logs, err := startAgent(t, helperConfig("sdk"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The clock stands still at the server's start: how long the start
	// took on a busy machine (seconds, at times, past restartEvery) must
	// not count as time passed.
	a.mu.Lock()
	now := a.lastStart
	a.mu.Unlock()
	var clockMu sync.Mutex
	a.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	ctx := context.Background()
	_, err = a.Call(ctx, "helper.crash", nil)
	if !errors.Is(err, wire.ErrAgentUnavailable) {
		t.Fatalf("crash: %v", err)
	}
	// Until restartEvery has passed, the server is not started again.
	// (The session may take a moment to be seen closed; a call meanwhile
	// fails the same way.)
	_, err = a.Call(ctx, "helper.echo", map[string]any{"text": "x"})
	if !errors.Is(err, wire.ErrAgentUnavailable) {
		t.Fatalf("right after the crash: %v", err)
	}
	if !a.Handles("helper.echo") {
		t.Error("the crashed server's tools left the table")
	}
	clockMu.Lock()
	now = now.Add(restartEvery)
	clockMu.Unlock()
	res, err := a.Call(ctx, "helper.echo", map[string]any{"text": "back"})
	if err != nil {
		t.Fatalf("after restartEvery: %v\n%s", err, logs)
	}
	if !strings.Contains(stringOf(res), "back") {
		t.Errorf("after the restart: %v", res)
	}
	if !strings.Contains(logs.String(), "the MCP server stopped") {
		t.Errorf("the crash was not logged:\n%s", logs)
	}
}

func stringOf(v any) string {
	var b strings.Builder
	if m, ok := v.(map[string]any); ok {
		content, _ := m["content"].([]any)
		for _, c := range content {
			text, _ := c.(map[string]any)["text"].(string)
			b.WriteString(text)
		}
	}
	return b.String()
}

func TestServerThatSendsMalformedJSONRPC(t *testing.T) {
	a, doc, _, err := startAgent(t, helperConfig("garbage"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(doc), " "); got != "ping helper.good" {
		t.Fatalf("capabilities %q", got)
	}
	_, err = a.Call(context.Background(), "helper.good", nil)
	if !errors.Is(err, wire.ErrAgentUnavailable) && !errors.Is(err, wire.ErrAgentFailed) {
		t.Fatalf("after a malformed answer: %v, want agent_unavailable or agent_error", err)
	}
	t.Logf("a malformed answer gives: %v", err)
	// The session is over: the next request is told so at once, rather
	// than waiting for an answer that cannot come.
	short, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = a.Call(short, "helper.good", nil)
	if !errors.Is(err, wire.ErrAgentUnavailable) {
		t.Fatalf("the request after a malformed answer: %v, want agent_unavailable", err)
	}
}

func TestToolWithInvalidSchemaIsLeftOut(t *testing.T) {
	a, doc, logs, err := startAgent(t, helperConfig("badschema"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(doc), " "); got != "ping helper.good" {
		t.Fatalf("capabilities %q, want the good tool kept", got)
	}
	if l := logs.String(); !strings.Contains(l, "tool=bad") || !strings.Contains(l, "inputSchema") {
		t.Errorf("no log line names the bad tool and its schema:\n%s", l)
	}
	res, err := a.Call(context.Background(), "helper.good", nil)
	if err != nil || stringOf(res) != "ok" {
		t.Errorf("the good tool: %v, %v", res, err)
	}
}

func TestServerThatDoesNotStart(t *testing.T) {
	_, _, logs, err := startAgent(t, helperConfig("exit"), 30*time.Second)
	if !errors.Is(err, ErrStart) {
		t.Fatalf("a server that exits at once: %v", err)
	}
	if !strings.Contains(logs.String(), "cannot open the database") {
		t.Errorf("its stderr was not logged:\n%s", logs)
	}
	_, _, _, err = startAgent(t, Config{Command: "/nonexistent/mcp-server"}, 30*time.Second)
	if !errors.Is(err, ErrStart) {
		t.Fatalf("a command that does not exist: %v", err)
	}
}

func TestServerThatHangs(t *testing.T) {
	_, _, _, err := startAgent(t, helperConfig("hang"), 300*time.Millisecond)
	if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), "agent.timeout") {
		t.Fatalf("a server that never answers initialize: %v", err)
	}
}

// TestNoGoroutineLeftBehind: after Close, nothing the agent started runs,
// on stdio (with a crash and a restart) and over streamable HTTP (with a
// tool-list change followed).
func TestNoGoroutineLeftBehind(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := mcp.NewServer(&mcp.Implementation{Name: "http", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()

	ctx := context.Background()
	a, _, _, err := startAgent(t, helperConfig("sdk"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a.Follow(func(change func(*negotiate.Document) error) (*negotiate.Document, error) {
		return nil, errors.New("unused")
	})
	if _, err := a.Call(ctx, "helper.crash", nil); !errors.Is(err, wire.ErrAgentUnavailable) {
		t.Fatal(err)
	}
	a.lastStart = time.Time{}
	if _, err := a.Call(ctx, "helper.echo", map[string]any{"text": "x"}); err != nil {
		t.Fatal(err)
	}
	a.Close()

	b, doc, _, err := startAgent(t, Config{URL: ts.URL, Default: &Overlay{}}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan []string, 1)
	b.Follow(func(change func(*negotiate.Document) error) (*negotiate.Document, error) {
		next := *doc
		next.Capabilities = slices.Clone(doc.Capabilities)
		if err := change(&next); err != nil {
			return nil, err
		}
		next.Seq++
		changed <- names(&next)
		return &next, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "shout", Description: "Shout the text"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
	})
	if got := strings.Join(<-changed, " "); got != "ping echo shout" {
		t.Errorf("after a tool was added: %q", got)
	}
	if res, err := b.Call(ctx, "shout", map[string]any{"text": "hi"}); err != nil || stringOf(res) != "HI" {
		t.Errorf("the added tool: %v, %v", res, err)
	}
	b.Close()
}

// TestToolsWithoutOverlayAreHeldBack: with no [agent.mcp.default], a
// tool without an overlay of its own is no capability (no peer, caller
// or projection sees it, and a call of it is refused as the agent has no
// such tool); a log line names it and says how to offer it, at start and
// again when the tool list changes. An overlay, even an empty one, offers
// its tool.
func TestToolsWithoutOverlayAreHeldBack(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echo the text"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "readFile", Description: "Read a file"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the owner's secrets"}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close) // after the agent's own cleanup, which closes its stream

	a, doc, logs, err := startAgent(t, Config{URL: ts.URL, Tools: map[string]Overlay{"echo": {}}}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(doc), " "); got != "ping echo" {
		t.Fatalf("capabilities %q, want readFile held back", got)
	}
	if a.Handles("read_file") {
		t.Error("the agent handles the held-back tool")
	}
	if _, err := a.Call(context.Background(), "read_file", nil); !errors.Is(err, wire.ErrAgentUnavailable) {
		t.Errorf("calling the held-back tool: %v", err)
	}
	heldLines := func() []string {
		var out []string
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, "MCP tools held back") {
				out = append(out, l)
			}
		}
		return out
	}
	if h := heldLines(); len(h) != 1 || !strings.Contains(h[0], "tools=readFile") || !strings.Contains(h[0], "[agent.mcp.default]") ||
		!strings.Contains(h[0], "[agent.mcp.tools.<tool>]") {
		t.Fatalf("the log does not say once which tool is held back and how to offer it:\n%s", logs)
	}

	// A tool-list change: a new tool without an overlay is held back and
	// logged with the other; one named by an overlay is offered.
	changed := make(chan []string, 4)
	a.Follow(func(change func(*negotiate.Document) error) (*negotiate.Document, error) {
		next := *doc
		next.Capabilities = slices.Clone(doc.Capabilities)
		if err := change(&next); err != nil {
			return nil, err
		}
		next.Seq++
		changed <- names(&next)
		return &next, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fetchURL", Description: "Fetch a URL"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	srv.RemoveTools("echo")
	if got := strings.Join(<-changed, " "); got != "ping" {
		t.Errorf("after echo went: %q", got)
	}
	h := heldLines()
	if last := h[len(h)-1]; len(h) < 2 || !strings.Contains(last, "tools=fetchURL,readFile") {
		t.Errorf("the tool-list change did not log the tools held back:\n%s", logs)
	}
	if a.Handles("fetch_url") {
		t.Error("the agent handles a held-back tool added later")
	}
}

// TestServerGetsOnlyTheEnvironmentNamed: a server on stdio does not see
// a secret in the daemon's environment; it gets the variables
// inherit_env names (by default PATH, HOME, LANG, TMPDIR) and env.
func TestServerGetsOnlyTheEnvironmentNamed(t *testing.T) {
	t.Setenv("IFACED_TEST_SECRET", "hunter2")
	t.Setenv("PATH", "/usr/bin:/bin")
	environ := func(cfg Config) map[string]string {
		t.Helper()
		a, _, logs, err := startAgent(t, cfg, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Call(context.Background(), "helper.environ", nil)
		if err != nil {
			t.Fatalf("environ: %v\n%s", err, logs)
		}
		env := map[string]string{}
		for l := range strings.Lines(stringOf(res)) {
			k, v, _ := strings.Cut(strings.TrimSuffix(l, "\n"), "=")
			env[k] = v
		}
		return env
	}

	env := environ(helperConfig("env"))
	if _, ok := env["IFACED_TEST_SECRET"]; ok {
		t.Errorf("the server sees the daemon's secret: %v", env)
	}
	if env["PATH"] != "/usr/bin:/bin" || env[helperEnv] != "env" {
		t.Errorf("the server lacks PATH or its env entry: %v", env)
	}
	for k := range env {
		if !slices.Contains(DefaultInheritEnv, k) && k != helperEnv {
			t.Errorf("the server got %s, which neither inherit_env nor env names", k)
		}
	}

	cfg := helperConfig("env")
	cfg.InheritEnv = []string{"IFACED_TEST_SECRET"}
	cfg.Env = append(cfg.Env, "IFACED_TEST_SECRET=replaced")
	if env := environ(cfg); env["IFACED_TEST_SECRET"] != "replaced" || env["PATH"] != "" {
		t.Errorf("inherit_env names only the secret, env replaces it: %v", env)
	}
	cfg.InheritEnv = []string{}
	cfg.Env = helperConfig("env").Env
	if env := environ(cfg); len(env) != 1 || env[helperEnv] != "env" {
		t.Errorf("inherit_env = [] inherits nothing: %v", env)
	}
}
