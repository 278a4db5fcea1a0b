package mcpagent

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
)

// Config is the [agent.mcp] table: which MCP server is the local agent,
// and the owner's overlays that turn its tools into capabilities.
//
//	[agent.mcp]
//	command = "npx"                                   # stdio: a program and its arguments
//	args = ["-y", "@modelcontextprotocol/server-everything"]
//	# url = "http://127.0.0.1:3001/mcp"               # or a streamable-HTTP endpoint
//	prefix = "everything"                             # capability names start with "everything."
//
//	[agent.mcp.default]                               # tools without an overlay of their own
//	conditions = { min_auth_level = 2 }               # (without it, such a tool is not offered)
//
//	[agent.mcp.tools.get-sum]                         # keyed by the MCP tool name
//	name = "math.sum"
//	conditions = { min_disclosure = "professional", min_auth_level = 1 }
//	price = { amount = "0.01", currency = "USD" }
//	categories = ["custom:math"]
//	advertise = "when-eligible"
type Config struct {
	Command string   `toml:"command"` // stdio: the program to start (looked up on PATH)
	Args    []string `toml:"args"`    // its arguments
	Env     []string `toml:"env"`     // environment, KEY=value, on top of the variables inherited
	// InheritEnv names the daemon's environment variables the program
	// gets (those set); nil means DefaultInheritEnv, [] none. Nothing else
	// of the daemon's environment reaches it: the daemon may hold secrets
	// there.
	InheritEnv []string `toml:"inherit_env"`
	Dir        string   `toml:"dir"`    // its working directory; "" is the daemon's
	URL        string   `toml:"url"`    // streamable HTTP: the endpoint (instead of command)
	Prefix     string   `toml:"prefix"` // dot-notation prefix of every capability name; "" for none
	// Default is the overlay of every tool that has none in Tools. Unset
	// (nil), such a tool is not offered at all: it is held back, and the
	// agent logs which tools are and how to offer them (fail closed). An
	// empty [agent.mcp.default] table offers them to everyone.
	Default *Overlay `toml:"default"`
	// Tools are overlays by MCP tool name. An overlay replaces Default as a
	// whole for its tool (fields are not merged).
	Tools map[string]Overlay `toml:"tools"`
}

// Overlay is what the owner adds to a tool to make it a capability: the
// members an MCP tool does not have. Conditions are the capability's
// conditions object, decoded by package negotiate's strict rules.
type Overlay struct {
	Name        string         `toml:"name"`        // the capability name, instead of the mapped one (tools only)
	Description string         `toml:"description"` // instead of the tool's
	Version     string         `toml:"version"`
	Conditions  map[string]any `toml:"conditions"`
	Price       *Price         `toml:"price"`
	Categories  []string       `toml:"categories"` // ACP tool categories
	Tags        []string       `toml:"tags"`
	Advertise   string         `toml:"advertise"` // "always" (the default) or "when-eligible"
}

// Price is a capability's price per invocation.
type Price struct {
	Amount   string `toml:"amount"`
	Currency string `toml:"currency"`
}

// members returns the overlay as capability members.
func (o *Overlay) members() map[string]any {
	m := map[string]any{}
	if o.Description != "" {
		m["description"] = o.Description
	}
	if o.Version != "" {
		m["version"] = o.Version
	}
	if o.Conditions != nil {
		m["conditions"] = o.Conditions
	}
	if o.Price != nil {
		m["price"] = map[string]any{"amount": o.Price.Amount, "currency": o.Price.Currency}
	}
	if o.Categories != nil {
		m["categories"] = o.Categories
	}
	if o.Tags != nil {
		m["tags"] = o.Tags
	}
	if o.Advertise != "" {
		m["advertise"] = o.Advertise
	}
	return m
}

// Stdio reports whether the server is a program talking over stdio (else
// a streamable-HTTP URL).
func (c *Config) Stdio() bool { return c.Command != "" }

// DefaultInheritEnv are the daemon's environment variables a server on
// stdio gets when agent.mcp.inherit_env is not set: enough to find
// programs (npx, node, python) and a home, locale and temporary
// directory, and nothing that usually holds a secret.
var DefaultInheritEnv = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// ChildEnv is the environment of a server on stdio: the variables
// InheritEnv (or DefaultInheritEnv) names that lookup finds set, then
// Env, whose entries win over an inherited one of the same name. It is
// never nil, so an empty one is empty rather than the daemon's.
func (c *Config) ChildEnv(lookup func(string) (string, bool)) []string {
	names := c.InheritEnv
	if names == nil {
		names = DefaultInheritEnv
	}
	env := []string{}
	for _, k := range names {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, c.Env...)
}

