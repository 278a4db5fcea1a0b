package console

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Confirming. Revoking and removing are asked twice: the form's post
// changes nothing and answers with a page that says what will happen,
// whose own form (the same fields, the session's CSRF token, and
// confirm=yes) does it. Plain HTML forms, so it works without
// JavaScript; the page's Cancel goes back without a change.

type confirmData struct {
	Action  string     // where the confirmed form posts
	Fields  url.Values // the fields posted, carried over
	What    string     // the question: "Revoke trust in Bob's key?"
	Then    string     // what follows
	Button  string     // the confirming button's words
	Cancel  string     // where Cancel goes
	Danger  bool       // a change that refuses or removes
	KeyList []string   // Fields' keys, in order
}

// confirmed reports whether the post carries confirm=yes; otherwise it
// renders the confirmation page (status 200, nothing changed) and
// reports false.
func (c *Console) confirmed(w http.ResponseWriter, r *http.Request, v *visit, d confirmData) bool {
	if r.PostFormValue("confirm") == "yes" {
		return true
	}
	d.Action = r.URL.Path
	d.Fields = url.Values{}
	for k, vs := range r.PostForm {
		if k != "csrf" && k != "confirm" {
			d.Fields[k] = vs
		}
	}
	for k := range d.Fields {
		d.KeyList = append(d.KeyList, k)
	}
	slices.Sort(d.KeyList)
	if d.Cancel == "" || !strings.HasPrefix(d.Cancel, "/ui/") {
		d.Cancel = "/ui/"
	}
	c.pages.render(w, http.StatusOK, "confirm", c.data(v, "Confirm", "", d))
	return false
}
