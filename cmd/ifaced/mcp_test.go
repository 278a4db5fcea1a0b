package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/interop/jsdeps"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/ifaced/ifaced/node/mcpserve"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// mcpPair is two greeted-to-be daemons on loopback: alice fronts the
// example agent (doc.summarize, a conditioned calendar.availability, echo)
// and is a DHT server; bob bootstraps from her, and serves MCP on his
// control API as `ifaced run` does.
type mcpPair struct {
	aliceHome, bobHome config.Home
	alice, bob         *node.Node
	aliceID            string
	bobAPI             *api.Server
}

func startMCPPair(t *testing.T) *mcpPair {
	t.Helper()
	cfg := agentConfig(t)
	cfg.Discovery.DHT = config.DHTServer
	p := &mcpPair{}
	p.aliceHome, p.alice = startDaemon(t, cfg)
	p.aliceID = p.alice.ID().PeerID().String()
	bobCfg := nodetest.LoopbackConfig()
	bobCfg.Discovery.DHT = config.DHTServer
	bobCfg.Discovery.Bootstrap = []string{p.alice.Addrs()[0].String()}
	p.bobHome, p.bob, p.bobAPI = startMCPDaemon(t, bobCfg)
	// Bob's owner chose alice (pinned her key): her capabilities are tools
	// of their own in his MCP server.
	if _, err := p.bob.TrustBook().PinKey(p.alice.ID().PeerID(), p.alice.ID().Fingerprint()); err != nil {
		t.Fatal(err)
	}
	return p
}

