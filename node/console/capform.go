package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The capability form: a capability from its fields (name, description,
// conditions, shown with its conditions or hidden until eligible), which
// the console writes as the JSON `ifaced caps add` takes. "Show the
// JSON" writes it into the JSON form below without adding, for the owner
// to add what the fields do not hold (parameters, output, price); "Add"
// adds it.

type formConditions struct {
	MinDisclosure string   `json:"min_disclosure,omitempty"`
	MinAuthLevel  *int     `json:"min_auth_level,omitempty"`
	Temperature   string   `json:"temperature,omitempty"`
	Persona       []string `json:"persona,omitempty"`
	Peers         []string `json:"peers,omitempty"`
	MaxConcurrent int      `json:"max_concurrent,omitempty"`
}

type formCapability struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Advertise   string          `json:"advertise,omitempty"`
	Conditions  *formConditions `json:"conditions,omitempty"`
}

// capFieldIDs are the form's field ids by the capability's member, as the
// API names a refused one.
var capFieldIDs = map[string]string{"name": "cap-name", "description": "cap-description", "advertise": "cap-advertise-always",
	"conditions.min_disclosure": "cap-min-disclosure", "conditions.min_auth_level": "cap-min-level", "conditions.temperature": "cap-temperature",
	"conditions.persona": "cap-persona", "conditions.peers": "cap-peers", "conditions.max_concurrent": "cap-max-concurrent"}

// list reads a list typed as "a, b" or "a b".
func list(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}

// capabilityOf builds the capability of the form's fields; a field it
// cannot read is named (by its id) with why.
func (p *capPages) capabilityOf(r *http.Request) (formCapability, string, string) {
	f := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	c := formCapability{Name: f("name"), Description: f("description")}
	if c.Name == "" {
		return c, "cap-name", "name: is required: a name such as notes.read (lower case, dots between words)"
	}
	switch a := f("advertise"); a {
	case "", "always":
	case "when-eligible":
		c.Advertise = a
	default:
		return c, "cap-advertise-always", fmt.Sprintf("advertise: %q: want always (shown with its conditions) or when-eligible (hidden until eligible)", a)
	}
	var cd formConditions
	cd.MinDisclosure, cd.Temperature = f("min_disclosure"), f("temperature")
	if l := f("min_auth_level"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 || n > 3 {
			return c, "cap-min-level", fmt.Sprintf("min_auth_level: %q: want 0 (introduced), 1 (signed), 2 (verified) or 3 (bound), or none", l)
		}
		cd.MinAuthLevel = &n
	}
	cd.Persona = list(f("persona"))
	l := p.c.labels(r.Context())
	for _, ref := range list(f("peers")) {
		// The owner's alias names a peer; a display name is its own claim,
		// so an allow list does not take one.
		if id, ok := l.byAlias[ref]; ok {
			ref = id
		}
		cd.Peers = append(cd.Peers, ref)
	}
	if m := f("max_concurrent"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			return c, "cap-max-concurrent", fmt.Sprintf("max_concurrent: %q: want a whole number of uses at once, 0 or empty for no limit", m)
		}
		cd.MaxConcurrent = n
	}
	if cd.MinDisclosure != "" || cd.MinAuthLevel != nil || cd.Temperature != "" || len(cd.Persona) > 0 || len(cd.Peers) > 0 || cd.MaxConcurrent > 0 {
		c.Conditions = &cd
	}
	return c, "", ""
}

func (p *capPages) addFields(w http.ResponseWriter, r *http.Request, v *visit) {
	c, id, bad := p.capabilityOf(r)
	if bad != "" {
		p.showWith(w, r, v, http.StatusBadRequest, id, bad+"; nothing was changed", r.PostForm, "")
		return
	}
	raw, err := json.Marshal(c)
	if err != nil {
		p.c.fail(w, v, http.StatusInternalServerError, "writing the capability as JSON: "+err.Error())
		return
	}
	var pretty bytes.Buffer
	json.Indent(&pretty, raw, "", "  ")
	if r.PostFormValue("preview") != "" {
		p.showWith(w, r, v, http.StatusOK, "", "", r.PostForm, pretty.String())
		return
	}
	doc, err := p.c.api.AddCapability(r.Context(), raw)
	if err != nil {
		id := ""
		if f := apiField(err); f != "" {
			id = capFieldIDs[f]
		}
		p.showWith(w, r, v, apiStatus(err), id, refusal("adding the capability", err), r.PostForm, pretty.String())
		return
	}
	p.c.changed(w, v, "/ui/caps", notice{Text: fmt.Sprintf("Added %s, written as %s. The document is now seq %d with %d capabilities; peers in conversation are sent their new view; kept across restarts.",
		c.Name, raw, doc.Seq, len(doc.Capabilities))})
}
