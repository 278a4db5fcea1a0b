package console

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/libp2p/go-libp2p/core/peer"
)

// policyPages is /ui/policy: the disclosure map by persona and peer and
// the temperature caps, and changing them (PUT /v1/policy/disclosure and
// /v1/policy/temperature, as `ifaced policy` does).
type policyPages struct{ c *Console }

type grantRow struct {
	Persona, Peer, Tier string
}

type capRowT struct {
	Peer, Max string
}

type policyData struct {
	Policy  *api.Policy
	Grants  []grantRow
	Caps    []capRowT
	Peer    string     // preselected in the forms (a peer ID)
	Persona string     // preselected in the grant form
	Tier    string     // preselected in the grant form: asked for, else the peer's grant now, else the default
	Max     string     // preselected in the cap form: asked for, else the peer's cap now, else the default
	Form    url.Values // the form refused, as sent
	Labels  labels
}

// Choices are the peers the forms offer: the known ones, and the one
// preselected when it is not among them.
func (d policyData) Choices() []string {
	ids := d.Labels.Known()
	if d.Peer != "" && !slices.Contains(ids, d.Peer) {
		ids = append([]string{d.Peer}, ids...)
	}
	return ids
}

func (p *policyPages) show(w http.ResponseWriter, r *http.Request, v *visit) {
	p.render(w, r, v, http.StatusOK, "", nil)
}

func (p *policyPages) render(w http.ResponseWriter, r *http.Request, v *visit, status int, refused string, form url.Values) {
	ctx := r.Context()
	pol, err := p.c.api.Policy(ctx)
	if err != nil {
		p.c.fail(w, v, apiStatus(err), "reading the policy: "+err.Error())
		return
	}
	q := r.URL.Query()
	d := policyData{Policy: pol, Form: form, Labels: p.c.labels(ctx), Persona: q.Get("persona"), Tier: q.Get("tier"), Max: q.Get("max")}
	d.Peer = d.Labels.resolveGrantee(q.Get("peer"))
	if form != nil {
		d.Peer = d.Labels.resolveGrantee(cmp.Or(form.Get("peer_other"), form.Get("peer")))
		d.Persona, d.Tier, d.Max = form.Get("persona"), cmp.Or(form.Get("tier"), d.Tier), cmp.Or(form.Get("max"), d.Max)
	}
	// The forms show the state: the peer's grant under the persona and its
	// cap, so that submitting them again changes nothing it was not asked to.
	persona := cmp.Or(d.Persona, negotiate.DefaultPersona)
	if d.Tier == "" {
		d.Tier = cmp.Or(pol.Disclosure[persona][d.Peer], pol.DefaultTier)
		if d.Peer != "" && pol.Disclosure[persona][d.Peer] == "" {
			if s, err := p.c.api.Seen(ctx, api.SeenQuery{Peer: d.Peer, Persona: d.Persona}); err == nil && s.Refused == nil {
				d.Tier = s.Facts.Tier // from config.toml's map or an introduction
			}
		}
	}
	if d.Max == "" {
		d.Max = cmp.Or(pol.MaxTemperature[d.Peer], pol.DefaultMaxTemperature)
	}
	for _, persona := range slices.Sorted(maps.Keys(pol.Disclosure)) {
		for _, pr := range slices.Sorted(maps.Keys(pol.Disclosure[persona])) {
			d.Grants = append(d.Grants, grantRow{Persona: persona, Peer: pr, Tier: pol.Disclosure[persona][pr]})
		}
	}
	for _, pr := range slices.Sorted(maps.Keys(pol.MaxTemperature)) {
		d.Caps = append(d.Caps, capRowT{Peer: pr, Max: pol.MaxTemperature[pr]})
	}
	pd := p.c.data(v, "Policy", "policy", d)
	pd.Skips = []skip{{"#grant-form", "Skip to Grant a tier"}, {"#temperature-form", "Skip to Cap a temperature"}}
	id := ""
	if refused != "" && form != nil {
		id = policyFields[form.Get("form")][refusedField(refused)]
	}
	pd.refuseField(id, refused)
	p.c.pages.render(w, status, "policy", pd)
}

// policyFields are the forms' field ids by the field a refusal names.
var policyFields = map[string]map[string]string{
	"grant": {"peer": "grant-peer-other", "tier": "grant-tier", "persona": "grant-persona"},
	"cap":   {"peer": "cap-peer-other", "max": "cap-max"},
}

// refusedField is the field a refusal names first ("peer: …", or
// "granting a tier: tier: …").
func refusedField(msg string) string {
	for _, f := range []string{"peer", "tier", "persona", "max"} {
		if strings.HasPrefix(msg, f+":") || strings.Contains(msg, ": "+f+":") {
			return f
		}
	}
	return "peer"
}

// resolveGrantee reads a peer named in the policy page's query: an alias
// of the owner's stands for its peer ID; anything else is kept as given.
func (l labels) resolveGrantee(ref string) string {
	ref = strings.TrimSpace(ref)
	if id, ok := l.byAlias[ref]; ok {
		return id
	}
	return ref
}

