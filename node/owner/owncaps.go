package owner

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
)

// Capabilities owns where the owner's capabilities come from, and the
// owner's changes to them at run time:
//
//   - config.toml's [[capabilities]] (OriginConfig), read at start;
//   - the owner's run-time changes, `caps add` and `caps remove` through
//     the control API (OriginRuntime): a layer over the config — the
//     config's capabilities less the ones removed, plus the ones added —
//     kept in the store (store.RuntimeCapabilities) in the same
//     transaction as the document they made, and laid over the config
//     again at every start;
//   - the MCP server's tools when one is the local agent (OriginMCP,
//     node/mcpagent), merged after the layer at start and whenever the
//     server's tool list changes. They are never kept as run-time changes:
//     the server lists them again at every start.
//
// Decisions:
//   - The layer is kept in the store, like the policy's run-time changes
//     (PolicyBook), not written into config.toml: the daemon never
//     rewrites the owner's file (comments, order), and a change made with
//     `caps add` and one made in the file stay told apart. The store is
//     also where the document's seq is: one transaction keeps both, so a
//     restart brings back the document the seq was given to.
//   - The config wins over the layer when they meet: a capability added
//     at run time whose name config.toml has since been given is dropped
//     from the layer at start (logged), and a removal of a capability the
//     config no longer has is forgotten. Removing a config capability and
//     adding one of the same name replaces it, across restarts too.
//   - A capability added at run time that no longer validates at start
//     (config.toml changed the tiers it names) is left out of the document
//     but kept in the store, logged and listed by Origins with its
//     problem, so fixing the config brings it back; `caps remove NAME`
//     forgets it.
//   - An MCP tool cannot be removed with `caps remove`: it would come back
//     with the next tool list. The owner restricts it in
//     [agent.mcp.tools.<tool>] instead, which the refusal says.
//   - Node.UpdateDocument (the MCP agent's path, and programs embedding
//     the daemon) changes the document without touching the layer: what
//     it adds is OriginUnsaved unless it is an MCP tool.
type Capabilities struct {
	docs  *Document
	store runtimeCapsStore
	log   *slog.Logger
	// tools reports whether the MCP server offers a capability; never
	// true without one.
	tools func(name string) bool

	mu      sync.Mutex // one run-time change at a time; guards what follows
	config  map[string]bool
	rc      store.RuntimeCapabilities
	leftOut []LeftOutCapability
}

// runtimeCapsStore reads the run-time changes; documents writes them.
type runtimeCapsStore interface {
	RuntimeCapabilities() (store.RuntimeCapabilities, error)
}

var _ runtimeCapsStore = (*store.Own)(nil)

// Where a capability of the owner's document comes from (OwnCapabilities).
const (
	OriginConfig  = "config"  // config.toml's [[capabilities]]
	OriginRuntime = "runtime" // added with caps add; kept across restarts
	OriginMCP     = "mcp"     // a tool of the MCP server ([agent.mcp]); listed again at every start
	OriginUnsaved = "unsaved" // changed through Node.UpdateDocument by a program; not kept across restarts
)

// CapabilityOrigin is where one capability of the document comes from.
type CapabilityOrigin struct {
	Name   string `json:"name"`
	Origin string `json:"origin"`
}

// LeftOutCapability is a capability added at run time and kept, that the
// document does not hold because it no longer validates.
type LeftOutCapability struct {
	Name    string `json:"name"`
	Problem string `json:"problem"`
}

// Errors of run-time changes.
var (
	// ErrCapabilityExists: a capability of that name is in the document.
	ErrCapabilityExists = errors.New("a capability of that name is already in the document")
	// ErrNoCapability: no capability of that name in the document.
	ErrNoCapability = errors.New("no capability of that name in the document")
	// ErrMCPTool: the capability is a tool of the MCP server.
	ErrMCPTool = errors.New("the capability is a tool of the MCP server")
)

func newOwnCapabilities(docs *Document, st runtimeCapsStore, log *slog.Logger, tools func(string) bool) *Capabilities {
	return &Capabilities{docs: docs, store: st, log: log, tools: tools}
}

