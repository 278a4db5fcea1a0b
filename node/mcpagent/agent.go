// Package mcpagent makes an MCP server the daemon's local agent
// ([agent.mcp] in the config). The daemon is the server's MCP client,
// built on the official Go SDK: it starts the server as a program speaking
// MCP on its stdio (CommandTransport), or reaches it at a streamable-HTTP
// URL.
//
// The server's tools/list becomes capabilities of the owner's document:
// each tool's name mapped to dot notation (CapabilityName, or the name an
// overlay gives), its description, inputSchema as parameters and
// outputSchema as output_schema; conditions, price, categories, tags and
// advertise come from the owner's overlay for that tool, or from the
// default overlay. A tool with neither is held back (fail closed): it is
// no capability, so no peer, HTTP caller or projection sees it, and the
// agent logs which tools are held back and how to offer them, at start
// and whenever the tool list changes. A tool that
// cannot become a capability — a name with no mapping, a name another tool
// or the config already has, a schema that does not compile, more tools
// than a document holds — is left out with a log line naming it, and the
// others stay.
//
// A tools/list_changed notification makes the agent list the tools again;
// when the capabilities it makes differ, the document is changed through
// the daemon's one path for owner changes (Node.UpdateDocument): a new seq,
// signed, pushed to every peer in conversation, announced.
//
// An invocation the daemon admitted (conditions, parameter schema,
// workload: node's invoker) becomes tools/call. A tool that declares an
// outputSchema answers with its structuredContent, which the invoker then
// checks against output_schema; any other tool answers with the MCP result
// object ({"content": [...]} and structuredContent when present). A tool
// error (isError, or a JSON-RPC error) is agent_error carrying the server's
// message; no answer within agent.timeout is agent_timeout; a server that
// is not running (it exited, or its connection broke) is agent_unavailable.
//
// Decisions:
//   - A server that cannot be started, or does not list its tools within
//     agent.timeout, stops the daemon from starting: the owner hears of it
//     at once, with the reason.
//   - A server that exits later keeps its tools in the document (they are
//     the owner's offer, and a restart should not churn every peer's
//     view); requests get agent_unavailable until the next request starts
//     it again, at most once per restartEvery.
//   - What reaches a peer is the server's own message, never the command
//     line, URL or local errors, which go to the log.
//   - A server on stdio gets only the environment the config names
//     (Config.ChildEnv: inherit_env, by default PATH, HOME, LANG and
//     TMPDIR, then env), never the daemon's whole environment.
//   - Bounds: at most negotiate.MaxCapabilities tools over at most maxPages
//     pages of tools/list; a result of at most maxResult bytes; a server's
//     own message cut to maxMessage bytes; stdio frames are bounded by the
//     SDK (16 MiB a line), streamable-HTTP events by maxEvent.
package mcpagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	maxPages     = 32              // tools/list pages read at most
	maxResult    = 1 << 20         // bytes of one tool result, like any agent answer
	maxMessage   = 1024            // bytes of a server's message passed on
	maxEvent     = 4 << 20         // bytes of one server-sent event (streamable HTTP)
	maxLogLine   = 4096            // bytes of one stderr line logged
	restartEvery = 5 * time.Second // at most one restart of an exited server this often
	terminate    = 2 * time.Second // after closing stdin, before SIGTERM
)

// ErrStart: the MCP server could not be started, or did not list its
// tools in time.
var ErrStart = errors.New("starting the MCP server")

// Updater changes the owner's document the way every owner change does
// (Node.UpdateDocument).
type Updater func(change func(*negotiate.Document) error) (*negotiate.Document, error)

// Agent is an MCP server acting as the local agent: its client session,
// the table of tools it offers as capabilities, and the loop that follows
// tool-list changes.
type Agent struct {
	cfg     Config
	order   *conditions.TierOrder
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
	client  *mcp.Client
	// httpClient reaches a streamable-HTTP server; its own transport, so
	// Close can drop its idle connections.
	httpClient *http.Client

	changed chan struct{} // a tool-list change waits to be read (coalesced)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	connMu sync.Mutex // one start of the server at a time

	mu        sync.Mutex
	session   *mcp.ClientSession // nil while the server is not running
	lastStart time.Time
	tools     map[string]tool        // offered, by capability name
	listed    []negotiate.Capability // made of the last tools/list, before merging
	held      []string               // tools of the last tools/list held back: no overlay says how to offer them
	offered   []negotiate.Capability // as they are in the document
	update    Updater
	closed    bool
}

