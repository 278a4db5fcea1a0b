package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// trustPages is /ui/trust: what this daemon established about each peer,
// pinning a key by comparing fingerprints, revoking, checking an identity
// document, and the introduction tokens (POST /v1/trust/{peer} and
// /v1/intros, as `ifaced trust` and `ifaced introduce` do).
type trustPages struct{ c *Console }

type trustData struct {
	Own     string // this daemon's fingerprint, to read to the other owner
	OwnID   string
	Rows    []trust.Info
	Intros  *api.IntroList
	Form    url.Values
	Tiers   []string
	Labels  labels
	Problem string // a list that could not be read
}

func (p *trustPages) show(w http.ResponseWriter, r *http.Request, v *visit) {
	p.render(w, r, v, http.StatusOK, "", nil)
}

func (p *trustPages) render(w http.ResponseWriter, r *http.Request, v *visit, status int, refused string, form url.Values) {
	p.renderField(w, r, v, status, "", refused, form)
}

// renderField is render with the refusal beside the field id too.
func (p *trustPages) renderField(w http.ResponseWriter, r *http.Request, v *visit, status int, id, refused string, form url.Values) {
	ctx := r.Context()
	st, err := p.c.api.Status(ctx)
	if err != nil {
		p.c.fail(w, v, apiStatus(err), "reading the daemon's status: "+err.Error())
		return
	}
	d := trustData{Own: st.Fingerprint, OwnID: st.PeerID, Form: form, Labels: p.c.labels(ctx)}
	rows, err := p.c.api.Trust(ctx)
	if err != nil {
		d.Problem = "reading the trust records: " + err.Error()
	}
	have := map[string]bool{}
	for _, t := range rows {
		have[t.Peer] = true
	}
	// A cached peer without a record is at level 1, signed only: it can
	// be pinned like the others.
	for _, id := range d.Labels.Known() {
		if have[id] {
			continue
		}
		info := trust.Info{Peer: id, Level: conditions.Signed, How: []string{"signed only"}}
		if pid, err := peer.Decode(id); err == nil {
			if pub, err := identity.PublicKeyFromPeerID(pid); err == nil {
				info.Fingerprint = identity.Fingerprint(pub)
			}
		}
		rows = append(rows, info)
	}
	d.Rows = rows
	if d.Intros, err = p.c.api.Introductions().List(ctx); err != nil {
		d.Problem = strings.TrimPrefix(d.Problem+"; ", "; ") + "reading the introduction tokens: " + err.Error()
	}
	if pol, err := p.c.api.Policy(ctx); err == nil {
		d.Tiers = pol.Tiers
	}
	pd := p.c.data(v, "Trust", "trust", d)
	pd.Skips = []skip{{"#intros", "Skip to Introductions"}}
	pd.refuseField(id, refused)
	p.c.pages.render(w, status, "trust", pd)
}

// act runs one trust action on the posted peer and reports it.
func (p *trustPages) act(w http.ResponseWriter, r *http.Request, v *visit, what string, a api.TrustAction) {
	id := strings.TrimSpace(r.PostFormValue("peer"))
	if id == "" {
		p.render(w, r, v, http.StatusBadRequest, "peer: is required: the peer whose key to "+what+"; nothing was changed", r.PostForm)
		return
	}
	l := p.c.labels(r.Context())
	if a.Revoke {
		if _, err := p.c.api.PeerTrust(r.Context(), id); err != nil {
			p.renderField(w, r, v, apiStatus(err), "", refusal(what+" "+shortID(id), err), r.PostForm)
			return
		}
	}
	if a.Revoke && !p.c.confirmed(w, r, v, confirmData{What: fmt.Sprintf("Revoke trust in the key of %s?", l.Label(id)),
		Then: "Every message it sends is refused from then on (key_revoked), in every conversation, open or not; it is shown nothing and may use nothing. " +
			"Its pin goes. To take its messages again, compare fingerprints with its owner and pin its key again.",
		Button: "Revoke", Cancel: "/ui/trust#peer-" + id, Danger: true}) {
		return
	}
	info, err := p.c.api.TrustPeer(r.Context(), id, a)
	if err != nil {
		msg := refusal(what+" "+shortID(id), err)
		p.renderField(w, r, v, apiStatus(err), "fp-"+id, msg, r.PostForm)
		return
	}
	n := notice{Text: fmt.Sprintf("%s: level %s (%s).", l.Label(info.Peer), info.Level, strings.Join(info.How, "; "))}
	if a.Revoke {
		n = notice{Warn: true, Text: fmt.Sprintf("Revoked trust in the key of %s: its messages are now refused (key_revoked), and it is shown nothing. "+
			"To take them again, pin its key again below.", l.Label(info.Peer))}
	}
	p.c.changed(w, v, "/ui/trust#peer-"+info.Peer, n)
}

