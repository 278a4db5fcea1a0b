package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// What a peer sees of this daemon, and why:
//
//	GET /v1/seen?peer=P[&persona=X]                          what peer P is shown, on the facts established for it
//	GET /v1/seen?tier=T&level=L&temperature=X&persona=Y      what a requester in that (hypothetical) context is shown
//
// Both can be given: a peer's facts with some of them replaced, to see
// what a change of policy would show it. A fact not established and not
// given is a stranger's: level 1 (signed, as every libp2p peer is), the
// default tier, cool, the default persona.
//
// For a peer, the facts are those it would be granted greeting now and
// proposing the most the owner allows it: its authentication level as
// trust established it, the tier the disclosure map (and any introduction
// token it holds) grants it under the persona, and its temperature cap. A
// greeting that proposes less is shown less.
//
// Every capability of the owner's document is listed with its standing
// for those facts, computed by the very view the peer would be sent
// (negotiate.Document.View):
//
//	eligible   in its view, and it may use it
//	shown      in its view with its conditions, not eligible (unmet says what is missing and how to meet it)
//	hidden     not in its view: not eligible, and advertised only to those who are (advertise = "when-eligible")
//	absent     not in its view: the capability does not exist under the persona
//
// For a peer, the answer also says what it holds (holds): the view this
// daemon last sent it (node.Node.SentView) — when, how, the grant it was
// cut for, which capabilities it showed eligible and which with their
// conditions — and each capability's standing in that view (held):
// eligible, shown, or none (not in the view it holds). A grant applies
// from the peer's next greeting, so what it holds and what it would be
// shown can differ; the owner's console shows both. holds is absent when
// no record is held (no view was sent since the daemon started, for a
// stranger, or ever). And when the door refuses the peer's messages (the
// owner revoked its key, a revocation statement did, or its key was
// retired), refused says so with the wire code: it is then shown nothing
// at all, and the standings are what it would be shown were its key
// trusted again.
//
// The answer is the owner's: hidden capabilities are listed, which no
// peer's view ever does. An unknown peer name is a 404; a tier, level or
// temperature that is not one is a 400 naming the parameter.

// Standings of a SeenCapability.
const (
	StandingEligible = "eligible"
	StandingShown    = "shown"
	StandingHidden   = "hidden"
	StandingAbsent   = "absent"
)

// Seen is the answer of GET /v1/seen.
type Seen struct {
	Peer string `json:"peer,omitempty"` // the peer's ID; absent for a context without a peer
	// Hypothetical is true when a fact was given in the query rather
	// than established for the peer.
	Hypothetical bool             `json:"hypothetical"`
	Facts        SeenFacts        `json:"facts"`
	Seq          uint64           `json:"seq"` // of the owner's document
	Capabilities []SeenCapability `json:"capabilities"`
	Holds        *SeenHolds       `json:"holds,omitempty"`   // the view last sent the peer
	Refused      *SeenRefused     `json:"refused,omitempty"` // the door refuses the peer's messages
}

// Held standings of a SeenCapability: its standing in the view the peer
// holds.
const (
	HeldEligible = "eligible" // in the view it holds, eligible
	HeldShown    = "shown"    // in the view it holds, with its conditions
	HeldNone     = "none"     // not in the view it holds
)

// SeenHolds is the view this daemon last sent a peer (node.Node.SentView).
type SeenHolds struct {
	At             time.Time        `json:"at"`
	Via            string           `json:"via"` // greeting, capabilities query, update
	ConversationID string           `json:"conversation_id,omitempty"`
	Open           bool             `json:"open"` // that conversation is still open (an update can still reach it)
	Seq            uint64           `json:"seq"`  // of the owner's document it was cut from
	Tier           string           `json:"tier"`
	Level          conditions.Level `json:"level"`
	Temperature    string           `json:"temperature"`
	Persona        string           `json:"persona,omitempty"`
	Eligible       []string         `json:"eligible"`
	Shown          []string         `json:"shown"`
	Gone           []string         `json:"gone,omitempty"` // in the view it holds, no longer in the document
}

// SeenRefused says why the door refuses a peer's messages.
type SeenRefused struct {
	Code   string `json:"code"` // key_revoked or key_retired
	Reason string `json:"reason"`
}

// SeenFacts are the facts the conditions are decided on, each with how it
// was reached.
type SeenFacts struct {
	Level          conditions.Level `json:"level"` // -1: none (a revoked key meets no min_auth_level)
	LevelHow       []string         `json:"level_how"`
	Tier           string           `json:"tier"`
	TierHow        string           `json:"tier_how"`
	Temperature    string           `json:"temperature"`
	TemperatureHow string           `json:"temperature_how"`
	Persona        string           `json:"persona,omitempty"` // "" is the owner's default persona
	PersonaHow     string           `json:"persona_how"`
}