// startMCPDaemon is startDaemon with the MCP endpoint mounted as
// runDaemon mounts it.
func startMCPDaemon(t *testing.T, cfg *config.Config) (config.Home, *node.Node, *api.Server) {
	t.Helper()
	h, n, srv, log := startServer(t, cfg)
	stop, err := mountMCP(srv, h, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return h, n, srv
}

// call calls a tool that must succeed and decodes its structured result.
func call(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, resultText(res))
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

// callFails calls a tool that must report a tool error and returns its
// text.
func callFails(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v (want a tool error)", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s succeeded with %s, want a tool error", name, resultText(res))
	}
	return resultText(res)
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// exercise runs find → show → greet → invoke, a refusal, bad input, a
// view change and messages through one MCP session of bob's.
func (p *mcpPair) exercise(t *testing.T, ctx context.Context, cs *mcp.ClientSession, toolsChanged <-chan struct{}, updated <-chan string) {
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	for _, name := range []string{"find_agents", "show_peer", "greet_peer", "invoke", "send_message", "list_peers", "list_conversations", "read_messages", "read_conversation"} {
		tl := byName[name]
		if tl == nil {
			t.Fatalf("tools/list has no %s: %v", name, slices.Collect(func(y func(string) bool) {
				for n := range byName {
					y(n)
				}
			}))
		}
		if tl.InputSchema == nil || tl.OutputSchema == nil || tl.Annotations == nil {
			t.Errorf("%s: input schema %v, output schema %v, annotations %+v", name, tl.InputSchema != nil, tl.OutputSchema != nil, tl.Annotations)
		}
	}
	if a := byName["find_agents"].Annotations; !a.ReadOnlyHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
		t.Errorf("find_agents annotations %+v: want read-only, open-world", a)
	}
	if a := byName["invoke"].Annotations; a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("invoke annotations %+v: want destructive", a)
	}
	if a := byName["read_messages"].Annotations; !a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("read_messages annotations %+v: want read-only, closed-world", a)
	}

	// find: bob's DHT knows alice once his bootstrap dial completed and
	// her records went out; poll the tool until the DHT answers with her.
	var found mcpserve.FindOutput
	for deadline := time.Now().Add(30 * time.Second); ; {
		found = mcpserve.FindOutput{}
		call(t, ctx, cs, "find_agents", map[string]any{"capability": "calendar.availability"}, &found)
		if len(found.Providers) > 0 && found.Providers[0].Source == "dht" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling observable state
	}
	if len(found.Providers) != 1 {
		t.Fatalf("find_agents: %+v", found)
	}
	if pr := found.Providers[0]; pr.Source != "dht" || pr.PeerID != p.aliceID || pr.Status != discovery.FindIneligible ||
		len(pr.Why) == 0 || !strings.Contains(strings.Join(pr.Why, "\n"), "min_disclosure") {
		t.Errorf("find_agents calendar.availability: %+v", pr)
	}
	// doc.summarize: from the cache now (the DHT asked her), eligible, with its tool.
	found = mcpserve.FindOutput{}
	call(t, ctx, cs, "find_agents", map[string]any{"capability": "doc.summarize"}, &found)
	if len(found.Providers) != 1 || found.Providers[0].Status != discovery.FindEligible || found.Providers[0].PeerID != p.aliceID {
		t.Errorf("find_agents doc.summarize: %+v", found)
	}

	var shown mcpserve.PeerOutput
	call(t, ctx, cs, "show_peer", map[string]any{"peer": p.aliceID}, &shown)
	offers := map[string]mcpserve.Offer{}
	for _, o := range shown.Capabilities {
		offers[o.Name] = o
	}
	if o := offers["doc.summarize"]; !o.Eligible || o.Parameters == nil {
		t.Errorf("show_peer doc.summarize: %+v", o)
	}
	if o := offers["calendar.availability"]; o.Eligible || len(o.Unmet) != 2 || o.Unmet[0].Condition != "min_disclosure" ||
		o.Unmet[0].Required != "professional" || o.Unmet[0].HowToMeet == "" {
		t.Errorf("show_peer calendar.availability: %+v", o)
	}

	var greeted mcpserve.GreetOutput
	call(t, ctx, cs, "greet_peer", map[string]any{"peer": p.aliceID, "disclosure": "public", "temperature": "warm"}, &greeted)
	if greeted.ConversationID == "" || greeted.GrantedToUs.Disclosure != "public" || len(greeted.Capabilities) != 3 {
		t.Errorf("greet_peer: %+v", greeted)
	}
	// The greeting brought the peer's tools up to date.
	own := mcpserve.ToolName(p.aliceID, "doc.summarize")
	if i := slices.IndexFunc(greeted.Capabilities, func(o mcpserve.Offer) bool { return o.Name == "doc.summarize" }); i < 0 || greeted.Capabilities[i].Tool != own {
		t.Errorf("greet_peer does not name the tool %s: %+v", own, greeted.Capabilities)
	}
	if tools, err = cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}

	var inv mcpserve.InvokeOutput
	call(t, ctx, cs, "invoke", map[string]any{"peer": p.aliceID, "capability": "doc.summarize",
		"params": map[string]any{"text": "one two three", "max_words": 2}}, &inv)
	if r, _ := inv.Result.(map[string]any); r["summary"] != "one two" || inv.ConversationID != greeted.ConversationID {
		t.Errorf("invoke doc.summarize: %+v", inv)
	}
	// The same capability through its own tool, with the peer's schema.
	if tl := byName[own]; tl == nil {
		t.Errorf("tools/list has no %s", own)
	} else if s, _ := tl.InputSchema.(map[string]any); s["required"] == nil || tl.OutputSchema == nil {
		t.Errorf("%s: input schema %v, output schema %v: want the view's", own, tl.InputSchema, tl.OutputSchema)
	}
	var sum struct {
		Summary   string `json:"summary"`
		WordCount int    `json:"word_count"`
	}
	call(t, ctx, cs, own, map[string]any{"text": "alpha beta gamma", "max_words": 1}, &sum)
	if sum.Summary != "alpha" || sum.WordCount != 1 {
		t.Errorf("%s: %+v", own, sum)
	}

	// A refusal carries the peer's explanation.
	text := callFails(t, ctx, cs, "invoke", map[string]any{"peer": p.aliceID, "capability": "calendar.availability", "params": map[string]any{"days": 3}})
	for _, want := range []string{"conditions_not_met", "- min_disclosure: requires professional, you have public; ", "- min_auth_level: requires 2 (verified), you have 1 (signed); "} {
		if !strings.Contains(text, want) {
			t.Errorf("refused invoke: no %q in\n%s", want, text)
		}
	}
	// Bad input: the peer's schema, the tool's schema, an unknown tool.
	if text := callFails(t, ctx, cs, "invoke", map[string]any{"peer": p.aliceID, "capability": "doc.summarize", "params": map[string]any{"text": 5}}); !strings.Contains(text, "invalid_params") || !strings.Contains(text, "/text") {
		t.Errorf("invalid params: %s", text)
	}
	if text := callFails(t, ctx, cs, "invoke", map[string]any{"peer": p.aliceID}); !strings.Contains(text, "capability") {
		t.Errorf("invoke without capability: %s", text)
	}
	if text := callFails(t, ctx, cs, "invoke", map[string]any{"peer": p.aliceID, "capability": "echo", "colour": "red"}); !strings.Contains(text, "colour") {
		t.Errorf("invoke with an unknown member: %s", text)
	}
	if text := callFails(t, ctx, cs, "show_peer", map[string]any{"peer": "12D3KooWNoSuchPeerNoSuchPeerNoSuchPeerNoSuchPeer"}); !strings.Contains(text, "peer") {
		t.Errorf("show_peer of an unknown peer: %s", text)
	}
	if text := callFails(t, ctx, cs, "send_message", map[string]any{"text": "hi"}); !strings.Contains(text, "peer, conversation_id: give exactly one") {
		t.Errorf("send_message with neither: %s", text)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), `unknown tool "no_such_tool"`) {
		t.Errorf("unknown tool: %v", err)
	}

	// Alice offers something new: bob's view of her changes in
	// conversation, and her new capability becomes a tool.
	ac, err := api.Dial(p.aliceHome)
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	viewURI := "ifaced://peers/" + p.aliceID
	if updated != nil {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: viewURI}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ac.AddCapability(ctx, json.RawMessage(`{"name": "weather.forecast", "description": "Forecast the weather"}`)); err != nil {
		t.Fatal(err)
	}
	if updated != nil {
		select {
		case uri := <-updated:
			if uri != viewURI {
				t.Errorf("resources/updated for %s, want %s", uri, viewURI)
			}
		case <-ctx.Done():
			t.Fatalf("no resources/updated for %s after alice's change", viewURI)
		}
	}
	weather := mcpserve.ToolName(p.aliceID, "weather.forecast")
	if toolsChanged != nil {
		for {
			select {
			case <-toolsChanged:
			case <-ctx.Done():
				t.Fatalf("no tools/list_changed after alice's change")
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == weather }) {
				break
			}
		}
	}

	// Messages: bob says something, alice answers, bob reads it.
	var sent mcpserve.SendOutput
	call(t, ctx, cs, "send_message", map[string]any{"conversation_id": greeted.ConversationID, "text": "Hello Alice."}, &sent)
	if sent.Delivered != "conversation" || sent.MessageID == "" {
		t.Errorf("send_message: %+v", sent)
	}
	if _, err := ac.Say(ctx, api.SayRequest{ConversationID: greeted.ConversationID, Phase: "context", Text: "Hello Bob."}); err != nil {
		t.Fatal(err)
	}
	var read mcpserve.ReadOutput
	for since := int64(0); ; {
		read = mcpserve.ReadOutput{}
		call(t, ctx, cs, "read_messages", map[string]any{"since": since, "conversation_id": greeted.ConversationID}, &read)
		if slices.ContainsFunc(read.Messages, func(m mcpserve.Message) bool {
			return m.Text == mcpserve.Quote(p.aliceID, "Hello Bob.", mcpserve.MaxPeerText)
		}) {
			break
		}
		since = read.NextCursor
		select {
		case <-ctx.Done():
			t.Fatalf("read_messages never returned alice's message: %+v", read)
		case <-time.After(50 * time.Millisecond): // polling observable state
		}
	}
	var conv mcpserve.ConversationOutput
	call(t, ctx, cs, "read_conversation", map[string]any{"conversation_id": greeted.ConversationID}, &conv)
	if !slices.ContainsFunc(conv.Entries, func(e mcpserve.Entry) bool { return e.Text == "Hello Alice." && e.Direction == "sent" }) ||
		conv.Resource != mcpserve.AuditURI(greeted.ConversationID) {
		t.Errorf("read_conversation: %+v", conv)
	}

	// Resources: the peer cache and the conversation's audit.
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ifaced://peers"})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, p.aliceID) {
		t.Errorf("ifaced://peers: %v %v", res, err)
	}
	res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: conv.Resource})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, "Hello Alice.") {
		t.Errorf("audit resource: %v %v", res, err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ifaced://audit/conv%3Anope"}); err == nil {
		t.Errorf("the audit of an unknown conversation was read")
	}
}

