package negotiate

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Importing goes the other way from the projections: a document another
// kind of agent serves (an AG-UI AgentCapabilities object, an A2A agent
// card, an orchestrator /capabilities answer) becomes an IFP-7 document,
// so that the owner finds such agents where it finds ifaced peers. What
// the source says is taken at its word — there is no view, and no
// conditions are known — so every imported capability is marked neither
// eligible nor not (Eligible nil), and the document carries no signature
// of ours. An A2A card's JWS is verified when present (VerifyAgentCard);
// the caller records whether it was.

// Import formats.
const (
	FormatAGUI         = "ag-ui"
	FormatA2A          = "a2a"
	FormatOrchestrator = "orchestrator"
)

// ErrNotImportable: the document is none of the formats ifaced imports.
var ErrNotImportable = errors.New("not an AG-UI capabilities object, an A2A agent card or an orchestrator capabilities answer")

// MaxImportSize bounds a document taken from outside.
const MaxImportSize = 1 << 20

// maxImportedCapabilities bounds what one outside document adds.
const maxImportedCapabilities = 1024

// Imported is an outside agent's document in IFP-7 form.
type Imported struct {
	Format   string    // FormatAGUI, FormatA2A or FormatOrchestrator
	Name     string    // the agent's name, as it gives it
	Document *Document // agent_id is the source URL unless the source names one
	Signed   bool      // an A2A card whose JWS verified
	Note     string    // why a signed card is imported as unsigned
}

// Import reads raw (fetched from source) as whichever format it is. An A2A
// card with signatures must verify under a key resolveKey returns; one
// without is imported unsigned. A document that mixes AG-UI and
// orchestrator members (as ifaced's own /capabilities does) is read as
// both: actions give the schemas, tools what actions lack.
func Import(raw []byte, source string, resolveKey func(kid string) (ed25519.PublicKey, error)) (*Imported, error) {
	if len(raw) > MaxImportSize {
		return nil, fmt.Errorf("importing %s: %d bytes, at most %d", source, len(raw), MaxImportSize)
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("importing %s: not a JSON object: %v", source, err)
	}
	switch {
	case top["skills"] != nil && top["name"] != nil:
		return importA2A(raw, top, source, resolveKey)
	case top["actions"] != nil || top["tools"] != nil:
		return importCapabilities(top, source)
	}
	return nil, fmt.Errorf("importing %s: %w", source, ErrNotImportable)
}

func importA2A(raw []byte, top map[string]json.RawMessage, source string, resolveKey func(string) (ed25519.PublicKey, error)) (*Imported, error) {
	out := &Imported{Format: FormatA2A}
	var card *AgentCard
	if top["signatures"] != nil {
		c, err := VerifyAgentCard(raw, resolveKey)
		switch {
		case err == nil:
			card, out.Signed = c, true
		case errors.Is(err, ErrAgentCardUnknownKey), errors.Is(err, ErrAgentCardUnsupported):
			// Signed with a key or algorithm this daemon cannot check: it
			// is as good as unsigned, and says so.
			out.Note = err.Error()
		default:
			// A signature that does not verify means the card was altered
			// or signed by someone else: not something to import.
			return nil, fmt.Errorf("importing the A2A card at %s: %w", source, err)
		}
	}
	if card == nil {
		if err := json.Unmarshal(raw, &card); err != nil {
			return nil, fmt.Errorf("importing the A2A card at %s: %v", source, err)
		}
	}
	if len(card.Skills) > maxImportedCapabilities {
		return nil, fmt.Errorf("importing the A2A card at %s: %d skills, at most %d", source, len(card.Skills), maxImportedCapabilities)
	}
	out.Name = card.Name
	doc := &Document{IFP: Version, AgentID: source, Capabilities: []Capability{}}
	for _, s := range card.Skills {
		name := s.ID
		if name == "" {
			name = s.Name
		}
		if name == "" {
			continue
		}
		doc.Capabilities = append(doc.Capabilities, Capability{Name: name, Description: s.Description, Tags: s.Tags})
	}
	out.Document = doc
	return out, nil
}

// importCapabilities reads AG-UI tools and orchestrator actions.
func importCapabilities(top map[string]json.RawMessage, source string) (*Imported, error) {
	var tools struct {
		Items []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Parameters  any    `json:"parameters"`
		} `json:"items"`
	}
	var actions []struct {
		Name         string `json:"name"`
		Description  string `json:"description"`
		InputSchema  any    `json:"input_schema"`
		OutputSchema any    `json:"output_schema"`
		Price        any    `json:"price"`
	}
	var ident struct {
		Name string `json:"name"`
	}
	var message string
	for key, dst := range map[string]any{"tools": &tools, "actions": &actions, "identity": &ident, "message": &message} {
		if raw := top[key]; raw != nil {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, fmt.Errorf("importing %s: %q: %v", source, key, err)
			}
		}
	}
	if len(tools.Items)+len(actions) > maxImportedCapabilities {
		return nil, fmt.Errorf("importing %s: %d tools and actions, at most %d", source, len(tools.Items)+len(actions), maxImportedCapabilities)
	}
	out := &Imported{Format: FormatAGUI, Name: ident.Name}
	if top["actions"] != nil && top["tools"] == nil {
		out.Format = FormatOrchestrator
	}
	doc := &Document{IFP: Version, AgentID: source, Capabilities: []Capability{}}
	seen := map[string]int{}
	for _, a := range actions {
		if a.Name == "" {
			continue
		}
		c := Capability{Name: a.Name, Description: a.Description, Parameters: a.InputSchema, OutputSchema: a.OutputSchema}
		if p, ok := a.Price.(string); ok && p != "" {
			c.Price = &Price{Amount: p, Currency: PriceCurrency}
		}
		seen[a.Name] = len(doc.Capabilities)
		doc.Capabilities = append(doc.Capabilities, c)
	}
	for _, t := range tools.Items {
		if t.Name == "" {
			continue
		}
		if i, ok := seen[t.Name]; ok {
			if doc.Capabilities[i].Parameters == nil {
				doc.Capabilities[i].Parameters = t.Parameters
			}
			continue
		}
		seen[t.Name] = len(doc.Capabilities)
		doc.Capabilities = append(doc.Capabilities, Capability{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	if out.Name == "" {
		out.Name = strings.TrimSpace(firstLine(message))
	}
	out.Document = doc
	return out, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
