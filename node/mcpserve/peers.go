package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// peerTools keeps one tool per eligible capability of each cached peer,
// within MaxPeerTools and MaxToolsPerPeer.
type peerTools struct {
	srv *mcp.Server
	d   Daemon
	log *slog.Logger

	mu     sync.Mutex
	byPeer map[string][]string // peer ID → its tools' names
	total  int
}

func newPeerTools(srv *mcp.Server, d Daemon, log *slog.Logger) *peerTools {
	return &peerTools{srv: srv, d: d, log: log, byPeer: map[string][]string{}}
}

// syncAll brings every cached peer's tools up to date.
func (p *peerTools) syncAll(ctx context.Context) {
	peers, err := p.d.Peers(ctx)
	if err != nil {
		p.log.Warn("listing peers for their tools", "err", err)
		return
	}
	for _, pr := range peers {
		if pr.Cached {
			p.sync(ctx, pr.PeerID)
		}
	}
}

// sync replaces a peer's tools with those of its cached view.
func (p *peerTools) sync(ctx context.Context, peerID string) {
	pc, err := p.d.PeerCapabilities(ctx, peerID, false)
	if err != nil {
		p.log.Warn("reading a peer's view for its tools", "peer", peerID, "err", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.byPeer[peerID]; len(old) > 0 {
		p.srv.RemoveTools(old...)
		p.total -= len(old)
		delete(p.byPeer, peerID)
	}
	if pc.View == nil {
		return
	}
	var names []string
	for _, c := range pc.View.Capabilities {
		if c.Eligible == nil || !*c.Eligible {
			continue
		}
		if len(names) == MaxToolsPerPeer || p.total == MaxPeerTools {
			p.log.Info("peer tool left out: too many tools", "peer", peerID, "capability", c.Name,
				"per_peer", MaxToolsPerPeer, "in_all", MaxPeerTools)
			continue
		}
		t, wrapped, err := capabilityTool(pc, c)
		if err == nil {
			err = p.add(t, p.handler(pc.PeerID, c.Name, wrapped, t.OutputSchema != nil))
		}
		if err != nil {
			p.log.Info("peer tool left out", "peer", peerID, "capability", c.Name, "err", err)
			continue
		}
		names = append(names, t.Name)
		p.total++
	}
	if len(names) > 0 {
		p.byPeer[peerID] = names
	}
}

// add registers t; the SDK panics on a schema it cannot take, which here
// is a stranger's schema, so that is an error.
func (p *peerTools) add(t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the MCP SDK refused the tool: %v", r)
		}
	}()
	p.srv.AddTool(t, h)
	return nil
}

// ToolName is the name of the tool for a peer's capability.
func ToolName(peerID, capability string) string {
	suffix := peerID
	if len(suffix) > 8 {
		suffix = suffix[len(suffix)-8:]
	}
	return capability + "__" + suffix
}

// capabilityTool describes a peer's capability as a tool; wrapped says
// its parameters are the params member of the arguments.
func capabilityTool(pc *api.PeerCaps, c negotiate.Capability) (t *mcp.Tool, wrapped bool, err error) {
	who := pc.PeerID
	if pc.Display != "" {
		who = fmt.Sprintf("%s (%s)", pc.Display, pc.PeerID)
	}
	desc := fmt.Sprintf("Run %s version %s on the peer %s. The peer describes it as: %q", c.Name, c.VersionOrDefault(), who,
		truncate(c.Description, maxDescBytes))
	if c.Price != nil {
		desc += fmt.Sprintf(" Price: %s %s per call.", c.Price.Amount, c.Price.Currency)
	}
	t = &mcp.Tool{Name: ToolName(pc.PeerID, c.Name), Title: c.Name + " on " + truncate(who, 120), Description: desc,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
		Meta:        mcp.Meta{"io.ifaced/peer": pc.PeerID, "io.ifaced/capability": c.Name}}
	in, err := boundedSchema("parameters", c.Parameters)
	if err != nil {
		return nil, false, err
	}
	switch {
	case in == nil:
		t.InputSchema = map[string]any{"type": "object"}
	case in["type"] == "object":
		t.InputSchema = in
	default:
		t.InputSchema = map[string]any{"type": "object", "required": []string{"params"},
			"properties": map[string]any{"params": in}}
		wrapped = true
	}
	out, err := boundedSchema("output_schema", c.OutputSchema)
	if err != nil {
		return nil, false, err
	}
	if out != nil && out["type"] == "object" {
		t.OutputSchema = out
	}
	return t, wrapped, nil
}

// boundedSchema is a peer's schema as a JSON object, refused when over
// maxSchemaBytes or not an object.
func boundedSchema(field string, v any) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if len(b) > maxSchemaBytes {
		return nil, fmt.Errorf("%s: %d bytes, over %d", field, len(b), maxSchemaBytes)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object", field)
	}
	return m, nil
}

// handler invokes the capability with the call's arguments as its
// parameters (or their params member, when the schema was wrapped).
func (p *peerTools) handler(peerID, capability string, wrapped, structured bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		params := req.Params.Arguments
		if wrapped {
			var w struct {
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(params, &w); err != nil || w.Params == nil {
				return toolError(fmt.Errorf("arguments: want an object with a params member (the value the peer's schema describes)")), nil
			}
			params = w.Params
		} else if len(params) == 0 || string(params) == "null" || string(params) == "{}" {
			params = nil
		}
		res, err := p.d.Invoke(ctx, api.InvokeRequest{Peer: peerID, Capability: capability, Params: params})
		if err != nil {
			return toolError(explain(err)), nil
		}
		b, err := json.Marshal(res.Result)
		if err != nil {
			return nil, fmt.Errorf("encoding the peer's result: %w", err)
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}},
			Meta: mcp.Meta{"io.ifaced/conversation_id": res.ConversationID, "io.ifaced/request_id": res.RequestID}}
		if structured {
			if _, ok := res.Result.(map[string]any); !ok {
				return toolError(fmt.Errorf("the peer's result is not the JSON object its output_schema declares: %s", truncate(string(b), 512))), nil
			}
			out.StructuredContent = json.RawMessage(b)
		}
		return out, nil
	}
}

func (p *peerTools) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, ns := range p.byPeer {
		out = append(out, ns...)
	}
	slices.Sort(out)
	return out
}

// toolOf returns the name of the tool for a peer's capability, "" when
// there is none.
func (p *peerTools) toolOf(peerID, capability string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	name := ToolName(peerID, capability)
	if slices.Contains(p.byPeer[peerID], name) {
		return name
	}
	return ""
}

func ptr[T any](v T) *T { return &v }
