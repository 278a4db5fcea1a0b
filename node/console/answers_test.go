package console

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/node/api"
)

// The console answers right (issue 28): each test here is one question an
// owner asks that the console once answered wrongly.

// section is the part of a page inside the element with id, up to its
// closing tag of the same name (no nesting of that tag inside).
func section(body, tag, id string) string {
	m := regexp.MustCompile(`(?s)<` + tag + `[^>]* id="` + regexp.QuoteMeta(id) + `"[^>]*>.*?</` + tag + `>`).FindString(body)
	return m
}

// After a grant, bob's page says what he holds (the public view of his
// greeting) beside what he would get at his next greeting, and the
// difference; the grant's notice no longer says his page shows what he
// sees now; the policy form shows the grant, so that submitting it again
// does not downgrade him.
func TestHoldsBesideWouldGet(t *testing.T) {
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	bobID := p.bob.peerID()
	waitUntil(t, "alice's record of the view she sent bob", func() bool {
		s, err := p.alice.c.Seen(testContext(t), api.SeenQuery{Peer: bobID})
		return err == nil && s.Holds != nil
	})

	st, body := b.post("/ui/policy/disclosure", url.Values{"form": {"grant"}, "peer": {bobID}, "tier": {"professional"}})
	want(t, "granting professional", st, body, http.StatusOK, "Granted", "next greeting")
	if strings.Contains(html.UnescapeString(body), "what it sees now") {
		t.Error("the grant's notice still says the peer's page shows what it sees now")
	}
	if sel := section(body, "select", "grant-tier"); !strings.Contains(sel, `<option value="professional" selected>`) {
		t.Errorf("the grant form after the grant does not show professional: %s", sel)
	}
	if sel := section(body, "select", "grant-peer"); !strings.Contains(sel, `<option value="`+bobID+`" selected>`) || !strings.Contains(html.UnescapeString(sel), bobDisplay) {
		t.Errorf("the grant form does not show bob, by name: %s", sel)
	}
	st, body = b.post("/ui/policy/temperature", url.Values{"form": {"cap"}, "peer": {bobID}, "max": {"warm"}})
	want(t, "capping bob at warm", st, body, http.StatusOK, "Capped")
	if sel := section(body, "select", "cap-max"); !strings.Contains(sel, `<option selected>warm</option>`) {
		t.Errorf("the cap form after capping does not show warm: %s", sel)
	}
	if sel := section(body, "select", "grant-tier"); !strings.Contains(sel, `<option value="professional" selected>`) {
		t.Errorf("the grant form after capping falls back from professional: %s", sel)
	}

	st, body = b.get("/ui/peers/" + bobID)
	want(t, "bob's page after the grant", st, body, http.StatusOK, `<b id="held-tier">public</b>`, `<b id="tier">professional</b>`)
	diff := html.UnescapeString(section(body, "div", "difference"))
	for _, s := range []string{"tier: holds public, would get professional", "temperature: holds cool, would get at most warm",
		"calendar.availability: holds shown, not eligible, would get eligible"} {
		if !strings.Contains(diff, s) {
			t.Errorf("the difference does not say %q: %s", s, pageText(diff))
		}
	}
	if r := row(t, body, "cap", "calendar.availability"); !strings.Contains(r, `<td class="held" data-label="In the view it holds">shown, not eligible</td>`) || !strings.Contains(r, ">eligible<") {
		t.Errorf("calendar for bob: %s", pageText(r))
	}
	// The peers page says both.
	st, body = b.get("/ui/peers")
	if r := row(t, body, "peer", bobID); !strings.Contains(r, `<td class="tier">professional</td>`) || !strings.Contains(r, "public, 1 eligible") {
		t.Errorf("bob's row: %s", pageText(r))
	}
}