func (p *trustPages) pin(w http.ResponseWriter, r *http.Request, v *visit) {
	fp := strings.TrimSpace(r.PostFormValue("fingerprint"))
	if fp == "" {
		p.renderField(w, r, v, http.StatusBadRequest, "fp-"+strings.TrimSpace(r.PostFormValue("peer")),
			"fingerprint: is required: the fingerprint (SHA256:…) the peer's owner read to you from `ifaced id`; nothing was changed", r.PostForm)
		return
	}
	p.act(w, r, v, "pin", api.TrustAction{Verify: fp})
}

func (p *trustPages) revoke(w http.ResponseWriter, r *http.Request, v *visit) {
	p.act(w, r, v, "revoke", api.TrustAction{Revoke: true})
}

func (p *trustPages) check(w http.ResponseWriter, r *http.Request, v *visit) {
	p.act(w, r, v, "check", api.TrustAction{Check: true})
}

// parseExpiry reads a token's lifetime as the command line does: 7d, 2w,
// 36h; "" is the daemon's default (trust.intro_expiry).
func parseExpiry(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := config.ParseDuration(s)
	if err != nil || d <= 0 || d > 100*365*24*time.Hour {
		return 0, fmt.Errorf("expires: %q: want a positive lifetime such as 7d, 2w or 36h (empty for the default, trust.intro_expiry)", s)
	}
	if d < time.Second {
		return 0, fmt.Errorf("expires: %q: a token must last at least a second", s)
	}
	return d, nil
}

func (p *trustPages) mint(w http.ResponseWriter, r *http.Request, v *visit) {
	label := strings.TrimSpace(r.PostFormValue("label"))
	if label == "" {
		p.renderField(w, r, v, http.StatusBadRequest, "intro-label", "label: is required: a name for whom the token is for, such as \"Bob\"; nothing was changed", r.PostForm)
		return
	}
	ttl, err := parseExpiry(strings.TrimSpace(r.PostFormValue("expires")))
	if err != nil {
		p.renderField(w, r, v, http.StatusBadRequest, "intro-expires", err.Error()+"; nothing was changed", r.PostForm)
		return
	}
	m, err := p.c.api.Introductions().Mint(r.Context(), api.IntroRequest{Label: label, ExpiresSeconds: int64(ttl / time.Second),
		Disclosure: r.PostFormValue("tier"), Persona: strings.TrimSpace(r.PostFormValue("persona"))})
	if err != nil {
		id := map[string]string{"disclosure": "intro-tier", "persona": "intro-persona", "label": "intro-label", "expires_seconds": "intro-expires"}[apiField(err)]
		p.renderField(w, r, v, apiStatus(err), id, refusal("minting a token", err), r.PostForm)
		return
	}
	p.c.changed(w, v, "/ui/trust", notice{Text: fmt.Sprintf("Minted token %s for %q, valid until %s. Copy it now and hand it to them (they run `ifaced accept-intro` and paste it): it is not shown again.",
		m.ID, m.Label, m.Expires.UTC().Format("2006-01-02 15:04 UTC")), Token: m.Token})
}

func (p *trustPages) revokeIntro(w http.ResponseWriter, r *http.Request, v *visit) {
	id := strings.TrimSpace(r.PostFormValue("id"))
	if id == "" {
		p.render(w, r, v, http.StatusBadRequest, "id: is required: the token to revoke; nothing was changed", r.PostForm)
		return
	}
	if list, err := p.c.api.Introductions().List(r.Context()); err == nil && !slices.ContainsFunc(list.Issued, func(in trust.IssuedIntroInfo) bool { return in.ID == id }) {
		p.render(w, r, v, http.StatusNotFound, fmt.Sprintf("revoking token %s: no token of that ID was minted here; nothing was changed", id), r.PostForm)
		return
	}
	if !p.c.confirmed(w, r, v, confirmData{What: fmt.Sprintf("Revoke the introduction token %s?", id),
		Then:   "It admits nobody from then on, and a peer it introduced loses what it granted (its tier, from its next greeting).",
		Button: "Revoke the token", Cancel: "/ui/trust#intros", Danger: true}) {
		return
	}
	info, err := p.c.api.Introductions().Revoke(r.Context(), id)
	if err != nil {
		p.render(w, r, v, apiStatus(err), refusal("revoking token "+id, err), r.PostForm)
		return
	}
	p.c.changed(w, v, "/ui/trust", notice{Text: fmt.Sprintf("Revoked token %s (%q): it admits nobody from now on.", info.ID, info.Label)})
}
