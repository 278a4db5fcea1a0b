package console

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/node/api"
)

// Advice for the owner. A peer's view says, for each condition it does
// not meet, how to meet it, written to the peer ("ask the owner to raise
// your tier"). The owner's pages say instead what the owner can do about
// it, with a link to the page that does it: grant it a tier, pin its
// key, raise its temperature cap, add it to a capability's peers.

// advice is one unmet condition as the owner reads it.
type advice struct {
	Condition string // the condition, as the document names it
	Required  string
	Have      string
	Do        string // what the owner can do, "" when nothing
	Href      string // where it is done
	Link      string // the link's words
}

// adviceFor turns the unmet conditions of capability name, for peer (""
// for a hypothetical requester) under persona, into the owner's advice.
func adviceFor(unmet []conditions.Unmet, peer, name, persona string) []advice {
	out := make([]advice, 0, len(unmet))
	q := func(kv ...string) string {
		v := url.Values{}
		if peer != "" {
			v.Set("peer", peer)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return v.Encode()
	}
	for _, u := range unmet {
		a := advice{Condition: string(u.Condition), Required: u.Required, Have: u.Have}
		switch u.Condition {
		case conditions.CondMinDisclosure:
			a.Do = "grant it " + u.Required + " (or higher)"
			if peer == "" {
				a.Do = "grant the peer " + u.Required + " (or higher)"
			}
			a.Href, a.Link = "/ui/policy?"+q("tier", u.Required, "persona", persona)+"#grant-form", "grant it on the policy page"
		case conditions.CondMinAuthLevel:
			switch {
			case strings.HasPrefix(u.Required, "3"):
				a.Do = "it needs a bound identity: an agent ID (an https URL or did:web) whose identity document lists its key; check its identity document"
				a.Href, a.Link = "/ui/trust#"+rowID(peer), "check it on the trust page"
			default:
				a.Do = "pin its key, after comparing fingerprints with its owner"
				a.Href, a.Link = "/ui/trust#"+rowID(peer), "pin it on the trust page"
			}
		case conditions.CondTemperature:
			a.Do = "raise its temperature cap to " + u.Required + "; it must also propose " + u.Required + " when it greets"
			a.Href, a.Link = "/ui/policy?"+q("max", u.Required)+"#temperature-form", "cap it on the policy page"
		case conditions.CondPersona:
			a.Do = "the capability exists only under persona " + u.Required + ": grant it a tier under that persona"
			a.Href, a.Link = "/ui/policy?"+q("persona", firstOf(u.Required))+"#grant-form", "grant it on the policy page"
		case conditions.CondPeers:
			a.Do = "only the peers the capability names may use it: add its peer ID to them"
			a.Href, a.Link = "/ui/caps/edit/"+url.PathEscape(name), "edit "+name
		case conditions.CondMaxConcurrent:
			a.Do = "it is busy now (at its limit of uses at once); nothing to grant: it may ask again later, or raise max_concurrent"
			a.Href, a.Link = "/ui/caps/edit/"+url.PathEscape(name), "edit "+name
		default:
			a.Do = fmt.Sprintf("the condition %s is not met", u.Condition)
		}
		out = append(out, a)
	}
	return out
}

// firstOf is the first of a list the conditions write as "a, b".
func firstOf(list string) string {
	first, _, _ := strings.Cut(list, ",")
	return strings.TrimSpace(first)
}

// rowID is the id of a peer's row on the trust page.
func rowID(peer string) string {
	if peer == "" {
		return "trust"
	}
	return "peer-" + peer
}

// refusedWhy says, for the owner, what a refusal's wire code means and
// what the owner can do: the peer's own hint is written to the peer.
var refusedWhy = map[string]string{
	"key_revoked":           "You revoked trust in this peer's key (or a revocation statement did): every message it sends is refused. If that was a mistake, compare fingerprints with its owner and pin its key again on the trust page.",
	"key_retired":           "This key was succeeded by another and its transition period is over: the peer must sign with its new key. Nothing to do.",
	"invalid_signature":     "The signature did not verify: a broken or forged message. Nothing to do; if it comes from a peer you know, tell its owner.",
	"wrong_key":             "It was signed by another key than the sender's own (on libp2p, the key of the stream's peer): a forged or misconfigured sender. Nothing to do.",
	"replay":                "A message ID seen before, or a date outside the replay window: a replayed or badly dated message. Nothing to do, unless the sender's clock is off.",
	"rate_limited":          "It sent more than its temperature allows per minute. Raise its temperature cap if you want it to send more.",
	"out_of_sequence":       "It did not fit its conversation (a sequence number, a phase, or a conversation already closed). Usually a peer that lost track; nothing to do.",
	"invalid_format":        "Not an IFP-4 message this daemon can read. Nothing to do.",
	"payload_too_large":     "Over the 1 MiB frame bound. Nothing to do.",
	"unsupported_version":   "Not an IFP-4 message. Nothing to do.",
	"stale_seq":             "It sent an older capability document than the one this daemon holds. Nothing to do.",
	"unknown_sender":        "Its key could not be resolved. Nothing to do.",
	"unavailable":           "This daemon took no new conversation: its audit log had no room (the disk nearly full, or the day's quota used). Free space, or raise [audit] limits.",
	"key_statement_refused": "A key statement this daemon will not follow; the reason says what conflicts.",
}

// whyRefused is the owner's words for a refusal's code.
func whyRefused(code string) string {
	if w, ok := refusedWhy[code]; ok {
		return w
	}
	if code == "" {
		return "A count of refusals left out of the record (over the refusal budget, or with the audit log out of room)."
	}
	return "Refused with the wire code " + code + "; the reason says why."
}

// refusedCodes are the codes a refusal's search offers.
func refusedCodes() []string {
	return []string{"key_revoked", "key_retired", "invalid_signature", "wrong_key", "replay", "rate_limited", "out_of_sequence", "invalid_format",
		"payload_too_large", "unsupported_version", "stale_seq", "unknown_sender", "unavailable", "key_statement_refused"}
}

// seenRow is a capability as an owner's page shows it: what the peer
// holds of it, what it would get, and the owner's advice.
type seenRow struct {
	api.SeenCapability
	Advice []advice
}

// seenView is a GET /v1/seen answer as an owner's page shows it.
type seenView struct {
	*api.Seen
	Rows []seenRow
	// Diff says, line by line, how what the peer would get at its next
	// greeting differs from what it holds; empty when it does not.
	Diff []string
}

// Standing words.
var (
	standingWords = map[string]string{api.StandingEligible: "eligible", api.StandingShown: "shown, not eligible",
		api.StandingHidden: "hidden: not in its view", api.StandingAbsent: "absent under this persona"}
	heldWords = map[string]string{api.HeldEligible: "eligible", api.HeldShown: "shown, not eligible", api.HeldNone: "not in its view"}
)

// asHeld is a standing as a held one: in the view eligible, in it with
// its conditions, or not in it.
func asHeld(standing string) string {
	switch standing {
	case api.StandingEligible:
		return api.HeldEligible
	case api.StandingShown:
		return api.HeldShown
	}
	return api.HeldNone
}

func makeSeenView(s *api.Seen) *seenView {
	v := &seenView{Seen: s}
	persona := s.Facts.Persona
	for _, c := range s.Capabilities {
		v.Rows = append(v.Rows, seenRow{SeenCapability: c, Advice: adviceFor(c.Unmet, s.Peer, c.Name, persona)})
	}
	h := s.Holds
	if h == nil {
		return v
	}
	f := s.Facts
	if h.Tier != f.Tier {
		v.Diff = append(v.Diff, fmt.Sprintf("tier: holds %s, would get %s", h.Tier, f.Tier))
	}
	if h.Temperature != f.Temperature {
		v.Diff = append(v.Diff, fmt.Sprintf("temperature: holds %s, would get at most %s", h.Temperature, f.Temperature))
	}
	if h.Level != f.Level {
		v.Diff = append(v.Diff, fmt.Sprintf("authentication level: holds %s, would get %s", h.Level, f.Level))
	}
	if h.Persona != f.Persona {
		v.Diff = append(v.Diff, fmt.Sprintf("persona: holds %s, would get %s", orDefault(h.Persona), orDefault(f.Persona)))
	}
	for _, c := range s.Capabilities {
		if now := asHeld(c.Standing); now != c.Held {
			v.Diff = append(v.Diff, fmt.Sprintf("%s: holds %s, would get %s", c.Name, heldWords[c.Held], standingWords[c.Standing]))
		}
	}
	for _, g := range h.Gone {
		v.Diff = append(v.Diff, g+": in the view it holds, removed from the document since")
	}
	if h.Seq != s.Seq && len(v.Diff) == 0 {
		v.Diff = append(v.Diff, fmt.Sprintf("the document: holds seq %d, would get seq %d (nothing it sees changed)", h.Seq, s.Seq))
	}
	return v
}

func orDefault(persona string) string {
	if persona == "" {
		return "default"
	}
	return persona
}

// Standing is a standing in words.
func (r seenRow) StandingWords() string { return standingWords[r.Standing] }

// HeldWords is the held standing in words.
func (r seenRow) HeldWords() string { return heldWords[r.Held] }

// Changes reports whether what the peer would get of it differs from
// what it holds.
func (r seenRow) Changes() bool { return r.Held != "" && asHeld(r.Standing) != r.Held }