// layer lays the stored run-time changes over doc, the document built
// from the config (before the MCP server's tools are merged). When the
// config overtook some of them, it returns the changes as they are to be
// stored with the document, without those; otherwise nil.
func (o *Capabilities) layer(doc *negotiate.Document) (*store.RuntimeCapabilities, error) {
	rc, err := o.store.RuntimeCapabilities()
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.config = map[string]bool{}
	for _, c := range doc.Capabilities {
		o.config[c.Name] = true
	}
	var kept store.RuntimeCapabilities
	for _, name := range rc.Removed {
		if !o.config[name] {
			o.log.Info("a capability removed at run time is no longer in config.toml; forgetting its removal", "capability", name)
			continue
		}
		kept.Removed = append(kept.Removed, name)
		doc.Capabilities = slices.DeleteFunc(doc.Capabilities, func(c negotiate.Capability) bool { return c.Name == name })
	}
	for _, raw := range rc.Added {
		var c negotiate.Capability
		if err := negotiate.DecodeStrict(raw, negotiate.FormatJSON, "", &c); err != nil {
			o.log.Warn("a capability added at run time no longer decodes; it is left out", "capability", string(raw), "err", err)
			o.leftOut = append(o.leftOut, LeftOutCapability{Name: capabilityName(raw), Problem: err.Error()})
			kept.Added = append(kept.Added, raw)
			continue
		}
		if _, taken := doc.Capability(c.Name); taken {
			o.log.Warn("config.toml now has a capability added at run time; the config's is used and the run-time one forgotten", "capability", c.Name)
			continue
		}
		kept.Added = append(kept.Added, raw)
		next := *doc
		next.Capabilities = append(slices.Clone(doc.Capabilities), c)
		if err := next.Validate(o.docs.order); err != nil {
			o.log.Warn("a capability added at run time no longer validates; it is left out until the config allows it (caps remove forgets it)", "capability", c.Name, "err", err)
			o.leftOut = append(o.leftOut, LeftOutCapability{Name: c.Name, Problem: err.Error()})
			continue
		}
		doc.Capabilities = next.Capabilities
	}
	o.rc = kept
	if len(kept.Added) == len(rc.Added) && len(kept.Removed) == len(rc.Removed) {
		return nil, nil
	}
	return &kept, nil
}

// update changes the document through change, which also names the
// run-time changes to store with it (nil: none), then tells peers.
func (o *Capabilities) update(change func(*negotiate.Document) (*store.RuntimeCapabilities, error)) (*negotiate.Document, error) {
	return o.docs.change(change)
}