// SeenCapability is one capability of the owner's document and its
// standing for the facts.
type SeenCapability struct {
	Name        string             `json:"name"`
	Description string             `json:"description,omitempty"`
	Standing    string             `json:"standing"`
	Unmet       []conditions.Unmet `json:"unmet,omitempty"`
	Held        string             `json:"held,omitempty"` // with holds: eligible, shown or none
}

// SeenQuery is what GET /v1/seen takes; every member is optional.
type SeenQuery struct {
	Peer        string
	Tier        string
	Level       *conditions.Level
	Temperature string
	Persona     string
}

func (q SeenQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"peer": q.Peer, "tier": q.Tier, "temperature": q.Temperature, "persona": q.Persona} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Level != nil {
		v.Set("level", strconv.Itoa(int(*q.Level)))
	}
	return v
}

// maxSeenPersona bounds the persona parameter, as a greeting's is.
const maxSeenPersona = 128

// seenRoutes answer GET /v1/seen: what a peer, or a hypothetical
// requester, is shown of the owner's document and why, and what the peer
// holds.
type seenRoutes struct {
	policy policyReader
	doc    documentSource
	trust  standingReader
	sent   sentViews
	convs  openConversations
	names  peerNames
}

// standingReader is what the trust book holds of a peer that its
// standing is decided on (trust.Book).
type standingReader interface {
	trustLevels
	Introductions(pid peer.ID) []negotiate.Introduction
	KeyRevoked(pid peer.ID) error
}

// sentViews is the record of the views this daemon sent (node.Node).
type sentViews interface {
	SentView(pid peer.ID) (store.SentView, bool, error)
}

