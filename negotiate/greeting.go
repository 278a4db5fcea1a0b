package negotiate

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/ifaced/ifaced/gossip"
)

// A greeting (IFP-3 phase greeting, also the answer to one) carries, in
// one place each:
//
//	headers.disclosure, headers.persona   the proposed tier and persona
//	headers.capabilities.offer            the capabilities the attached view lets the recipient use now
//	part "capabilities"                   the sender's signed view for the recipient (SignedView), unless
//	                                      view_unchanged says the recipient holds it
//	part "greeting"                       {temperature, ifp_support, requested_tool_categories,
//	                                       have_view, view_unchanged, acks}: the rest of the proposal
//	part "context"                        in an answer: the context the sender grants the recipient (Granted)
//
// ReadGreeting decodes all of it once; Greeting.Write writes it.

// ErrInvalidGreeting: a greeting's "greeting" or "context" part cannot be
// read. It wraps gossip.ErrInvalidMessage; the error is a
// *gossip.FieldError naming the member.
var ErrInvalidGreeting = fmt.Errorf("%w: unreadable greeting", gossip.ErrInvalidMessage)

// GreetingBounds bound the containers, elements and nesting of a
// greeting's "greeting" and "context" parts, checked before they are
// decoded (gossip.Bounds). Either part is one object of a few members and
// short lists (some ten elements in practice); the bounds leave room for
// members this daemon does not know yet, which it skips.
var GreetingBounds = gossip.Bounds{MaxContainers: 256, MaxElements: 4096, MaxDepth: 16}

// MaxRequestedCategories bounds the ACP tool categories a greeting may
// request: a hint, of which a few are plenty, kept per conversation.
const MaxRequestedCategories = 16

// Greeting is what a greeting says besides its text and its view.
type Greeting struct {
	Proposal
	// Granted is the "context" part: what the sender grants the recipient.
	// An answer carries it; nil when absent.
	Granted *Granted
}

// greetingPart is the content of the "greeting" part.
type greetingPart struct {
	Temperature    string   `json:"temperature,omitempty"`
	IFPSupport     []int    `json:"ifp_support,omitempty"`
	ToolCategories []string `json:"requested_tool_categories,omitempty"`
	HaveView       string   `json:"have_view,omitempty"`
	ViewUnchanged  string   `json:"view_unchanged,omitempty"`
	Acks           bool     `json:"acks,omitempty"`
}

// ReadGreeting decodes the proposal of greeting m (its headers and its
// "greeting" part) and the context it grants (its "context" part). A part
// that is present but unreadable — not an object, or a member of the
// wrong type — is an error wrapping ErrInvalidGreeting, never a proposal
// of nothing; members this daemon does not know are ignored. A have_view
// or view_unchanged that is not a view's sum (64 hex digits) names no
// view, and requested_tool_categories past MaxRequestedCategories are not
// read. A part past GreetingBounds is refused before it is decoded.
func ReadGreeting(m *gossip.Message) (Greeting, error) {
	var g Greeting
	g.Disclosure, g.Persona = m.Headers.Disclosure, m.Headers.Persona
	var gp greetingPart
	if err := decodePart(m, PartGreeting, &gp); err != nil {
		return Greeting{}, err
	}
	g.Temperature, g.IFPSupport, g.Acks = gp.Temperature, gp.IFPSupport, gp.Acks
	g.ToolCategories = gp.ToolCategories[:min(len(gp.ToolCategories), MaxRequestedCategories)]
	if IsViewSum(gp.HaveView) {
		g.HaveView = gp.HaveView
	}
	if IsViewSum(gp.ViewUnchanged) {
		g.ViewUnchanged = gp.ViewUnchanged
	}
	var granted Granted
	if err := decodePart(m, PartContext, &granted); err != nil {
		return Greeting{}, err
	}
	if _, ok := m.Body.Part(PartContext); ok {
		g.Granted = &granted
	}
	return g, nil
}

// Write puts the greeting into m, which carries view (nil: none):
// headers.disclosure and headers.persona from the proposal,
// headers.capabilities.offer from the view, and the body parts — the
// view, unless ViewUnchanged is its Sum; the "greeting" part; the
// "context" part when Granted is set. The body text is the caller's.
func (g Greeting) Write(m *gossip.Message, view *SignedView) {
	m.Headers.Disclosure, m.Headers.Persona = g.Disclosure, g.Persona
	m.Body.Parts = nil
	if view != nil {
		if offer := view.Offer(); len(offer) > 0 {
			m.Headers.Capabilities = &gossip.CapabilityHeaders{Offer: offer}
		}
		if g.ViewUnchanged != view.Sum {
			m.Body.Parts = append(m.Body.Parts, view.Part())
		}
	}
	gp := greetingPart{Temperature: g.Temperature, IFPSupport: g.IFPSupport,
		ToolCategories: g.ToolCategories, HaveView: g.HaveView, ViewUnchanged: g.ViewUnchanged, Acks: g.Acks}
	m.Body.Parts = append(m.Body.Parts, gossip.Part{ContentType: "application/json", Name: PartGreeting, Content: gp.jsonValue()})
	if g.Granted != nil {
		m.Body.Parts = append(m.Body.Parts, gossip.Part{ContentType: "application/json", Name: PartContext, Content: g.Granted.jsonValue()})
	}
}

