package negotiate

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
)

// Version is the IFP number of capability documents.
const Version = 7

// Advertise modes of a capability.
const (
	AdvertiseAlways       = "always"        // shown to everyone, with its conditions (the IFP-7 default)
	AdvertiseWhenEligible = "when-eligible" // shown only to requesters who meet its conditions
)

// ACP tool categories (agent-client-protocol RFD "requested tool
// categories"). A custom category is written "custom:<name>".
var ToolCategories = []string{"search", "social_search", "media_gen", "web", "code_exec", "voice"}

// ValidToolCategory reports whether cat is an ACP tool category: one of
// ToolCategories, or custom:<name>.
func ValidToolCategory(cat string) bool {
	return slices.Contains(ToolCategories, cat) || categoryRE.MatchString(cat)
}

// Document is an IFP-7 capability document with ifaced's optional
// additions; a plain IFP-7 reader can ignore every field it does not know.
type Document struct {
	IFP          int               `json:"ifp"`
	AgentID      string            `json:"agent_id"`
	Seq          uint64            `json:"seq"` // increases on every change; a receiver never accepts a lower one
	Capabilities []Capability      `json:"capabilities"`
	IFPSupport   []int             `json:"ifp_support,omitempty"`
	Updated      string            `json:"updated,omitempty"`
	Relay        *identity.Relay   `json:"relay,omitempty"` // IFP-8 §2.3
	AGUI         *AGUICapabilities `json:"agui,omitempty"`
	// SupportedCategories are the ACP tool categories of the capabilities
	// in this view (set by View, so a hidden capability's category never
	// shows); requesters may ask for them with requested_tool_categories.
	SupportedCategories []string `json:"supported_tool_categories,omitempty"`
	// Signature is present when the document is served on its own; it
	// covers every other member (see identity).
	Signature *identity.DocumentSignature `json:"signature,omitempty"`

	// Extra holds the members of a peer's view this daemon does not model,
	// as received, so that encoding the document writes them back (see
	// DecodeView). An owner's document has none: LoadDocument refuses
	// members it does not know.
	Extra map[string]jsontext.Value `json:"-"`

	// received is the JSON a peer's view was decoded from (DecodeView), for
	// VerifyCanonical; nil for a document made here.
	received []byte
}

// Capability is one IFP-7 capability.
type Capability struct {
	Name         string                 `json:"name"`
	Version      string                 `json:"version,omitempty"` // "1" when empty
	Description  string                 `json:"description"`
	Parameters   any                    `json:"parameters,omitempty"` // JSON Schema (draft 2020-12) of the input
	Conditions   *conditions.Conditions `json:"conditions,omitempty"`
	OutputSchema any                    `json:"output_schema,omitempty"` // JSON Schema of the result
	Price        *Price                 `json:"price,omitempty"`
	Categories   []string               `json:"categories,omitempty"` // ACP tool categories
	Tags         []string               `json:"tags,omitempty"`
	Advertise    string                 `json:"advertise,omitempty"` // "always" when empty

	// Set only in a view: whether the requester meets the conditions now,
	// and if not, what is missing.
	Eligible *bool              `json:"eligible,omitempty"`
	Unmet    []conditions.Unmet `json:"unmet,omitempty"`

	// Extra and ConditionsExtra hold the members of a peer's capability,
	// and of its conditions object, that this daemon does not model, as
	// received; encoding writes them back. An owner's capability has none.
	Extra           map[string]jsontext.Value `json:"-"`
	ConditionsExtra map[string]jsontext.Value `json:"-"`
}

// Price is what one invocation costs.
type Price struct {
	Amount   string `json:"amount"`   // decimal string, e.g. "0.05"
	Currency string `json:"currency"` // e.g. "USDC", "USD"
}

// AGUICapabilities holds the AG-UI capability categories that do not come
// from the capability list (tools do). Each is kept as the JSON object the
// AG-UI AgentCapabilities type defines for it.
type AGUICapabilities struct {
	Transport      map[string]any `json:"transport,omitempty"`
	Output         map[string]any `json:"output,omitempty"`
	State          map[string]any `json:"state,omitempty"`
	MultiAgent     map[string]any `json:"multiAgent,omitempty"`
	Reasoning      map[string]any `json:"reasoning,omitempty"`
	Multimodal     map[string]any `json:"multimodal,omitempty"`
	Execution      map[string]any `json:"execution,omitempty"`
	HumanInTheLoop map[string]any `json:"humanInTheLoop,omitempty"`
	Custom         map[string]any `json:"custom,omitempty"`
}