func (s *seenRoutes) seen(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pol := s.policy.Current()
	order := pol.Order
	persona := q.Get("persona")
	if persona == negotiate.DefaultPersona {
		persona = ""
	}
	if len(persona) > maxSeenPersona {
		writeError(w, badField("persona", "is %d bytes: want at most %d", len(persona), maxSeenPersona))
		return
	}
	out := Seen{Capabilities: []SeenCapability{}}
	f := &out.Facts
	*f = SeenFacts{Level: conditions.Signed, LevelHow: []string{"signed: what every libp2p peer is (no peer named)"},
		Tier: pol.DefaultTier, TierHow: "the default tier (disclosure.default)",
		Temperature: conditions.Cool, TemperatureHow: "cool: a greeting that proposes no temperature",
		Persona: persona, PersonaHow: "the owner's default persona"}
	if persona != "" {
		f.PersonaHow = "given in the query"
	}
	var facts conditions.Facts
	if ref := q.Get("peer"); ref != "" {
		pid, e := s.names.resolve(ref)
		if e != nil {
			writeError(w, e)
			return
		}
		out.Peer = pid.String()
		s.peerFacts(pid, persona, &pol, f)
		facts.Peer = out.Peer
	}
	if t := q.Get("tier"); t != "" {
		if !order.Known(t) {
			writeError(w, badField("tier", "%q is not a tier this daemon uses: want one of %s", t, strings.Join(order.Tiers(), ", ")))
			return
		}
		f.Tier, f.TierHow, out.Hypothetical = t, "given in the query", true
	}
	if l := q.Get("level"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < int(conditions.NoLevel) || n > int(conditions.Bound) {
			writeError(w, badField("level", "%q: want an authentication level, 0 (introduced), 1 (signed), 2 (verified) or 3 (bound), or -1 for none", l))
			return
		}
		f.Level, f.LevelHow, out.Hypothetical = conditions.Level(n), []string{"given in the query"}, true
	}
	if t := q.Get("temperature"); t != "" {
		if _, ok := conditions.TemperatureRank(t); !ok {
			writeError(w, badField("temperature", "%q: want cool, warm or hot", t))
			return
		}
		f.Temperature, f.TemperatureHow, out.Hypothetical = t, "given in the query", true
	}
	if out.Peer == "" && persona != "" {
		out.Hypothetical = true
	}
	facts.AuthLevel, facts.Disclosure, facts.Temperature, facts.Persona = f.Level, f.Tier, f.Temperature, f.Persona
	doc := s.doc.Document()
	out.Seq = doc.Seq
	shown := map[string]negotiate.Capability{}
	for _, c := range doc.View(facts, order).Capabilities {
		shown[c.Name] = c
	}
	for _, c := range doc.Capabilities {
		sc := SeenCapability{Name: c.Name, Description: c.Description}
		v, ok := shown[c.Name]
		switch dec := conditions.Evaluate(c.Conds(), facts, order, 0); {
		case ok && v.Eligible != nil && *v.Eligible:
			sc.Standing = StandingEligible
		case ok:
			sc.Standing, sc.Unmet = StandingShown, v.Unmet
		case dec.Absent():
			sc.Standing, sc.Unmet = StandingAbsent, dec.Unmet
		default:
			sc.Standing, sc.Unmet = StandingHidden, dec.Unmet
		}
		out.Capabilities = append(out.Capabilities, sc)
	}
	if out.Peer != "" {
		pid, _ := peer.Decode(out.Peer)
		if e := s.holds(pid, &out); e != nil {
			writeError(w, e)
			return
		}
		if err := s.trust.KeyRevoked(pid); err != nil {
			out.Refused = &SeenRefused{Code: string(wire.CodeOf(err)), Reason: err.Error()}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// holds fills out.Holds, and each capability's held standing, from the
// record of the view last sent pid.
func (s *seenRoutes) holds(pid peer.ID, out *Seen) *Error {
	v, ok, err := s.sent.SentView(pid)
	if err != nil {
		return internal(err)
	}
	if !ok {
		return nil
	}
	h := &SeenHolds{At: v.At, Via: v.Via, ConversationID: v.ConversationID, Seq: v.Seq, Tier: v.Tier, Level: conditions.Level(v.Level),
		Temperature: v.Temperature, Persona: v.Persona, Eligible: v.Eligible, Shown: v.Shown}
	if h.Eligible == nil {
		h.Eligible = []string{}
	}
	if h.Shown == nil {
		h.Shown = []string{}
	}
	h.Open = h.ConversationID != "" && isOpen(s.convs, h.ConversationID)
	inDoc := map[string]bool{}
	for i := range out.Capabilities {
		c := &out.Capabilities[i]
		inDoc[c.Name] = true
		switch {
		case slices.Contains(h.Eligible, c.Name):
			c.Held = HeldEligible
		case slices.Contains(h.Shown, c.Name):
			c.Held = HeldShown
		default:
			c.Held = HeldNone
		}
	}
	for _, n := range append(slices.Clone(h.Eligible), h.Shown...) {
		if !inDoc[n] {
			h.Gone = append(h.Gone, n)
		}
	}
	out.Holds = h
	return nil
}

// peerFacts fills f with what was established for pid: its level as trust
// holds it, and what the policy grants it proposing the most it may.
func (s *seenRoutes) peerFacts(pid peer.ID, persona string, pol *negotiate.Policy, f *SeenFacts) {
	info := s.trust.Peer(pid)
	f.Level, f.LevelHow = info.Level, info.How
	req := negotiate.Requester{PeerID: pid.String(), AgentID: info.AgentID, Level: info.Level,
		Introductions: s.trust.Introductions(pid)}
	g := pol.GrantTo(req, negotiate.Proposal{Persona: persona, Temperature: conditions.Hot})
	key := negotiate.DefaultPersona
	if g.Persona != "" {
		key = g.Persona
	}
	f.Persona = g.Persona
	switch {
	case persona != "" && g.Persona == "":
		f.PersonaHow = fmt.Sprintf("the owner's default persona: %q is not one the owner established for this peer (the disclosure map, an introduction token or disclosure.open_personas)", persona)
	case persona != "":
		f.PersonaHow = "established for this peer (the disclosure map, an introduction token, or an open persona)"
	}
	f.Tier = g.Disclosure
	mapped, named := pol.Map[key][pid.String()]
	if !named && info.AgentID != "" {
		mapped, named = pol.Map[key][info.AgentID]
	}
	switch {
	case named && mapped == g.Disclosure:
		f.TierHow = fmt.Sprintf("the disclosure map grants it %s under persona %s", mapped, key)
	case named:
		f.TierHow = fmt.Sprintf("the disclosure map grants it %s under persona %s, raised by an introduction token it holds", mapped, key)
	case g.Disclosure != pol.DefaultTier:
		f.TierHow = "an introduction token it holds (the disclosure map does not name it)"
	default:
		f.TierHow = fmt.Sprintf("the default tier: the disclosure map does not name it under persona %s", key)
	}
	f.Temperature = g.Temperature
	if _, capped := pol.MaxTemp[pid.String()]; capped || info.AgentID != "" && pol.MaxTemp[info.AgentID] != "" {
		f.TemperatureHow = "its temperature cap: the most it may reach (a greeting that proposes less gets less)"
	} else {
		f.TemperatureHow = "the default maximum temperature (temperature.default_max): the most it may reach"
	}
}

// Seen returns what a peer, or a hypothetical requester, is shown of this
// daemon's document, capability by capability, and on which facts.
func (c *Client) Seen(ctx context.Context, q SeenQuery) (*Seen, error) {
	var out Seen
	path := "/v1/seen"
	if v := q.values(); len(v) > 0 {
		path += "?" + v.Encode()
	}
	return &out, c.call(ctx, http.MethodGet, path, nil, &out)
}