// TestMCPOverStdio runs `ifaced mcp` as an MCP client starts it (the Go
// SDK's command transport), speaking 2026-07-28, and then a 2025-06-18
// client of the same binary.
func TestMCPOverStdio(t *testing.T) {
	bin := buildIfaced(t)
	p := startMCPPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	changed, updated := make(chan struct{}, 16), make(chan string, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "ifaced-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- r.Params.URI:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "mcp", "--home", p.bobHome.Dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated %s, want 2026-07-28", v)
	}
	p.exercise(t, ctx, cs, changed, updated)

	old, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "mcp", "--home", p.bobHome.Dir)},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if v := old.InitializeResult().ProtocolVersion; v != "2025-06-18" {
		t.Errorf("a 2025-06-18 client negotiated %s", v)
	}
	text := callFails(t, ctx, old, "invoke", map[string]any{"peer": p.aliceID, "capability": "calendar.availability", "params": map[string]any{"days": 3}})
	if !strings.Contains(text, "min_disclosure: requires professional, you have public") {
		t.Errorf("refusal over 2025-06-18: %s", text)
	}
}

// bearer adds the control API token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestMCPOverHTTP talks to the daemon's /v1/mcp with the Go SDK's
// streamable client: refused without the token; with it, at 2026-07-28
// (stateless, discovered) and at 2025-06-18 (initialize).
func TestMCPOverHTTP(t *testing.T) {
	p := startMCPPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	endpoint := "http://" + p.bobAPI.Addr() + api.MCPPath
	client := mcp.NewClient(&mcp.Implementation{Name: "ifaced-test", Version: "1"}, nil)

	if _, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil); err == nil {
		t.Fatal("connected without the token")
	}
	tok, err := os.ReadFile(api.TokenFile(p.bobHome))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: bearer{strings.TrimSpace(string(tok)), http.DefaultTransport}}
	changed, updated := make(chan struct{}, 16), make(chan string, 16)
	modern := mcp.NewClient(&mcp.Implementation{Name: "ifaced-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- r.Params.URI:
			default:
			}
		},
	})
	cs, err := modern.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated %s, want 2026-07-28", v)
	}
	p.exercise(t, ctx, cs, changed, updated)

	// A 2025-06-18 client gets a session, and with it notifications.
	oldChanged := make(chan struct{}, 16)
	legacy := mcp.NewClient(&mcp.Implementation{Name: "ifaced-test-legacy", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case oldChanged <- struct{}{}:
			default:
			}
		}})
	old, err := legacy.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if v := old.InitializeResult().ProtocolVersion; v != "2025-06-18" || old.ID() == "" {
		t.Errorf("a 2025-06-18 client negotiated %s, session %q", v, old.ID())
	}
	var inv mcpserve.InvokeOutput
	call(t, ctx, old, "invoke", map[string]any{"peer": p.aliceID, "capability": "echo", "params": map[string]any{"x": 1}}, &inv)
	if r, _ := inv.Result.(map[string]any); r["x"] != float64(1) {
		t.Errorf("echo over 2025-06-18: %+v", inv)
	}
	ac, err := api.Dial(p.aliceHome)
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	if _, err := ac.RemoveCapability(ctx, "weather.forecast"); err != nil {
		t.Fatal(err)
	}
	weather := mcpserve.ToolName(p.aliceID, "weather.forecast")
	for {
		select {
		case <-oldChanged:
		case <-ctx.Done():
			t.Fatalf("the 2025-06-18 session had no tools/list_changed after alice removed a capability")
		}
		tools, err := old.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == weather }) {
			break
		}
	}
}

