package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/mail"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeDaemon serves views a stranger wrote, trust records and a policy,
// and records invocations.
type fakeDaemon struct {
	views   map[string]*api.PeerCaps
	trust   map[string]trust.Info // by peer ID; a peer without one is signed only
	policy  api.Policy
	invoked []api.InvokeRequest
}

// pin makes the owner have pinned each peer's key.
func (f *fakeDaemon) pin(ids ...string) {
	if f.trust == nil {
		f.trust = map[string]trust.Info{}
	}
	for _, id := range ids {
		f.trust[id] = trust.Info{Peer: id, Level: conditions.Verified, PinnedKey: "SHA256:" + id}
	}
}

func (f *fakeDaemon) Status(context.Context) (*api.Status, error) {
	return &api.Status{PeerID: "12D3KooWOwnerOwnerOwnerOwnerOwner", DID: "did:key:z6MkOwner"}, nil
}

func (f *fakeDaemon) Trust(context.Context) ([]trust.Info, error) {
	var out []trust.Info
	for _, id := range slices.Sorted(maps.Keys(f.trust)) {
		out = append(out, f.trust[id])
	}
	return out, nil
}

func (f *fakeDaemon) PeerTrust(_ context.Context, peer string) (*trust.Info, error) {
	if info, ok := f.trust[peer]; ok {
		return &info, nil
	}
	return &trust.Info{Peer: peer, Level: conditions.Signed}, nil
}

func (f *fakeDaemon) Policy(context.Context) (*api.Policy, error) {
	p := f.policy
	if p.Tiers == nil {
		p.DefaultTier, p.Tiers = "public", []string{"public", "professional", "close", "intimate"}
	}
	return &p, nil
}

func (f *fakeDaemon) Peers(context.Context) ([]api.Peer, error) {
	var out []api.Peer
	for id, v := range f.views {
		out = append(out, api.Peer{PeerID: id, AgentID: v.AgentID, Display: v.Display, Cached: true})
	}
	return out, nil
}

func (f *fakeDaemon) PeerCapabilities(_ context.Context, peer string, _ bool) (*api.PeerCaps, error) {
	if pc, ok := f.views[peer]; ok {
		return pc, nil
	}
	return nil, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no peer " + peer}
}

func (f *fakeDaemon) Invoke(_ context.Context, req api.InvokeRequest) (*converse.InvokeResult, error) {
	f.invoked = append(f.invoked, req)
	if req.Capability == "lies.about.output" {
		return &converse.InvokeResult{Result: "a string"}, nil
	}
	var params any
	json.Unmarshal(req.Params, &params)
	return &converse.InvokeResult{ConversationID: "conv:x", RequestID: "r", Result: map[string]any{"got": params}}, nil
}

func (f *fakeDaemon) Find(context.Context, string, string, int) (*api.FindAnswer, error) {
	return nil, &api.Error{Status: 503, Code: api.CodeDHTUnavailable, Message: "the DHT is off"}
}
func (f *fakeDaemon) Greet(context.Context, api.GreetRequest) (*converse.GreetResult, error) {
	return nil, fmt.Errorf("not in this test")
}
func (f *fakeDaemon) Send(context.Context, api.SendRequest) (*mail.SendResult, error) {
	return nil, fmt.Errorf("not in this test")
}
func (f *fakeDaemon) Say(context.Context, api.SayRequest) (*gossip.Message, error) {
	return nil, fmt.Errorf("not in this test")
}
func (f *fakeDaemon) Conversations(context.Context) ([]converse.ConversationInfo, error) {
	return nil, nil
}
func (f *fakeDaemon) AuditEntries(context.Context, string) (*api.AuditConversation, error) {
	return nil, fmt.Errorf("not in this test")
}
func (f *fakeDaemon) Observe(context.Context) (*api.EventStream, error) {
	return nil, fmt.Errorf("not in this test")
}

func view(peerID string, caps ...negotiate.Capability) *api.PeerCaps {
	yes := true
	for i := range caps {
		if caps[i].Eligible == nil {
			caps[i].Eligible = &yes
		}
	}
	return &api.PeerCaps{PeerID: peerID, View: &negotiate.Document{Capabilities: caps}}
}

