package negotiate

import (
	"fmt"

	"github.com/ifaced/ifaced/conditions"
)

// Proposal is what a greeting asks of the owner: the disclosure tier and
// persona from its headers, and the temperature, IFP versions and ACP tool
// categories from its "greeting" body part. It is a request, never a fact.
type Proposal struct {
	Disclosure     string   `json:"disclosure,omitempty"`
	Persona        string   `json:"persona,omitempty"`
	Temperature    string   `json:"temperature,omitempty"`
	IFPSupport     []int    `json:"ifp_support,omitempty"`
	ToolCategories []string `json:"requested_tool_categories,omitempty"`

	// HaveView, in a greeting or its answer, is the hex SHA-256 of the RFC
	// 8785 form of the view the sender holds, verified, from the recipient.
	// A recipient whose view for the sender still has that hash may leave
	// it out of its next message (the answer, or its next greeting), and
	// says so with ViewUnchanged (the same hash). Like an HTTP
	// If-None-Match: a peer that knows neither field sends its view every
	// time, and nothing breaks.
	HaveView      string `json:"have_view,omitempty"`
	ViewUnchanged string `json:"view_unchanged,omitempty"`
}

// Outcomes of a proposal (IFP-12 §3.5).
const (
	OutcomeGranted  = "granted"  // nothing was proposed; the owner's grant applies
	OutcomeAccepted = "accepted" // granted as proposed
	OutcomeLowered  = "lowered"  // proposed more than the owner grants; granted less
	OutcomeDeclined = "declined" // proposed something the owner does not offer
)

// Granted is the context the owner's daemon grants one requester: the
// facts its conditions are decided on. Notes explain, for the requester
// and the audit log, every place where the grant differs from the proposal.
type Granted struct {
	Disclosure        string           `json:"disclosure"`
	DisclosureOutcome string           `json:"disclosure_outcome"`
	AuthLevel         conditions.Level `json:"auth_level"`
	Temperature       string           `json:"temperature"`
	Persona           string           `json:"persona,omitempty"`
	Notes             []string         `json:"notes,omitempty"`
	// ToolCategories are the requested ACP tool categories this view
	// supports, and so puts first (ACP requested_tool_categories).
	ToolCategories []string `json:"tool_categories,omitempty"`
}

// Policy is the owner's side of a negotiation: the disclosure map
// (persona → peer → tier, IFP-12 §3.4), the default tier, and per-peer
// temperature maxima.
type Policy struct {
	Order          *conditions.TierOrder
	DefaultTier    string
	Map            map[string]map[string]string
	DefaultMaxTemp string
	MaxTemp        map[string]string
}

// DefaultPersona is the disclosure-map key of the owner's undifferentiated
// context (a conversation without a persona).
const DefaultPersona = "default"

// Grant computes what the owner grants a requester, known by peer ID and
// agent ID, at authentication level level, given its proposal. It never
// grants more than the map and caps allow, whatever was proposed.
func (p *Policy) Grant(peerID, agentID string, level conditions.Level, prop Proposal) Granted {
	g := Granted{AuthLevel: level}
	// Any persona may be proposed. Refusing unknown ones would tell a
	// prober which personas exist; a persona the map does not name simply
	// gets the default tier.
	if len(prop.Persona) <= 128 {
		g.Persona = prop.Persona
	}
	mapKey := g.Persona
	if mapKey == "" {
		mapKey = DefaultPersona
	}
	allowed := p.DefaultTier
	if t, ok := lookup(p.Map[mapKey], peerID, agentID); ok {
		allowed = t
	}
	order := p.Order
	switch {
	case prop.Disclosure == "":
		g.Disclosure, g.DisclosureOutcome = allowed, OutcomeGranted
	case !order.Known(prop.Disclosure):
		g.Disclosure, g.DisclosureOutcome = allowed, OutcomeDeclined
		g.Notes = append(g.Notes, fmt.Sprintf("disclosure %q is not a tier the owner uses; granted %q", prop.Disclosure, allowed))
	case order.AtLeast(allowed, prop.Disclosure):
		g.Disclosure, g.DisclosureOutcome = prop.Disclosure, OutcomeAccepted
	default:
		g.Disclosure, g.DisclosureOutcome = allowed, OutcomeLowered
		g.Notes = append(g.Notes, fmt.Sprintf("disclosure %q lowered to %q, the most the owner grants you", prop.Disclosure, allowed))
	}

	maxTemp := p.DefaultMaxTemp
	if t, ok := lookup(p.MaxTemp, peerID, agentID); ok {
		maxTemp = t
	}
	want := prop.Temperature
	if want == "" {
		want = conditions.Cool
	}
	wr, wok := conditions.TemperatureRank(want)
	mr, _ := conditions.TemperatureRank(maxTemp)
	switch {
	case !wok:
		g.Temperature = conditions.Cool
		g.Notes = append(g.Notes, fmt.Sprintf("temperature %q is not cool, warm or hot; the conversation is cool", want))
	case wr > mr:
		g.Temperature = maxTemp
		g.Notes = append(g.Notes, fmt.Sprintf("temperature %q lowered to %q, the most the owner allows you", want, maxTemp))
	default:
		g.Temperature = want
	}
	return g
}

func lookup(m map[string]string, keys ...string) (string, bool) {
	for _, k := range keys {
		if k == "" {
			continue
		}
		if v, ok := m[k]; ok {
			return v, true
		}
	}
	return "", false
}

// Raise combines the grant of a later greeting in the same conversation
// with the current one: the level never goes down inside a conversation
// (IFP-5 §2), nor do disclosure and temperature while the persona stays
// the same (IFP-12 §3.6); a change of persona takes that persona's grant.
func (g Granted) Raise(next Granted, order *conditions.TierOrder) Granted {
	out := next
	out.AuthLevel = max(g.AuthLevel, next.AuthLevel)
	if next.Persona != g.Persona {
		// Tiers and temperatures belong to a persona's map: a greeting that
		// changes persona starts from that persona's grant, and nothing
		// granted under the previous persona carries over.
		return out
	}
	if order.AtLeast(g.Disclosure, next.Disclosure) {
		out.Disclosure = g.Disclosure
	}
	gr, _ := conditions.TemperatureRank(g.Temperature)
	nr, _ := conditions.TemperatureRank(next.Temperature)
	if gr > nr {
		out.Temperature = g.Temperature
	}
	return out
}

// Facts turns a grant into the facts conditions are evaluated on.
func (g Granted) Facts(peer string, inFlight int) conditions.Facts {
	return conditions.Facts{Peer: peer, AuthLevel: g.AuthLevel, Disclosure: g.Disclosure,
		Temperature: g.Temperature, Persona: g.Persona, InFlight: inFlight}
}