// VersionOrDefault returns the capability's version, "1" when unset.
func (c *Capability) VersionOrDefault() string {
	if c.Version == "" {
		return "1"
	}
	return c.Version
}

// Hidden reports whether the capability is shown only to eligible requesters.
func (c *Capability) Hidden() bool { return c.Advertise == AdvertiseWhenEligible }

// Conds returns the capability's conditions (zero when none).
func (c *Capability) Conds() conditions.Conditions {
	if c.Conditions == nil {
		return conditions.Conditions{}
	}
	return *c.Conditions
}

// ConditionTerms lists the capability's conditions as key=value terms
// in a fixed order (min_disclosure, min_auth_level, temperature, persona,
// peers, max_concurrent), as the command line and the console show them;
// none when it sets none.
func (c *Capability) ConditionTerms() []string {
	var terms []string
	k := c.Conds()
	if k.MinDisclosure != "" {
		terms = append(terms, "min_disclosure="+k.MinDisclosure)
	}
	if k.MinAuthLevel != nil {
		terms = append(terms, "min_auth_level="+k.MinAuthLevel.String())
	}
	if k.Temperature != "" {
		terms = append(terms, "temperature="+k.Temperature)
	}
	if len(k.Persona) > 0 {
		terms = append(terms, "persona="+strings.Join(k.Persona, ","))
	}
	if len(k.Peers) > 0 {
		terms = append(terms, "peers="+strings.Join(k.Peers, ","))
	}
	if k.MaxConcurrent > 0 {
		terms = append(terms, fmt.Sprintf("max_concurrent=%d", k.MaxConcurrent))
	}
	return terms
}

// Capability returns the capability with the given name.
func (d *Document) Capability(name string) (*Capability, bool) {
	for i := range d.Capabilities {
		if d.Capabilities[i].Name == name {
			return &d.Capabilities[i], true
		}
	}
	return nil, false
}

// Limits on a document. A document must also fit in one message.
const (
	MaxCapabilities   = 256
	MaxNameLen        = 128
	MaxDescriptionLen = 4096
	MaxTags           = 32
	MaxTagLen         = 64
	MaxSchemaDepth    = 32
)

// ErrInvalidDocument wraps every validation problem.
var ErrInvalidDocument = errors.New("invalid capability document")

// FieldError names the capability and field a problem is in.
type FieldError struct {
	Field      string // JSON path, e.g. "capabilities[2].conditions.min_disclosure"
	Capability string // the capability's name, when the problem is inside one
	Problem    string
	Line       int // source line, when the document was loaded from a file; 0 otherwise
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Describe())
	}
	return e.Describe()
}

// Describe is the error without its line, for callers that print the line
// their own way (file:line: ...).
func (e *FieldError) Describe() string {
	var b strings.Builder
	b.WriteString(e.Field)
	if e.Capability != "" {
		fmt.Fprintf(&b, " (capability %q)", e.Capability)
	}
	b.WriteString(": ")
	b.WriteString(e.Problem)
	return b.String()
}

// Unwrap lets errors.Is match ErrInvalidDocument.
func (e *FieldError) Unwrap() error { return ErrInvalidDocument }