// Validate checks the table under the owner's tier order; each problem is
// a *negotiate.FieldError naming its key under agent.mcp.
func (c *Config) Validate(order *conditions.TierOrder) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &negotiate.FieldError{Field: "agent.mcp" + field, Problem: fmt.Sprintf(format, args...)})
	}
	switch {
	case c.Command == "" && c.URL == "":
		bad("", "names no server: set command (and args) for a server on stdio, or url for a streamable-HTTP one")
	case c.Command != "" && c.URL != "":
		bad(".url", "is set beside command: name one server, either command (stdio) or url (streamable HTTP)")
	case c.URL != "":
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(".url", "%q is not an http(s) URL (e.g. \"http://127.0.0.1:3001/mcp\")", c.URL)
		}
		if len(c.Args) > 0 || len(c.Env) > 0 || c.InheritEnv != nil || c.Dir != "" {
			bad(".args", "args, env, inherit_env and dir go with command, not with url")
		}
	}
	for i, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			bad(fmt.Sprintf(".env[%d]", i), "%q is not KEY=value", kv)
		}
	}
	for i, k := range c.InheritEnv {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			bad(fmt.Sprintf(".inherit_env[%d]", i), "%q is not the name of an environment variable (e.g. \"PATH\"; set a value with env = [\"KEY=value\"])", k)
		}
	}
	if c.Prefix != "" {
		if err := negotiate.CheckName(c.Prefix); err != nil {
			bad(".prefix", "%v", err)
		}
	}
	if c.Default != nil {
		if c.Default.Name != "" {
			bad(".default.name", "a name belongs to one tool: set it under agent.mcp.tools.<tool>.name")
		}
		errs = append(errs, checkOverlay("agent.mcp.default", "", c.Default, order)...)
	}
	names := map[string]string{}
	for _, tool := range slices.Sorted(maps.Keys(c.Tools)) {
		o := c.Tools[tool]
		field := fmt.Sprintf("agent.mcp.tools.%s", tool)
		name := o.Name
		if name == "" {
			var err error
			if name, err = CapabilityName(c.Prefix, tool); err != nil {
				errs = append(errs, &negotiate.FieldError{Field: field, Problem: err.Error()})
				continue
			}
		} else if err := negotiate.CheckName(name); err != nil {
			errs = append(errs, &negotiate.FieldError{Field: field + ".name", Problem: err.Error()})
			continue
		}
		if other, dup := names[name]; dup {
			errs = append(errs, &negotiate.FieldError{Field: field, Problem: fmt.Sprintf("gives capability name %q, as tool %q does: set a different name", name, other)})
		}
		names[name] = tool
		errs = append(errs, checkOverlay(field, name, &o, order)...)
	}
	return errs
}

// checkOverlay validates o as the capability it would make, with a
// placeholder description, and renames the document's fields to field.
func checkOverlay(field, name string, o *Overlay, order *conditions.TierOrder) []error {
	if name == "" {
		name = "tool"
	}
	_, err := capability(name, "placeholder", nil, nil, o, order)
	var errs []error
	for _, e := range negotiate.Errors(err) {
		fe, ok := e.(*negotiate.FieldError)
		if !ok {
			errs = append(errs, &negotiate.FieldError{Field: field, Problem: e.Error()})
			continue
		}
		f := strings.TrimPrefix(strings.TrimPrefix(fe.Field, "capabilities[0]"), "capabilities/0")
		errs = append(errs, &negotiate.FieldError{Field: field + f, Problem: fe.Problem})
	}
	return errs
}

// capability builds and validates the capability a tool becomes: name,
// description, the tool's schemas, and the overlay's members. Every
// problem is a *negotiate.FieldError (fields under capabilities[0]).
func capability(name, description string, input, output any, o *Overlay, order *conditions.TierOrder) (*negotiate.Capability, error) {
	members := map[string]any{"name": name, "description": description}
	if input != nil {
		members["parameters"] = input
	}
	if output != nil {
		members["output_schema"] = output
	}
	maps.Copy(members, o.members())
	tree := map[string]any{"ifp": negotiate.Version, "agent_id": "did:key:placeholder", "seq": 1,
		"capabilities": []any{members}}
	var d negotiate.Document
	if err := negotiate.DecodeValue(tree, &d); err != nil {
		return nil, err
	}
	if err := d.Validate(order); err != nil {
		return nil, err
	}
	return &d.Capabilities[0], nil
}
