// The orchestrator contract and the one GET /capabilities response.
//
// Two kinds of client ask for GET /capabilities: AG-UI clients (HttpAgent
// fetches {url}/capabilities and reads an AgentCapabilities object) and
// orchestrators that expect {message, actions[]}. One merged object serves
// both, so no content negotiation is needed:
//
//   - @ag-ui/core's AgentCapabilitiesSchema (1.0.0, "@ag-ui/core/schemas")
//     is a z.looseObject, so unknown keys pass through rather than fail:
//     "message" and "actions" survive AgentCapabilitiesSchema.parse, and an
//     AG-UI client ignores them (interop/js/check.mjs checks this with the
//     real package);
//   - the orchestrator contract names only message and actions; the AG-UI
//     members beside them are extra context for its LLM, nothing more;
//   - the member names do not collide (AG-UI's are identity, transport,
//     tools, output, state, multiAgent, reasoning, multimodal, execution,
//     humanInTheLoop, custom).
//
// Should a client ever reject the extra members, the lead can serve
// AGUICapabilities or Actions alone behind a query parameter; both are
// exported for that.

package negotiate

// PriceCurrency is the only currency the orchestrator contract has: its
// price is "USDC per invocation".
const PriceCurrency = "USDC"

// Action is one entry of the orchestrator contract's actions[].
type Action struct {
	Name         string `json:"name"`         // matched in /invoke requests
	Description  string `json:"description"`  // fed to the orchestrator's LLM
	InputSchema  any    `json:"input_schema"` // JSON Schema of the input
	OutputSchema any    `json:"output_schema"`
	Price        string `json:"price,omitempty"` // USDC per invocation; absent: free
}

// OrchestratorCapabilities is the orchestrator contract's response.
type OrchestratorCapabilities struct {
	Message string   `json:"message"`
	Actions []Action `json:"actions"`
}

// CapabilitiesObject is the one GET /capabilities response: the AG-UI
// AgentCapabilities members and the orchestrator's message and actions
// side by side (see the file comment).
type CapabilitiesObject struct {
	AGUIAgentCapabilities
	Message string   `json:"message"`
	Actions []Action `json:"actions"`
}

// Actions projects the view d (never the owner's document; see agui.go)
// onto the orchestrator's actions: the capabilities the caller may use now
// (Eligible true), since an orchestrator invokes whatever it is shown.
//
// input_schema and output_schema are required by the contract: a capability
// without parameters gets an empty object schema, one without an output
// schema gets {} (any JSON value). A price is written only in USDC; a
// capability priced in another currency is left out, because the contract
// could only show it as free or at a price in the wrong unit. The result is
// never nil, so it encodes as [] rather than null.
func (d *Document) Actions() []Action {
	out := []Action{}
	for _, c := range d.usable() {
		a := Action{Name: c.Name, Description: c.Description, InputSchema: inputSchema(c), OutputSchema: c.OutputSchema}
		if a.OutputSchema == nil {
			a.OutputSchema = map[string]any{}
		}
		if c.Price != nil {
			if c.Price.Currency != PriceCurrency {
				continue
			}
			a.Price = c.Price.Amount
		}
		out = append(out, a)
	}
	return out
}

// OrchestratorCapabilities projects the view d onto the orchestrator
// contract alone. message is ident.Description, or, when that is empty, a
// sentence naming the agent and what it offers the caller.
func (d *Document) OrchestratorCapabilities(ident AGUIIdentity) *OrchestratorCapabilities {
	msg := ident.Description
	if msg == "" {
		msg = summary(displayName(d, ident), d.usable())
	}
	return &OrchestratorCapabilities{Message: msg, Actions: d.Actions()}
}

// CapabilitiesObject projects the view d onto the merged GET /capabilities
// response (see the file comment).
func (d *Document) CapabilitiesObject(ident AGUIIdentity) *CapabilitiesObject {
	o := d.OrchestratorCapabilities(ident)
	return &CapabilitiesObject{AGUIAgentCapabilities: *d.AGUICapabilities(ident), Message: o.Message, Actions: o.Actions}
}