// grantee reads the peer of a grant: an alias of the owner's, a peer ID,
// or an agent ID the policy or trust already names. A display name is the
// peer's own claim, so it does not name a grantee (as on the command
// line); anything else is an unknown peer.
func (p *policyPages) grantee(r *http.Request, pol *api.Policy) (string, string) {
	ref := strings.TrimSpace(cmp.Or(strings.TrimSpace(r.PostFormValue("peer_other")), r.PostFormValue("peer")))
	if ref == "" {
		return "", "peer: is required: choose a peer, or give its peer ID or an alias of yours"
	}
	l := p.c.labels(r.Context())
	if id, ok := l.byAlias[ref]; ok {
		return id, ""
	}
	if _, err := peer.Decode(ref); err == nil {
		return ref, ""
	}
	for _, peers := range pol.Disclosure {
		if _, ok := peers[ref]; ok {
			return ref, ""
		}
	}
	if _, ok := pol.MaxTemperature[ref]; ok {
		return ref, ""
	}
	if ts, err := p.c.api.Trust(r.Context()); err == nil {
		for _, t := range ts {
			if t.AgentID != "" && t.AgentID == ref {
				return ref, ""
			}
		}
	}
	return "", fmt.Sprintf("peer: unknown peer %q: choose one from the list, or give its peer ID (12D3KooW…), an alias of yours, or an agent ID this daemon verified; "+
		"a display name is the peer's own claim, so grants do not take one. Nothing was changed", ref)
}

func (p *policyPages) disclosure(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	pol, err := p.c.api.Policy(ctx)
	if err != nil {
		p.c.fail(w, v, apiStatus(err), "reading the policy: "+err.Error())
		return
	}
	id, bad := p.grantee(r, pol)
	if bad != "" {
		p.render(w, r, v, http.StatusBadRequest, bad, r.PostForm)
		return
	}
	persona := cmp.Or(strings.TrimSpace(r.PostFormValue("persona")), negotiate.DefaultPersona)
	tier := r.PostFormValue("tier")
	l := p.c.labels(ctx)
	if tier == "" && !p.c.confirmed(w, r, v, confirmData{What: fmt.Sprintf("Remove the tier granted to %s under persona %s?", l.Label(id), persona),
		Then:   fmt.Sprintf("From its next greeting it gets config.toml's grant, or the default tier (%s); what it holds now stays until then.", pol.DefaultTier),
		Button: "Remove the grant", Cancel: "/ui/policy?peer=" + url.QueryEscape(id), Danger: true}) {
		return
	}
	if _, err := p.c.api.SetDisclosure(ctx, api.DisclosureChange{Persona: persona, Peer: id, Tier: tier}); err != nil {
		p.render(w, r, v, apiStatus(err), refusal("granting a tier", err), r.PostForm)
		return
	}
	text := fmt.Sprintf("Granted %s the tier %s under persona %s. It applies from its next greeting: until then it holds the view it was last sent, which its page shows beside what it will get.", l.Label(id), tier, persona)
	if tier == "" {
		text = fmt.Sprintf("Removed the run-time grant of %s under persona %s: config.toml's, or the default tier, applies from its next greeting.", l.Label(id), persona)
	}
	p.c.changed(w, v, "/ui/policy?peer="+url.QueryEscape(id), notice{Text: text})
}

func (p *policyPages) temperature(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	pol, err := p.c.api.Policy(ctx)
	if err != nil {
		p.c.fail(w, v, apiStatus(err), "reading the policy: "+err.Error())
		return
	}
	id, bad := p.grantee(r, pol)
	if bad != "" {
		p.render(w, r, v, http.StatusBadRequest, bad, r.PostForm)
		return
	}
	max := r.PostFormValue("max")
	l := p.c.labels(ctx)
	if max == "" && !p.c.confirmed(w, r, v, confirmData{What: fmt.Sprintf("Remove the temperature cap of %s?", l.Label(id)),
		Then:   fmt.Sprintf("From its next greeting it is capped by config.toml, or by the default (%s).", pol.DefaultMaxTemperature),
		Button: "Remove the cap", Cancel: "/ui/policy?peer=" + url.QueryEscape(id), Danger: true}) {
		return
	}
	if _, err := p.c.api.SetTemperature(ctx, api.TemperatureChange{Peer: id, Max: max}); err != nil {
		p.render(w, r, v, apiStatus(err), refusal("capping the temperature", err), r.PostForm)
		return
	}
	text := fmt.Sprintf("Capped %s at %s. It applies from its next greeting.", l.Label(id), max)
	if max == "" {
		text = fmt.Sprintf("Removed the run-time temperature cap of %s.", l.Label(id))
	}
	p.c.changed(w, v, "/ui/policy?peer="+url.QueryEscape(id), notice{Text: text})
}