func connect(t *testing.T, s *Service) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var out []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(tl.Name, "__") {
			out = append(out, tl.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestPeerToolsFromStrangersViews: what a peer writes in its view cannot
// crash the server or grow its tool list without bound; a bad schema
// leaves out that tool only.
func TestPeerToolsFromStrangersViews(t *testing.T) {
	huge := map[string]any{"type": "object", "description": strings.Repeat("x", maxSchemaBytes)}
	header := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "object", "x-mcp-header": "N"}}}
	no := false
	f := &fakeDaemon{views: map[string]*api.PeerCaps{
		"peerAAAAAAAA": view("peerAAAAAAAA",
			negotiate.Capability{Name: "ok.object", Description: strings.Repeat("d", 5000), Parameters: map[string]any{"type": "object", "required": []any{"a"}}},
			negotiate.Capability{Name: "ok.string", Parameters: map[string]any{"type": "string"}},
			negotiate.Capability{Name: "bad.huge", Parameters: huge},
			negotiate.Capability{Name: "bad.header", Parameters: header},
			negotiate.Capability{Name: "not.eligible", Eligible: &no},
			negotiate.Capability{Name: "lies.about.output", OutputSchema: map[string]any{"type": "object"}},
		),
	}}
	f.pin("peerAAAAAAAA")
	s := New(f, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	cs := connect(t, s)
	s.peers.syncAll(context.Background())

	liar := ToolName("peerAAAAAAAA", "lies.about.output")
	want := []string{ToolName("peerAAAAAAAA", "ok.object"), ToolName("peerAAAAAAAA", "ok.string")}
	if got, all := toolNames(t, cs), slices.Sorted(slices.Values(append([]string{liar}, want...))); !slices.Equal(got, all) {
		t.Fatalf("peer tools %q, want %q and %q", got, liar, want)
	}
	// A result that is not what the output schema declares is a tool
	// error, not structured content a client would reject.
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: liar, Arguments: map[string]any{}}); err != nil || !res.IsError ||
		!strings.Contains(res.Content[0].(*mcp.TextContent).Text, "not the JSON object its output_schema declares") {
		t.Errorf("a peer result against its output schema: %v %+v", err, res)
	}
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err == nil && tl.Name == want[0] && (len(tl.Description) > MaxPeerDesc+600 ||
			!strings.Contains(tl.Description, Quote("peerAAAAAAAA", strings.Repeat("d", 5000), MaxPeerDesc))) {
			t.Errorf("a 5000-byte description became a %d-byte one, not quoted and cut to %d: %q", len(tl.Description), MaxPeerDesc, tl.Description)
		}
	}
	// A non-object schema is wrapped as params, and unwrapped on the way.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: want[1], Arguments: map[string]any{"params": "hello"}})
	if err != nil || res.IsError {
		t.Fatalf("calling %s: %v %+v", want[1], err, res)
	}
	if got := f.invoked[len(f.invoked)-1]; got.Capability != "ok.string" || string(got.Params) != `"hello"` {
		t.Errorf("invoked %+v", got)
	}
	res, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: want[1], Arguments: map[string]any{"text": "hello"}})
	if res == nil || !res.IsError {
		t.Errorf("calling %s without params: %+v", want[1], res)
	}

	// A view that drops a capability drops its tool.
	f.views["peerAAAAAAAA"] = view("peerAAAAAAAA", negotiate.Capability{Name: "ok.string", Parameters: map[string]any{"type": "string"}})
	s.peers.sync(context.Background(), "peerAAAAAAAA")
	if got := toolNames(t, cs); !slices.Equal(got, want[1:]) {
		t.Errorf("after the change: %q, want %q", got, want[1:])
	}
}

// TestPeerToolsAreCapped: many peers with many capabilities make at most
// MaxToolsPerPeer tools each and MaxPeerTools in all.
func TestPeerToolsAreCapped(t *testing.T) {
	f := &fakeDaemon{views: map[string]*api.PeerCaps{}}
	for p := range 6 {
		id := fmt.Sprintf("peer%08d", p)
		var caps []negotiate.Capability
		for c := range 40 {
			caps = append(caps, negotiate.Capability{Name: fmt.Sprintf("cap.n%d", c)})
		}
		f.views[id] = view(id, caps...)
		f.pin(id)
	}
	s := New(f, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	cs := connect(t, s)
	s.peers.syncAll(context.Background())
	got := toolNames(t, cs)
	if len(got) != MaxPeerTools {
		t.Fatalf("%d peer tools, want %d", len(got), MaxPeerTools)
	}
	per := map[string]int{}
	for _, n := range got {
		per[strings.TrimPrefix(n[:strings.Index(n, "__")], "peer_")]++
	}
	for p, n := range per {
		if n > MaxToolsPerPeer {
			t.Errorf("peer …%s has %d tools, over %d", p, n, MaxToolsPerPeer)
		}
	}
	// A peer whose view empties gives its room to others on their next sync.
	for id := range f.views {
		if per[id[len(id)-8:]] > 0 {
			f.views[id] = view(id)
			s.peers.sync(context.Background(), id)
			break
		}
	}
	if n := len(toolNames(t, cs)); n != MaxPeerTools-MaxToolsPerPeer {
		t.Errorf("after one peer emptied: %d tools", n)
	}
}

// TestInboxKeepsTheLatest: read_messages holds the last InboxSize
// messages, texts cut to 8 KiB, and says how many a late reader missed.
func TestInboxKeepsTheLatest(t *testing.T) {
	b := newInbox(InboxSize)
	for i := range InboxSize + 44 {
		m := &gossip.Message{Headers: gossip.Headers{ConversationID: "conv:a", Phase: gossip.PhaseContext, Sequence: int64(i)},
			Body: gossip.Body{Text: fmt.Sprintf("m%d %s", i, strings.Repeat("é", MaxPeerText))}}
		b.add(events.Event{Type: events.EventMessage, At: time.Unix(int64(i), 0), Peer: "12D3KooWppppppp1", Message: m})
	}
	msgs, missed, next, _ := b.since(0, "", 1000)
	quoted := regexp.MustCompile(`^Peer …ppppppp1 wrote: «(.*)» \(quoted, untrusted\)$`)
	first := quoted.FindStringSubmatch(msgs[0].Text)
	if len(msgs) != InboxSize || missed != 44 || next != InboxSize+44 || first == nil || !strings.HasPrefix(first[1], "m44 ") {
		t.Fatalf("since 0: %d messages from %.40q, missed %d, next %d", len(msgs), msgs[0].Text, missed, next)
	}
	if m := msgs[0]; len(first[1]) > MaxPeerText || !m.TextCut || !strings.HasSuffix(first[1], "é…") {
		t.Errorf("a long text kept as %d bytes (cut %v), ending %q", len(first[1]), m.TextCut, first[1][len(first[1])-5:])
	}
	msgs, missed, next, _ = b.since(next-2, "", 1)
	if len(msgs) != 1 || missed != 0 || next != InboxSize+43 {
		t.Errorf("since next-2, limit 1: %d messages, missed %d, next %d", len(msgs), missed, next)
	}
	if msgs, _, _, _ = b.since(0, "conv:other", 10); len(msgs) != 0 {
		t.Errorf("another conversation's filter returned %d", len(msgs))
	}
}
