// The interop projections: AG-UI (this file), the orchestrator actions
// contract and the merged GET /capabilities object (actions.go), the A2A
// agent card (a2a.go) and ACP tool categories (acp.go).
//
// Every projection is a pure function of a VIEW, never of the owner's
// document: the caller first computes d.View(facts, order) for the caller's
// facts and projects that. A capability hidden from the caller (advertise =
// "when-eligible" and not eligible) or limited to another persona is
// therefore absent before any projection runs, and no projection has a way
// to bring it back. As a second guard, the projections that list callable
// things (AG-UI tools, actions, A2A skills) take only capabilities whose
// Eligible is true, which a view sets and an owner's document never does:
// projecting an owner's document by mistake lists nothing rather than
// everything.
//
// None of these formats can say "not yet: meet these conditions first", so
// they list only what the caller may use now. The IFP-7 view itself (the
// well-known endpoint and the libp2p query) stays the place where
// ineligible capabilities are shown with their conditions.

package negotiate

import "strings"

// AGUIIdentity is what the daemon knows about the agent that a capability
// document does not hold: the IdentityCapabilities of AG-UI and the
// name/description of an A2A card and the orchestrator message come from it.
type AGUIIdentity struct {
	AgentID          string         // IFP agent id; the document's agent_id when empty
	DisplayName      string         // human-readable name (an IFP-10 name, say); AgentID when empty
	Type             string         // the platform powering the agent; "ifaced" when empty
	Description      string         // what the agent does
	Version          string         // the agent's own version
	Provider         string         // organization or person that runs it
	DocumentationURL string         // documentation or home page
	Metadata         map[string]any // extra identity members; agent_id is added
}

// AGUIAgentCapabilities is the AG-UI AgentCapabilities object (@ag-ui/core
// AgentCapabilitiesSchema) with its member names exactly. Absent means "not
// declared", so empty categories are omitted. The categories other than
// identity and tools are the owner's agui block as written.
type AGUIAgentCapabilities struct {
	Identity       *AGUIIdentityCapabilities `json:"identity,omitempty"`
	Transport      map[string]any            `json:"transport,omitempty"`
	Tools          *AGUIToolsCapabilities    `json:"tools,omitempty"`
	Output         map[string]any            `json:"output,omitempty"`
	State          map[string]any            `json:"state,omitempty"`
	MultiAgent     map[string]any            `json:"multiAgent,omitempty"`
	Reasoning      map[string]any            `json:"reasoning,omitempty"`
	Multimodal     map[string]any            `json:"multimodal,omitempty"`
	Execution      map[string]any            `json:"execution,omitempty"`
	HumanInTheLoop map[string]any            `json:"humanInTheLoop,omitempty"`
	Custom         map[string]any            `json:"custom,omitempty"`
}

// AGUIIdentityCapabilities is AG-UI's IdentityCapabilities.
type AGUIIdentityCapabilities struct {
	Name             string         `json:"name,omitempty"`
	Type             string         `json:"type,omitempty"`
	Description      string         `json:"description,omitempty"`
	Version          string         `json:"version,omitempty"`
	Provider         string         `json:"provider,omitempty"`
	DocumentationURL string         `json:"documentationUrl,omitempty"`
	Metadata         map[string]any `json:"metadata,omitempty"`
}

// AGUIToolsCapabilities is AG-UI's ToolsCapabilities. ifaced declares only
// supported and items: whether the agent calls tools in parallel or takes
// client-provided tools is the agent's business, not the daemon's.
type AGUIToolsCapabilities struct {
	Supported bool       `json:"supported"`
	Items     []AGUITool `json:"items"`
}

