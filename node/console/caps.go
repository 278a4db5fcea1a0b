package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/owner"
)

// capPages are /ui/caps and /ui/caps/edit/{name}: the owner's document,
// where each capability comes from, adding, editing and removing them
// (through POST and DELETE /v1/caps, as `caps add` and `caps remove`),
// and "seen as": the standing of each for a peer or a context
// (GET /v1/seen).
type capPages struct{ c *Console }

type capRow struct {
	negotiate.Capability
	Origin     string
	Conditions string
	JSON       string
}

type capsData struct {
	Own     *api.OwnDocument
	Rows    []capRow
	Form    url.Values // the add forms, kept when refused or previewed
	JSON    string     // what the capability form wrote (a preview, or kept when refused)
	As      url.Values // the "seen as" form
	Seen    *seenView  // nil when the query was refused (SeenErr) or none was asked
	SeenErr string
	Tiers   []string
	Labels  labels
}

// F is a field of the add forms as it was sent, "" when none was.
func (d capsData) F(name string) string {
	if d.Form == nil {
		return ""
	}
	return d.Form.Get(name)
}

// originWords say where a capability comes from.
var originWords = map[string]string{owner.OriginConfig: "config.toml", owner.OriginRuntime: "added at run time",
	owner.OriginMCP: "the MCP server", owner.OriginUnsaved: "unsaved"}

func (p *capPages) list(w http.ResponseWriter, r *http.Request, v *visit) {
	p.show(w, r, v, http.StatusOK, "", nil)
}

// show renders the page with status and, when refused, why and the form
// as it was sent.
func (p *capPages) show(w http.ResponseWriter, r *http.Request, v *visit, status int, refusal string, form url.Values) {
	p.showWith(w, r, v, status, "", refusal, form, "")
}

// showWith is show with the refusal beside the field id too, and js in
// the capability form's JSON.
func (p *capPages) showWith(w http.ResponseWriter, r *http.Request, v *visit, status int, id, refusal string, form url.Values, js string) {
	ctx := r.Context()
	own, err := p.c.api.OwnDocument(ctx)
	if err != nil {
		p.c.fail(w, v, apiStatus(err), "reading the document: "+err.Error())
		return
	}
	d := capsData{Own: own, Form: form, JSON: js, As: r.URL.Query(), Labels: p.c.labels(ctx)}
	if pol, err := p.c.api.Policy(ctx); err == nil {
		d.Tiers = pol.Tiers
	}
	origin := map[string]string{}
	for _, o := range own.Origins {
		origin[o.Name] = o.Origin
	}
	for _, c := range own.Document.Capabilities {
		js, _ := capabilityJSON(c)
		d.Rows = append(d.Rows, capRow{Capability: c, Origin: originWords[origin[c.Name]], Conditions: describeConditions(c), JSON: js})
	}
	if q := r.URL.Query(); r.Method == http.MethodGet && anyOf(q, "as", "tier", "level", "temperature", "persona") {
		sq := api.SeenQuery{Peer: d.Labels.resolve(q.Get("as")), Tier: q.Get("tier"), Temperature: q.Get("temperature"), Persona: q.Get("persona")}
		var err error
		if l := q.Get("level"); l != "" {
			n, aerr := strconv.Atoi(l)
			lv := conditions.Level(n)
			sq.Level = &lv
			if aerr != nil {
				err = &api.Error{Status: http.StatusBadRequest, Code: api.CodeBadRequest, Field: "level",
					Message: fmt.Sprintf("level: %q: want an authentication level, 0 (introduced), 1 (signed), 2 (verified) or 3 (bound), or -1 for none", l)}
			}
		}
		var seen *api.Seen
		if err == nil {
			seen, err = p.c.api.Seen(ctx, sq)
		}
		// A refused query shows its refusal only: the answer of a failed
		// call is no result.
		if err != nil {
			d.SeenErr = err.Error()
			if status == http.StatusOK {
				status = apiStatus(err)
			}
		} else {
			d.Seen = makeSeenView(seen)
		}
	}
	pd := p.c.data(v, "Capabilities", "caps", d)
	pd.Skips = []skip{{"#seen-as", "Skip to Seen as"}, {"#add", "Skip to Add a capability"}}
	pd.refuseField(id, refusal)
	if d.SeenErr != "" {
		if pd.Fields == nil {
			pd.Fields = map[string]string{}
		}
		pd.Fields[seenField(d.SeenErr)] = d.SeenErr
	}
	p.c.pages.render(w, status, "caps", pd)
}