// TestMCPTypeScriptClient has the official TypeScript SDK's client
// (interop/js/mcp.mjs, installed with npm ci from the committed lock file)
// use `ifaced mcp` over stdio and the daemon's /v1/mcp over streamable
// HTTP: it speaks 2025-11-25 with initialize, and validates every
// structured result against the tool's output schema.
func TestMCPTypeScriptClient(t *testing.T) {
	jsdeps.NeedNode(t)
	dir, err := filepath.Abs(filepath.Join("..", "..", "interop", "js"))
	if err != nil {
		t.Fatal(err)
	}
	jsdeps.Install(t, dir)
	bin := buildIfaced(t)
	p := startMCPPair(t)
	tok, err := os.ReadFile(api.TokenFile(p.bobHome))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "mcp.mjs", bin, p.bobHome.Dir, p.aliceID, "http://"+p.bobAPI.Addr()+api.MCPPath)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "IFACED_MCP_TOKEN="+strings.TrimSpace(string(tok)))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node mcp.mjs: %v\n%s", err, stderr.String())
	}
	type run struct {
		ProtocolVersion   string               `json:"protocolVersion"`
		Server            string               `json:"server"`
		Tools             []string             `json:"tools"`
		InvokeAnnotations *mcp.ToolAnnotations `json:"invokeAnnotations"`
		Summary           string               `json:"summary"`
		OwnTool           string               `json:"ownTool"`
		OwnResult         map[string]any       `json:"ownResult"`
		RefusedIsError    bool                 `json:"refusedIsError"`
		Refusal           string               `json:"refusal"`
		Unknown           string               `json:"unknown"`
	}
	var got struct {
		Stdio *run `json:"stdio"`
		HTTP  *run `json:"http"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("mcp.mjs printed no JSON summary (%v): %s\n%s", err, out, stderr.String())
	}
	wantTools := []string{"find_agents", "greet_peer", "invoke", "list_conversations", "list_peers", "read_conversation", "read_messages", "send_message", "show_peer"}
	for name, r := range map[string]*run{"stdio": got.Stdio, "http": got.HTTP} {
		if r == nil {
			t.Errorf("%s: no summary in %s", name, out)
			continue
		}
		if r.ProtocolVersion != "2025-11-25" || r.Server != "ifaced" || !slices.Equal(r.Tools, wantTools) {
			t.Errorf("%s: protocol %q, server %q, tools %q", name, r.ProtocolVersion, r.Server, r.Tools)
		}
		if a := r.InvokeAnnotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
			t.Errorf("%s: invoke's annotations as the client read them: %+v", name, a)
		}
		if r.Summary != "one two" || r.OwnTool != mcpserve.ToolName(p.aliceID, "doc.summarize") || r.OwnResult["summary"] != "alpha" {
			t.Errorf("%s: summary %q, own tool %q, its result %v", name, r.Summary, r.OwnTool, r.OwnResult)
		}
		if !r.RefusedIsError || !strings.Contains(r.Refusal, "min_disclosure: requires professional, you have public") {
			t.Errorf("%s: refusal %v %q", name, r.RefusedIsError, r.Refusal)
		}
		if !strings.Contains(r.Unknown, "no_such_tool") {
			t.Errorf("%s: an unknown tool gave %q", name, r.Unknown)
		}
	}
}

// TestMCPEndpointLeavesNoGoroutine serves a 2026-07-28 session over
// /v1/mcp (with its subscriptions/listen stream open) and a 2025-06-18
// one (with its GET stream), stops the daemon as
// runDaemon does, and checks that nothing the endpoint started still runs.
func TestMCPEndpointLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h, n, srv, log := openDaemon(t, nil)
	stop, err := mountMCP(srv, h, log)
	if err != nil {
		srv.Close()
		n.Close()
		t.Fatal(err)
	}
	tok, err := os.ReadFile(api.TokenFile(h))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + srv.Addr() + api.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{strings.TrimSpace(string(tok)), tr}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	legacy, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + srv.Addr() + api.MCPPath,
		HTTPClient: &http.Client{Transport: bearer{strings.TrimSpace(string(tok)), tr}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := legacy.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	legacy.Close()
	tr.CloseIdleConnections()
	stop()
	if err := errors.Join(srv.Close(), n.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestMCPSurvivesADaemonRestart: `ifaced mcp` outlives the daemon it
// serves (an MCP host starts it once); after a restart, with a new token,
// its next call finds the daemon again.
func TestMCPSurvivesADaemonRestart(t *testing.T) {
	bin := buildIfaced(t)
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if _, err := h.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() (stop func()) {
		id, _, err := h.Open(false, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cfg := nodetest.LoopbackConfig()
		n, err := node.New(cfg, id, h, log)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := api.Listen(n, h, cfg.API.Listen, log)
		if err != nil {
			n.Close()
			t.Fatal(err)
		}
		return func() { srv.Close(); n.Close() }
	}
	stop := start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: exec.Command(bin, "mcp", "--home", h.Dir)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call(t, ctx, cs, "list_peers", map[string]any{}, nil)
	stop()
	if text := callFails(t, ctx, cs, "list_peers", map[string]any{}); !strings.Contains(text, "no ifaced is running") {
		t.Errorf("with the daemon stopped: %s", text)
	}
	stop = start()
	defer stop()
	call(t, ctx, cs, "list_peers", map[string]any{}, nil)
}