// tool is one offered tool: its MCP name, and whether it declared an
// output schema (then its structured content is the result).
type tool struct {
	name       string
	structured bool
}

// New returns an agent for cfg (validated), not yet started. timeout is
// agent.timeout: the bound on starting the server and listing its tools.
func New(cfg Config, order *conditions.TierOrder, timeout time.Duration, log *slog.Logger) *Agent {
	a := &Agent{cfg: cfg, order: order, timeout: timeout, log: log, now: time.Now,
		changed: make(chan struct{}, 1), tools: map[string]tool{},
		httpClient: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.client = mcp.NewClient(&mcp.Implementation{Name: "ifaced", Version: "1"}, &mcp.ClientOptions{
		Logger:                 log,
		Capabilities:           &mcp.ClientCapabilities{}, // no roots, sampling or elicitation
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { a.toolsChanged() },
	})
	return a
}

// Start starts the server, lists its tools, and puts the capabilities they
// make into doc (the owner's document before it is first signed). The
// error wraps ErrStart.
func (a *Agent) Start(ctx context.Context, doc *negotiate.Document) error {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	cs, err := a.connect(ctx)
	if err != nil {
		return err
	}
	caps, tools, held, err := a.list(ctx, cs)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStart, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.listed, a.held = caps, held
	a.offered, a.tools = a.merge(doc, caps, tools, nil)
	a.log.Info("MCP server is the local agent", "tools", len(a.offered))
	a.logHeld(held)
	return nil
}

// errHeldBack: a tool has no overlay of its own and there is no default.
var errHeldBack = errors.New("no overlay says how to offer it")

// logHeld says which tools are held back and how to offer them.
func (a *Agent) logHeld(held []string) {
	if len(held) == 0 {
		return
	}
	a.log.Warn("MCP tools held back: no overlay says how to offer them, so no peer or HTTP caller sees them",
		"tools", strings.Join(held, ","),
		"how", "add [agent.mcp.default] with the conditions for every tool without an overlay (e.g. conditions = { min_auth_level = 2 }), "+
			"or [agent.mcp.tools.<tool>] for one tool; an empty table offers a tool to everyone")
}

// Follow makes later tool-list changes go through update, from now on.
func (a *Agent) Follow(update Updater) {
	a.mu.Lock()
	a.update = update
	a.mu.Unlock()
	a.wg.Add(1)
	go a.followLoop()
}

// Handles reports whether capability is one of the server's tools.
func (a *Agent) Handles(capability string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.tools[capability]
	return ok
}

// Tool returns the MCP name of the tool offered as capability.
func (a *Agent) Tool(capability string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.tools[capability]
	return t.name, ok
}

// Close ends the session (and with it a server on stdio) and the loop. A
// server that exits uncleanly on the way is logged, not an error of the
// daemon's shutdown.
func (a *Agent) Close() error {
	a.mu.Lock()
	a.closed = true
	cs := a.session
	a.session = nil
	a.mu.Unlock()
	a.cancel()
	if cs != nil {
		if err := cs.Close(); err != nil {
			a.log.Info("closing the MCP server", "err", err)
		}
	}
	a.wg.Wait()
	a.httpClient.CloseIdleConnections()
	return nil
}

// transport is a new transport for the configured server (an exec.Cmd
// runs once, so each start needs its own).
func (a *Agent) transport() mcp.Transport {
	if !a.cfg.Stdio() {
		return &mcp.StreamableClientTransport{Endpoint: a.cfg.URL, MaxEventSize: maxEvent, HTTPClient: a.httpClient}
	}
	cmd := exec.Command(a.cfg.Command, a.cfg.Args...)
	cmd.Env = a.cfg.ChildEnv(os.LookupEnv)
	cmd.Dir = a.cfg.Dir
	cmd.Stderr = &stderrLog{log: a.log}
	cmd.WaitDelay = terminate
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: terminate}
}