// seenField is the "seen as" form field a refusal of GET /v1/seen
// concerns.
func seenField(msg string) string {
	for _, f := range []string{"tier", "level", "temperature", "persona"} {
		if strings.HasPrefix(msg, f+":") || strings.Contains(msg, "bad_request: "+f) {
			return "as-" + f
		}
	}
	return "as"
}

func anyOf(q url.Values, keys ...string) bool {
	for _, k := range keys {
		if q.Get(k) != "" {
			return true
		}
	}
	return false
}

// capabilityJSON is a capability as the owner edits it: indented JSON.
func capabilityJSON(c negotiate.Capability) (string, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return "", err
	}
	return b.String(), nil
}

// describeConditions writes a capability's conditions as key=value pairs,
// as `ifaced caps` does.
func describeConditions(c negotiate.Capability) string {
	parts := c.ConditionTerms()
	if c.Hidden() {
		parts = append(parts, "hidden from anyone not eligible")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// refusal says an API refusal on the page, naming its field.
func refusal(action string, err error) string {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Field != "" && !strings.HasPrefix(ae.Message, ae.Field) {
		return fmt.Sprintf("%s: %s: %s; nothing was changed", action, ae.Field, ae.Message)
	}
	return fmt.Sprintf("%s: %v; nothing was changed", action, err)
}

func (p *capPages) add(w http.ResponseWriter, r *http.Request, v *visit) {
	if r.PostFormValue("form") == "fields" {
		p.addFields(w, r, v)
		return
	}
	src := strings.TrimSpace(r.PostFormValue("capability"))
	if src == "" {
		p.showWith(w, r, v, http.StatusBadRequest, "capability", `capability: is empty: paste one capability as a JSON object, e.g. {"name": "ping", "description": "Answer pings"}, or an array of them; nothing was changed`, r.PostForm, "")
		return
	}
	doc, err := p.c.api.AddCapability(r.Context(), json.RawMessage(src))
	if err != nil {
		p.showWith(w, r, v, apiStatus(err), "capability", refusal("adding the capability", err), r.PostForm, "")
		return
	}
	p.c.changed(w, v, "/ui/caps", notice{Text: fmt.Sprintf("Added. The document is now seq %d with %d capabilities; peers in conversation are sent their new view; kept across restarts.",
		doc.Seq, len(doc.Capabilities))})
}

func (p *capPages) remove(w http.ResponseWriter, r *http.Request, v *visit) {
	name := r.PostFormValue("name")
	if name == "" {
		p.show(w, r, v, http.StatusBadRequest, "name: is required: the capability to remove; nothing was changed", nil)
		return
	}
	if own, err := p.c.api.OwnDocument(r.Context()); err == nil {
		if _, _, ok := findCapability(own, name); !ok {
			p.show(w, r, v, http.StatusNotFound, fmt.Sprintf("removing %q: the document has no such capability; nothing was changed", name), nil)
			return
		}
	}
	if !p.c.confirmed(w, r, v, confirmData{What: fmt.Sprintf("Remove the capability %s?", name),
		Then:   "It leaves the document at once (a new seq); peers in conversation are sent their new view without it, and no one can use it. It stays removed across restarts, even when config.toml has it; adding it again brings it back.",
		Button: "Remove " + name, Cancel: "/ui/caps", Danger: true}) {
		return
	}
	doc, err := p.c.api.RemoveCapability(r.Context(), name)
	if err != nil {
		p.show(w, r, v, apiStatus(err), refusal("removing "+strconv.Quote(name), err), nil)
		return
	}
	p.c.changed(w, v, "/ui/caps", notice{Text: fmt.Sprintf("Removed %s. The document is now seq %d with %d capabilities; kept removed across restarts.",
		name, doc.Seq, len(doc.Capabilities))})
}

type editData struct {
	Name   string
	Origin string
	JSON   string
}

func (p *capPages) edit(w http.ResponseWriter, r *http.Request, v *visit) {
	p.showEdit(w, r, v, http.StatusOK, "", "")
}

// showEdit renders the edit page of the capability in the path, with
// text in the editor when it was refused.
func (p *capPages) showEdit(w http.ResponseWriter, r *http.Request, v *visit, status int, refused, text string) {
	name := r.PathValue("name")
	own, err := p.c.api.OwnDocument(r.Context())
	if err != nil {
		p.c.fail(w, v, apiStatus(err), "reading the document: "+err.Error())
		return
	}
	c, origin, ok := findCapability(own, name)
	if !ok {
		p.c.fail(w, v, http.StatusNotFound, fmt.Sprintf("the document has no capability %q (see /ui/caps)", name))
		return
	}
	d := editData{Name: name, Origin: origin, JSON: text}
	if d.JSON == "" {
		d.JSON, _ = capabilityJSON(c)
	}
	pd := p.c.data(v, "Edit "+name, "caps", d)
	pd.Error = refused
	p.c.pages.render(w, status, "capedit", pd)
}

func findCapability(own *api.OwnDocument, name string) (negotiate.Capability, string, bool) {
	for _, c := range own.Document.Capabilities {
		if c.Name == name {
			for _, o := range own.Origins {
				if o.Name == name {
					return c, o.Origin, true
				}
			}
			return c, "", true
		}
	}
	return negotiate.Capability{}, "", false
}

// save replaces a capability: the new one is checked here first (under
// the daemon's tiers), so that a bad edit changes nothing; then the old
// one is removed and the new one added, through the API. Should the
// daemon still refuse the new one, the old one is added back.
func (p *capPages) save(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	name := r.PathValue("name")
	src := strings.TrimSpace(r.PostFormValue("capability"))
	own, err := p.c.api.OwnDocument(ctx)
	if err != nil {
		p.c.fail(w, v, apiStatus(err), "reading the document: "+err.Error())
		return
	}
	old, origin, ok := findCapability(own, name)
	if !ok {
		p.c.fail(w, v, http.StatusNotFound, fmt.Sprintf("the document has no capability %q: nothing was changed", name))
		return
	}
	if origin == owner.OriginMCP {
		p.showEdit(w, r, v, http.StatusConflict, fmt.Sprintf("%s is a tool of the MCP server ([agent] mcp): change it there; nothing was changed", name), src)
		return
	}
	f, err := negotiate.LoadCapabilities([]byte(src), negotiate.FormatJSON, p.c.tiers)
	if err == nil && f.Shape != negotiate.ShapeCapability {
		err = fmt.Errorf("read as %s: an edit is one capability, a JSON object", f.Describe())
	}
	if err != nil {
		var lines []string
		for _, e := range negotiate.Errors(err) {
			lines = append(lines, e.Error())
		}
		p.showEdit(w, r, v, http.StatusBadRequest, "capability: "+strings.Join(lines, "; ")+"; nothing was changed", src)
		return
	}
	next := f.Capabilities[0]
	if next.Name != name {
		if _, _, taken := findCapability(own, next.Name); taken {
			p.showEdit(w, r, v, http.StatusConflict, fmt.Sprintf("name: %q is another capability's; nothing was changed", next.Name), src)
			return
		}
	}
	before, _ := json.Marshal(old)
	after, _ := json.Marshal(next)
	if bytes.Equal(before, after) {
		p.c.changed(w, v, "/ui/caps", notice{Text: fmt.Sprintf("%s is unchanged: nothing was saved.", name)})
		return
	}
	if _, err := p.c.api.RemoveCapability(ctx, name); err != nil {
		p.showEdit(w, r, v, apiStatus(err), refusal("replacing "+strconv.Quote(name), err), src)
		return
	}
	doc, err := p.c.api.AddCapability(ctx, after)
	if err != nil {
		msg := refusal("saving "+strconv.Quote(name), err)
		if _, rerr := p.c.api.AddCapability(ctx, before); rerr != nil {
			msg = fmt.Sprintf("saving %q: %v; and putting the old one back failed too (%v): add it again from the JSON below", name, err, rerr)
			p.showEdit(w, r, v, apiStatus(err), msg, string(before))
			return
		}
		p.showEdit(w, r, v, apiStatus(err), strings.TrimSuffix(msg, "; nothing was changed")+"; the old capability was put back as it was", src)
		return
	}
	text := fmt.Sprintf("Saved %s. The document is now seq %d; peers in conversation are sent their new view.", next.Name, doc.Seq)
	if origin == owner.OriginConfig {
		text += " It now comes from the console (kept across restarts); config.toml's version stays removed."
	}
	p.c.changed(w, v, "/ui/caps", notice{Text: text})
}

// apiField is the field an API refusal names, "" when none.
func apiField(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Field
	}
	return ""
}