var (
	capNameRE  = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$`)
	categoryRE = regexp.MustCompile(`^custom:[a-z][a-z0-9_-]{0,62}$`)
	amountRE   = regexp.MustCompile(`^(0|[1-9][0-9]{0,17})(\.[0-9]{1,18})?$`)
	currencyRE = regexp.MustCompile(`^[A-Z][A-Z0-9]{2,9}$`)
	tagRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
)

// Validate checks the document under the owner's tier order (nil: the
// standard tiers) and returns every problem as a *FieldError. Parameter and
// output schemas must compile as JSON Schema draft 2020-12 without loading
// anything from outside the document.
func (d *Document) Validate(order *conditions.TierOrder) error {
	var errs []error
	bad := func(field, capName, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Capability: capName, Problem: fmt.Sprintf(format, args...)})
	}
	if d.IFP != Version {
		bad("ifp", "", "must be %d, got %d", Version, d.IFP)
	}
	if strings.TrimSpace(d.AgentID) == "" {
		bad("agent_id", "", "is required")
	}
	if d.Updated != "" {
		if _, err := time.Parse(time.RFC3339, d.Updated); err != nil {
			bad("updated", "", "%q is not an RFC 3339 time (e.g. 2026-03-04T12:00:00Z)", d.Updated)
		}
	}
	for i, n := range d.IFPSupport {
		if n < 1 || n > 999 {
			bad(fmt.Sprintf("ifp_support[%d]", i), "", "%d is not an IFP number", n)
		}
	}
	// An owner's document models everything it says: a member that would
	// be kept as unknown in a peer's view is a misspelling here.
	unknown := "is not a known field (check its spelling)"
	for _, name := range slices.Sorted(maps.Keys(d.Extra)) {
		bad(name, "", "%s", unknown)
	}
	if len(d.Capabilities) > MaxCapabilities {
		bad("capabilities", "", "has %d entries, at most %d", len(d.Capabilities), MaxCapabilities)
	}
	seen := map[string]int{}
	for i := range d.Capabilities {
		c := &d.Capabilities[i]
		f := fmt.Sprintf("capabilities[%d]", i)
		capBad := func(field, format string, args ...any) { bad(f+field, c.Name, format, args...) }
		if p := nameProblem(c.Name); p != "" {
			capBad(".name", "%s", p)
		}
		for _, name := range slices.Sorted(maps.Keys(c.Extra)) {
			capBad("."+name, "%s", unknown)
		}
		for _, name := range slices.Sorted(maps.Keys(c.ConditionsExtra)) {
			capBad(".conditions."+name, "is not a known condition; refusing it rather than ignoring a condition")
		}
		if j, dup := seen[c.Name]; dup && c.Name != "" {
			capBad(".name", "%q is also capabilities[%d]; names must be unique", c.Name, j)
		} else {
			seen[c.Name] = i
		}
		if c.Version != "" && (len(c.Version) > MaxVersionLen || strings.ContainsAny(c.Version, " \t\n")) {
			capBad(".version", "%q: at most %d bytes, no white space", c.Version, MaxVersionLen)
		}
		switch {
		case strings.TrimSpace(c.Description) == "":
			capBad(".description", "is required: say what the capability does")
		case len(c.Description) > MaxDescriptionLen:
			capBad(".description", "is %d bytes, at most %d", len(c.Description), MaxDescriptionLen)
		}
		if c.Parameters != nil {
			for _, p := range checkSchema(c.Parameters) {
				capBad(".parameters", "%s", p)
			}
		}
		if c.OutputSchema != nil {
			for _, p := range checkSchema(c.OutputSchema) {
				capBad(".output_schema", "%s", p)
			}
		}
		if c.Conditions != nil {
			for _, e := range Errors(c.Conditions.Validate(order)) {
				var fe *conditions.FieldError
				if errors.As(e, &fe) {
					capBad(".conditions."+fe.Field, "%s", fe.Problem)
				} else {
					capBad(".conditions", "%v", e)
				}
			}
		}
		if p := c.Price; p != nil {
			if !amountRE.MatchString(p.Amount) {
				capBad(".price.amount", "%q is not a decimal amount (e.g. \"0.05\")", p.Amount)
			}
			if !currencyRE.MatchString(p.Currency) {
				capBad(".price.currency", "%q is not a currency code (e.g. \"USDC\", \"USD\")", p.Currency)
			}
		}
		for j, cat := range c.Categories {
			if !ValidToolCategory(cat) {
				capBad(fmt.Sprintf(".categories[%d]", j), "%q is not a tool category (want one of %s, or custom:<name>)", cat, strings.Join(ToolCategories, ", "))
			}
		}
		if len(c.Tags) > MaxTags {
			capBad(".tags", "has %d tags, at most %d", len(c.Tags), MaxTags)
		}
		for j, tag := range c.Tags {
			if len(tag) > MaxTagLen || !tagRE.MatchString(tag) {
				capBad(fmt.Sprintf(".tags[%d]", j), "%q: lowercase letters, digits, '.', '_' and '-', at most %d bytes", tag, MaxTagLen)
			}
		}
		switch c.Advertise {
		case "", AdvertiseAlways, AdvertiseWhenEligible:
		default:
			capBad(".advertise", "%q: want %q (the default) or %q", c.Advertise, AdvertiseAlways, AdvertiseWhenEligible)
		}
		if c.Eligible != nil || c.Unmet != nil {
			capBad(".eligible", "is set only in a view, not in the owner's document")
		}
	}
	return errors.Join(errs...)
}

// Errors returns the errors joined in err (errors.Join), or err alone;
// validation reports every problem at once this way.
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