// jsonValue is JSONValue(p), built member by member: every greeting
// carries this part, and a round trip through encoding/json was some
// 5 µs of each. TestGreetingPartsAsJSONValue holds the two together.
func (p greetingPart) jsonValue() map[string]any {
	v := make(map[string]any, 6)
	if p.Temperature != "" {
		v["temperature"] = jsonText(p.Temperature)
	}
	if len(p.IFPSupport) > 0 {
		v["ifp_support"] = jsonNumbers(p.IFPSupport)
	}
	if len(p.ToolCategories) > 0 {
		v["requested_tool_categories"] = jsonStrings(p.ToolCategories)
	}
	if p.HaveView != "" {
		v["have_view"] = jsonText(p.HaveView)
	}
	if p.ViewUnchanged != "" {
		v["view_unchanged"] = jsonText(p.ViewUnchanged)
	}
	if p.Acks {
		v["acks"] = true
	}
	return v
}

// jsonValue is JSONValue(g), built member by member (see greetingPart's).
func (g *Granted) jsonValue() map[string]any {
	v := map[string]any{"disclosure": jsonText(g.Disclosure), "disclosure_outcome": jsonText(g.DisclosureOutcome),
		"auth_level": float64(g.AuthLevel), "temperature": jsonText(g.Temperature)}
	if g.Persona != "" {
		v["persona"] = jsonText(g.Persona)
	}
	if len(g.Notes) > 0 {
		v["notes"] = jsonStrings(g.Notes)
	}
	if len(g.ToolCategories) > 0 {
		v["tool_categories"] = jsonStrings(g.ToolCategories)
	}
	return v
}

// jsonText is s as a round trip through encoding/json gives it back:
// each byte that is not part of valid UTF-8 replaced by U+FFFD, which is
// what ranging over a string (strings.Map) reads it as.
func jsonText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.Map(func(r rune) rune { return r }, s)
}

// jsonStrings and jsonNumbers are lists as encoding/json decodes them
// into an any: []any of strings (jsonText), and of float64s.
func jsonStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = jsonText(s)
	}
	return out
}

func jsonNumbers(ns []int) []any {
	out := make([]any, len(ns))
	for i, n := range ns {
		out[i] = float64(n)
	}
	return out
}

// IsViewSum reports whether s can name a view: a hex SHA-256 (64 digits).
func IsViewSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// JSONValue is v as the generic JSON value a message part holds (maps,
// slices, strings, float64, bools, nil), so that a part signs and travels
// the same way on every transport.
func JSONValue(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// MustJSONValue is JSONValue for a value that always encodes (the
// daemon's own plain structs); a failure is a programming error, and
// panics.
func MustJSONValue(v any) any {
	out, err := JSONValue(v)
	if err != nil {
		panic(fmt.Sprintf("encoding %T as a part's content: %v", v, err))
	}
	return out
}

// decodePart decodes the content of m's part name, if m has one, into v,
// naming the member at fault in the message's own terms.
func decodePart(m *gossip.Message, name string, v any) error {
	i := -1
	for j := range m.Body.Parts {
		if m.Body.Parts[j].Name == name {
			i = j
			break
		}
	}
	if i < 0 {
		return nil
	}
	field := fmt.Sprintf("body.parts[%d].content", i)
	bad := func(path, problem string) error {
		if path != "" {
			path = joinPath(field, path)
		} else {
			path = field
		}
		return &gossip.FieldError{Field: path, Problem: fmt.Sprintf("(the %q part) %s", name, problem), Err: ErrInvalidGreeting}
	}
	// The canonical form is JSON of the same value, and for a part that
	// came in as CBOR it is kept for the signature's check and the audit
	// log, which need it too.
	raw, err := m.Body.Parts[i].CanonicalContent()
	if err != nil {
		return bad("", "is not a JSON value")
	}
	if k := jsontext.Value(raw).Kind(); k != '{' {
		return bad("", "expected an object, got "+kindName(k))
	}
	var fe *gossip.FieldError
	if errors.As(gossip.ScanJSON(raw, GreetingBounds), &fe) {
		return bad("", fe.Problem)
	}
	err = jsonv2.Unmarshal(raw, v)
	var se *jsonv2.SemanticError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		problem := "is not readable"
		if se.GoType != nil {
			problem = "expected " + jsonWords(se.GoType)
			if se.JSONKind != 0 {
				problem += ", got " + kindName(se.JSONKind)
			}
		}
		return bad(pointerToField(string(se.JSONPointer)), problem)
	default:
		return bad("", "is not readable")
	}
}

// jsonWords names what a Go type reads from JSON, in JSON's words.
func jsonWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(jsonWords(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonWords(t.Elem())
	}
	return "a JSON value"
}