// Add adds capabilities to the document at run time, all or none, and
// keeps them across restarts. A name already in the document is
// ErrCapabilityExists; validation problems are *negotiate.FieldErrors
// whose fields name the capabilities as capabilities[i], i counted in
// caps (a problem elsewhere in the document is named as it is there).
func (o *Capabilities) Add(caps []negotiate.Capability) (*negotiate.Document, error) {
	raws := make([]json.RawMessage, len(caps))
	for i := range caps {
		raw, err := json.Marshal(caps[i])
		if err != nil {
			return nil, fmt.Errorf("adding capability %q: %w", caps[i].Name, err)
		}
		raws[i] = raw
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var next store.RuntimeCapabilities
	doc, err := o.update(func(d *negotiate.Document) (*store.RuntimeCapabilities, error) {
		for _, c := range caps {
			if _, ok := d.Capability(c.Name); ok && c.Name != "" {
				return nil, fmt.Errorf("adding capability %q: %w (remove it first to replace it)", c.Name, ErrCapabilityExists)
			}
		}
		// Before the MCP server's tools, where they are laid at start, so
		// that a restart makes the same document and keeps the seq.
		base := slices.IndexFunc(d.Capabilities, func(c negotiate.Capability) bool { return o.tools(c.Name) })
		if base < 0 {
			base = len(d.Capabilities)
		}
		d.Capabilities = slices.Insert(d.Capabilities, base, caps...)
		if err := d.Validate(o.docs.order); err != nil {
			return nil, renumber(err, base, len(caps))
		}
		next = o.rc
		next.Added = append(slices.Clone(o.rc.Added), raws...)
		return &next, nil
	})
	if err != nil {
		return nil, err
	}
	o.rc = next
	return doc, nil
}

// Remove removes a capability at run time and keeps it removed across
// restarts: one added at run time is forgotten, one of the config is
// recorded as removed. An MCP tool is ErrMCPTool; a name the document
// does not have (nor a left-out run-time capability) is ErrNoCapability.
func (o *Capabilities) Remove(name string) (*negotiate.Document, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	added := slices.IndexFunc(o.rc.Added, func(raw json.RawMessage) bool { return capabilityName(raw) == name })
	if i := slices.IndexFunc(o.leftOut, func(l LeftOutCapability) bool { return l.Name == name }); i >= 0 && added >= 0 {
		next := o.rc
		next.Added = slices.Delete(slices.Clone(o.rc.Added), added, added+1)
		if err := o.docs.store.SaveOwnDocumentWith(0, nil, next); err != nil {
			return nil, fmt.Errorf("removing capability %q: %w", name, err)
		}
		o.rc, o.leftOut = next, slices.Delete(o.leftOut, i, i+1)
		return o.docs.Current(), nil
	}
	if added < 0 && o.tools(name) {
		return nil, fmt.Errorf("removing capability %q: %w ([agent.mcp]), listed again at every start: restrict it with conditions or advertise = %q in [agent.mcp.tools.<tool>] instead",
			name, ErrMCPTool, negotiate.AdvertiseWhenEligible)
	}
	var next store.RuntimeCapabilities
	doc, err := o.update(func(d *negotiate.Document) (*store.RuntimeCapabilities, error) {
		i := slices.IndexFunc(d.Capabilities, func(c negotiate.Capability) bool { return c.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("removing capability %q: %w", name, ErrNoCapability)
		}
		d.Capabilities = slices.Delete(d.Capabilities, i, i+1)
		next = o.rc
		switch {
		case added >= 0:
			next.Added = slices.Delete(slices.Clone(o.rc.Added), added, added+1)
		case o.config[name] && !slices.Contains(o.rc.Removed, name):
			next.Removed = append(slices.Clone(o.rc.Removed), name)
		default:
			return nil, nil // an unsaved one: nothing to keep
		}
		return &next, nil
	})
	if err != nil {
		return nil, err
	}
	o.rc = next
	return doc, nil
}

// Origins is the current document with where each of its capabilities
// comes from, the config's capabilities removed at run time, and the
// run-time ones left out.
func (o *Capabilities) Origins() (*negotiate.Document, []CapabilityOrigin, []string, []LeftOutCapability) {
	o.mu.Lock()
	defer o.mu.Unlock()
	doc := o.docs.Current()
	added := map[string]bool{}
	for _, raw := range o.rc.Added {
		added[capabilityName(raw)] = true
	}
	origins := make([]CapabilityOrigin, 0, len(doc.Capabilities))
	for _, c := range doc.Capabilities {
		origin := OriginUnsaved
		switch {
		case added[c.Name]:
			origin = OriginRuntime
		case o.config[c.Name] && !slices.Contains(o.rc.Removed, c.Name):
			origin = OriginConfig
		case o.tools(c.Name):
			origin = OriginMCP
		}
		origins = append(origins, CapabilityOrigin{Name: c.Name, Origin: origin})
	}
	return doc, origins, slices.Clone(o.rc.Removed), slices.Clone(o.leftOut)
}

// renumber renames capabilities[base+i] (i < n) in the fields of err's
// *negotiate.FieldErrors to capabilities[i].
func renumber(err error, base, n int) error {
	for _, e := range negotiate.Errors(err) {
		var fe *negotiate.FieldError
		if !errors.As(e, &fe) {
			continue
		}
		rest, ok := strings.CutPrefix(fe.Field, "capabilities[")
		if !ok {
			continue
		}
		num, after, ok := strings.Cut(rest, "]")
		if i, err := strconv.Atoi(num); ok && err == nil && i >= base && i < base+n {
			fe.Field = fmt.Sprintf("capabilities[%d]%s", i-base, after)
		}
	}
	return err
}

// capabilityName is the name of a stored capability ("" when it does not
// decode).
func capabilityName(raw json.RawMessage) string {
	var c struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.Name
}