// A revoked peer is refused everywhere: its row and its page say its
// messages are refused, list nothing it may use, offer to pin its key
// again instead of revoking it; the revocation asks first and its notice
// says what follows. Its refused greeting is in the record of refusals,
// found by the audit's search and its refusals filter, and from its event.
func TestRevokedPeerRefused(t *testing.T) {
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	bobID := p.bob.peerID()

	st, body := b.post("/ui/trust/revoke", url.Values{"peer": {bobID}})
	want(t, "revoking bob", st, body, http.StatusOK, `id="confirm-form"`, "refused")
	st, body = b.post("/ui/trust/revoke", url.Values{"peer": {bobID}, "confirm": {"yes"}})
	want(t, "revoking bob, confirmed", st, body, http.StatusOK, `class="notice warn"`, "its messages are now refused")
	r := row(t, body, "peer", bobID)
	if strings.Contains(r, `action="/ui/trust/revoke"`) || !strings.Contains(r, "Pin again") {
		t.Errorf("bob's trust row after the revocation: %s", pageText(r))
	}

	st, body = b.get("/ui/peers")
	r = row(t, body, "peer", bobID)
	if !strings.Contains(r, `class="refused"`) || !strings.Contains(r, "Refused") || strings.Contains(r, " of 3") {
		t.Errorf("bob's row on the peers page: %s", pageText(r))
	}
	st, body = b.get("/ui/peers/" + bobID)
	want(t, "bob's page", st, body, http.StatusOK, `id="refused"`, "Its messages are refused", `id="pin-again"`, "Pin again")
	text := html.UnescapeString(body)
	for _, bad := range []string{`id="seen"`, ">eligible<", "sign your messages", "ask the owner", `<b id="held-tier">`} {
		if strings.Contains(text, bad) {
			t.Errorf("bob's page, revoked, shows %q:\n%s", bad, pageText(body))
		}
	}

	// His greeting is refused, and found.
	ctx := testContext(t)
	if _, err := p.bob.c.Greet(ctx, api.GreetRequest{Peer: p.alice.peerID()}); err == nil {
		t.Fatal("alice took the greeting of a peer she revoked")
	}
	waitUntil(t, "the refused greeting in the record", func() bool {
		l, err := p.alice.c.Refusals(ctx, api.RefusalQuery{Code: "key_revoked"})
		return err == nil && len(l.Refusals) > 0
	})
	for _, q := range []string{"q=key_revoked", "refusals=1", "refusals=1&peer=" + url.QueryEscape(bobID)} {
		st, body := b.get("/ui/audit?" + q)
		if st != http.StatusOK || !strings.Contains(section(body, "section", "refused-messages"), `data-code="key_revoked"`) {
			t.Errorf("audit?%s: %d, the refused greeting is not listed\n%s", q, st, pageText(body))
		}
	}
	st, body = b.get("/ui/audit/refusals?code=key_revoked")
	want(t, "the refusals page by code", st, body, http.StatusOK, `data-code="key_revoked"`, "You revoked trust in this peer's key")
	st, body = b.get("/ui/audit/refusals?q=KEY_REVOKED&peer=" + url.QueryEscape(bobID))
	want(t, "the refusals page by text and peer", st, body, http.StatusOK, `data-code="key_revoked"`)
	st, body = b.get("/ui/audit/refusals?code=wrong_key")
	want(t, "the refusals page, nothing matching", st, body, http.StatusOK, "No refused message matches")

	// The refused event links to its record, which answers, marked; it
	// never links to the conversation the refused greeting claimed.
	var ev shownEvent
	waitUntil(t, "the refused event", func() bool {
		evs, _ := p.alice.con.events.recent()
		for _, e := range evs {
			if e.Refused() && e.Peer == bobID {
				ev = e
				return true
			}
		}
		return false
	})
	if ev.Name == "" || !strings.HasPrefix(ev.Link, "/ui/audit/refusals?at=") {
		t.Errorf("the refused event: name %q, link %q", ev.Name, ev.Link)
	}
	st, body = b.get("/ui/")
	want(t, "the overview", st, body, http.StatusOK, `aria-live="polite"`, html.EscapeString(bobDisplay))
	if ev.Conversation != "" && strings.Contains(body, `href="/ui/audit/c/`+url.PathEscape(ev.Conversation)) {
		t.Errorf("the overview links the refused event to the conversation it claimed, %s, which holds no refused message", ev.Conversation)
	}
	st, body = b.get(strings.TrimSuffix(ev.Link, "#refusals"))
	want(t, "the refused event's record", st, body, http.StatusOK, `class="entry refusal target"`, `data-code="key_revoked"`)
}