// connect starts the server and opens a session, and watches it: when the
// server exits or the connection breaks, the session is dropped.
func (a *Agent) connect(ctx context.Context) (*mcp.ClientSession, error) {
	a.mu.Lock()
	a.lastStart = a.now()
	a.mu.Unlock()
	cs, err := a.client.Connect(ctx, a.transport(), nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: no answer to initialize within agent.timeout (%s)", ErrStart, a.timeout)
		}
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		cs.Close()
		return nil, fmt.Errorf("%w: the daemon is closing", ErrStart)
	}
	a.session = cs
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		a.forget(cs, cs.Wait())
	}()
	return cs, nil
}

// forget drops session cs, when it is the current one, and closes it:
// the next request starts the server again.
func (a *Agent) forget(cs *mcp.ClientSession, why error) {
	a.mu.Lock()
	mine := a.session == cs
	if mine {
		a.session = nil
	}
	a.mu.Unlock()
	if mine {
		a.log.Warn("the MCP server stopped; requests get agent_unavailable until it is started again", "err", why)
	}
	cs.Close()
}

// running returns the session, starting the server again when it stopped
// and restartEvery has passed since the last start.
func (a *Agent) running(ctx context.Context) (*mcp.ClientSession, error) {
	a.connMu.Lock()
	defer a.connMu.Unlock()
	a.mu.Lock()
	cs, last := a.session, a.lastStart
	a.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	if a.now().Sub(last) < restartEvery {
		return nil, fmt.Errorf("%w: the MCP server is not running", wire.ErrAgentUnavailable)
	}
	cs, err := a.connect(ctx)
	if err != nil {
		a.log.Warn("starting the MCP server again", "err", err)
		return nil, fmt.Errorf("%w: the MCP server is not running", wire.ErrAgentUnavailable)
	}
	a.log.Info("started the MCP server again")
	a.toolsChanged() // it may list other tools now
	return cs, nil
}

// toolsChanged asks the loop to list the tools again.
func (a *Agent) toolsChanged() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

func (a *Agent) followLoop() {
	defer a.wg.Done()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.changed:
			if err := a.refresh(); err != nil {
				a.log.Warn("following the MCP server's tool list", "err", err)
			}
		}
	}
}

// refresh lists the tools again and, when the capabilities they make
// differ from those offered, changes the document.
func (a *Agent) refresh() error {
	ctx, cancel := context.WithTimeout(a.ctx, a.timeout)
	defer cancel()
	a.mu.Lock()
	cs, update := a.session, a.update
	a.mu.Unlock()
	if cs == nil {
		return nil // listed again when it starts again
	}
	caps, tools, held, err := a.list(ctx, cs)
	if err != nil {
		return err
	}
	a.mu.Lock()
	same := reflect.DeepEqual(caps, a.listed)
	sameHeld := slices.Equal(held, a.held)
	prev := a.offered
	a.held = held
	a.mu.Unlock()
	if !same || !sameHeld {
		a.logHeld(held)
	}
	if same {
		return nil
	}
	a.mu.Lock()
	oldListed, oldTools := a.listed, a.tools
	a.mu.Unlock()
	var offered []negotiate.Capability
	doc, err := update(func(d *negotiate.Document) error {
		var table map[string]tool
		offered, table = a.merge(d, caps, tools, prev)
		// The table is this agent's before the document is published:
		// once a peer or the owner sees the new tool, invoking it and
		// asking where it comes from must find it (the document's event
		// went out while the old table still stood).
		a.mu.Lock()
		a.listed, a.offered, a.tools = caps, offered, table
		a.mu.Unlock()
		return nil
	})
	if err != nil {
		a.mu.Lock()
		a.listed, a.offered, a.tools = oldListed, prev, oldTools
		a.mu.Unlock()
		return fmt.Errorf("changing the document: %w", err)
	}
	a.log.Info("the MCP server's tools changed", "tools", len(offered), "seq", doc.Seq)
	return nil
}