// AGUITool is the @ag-ui/core Tool: name, description, and the JSON Schema
// of its parameters. Metadata carries what AG-UI has no member for (ACP
// categories, tags, price).
type AGUITool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  any            `json:"parameters"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// AGUICapabilities projects the view d (see the file comment: never the
// owner's document) onto the AG-UI AgentCapabilities object served at
// GET /capabilities.
//
// tools.items lists the capabilities the caller may invoke now (Eligible
// true): AG-UI tools are what a client may call, and the format has no
// place for conditions. Without any, tools is omitted. identity comes from
// ident; the other categories from the document's agui block. The result
// shares the agui block's maps with d: treat it as read-only.
func (d *Document) AGUICapabilities(ident AGUIIdentity) *AGUIAgentCapabilities {
	out := &AGUIAgentCapabilities{Identity: aguiIdentity(d, ident)}
	if a := d.AGUI; a != nil {
		out.Transport, out.Output, out.State = nonEmpty(a.Transport), nonEmpty(a.Output), nonEmpty(a.State)
		out.MultiAgent, out.Reasoning, out.Multimodal = nonEmpty(a.MultiAgent), nonEmpty(a.Reasoning), nonEmpty(a.Multimodal)
		out.Execution, out.HumanInTheLoop, out.Custom = nonEmpty(a.Execution), nonEmpty(a.HumanInTheLoop), nonEmpty(a.Custom)
	}
	for _, c := range d.usable() {
		t := AGUITool{Name: c.Name, Description: c.Description, Parameters: inputSchema(c)}
		meta := map[string]any{}
		if len(c.Categories) > 0 {
			meta["categories"] = c.Categories
		}
		if len(c.Tags) > 0 {
			meta["tags"] = c.Tags
		}
		if c.Price != nil {
			meta["price"] = c.Price
		}
		if len(meta) > 0 {
			t.Metadata = meta
		}
		if out.Tools == nil {
			out.Tools = &AGUIToolsCapabilities{Supported: true}
		}
		out.Tools.Items = append(out.Tools.Items, t)
	}
	return out
}

func aguiIdentity(d *Document, ident AGUIIdentity) *AGUIIdentityCapabilities {
	id := &AGUIIdentityCapabilities{
		Name:             displayName(d, ident),
		Type:             ident.Type,
		Description:      ident.Description,
		Version:          ident.Version,
		Provider:         ident.Provider,
		DocumentationURL: ident.DocumentationURL,
	}
	if id.Type == "" {
		id.Type = "ifaced"
	}
	meta := make(map[string]any, len(ident.Metadata)+1)
	for k, val := range ident.Metadata {
		meta[k] = val
	}
	meta["agent_id"] = agentID(d, ident)
	id.Metadata = meta
	return id
}

// usable returns the capabilities of a view the requester may use now.
// An owner's document has no Eligible marks and yields nothing.
func (d *Document) usable() []*Capability {
	var out []*Capability
	for i := range d.Capabilities {
		if c := &d.Capabilities[i]; c.Eligible != nil && *c.Eligible {
			out = append(out, c)
		}
	}
	return out
}

// emptyObjectSchema is the input schema of a capability that declares no
// parameters: requests carry none (an empty object; see Schemas).
func emptyObjectSchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

// inputSchema is the JSON Schema of a capability's input as tool formats
// want it: the declared one, or an empty object schema.
func inputSchema(c *Capability) any {
	if c.Parameters == nil {
		return emptyObjectSchema()
	}
	return c.Parameters
}

func agentID(d *Document, ident AGUIIdentity) string {
	if ident.AgentID != "" {
		return ident.AgentID
	}
	return d.AgentID
}

func displayName(d *Document, ident AGUIIdentity) string {
	if ident.DisplayName != "" {
		return ident.DisplayName
	}
	return agentID(d, ident)
}

// summary is the description of an agent that has none: its name and the
// capabilities the caller may use now, for the LLM that routes to it.
func summary(name string, caps []*Capability) string {
	if len(caps) == 0 {
		return name + " offers you no capabilities at present."
	}
	var b strings.Builder
	b.WriteString(name)
	b.WriteString(" offers:")
	for i, c := range caps {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(" ")
		b.WriteString(c.Name)
		b.WriteString(" (")
		b.WriteString(strings.TrimRight(c.Description, ". "))
		b.WriteString(")")
	}
	b.WriteByte('.')
	return b.String()
}

func nonEmpty(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	return m
}