// "Seen as" a peer the daemon does not know shows the refusal, beside the
// field, and no result at all.
func TestSeenAsUnknownShowsOnlyTheError(t *testing.T) {
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	st, body := b.get("/ui/caps?as=nobody")
	want(t, "seen as nobody", st, body, http.StatusNotFound, `id="seen-error"`, "unknown peer", `id="as-error"`, `aria-invalid="true"`)
	for _, bad := range []string{`id="seen"`, `id="seen-facts"`, "the document has no capabilities", "tier ,"} {
		if strings.Contains(body, bad) {
			t.Errorf("seen as nobody shows %q:\n%s", bad, pageText(body))
		}
	}
	// A display name, as the command line takes one for a verb that
	// grants nothing.
	st, body = b.get("/ui/caps?as=" + url.QueryEscape(bobDisplay))
	want(t, "seen as bob by his display name", st, body, http.StatusOK, `id="seen-facts"`, `id="seen"`)
	st, body = b.get("/ui/peers/" + url.PathEscape(bobDisplay))
	want(t, "bob's page by his display name", st, body, http.StatusOK, p.bob.peerID())
	st, body = b.get("/ui/audit/refusals?peer=" + url.QueryEscape(bobDisplay))
	want(t, "refusals by his display name", st, body, http.StatusOK)
}

// The owner's pages advise the owner, with links, never in the words a
// peer is told.
func TestOwnerAdvice(t *testing.T) {
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	bobID := p.bob.peerID()
	st, body := b.get("/ui/peers/" + bobID)
	want(t, "bob's page", st, body, http.StatusOK)
	r := html.UnescapeString(row(t, body, "cap", "calendar.availability"))
	if !strings.Contains(r, "You can grant it professional") || !strings.Contains(r, `href="/ui/policy?peer=`+bobID+`&tier=professional#grant-form"`) {
		t.Errorf("the calendar's advice: %s", r)
	}
	seen := html.UnescapeString(section(body, "table", "seen"))
	for _, peerWords := range []string{"ask the owner", "your tier", "your peer ID"} {
		if strings.Contains(seen, peerWords) {
			t.Errorf("the owner's page advises in the peer's words (%q): %s", peerWords, pageText(seen))
		}
	}
	// The link leads to a form that shows what it advised.
	st, body = b.get("/ui/policy?peer=" + bobID + "&tier=professional")
	if sel := section(body, "select", "grant-tier"); !strings.Contains(sel, `<option value="professional" selected>`) {
		t.Errorf("the advice's link does not preselect professional: %s", sel)
	}
}

