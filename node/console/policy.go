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
	Policy *api.Policy
	Grants []grantRow
	Caps   []capRowT
	Peer   string     // preselected in the forms
	Form   url.Values // the form refused, as sent
	Labels labels
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
	d := policyData{Policy: pol, Peer: r.URL.Query().Get("peer"), Form: form, Labels: p.c.labels(ctx)}
	for _, persona := range slices.Sorted(maps.Keys(pol.Disclosure)) {
		for _, pr := range slices.Sorted(maps.Keys(pol.Disclosure[persona])) {
			d.Grants = append(d.Grants, grantRow{Persona: persona, Peer: pr, Tier: pol.Disclosure[persona][pr]})
		}
	}
	for _, pr := range slices.Sorted(maps.Keys(pol.MaxTemperature)) {
		d.Caps = append(d.Caps, capRowT{Peer: pr, Max: pol.MaxTemperature[pr]})
	}
	pd := p.c.data(v, "Policy", "policy", d)
	pd.Error = refused
	p.c.pages.render(w, status, "policy", pd)
}

// grantee reads the peer of a grant: an alias of the owner's, a peer ID,
// or an agent ID the policy or trust already names. A display name is the
// peer's own claim, so it does not name a grantee (as on the command
// line); anything else is an unknown peer.
func (p *policyPages) grantee(r *http.Request, pol *api.Policy) (string, string) {
	ref := strings.TrimSpace(r.PostFormValue("peer"))
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
	if _, err := p.c.api.SetDisclosure(ctx, api.DisclosureChange{Persona: persona, Peer: id, Tier: tier}); err != nil {
		p.render(w, r, v, apiStatus(err), refusal("granting a tier", err), r.PostForm)
		return
	}
	l := p.c.labels(ctx)
	text := fmt.Sprintf("Granted %s the tier %s under persona %s. It applies from its next greeting; what it sees now is on its page.", l.Label(id), tier, persona)
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
	if _, err := p.c.api.SetTemperature(ctx, api.TemperatureChange{Peer: id, Max: max}); err != nil {
		p.render(w, r, v, apiStatus(err), refusal("capping the temperature", err), r.PostForm)
		return
	}
	l := p.c.labels(ctx)
	text := fmt.Sprintf("Capped %s at %s. It applies from its next greeting.", l.Label(id), max)
	if max == "" {
		text = fmt.Sprintf("Removed the run-time temperature cap of %s.", l.Label(id))
	}
	p.c.changed(w, v, "/ui/policy?peer="+url.QueryEscape(id), notice{Text: text})
}
