package negotiate

import (
	"fmt"
	"slices"

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

	// Acks, in a greeting or its answer, says that the sender acknowledges
	// each context message the recipient says in the conversation, once it
	// has admitted and recorded it, and reads the recipient's
	// acknowledgements of its own (node/wire: Acknowledgements). A side
	// acknowledges, and waits for acknowledgements, only when the other
	// side said so: a peer that knows nothing of them is neither sent one
	// nor waited on.
	Acks bool `json:"acks,omitempty"`
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
// (persona → peer → tier, IFP-12 §3.4), the default tier, per-peer
// temperature maxima, and the personas anyone may propose.
type Policy struct {
	Order          *conditions.TierOrder
	DefaultTier    string
	Map            map[string]map[string]string
	DefaultMaxTemp string
	MaxTemp        map[string]string
	// OpenPersonas are the personas the owner declared open (config
	// disclosure.open_personas): any requester may propose them. Every
	// other persona is granted only to requesters the owner established
	// under it (see GrantTo).
	OpenPersonas []string
}

// DefaultPersona is the disclosure-map key of the owner's undifferentiated
// context (a conversation without a persona).
const DefaultPersona = "default"

// maxPersonaLen bounds a proposed persona name.
const maxPersonaLen = 128

// Requester is what the owner's daemon established about whoever asks —
// never what the requester claims.
type Requester struct {
	PeerID  string           // its libp2p peer ID, or "" (an HTTP caller without one)
	AgentID string           // the agent ID the daemon established for it (IFP-5 level 3), or ""
	Level   conditions.Level // its authentication level
	// Introductions are the introduction tokens the owner minted that
	// were admitted for this requester and are still valid (unexpired,
	// its key not revoked).
	Introductions []Introduction
}

// Introduction is what one admitted introduction token grants: the
// persona it names (established for the requester by the owner's own
// token), and under it at least the tier Disclosure ("" grants none).
// Persona "" or DefaultPersona is the default persona.
type Introduction struct {
	Persona    string
	Disclosure string
}

// noteUnestablishedPersona is the note of a proposed persona the owner
// has not established for the requester. It is the same for every such
// persona, whether the owner has it or not, so that proposing cannot
// probe which personas exist.
const noteUnestablishedPersona = "the persona you proposed is not one the owner has established for you; the conversation is under the owner's default persona"

// Grant computes what the owner grants a requester known by peer ID and
// established agent ID at level, without introductions.
//
// Deprecated: use GrantTo, which also applies the requester's
// introductions.
func (p *Policy) Grant(peerID, agentID string, level conditions.Level, prop Proposal) Granted {
	return p.GrantTo(Requester{PeerID: peerID, AgentID: agentID, Level: level}, prop)
}

// GrantTo computes what the owner grants requester r given its proposal.
// It never grants more than the owner established, whatever was proposed:
//
//   - Persona. A persona conditions are decided on must be the owner's
//     word, not the requester's claim. A proposed persona is granted only
//     when the owner established it for r: the disclosure map names r
//     under it (by peer ID or established agent ID), an introduction
//     token admitted for r names it, or the owner declared it open.
//     Otherwise the grant is the default persona, with a note that is the
//     same whether the persona exists or not.
//   - Disclosure. The granted persona's map entry for r, else the default
//     tier, raised to the highest tier r's introductions grant under that
//     persona; a proposal can lower it, never raise it.
//   - Temperature. At most r's maximum (else the default maximum).
func (p *Policy) GrantTo(r Requester, prop Proposal) Granted {
	g := Granted{AuthLevel: r.Level}
	persona := prop.Persona
	if persona == DefaultPersona {
		persona = ""
	}
	if persona != "" && !p.established(r, persona) {
		g.Notes = append(g.Notes, noteUnestablishedPersona)
		persona = ""
	}
	g.Persona = persona
	mapKey := orDefault(persona)
	allowed := p.DefaultTier
	if t, ok := lookup(p.Map[mapKey], r.PeerID, r.AgentID); ok {
		allowed = t
	}
	order := p.Order
	if floor := r.introducedTier(mapKey, order); floor != "" && !order.AtLeast(allowed, floor) {
		allowed = floor
	}
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
	if t, ok := lookup(p.MaxTemp, r.PeerID, r.AgentID); ok {
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

// established reports whether the owner established persona (not the
// default one) for r.
func (p *Policy) established(r Requester, persona string) bool {
	if len(persona) > maxPersonaLen {
		return false
	}
	if _, ok := lookup(p.Map[persona], r.PeerID, r.AgentID); ok {
		return true
	}
	for _, in := range r.Introductions {
		if orDefault(in.Persona) == persona {
			return true
		}
	}
	return slices.Contains(p.OpenPersonas, persona)
}

// introducedTier is the highest tier r's introductions grant under the
// map key persona, or "".
func (r Requester) introducedTier(persona string, order *conditions.TierOrder) string {
	best := ""
	for _, in := range r.Introductions {
		if in.Disclosure == "" || orDefault(in.Persona) != persona || !order.Known(in.Disclosure) {
			continue
		}
		if best == "" || order.AtLeast(in.Disclosure, best) {
			best = in.Disclosure
		}
	}
	return best
}

// orDefault is the disclosure-map key of persona.
func orDefault(persona string) string {
	if persona == "" {
		return DefaultPersona
	}
	return persona
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