// The capability form writes the JSON for the owner: shown without
// adding, added as written, and a field it cannot read refused beside it.
func TestCapabilityForm(t *testing.T) {
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	if err := setAlias(p.alice, "bob", p.bob.peerID()); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"form": {"fields"}, "name": {"notes.read"}, "description": {"Read my notes"}, "min_disclosure": {"personal"},
		"min_auth_level": {"2"}, "temperature": {"warm"}, "peers": {"bob"}, "advertise": {"when-eligible"}}
	preview := url.Values{"preview": {"1"}}
	for k, v := range form {
		preview[k] = v
	}
	seq := p.alice.n.Document().Seq
	st, body := b.post("/ui/caps/add", preview)
	want(t, "showing the JSON", st, body, http.StatusOK, `"name": "notes.read"`, `"advertise": "when-eligible"`, `"min_disclosure": "personal"`,
		`"min_auth_level": 2`, `"peers": [`, p.bob.peerID())
	if p.alice.n.Document().Seq != seq {
		t.Error("showing the JSON changed the document")
	}
	st, body = b.post("/ui/caps/add", form)
	want(t, "adding by the form", st, body, http.StatusOK, "Added notes.read")
	c, ok := p.alice.n.Document().Capability("notes.read")
	if !ok || !c.Hidden() || c.Conditions == nil || c.Conditions.MinDisclosure != "personal" || c.Conditions.MinAuthLevel == nil || *c.Conditions.MinAuthLevel != 2 ||
		c.Conditions.Temperature != "warm" || len(c.Conditions.Peers) != 1 || c.Conditions.Peers[0] != p.bob.peerID() {
		t.Errorf("the capability the form added: %+v", c)
	}
	before := stateOf(t, p.alice)
	for _, bad := range []struct {
		field, value, id string
	}{
		{"min_auth_level", "9", "cap-min-level"},
		{"max_concurrent", "many", "cap-max-concurrent"},
		{"name", "", "cap-name"},
		{"min_disclosure", "royal", "cap-min-disclosure"},
	} {
		f := url.Values{"form": {"fields"}, "name": {"other.cap"}, "description": {"x"}}
		f.Set(bad.field, bad.value)
		st, body := b.post("/ui/caps/add", f)
		if st/100 != 4 || !strings.Contains(body, `id="`+bad.id+`-error"`) || !strings.Contains(body, `aria-describedby="`+bad.id+`-error"`) {
			t.Errorf("%s=%q: %d, want a refusal beside %s\n%s", bad.field, bad.value, st, bad.id, pageText(body))
		}
		if bad.value != "" && !strings.Contains(body, `value="`+bad.value+`"`) && !strings.Contains(body, `<option value="">any</option>`) {
			t.Errorf("%s=%q: the form lost what was typed", bad.field, bad.value)
		}
	}
	sameState(t, "the refused capability forms", before, stateOf(t, p.alice))
}

// A conversation's answers are shown as readable content beside the raw
// message; every page has a skip link, and counts say when they were read.
func TestReadablePages(t *testing.T) {
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	st, body := b.get("/ui/audit/c/" + url.PathEscape(p.conv))
	want(t, "the conversation", st, body, http.StatusOK, `data-part="result"`, "The answer", `<pre class="content">pong</pre>`, "The refusal")
	for _, page := range []string{"/ui/", "/ui/peers", "/ui/caps", "/ui/policy", "/ui/trust", "/ui/audit", "/ui/audit/refusals"} {
		st, body := b.get(page)
		want(t, page, st, body, http.StatusOK, `<a class="skip" href="#main">Skip to content</a>`, `<main id="main" tabindex="-1">`)
	}
	st, body = b.get("/ui/caps")
	want(t, "the caps page", st, body, http.StatusOK, `<a class="skip" href="#seen-as">Skip to Seen as</a>`, `<section id="seen-as" tabindex="-1">`, `<th scope="col">Actions</th>`)
	for _, page := range []string{"/ui/", "/ui/peers"} {
		st, body := b.get(page)
		want(t, page, st, body, http.StatusOK, `id="as-of"`, "reload to update")
	}
}

// A refused grant says why beside the field it concerns.
func TestPolicyRefusalBesideItsField(t *testing.T) {
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	bobID := p.bob.peerID()
	for _, c := range []struct {
		form url.Values
		id   string
	}{
		{url.Values{"form": {"grant"}, "peer": {bobID}, "tier": {"royal"}}, "grant-tier"},
		{url.Values{"form": {"grant"}, "peer": {""}, "peer_other": {"nobody"}, "tier": {"professional"}}, "grant-peer-other"},
		{url.Values{"form": {"cap"}, "peer": {bobID}, "max": {"tepid"}}, "cap-max"},
	} {
		path := "/ui/policy/disclosure"
		if c.form.Get("form") == "cap" {
			path = "/ui/policy/temperature"
		}
		st, body := b.post(path, c.form)
		if st != http.StatusBadRequest || !strings.Contains(body, `id="`+c.id+`-error"`) || !strings.Contains(body, `aria-describedby="`+c.id+`-error"`) {
			t.Errorf("%v: %d, want the refusal beside %s\n%s", c.form, st, c.id, pageText(body))
		}
	}
}