// list reads the server's tools (at most maxPages pages) and makes each
// a capability; a tool that cannot be one is left out and logged, and a
// tool no overlay covers is held back (returned by its MCP name, logged by
// the caller).
func (a *Agent) list(ctx context.Context, cs *mcp.ClientSession) (_ []negotiate.Capability, _ map[string]tool, held []string, _ error) {
	var all []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for page := 0; ; page++ {
		if page == maxPages {
			a.log.Warn("the MCP server's tool list has more pages than are read; the rest are left out", "pages", maxPages)
			break
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, nil, fmt.Errorf("tools/list: no answer within agent.timeout (%s)", a.timeout)
			}
			return nil, nil, nil, fmt.Errorf("tools/list: %w", err)
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" || len(all) > negotiate.MaxCapabilities {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	var caps []negotiate.Capability
	tools := map[string]tool{}
	for _, t := range all {
		if t == nil {
			continue
		}
		if len(caps) == negotiate.MaxCapabilities {
			a.log.Warn("MCP tool left out", "tool", t.Name, "reason", fmt.Sprintf("a document holds at most %d capabilities", negotiate.MaxCapabilities))
			continue
		}
		c, err := a.capability(t)
		if errors.Is(err, errHeldBack) {
			held = append(held, t.Name)
			continue
		}
		if err != nil {
			a.log.Warn("MCP tool left out", "tool", t.Name, "reason", err)
			continue
		}
		if _, dup := tools[c.Name]; dup {
			a.log.Warn("MCP tool left out", "tool", t.Name, "reason", fmt.Sprintf("tool %q already has the capability name %q; give one of them agent.mcp.tools.<tool>.name", tools[c.Name].name, c.Name))
			continue
		}
		tools[c.Name] = tool{name: t.Name, structured: t.OutputSchema != nil}
		caps = append(caps, *c)
	}
	return caps, tools, held, nil
}

// capability makes tool t a capability under its overlay.
func (a *Agent) capability(t *mcp.Tool) (*negotiate.Capability, error) {
	o, ok := a.cfg.Tools[t.Name]
	if !ok {
		if a.cfg.Default == nil {
			return nil, errHeldBack
		}
		o = *a.cfg.Default
	}
	name := o.Name
	if name == "" {
		var err error
		if name, err = CapabilityName(a.cfg.Prefix, t.Name); err != nil {
			return nil, err
		}
	}
	desc := cmpOr(t.Description, t.Title, "MCP tool "+t.Name)
	desc = truncate(desc, negotiate.MaxDescriptionLen)
	input, err := plain(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("inputSchema: %v", err)
	}
	output, err := plain(t.OutputSchema)
	if err != nil {
		return nil, fmt.Errorf("outputSchema: %v", err)
	}
	c, err := capability(name, desc, input, output, &o, a.order)
	if err != nil {
		var problems []string
		for _, e := range negotiate.Errors(err) {
			s := e.Error()
			s = strings.Replace(s, "capabilities[0].parameters", "inputSchema", 1)
			s = strings.Replace(s, "capabilities[0].output_schema", "outputSchema", 1)
			problems = append(problems, s)
		}
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return c, nil
}

// merge puts caps into d in place of prev (the capabilities this agent
// put there before), leaving out any whose name d already has. It returns
// the capabilities put in and their table.
func (a *Agent) merge(d *negotiate.Document, caps []negotiate.Capability, tools map[string]tool, prev []negotiate.Capability) ([]negotiate.Capability, map[string]tool) {
	d.Capabilities = slices.DeleteFunc(d.Capabilities, func(c negotiate.Capability) bool {
		return slices.ContainsFunc(prev, func(p negotiate.Capability) bool { return p.Name == c.Name })
	})
	var offered []negotiate.Capability
	table := map[string]tool{}
	for _, c := range caps {
		if _, taken := d.Capability(c.Name); taken {
			a.log.Warn("MCP tool left out", "tool", tools[c.Name].name, "reason", fmt.Sprintf("the document already has a capability named %q; give the tool agent.mcp.tools.<tool>.name", c.Name))
			continue
		}
		if len(d.Capabilities) == negotiate.MaxCapabilities {
			a.log.Warn("MCP tool left out", "tool", tools[c.Name].name, "reason", fmt.Sprintf("a document holds at most %d capabilities", negotiate.MaxCapabilities))
			continue
		}
		d.Capabilities = append(d.Capabilities, c)
		offered = append(offered, c)
		table[c.Name] = tools[c.Name]
	}
	return offered, table
}

// Call runs the tool offered as capability with params (validated against
// its parameters by the daemon) and returns its result. Errors wrap
// wire.ErrAgentFailed, wire.ErrAgentTimeout or wire.ErrAgentUnavailable.
func (a *Agent) Call(ctx context.Context, capability string, params any) (any, error) {
	a.mu.Lock()
	t, ok := a.tools[capability]
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: the MCP server no longer offers %s", wire.ErrAgentUnavailable, capability)
	}
	cs, err := a.running(ctx)
	if err != nil {
		return nil, err
	}
	if params == nil {
		params = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: t.name, Arguments: params})
	var rpcErr *jsonrpc.Error
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: the MCP server did not answer tools/call %q in time", wire.ErrAgentTimeout, t.name)
	case errors.As(err, &rpcErr):
		return nil, fmt.Errorf("%w: the MCP server refused tools/call %q: %s", wire.ErrAgentFailed, t.name, truncate(rpcErr.Message, maxMessage))
	case errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		a.forget(cs, err)
		return nil, fmt.Errorf("%w: the MCP server stopped during tools/call %q", wire.ErrAgentUnavailable, t.name)
	default:
		// Not the server's own words: transport and decoding errors may
		// name local addresses, so they stay in the log.
		a.log.Warn("tools/call failed", "tool", t.name, "err", err)
		return nil, fmt.Errorf("%w: tools/call %q failed: the MCP server's answer could not be read (the owner's log has the details)", wire.ErrAgentFailed, t.name)
	}
	if res.IsError {
		return nil, fmt.Errorf("%w: tool %q failed: %s", wire.ErrAgentFailed, t.name, truncate(contentText(res.Content), maxMessage))
	}
	var out any = res
	if t.structured {
		if res.StructuredContent == nil {
			return nil, fmt.Errorf("%w: tool %q declares an output schema but returned no structured content", wire.ErrAgentFailed, t.name)
		}
		out = res.StructuredContent
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q returned a result with no JSON form: %v", wire.ErrAgentFailed, t.name, err)
	}
	if len(raw) > maxResult {
		return nil, fmt.Errorf("%w: tool %q returned %d bytes, over %d", wire.ErrAgentFailed, t.name, len(raw), maxResult)
	}
	var result any
	if err := json.Unmarshal(raw, &result); err != nil {
		return nil, fmt.Errorf("%w: tool %q: %v", wire.ErrAgentFailed, t.name, err)
	}
	if m, ok := result.(map[string]any); ok && !t.structured {
		delete(m, "isError")
		delete(m, "_meta")
	}
	return result, nil
}

// contentText is the text of a tool's content, for an error message.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "(no text)"
	}
	return strings.Join(parts, " ")
}

// plain turns a schema as the SDK decoded it into plain JSON values (nil
// for none).
func plain(schema any) (any, error) {
	if schema == nil {
		return nil, nil
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

func cmpOr(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// stderrLog logs what a server on stdio writes to its stderr, a line at a
// time, each cut to maxLogLine bytes.
type stderrLog struct {
	log *slog.Logger
	buf []byte
}

func (w *stderrLog) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := slices.Index(p, '\n')
		if i < 0 {
			room := maxLogLine - len(w.buf)
			w.buf = append(w.buf, p[:min(len(p), max(room, 0))]...)
			return n, nil
		}
		room := maxLogLine - len(w.buf)
		w.buf = append(w.buf, p[:min(i, max(room, 0))]...)
		w.log.Info("MCP server", "stderr", string(w.buf))
		w.buf = w.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

var _ io.Writer = (*stderrLog)(nil)
