package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/libp2p/go-libp2p/core/peer"
)

// bobDisplay is bob's display name: his own words, which the console
// must show as text.
const bobDisplay = `Bob <img src=x onerror="alert(1)">`

// greetedPair is alice (aliceConfig), whose console the tests drive, and
// bob, who greeted her, had ping answered and was refused the calendar.
type greetedPair struct {
	alice, bob *daemon
	conv       string // the conversation of the greeting and requests
	refusal    string // the message ID of alice's refusal of the calendar
}

func greet(t *testing.T) *greetedPair {
	t.Helper()
	ctx := testContext(t)
	bobCfg := nodetest.LoopbackConfig()
	bobCfg.Identity.Display = bobDisplay
	p := &greetedPair{alice: startDaemon(t, aliceConfig()), bob: startDaemon(t, bobCfg)}
	if _, err := p.bob.c.Connect(ctx, p.alice.n.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	g, err := p.bob.c.Greet(ctx, api.GreetRequest{Peer: p.alice.peerID(), Disclosure: "professional"})
	if err != nil {
		t.Fatal(err)
	}
	p.conv = g.ConversationID
	if _, err := p.bob.c.Invoke(ctx, api.InvokeRequest{Peer: p.alice.peerID(), Capability: "ping", ConversationID: p.conv}); err != nil {
		t.Fatal(err)
	}
	_, err = p.bob.c.Invoke(ctx, api.InvokeRequest{Peer: p.alice.peerID(), Capability: "calendar.availability", ConversationID: p.conv})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.PeerError == nil {
		t.Fatalf("bob's calendar request: %v, want alice's refusal", err)
	}
	// Alice's refusal, from her audit log.
	waitUntil(t, "alice's refusal in her audit log", func() bool {
		ac, err := p.alice.c.AuditEntries(ctx, p.conv)
		if err != nil {
			return false
		}
		for _, e := range ac.Entries {
			if e.Direction == gossip.Sent && e.Message != nil && e.Message.Headers.Phase == gossip.PhaseError {
				p.refusal = e.Message.Headers.MessageID
			}
		}
		return p.refusal != ""
	})
	return p
}

// row is the table row of a page whose data-ATTR is value.
func row(t *testing.T, body, attr, value string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-` + attr + `="` + regexp.QuoteMeta(value) + `".*?</tr>`).FindString(body)
	if m == "" {
		t.Errorf("no row with data-%s=%q in\n%s", attr, value, pageText(body))
	}
	return m
}

// seenTable is the "seen as" table of a page.
func seenTable(body string) string {
	_, t, _ := strings.Cut(body, `<table class="seen" id="seen">`)
	return t
}

// TestPeerPages: the peers page lists bob with what alice established
// and grants; his page says what he sees of her and why, capability by
// capability, what he offers, and their conversation.
func TestPeerPages(t *testing.T) {
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	bobID := p.bob.peerID()

	st, body := b.get("/ui/peers")
	want(t, "peers", st, body, http.StatusOK)
	r := row(t, body, "peer", bobID)
	for _, s := range []string{"1 (signed)", `<td class="tier">public</td>`, "1 of 3", "connected (direct)"} {
		if !strings.Contains(r, s) {
			t.Errorf("bob's row does not say %q: %s", s, pageText(r))
		}
	}

	if strings.Contains(body, "<img") || !strings.Contains(body, html.EscapeString(bobDisplay)) && !strings.Contains(body, "Bob &lt;img") {
		t.Errorf("bob's display name is not shown as text:\n%s", r)
	}

	st, body = b.get("/ui/peers/" + bobID)
	want(t, "bob's page", st, body, http.StatusOK, bobID, p.bob.n.ID().Fingerprint(), `<b id="tier">public</b>`, p.conv)
	if r := row(t, body, "cap", "ping"); !strings.Contains(r, ">eligible<") {
		t.Errorf("ping for bob: %s", pageText(r))
	}
	if r := row(t, body, "cap", "calendar.availability"); !strings.Contains(r, "shown, not eligible") || !strings.Contains(r, "min_disclosure") || !strings.Contains(r, "professional") {
		t.Errorf("calendar for bob: %s", pageText(r))
	}
	if r := row(t, body, "cap", "diary.read"); !strings.Contains(r, "hidden: not in its view") {
		t.Errorf("the diary for bob: %s", pageText(r))
	}
	// What he offers: his own document's view for alice, cached by the
	// greeting.
	if !strings.Contains(body, "What it offers this agent") || !strings.Contains(body, "<b>ping</b>") {
		t.Errorf("bob's offers are not shown:\n%s", pageText(body))
	}
	// Asked again.
	st, body = b.get("/ui/peers/" + bobID + "?refresh=1")
	want(t, "bob's page, asked again", st, body, http.StatusOK, "just asked")
	// Under a persona alice did not establish for him: the default one.
	st, body = b.get("/ui/peers/" + bobID + "?persona=work")
	want(t, "bob under work", st, body, http.StatusOK, "not one the owner established")
	// By the owner's alias for him.
	if err := setAlias(p.alice, "bob", bobID); err != nil {
		t.Fatal(err)
	}
	st, body = b.get("/ui/peers/bob")
	want(t, "bob by alias", st, body, http.StatusOK, bobID, "<dt>Called</dt><dd>bob (Bob &lt;img")
	// Unknown and unreadable peers.
	st, body = b.get("/ui/peers/nobody")
	want(t, "an unknown peer", st, body, http.StatusNotFound, "unknown peer")
	st, body = b.get("/ui/peers/did:key:zNope")
	want(t, "a bad did:key", st, body, http.StatusBadRequest, "peer")
}

// setAlias writes an alias as `ifaced alias` does.
func setAlias(d *daemon, name, id string) error {
	book := d.con.aliases
	pid, err := peer.Decode(id)
	if err != nil {
		return err
	}
	_, err = book.Set(name, pid)
	return err
}

// TestPolicyPage: raising bob's tier on the policy page changes what his
// page says he sees; a bad tier, an unknown peer or a display name
// changes nothing and says why.
func TestPolicyPage(t *testing.T) {
	ctx := testContext(t)
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	bobID := p.bob.peerID()

	st, body := b.get("/ui/policy?peer=" + url.QueryEscape(bobID))
	want(t, "policy", st, body, http.StatusOK, "public &lt; professional", `value="`+bobID+`"`)

	before := stateOf(t, p.alice)
	for _, c := range []struct {
		name string
		form url.Values
		says []string
	}{
		{"a bad tier", url.Values{"peer": {bobID}, "tier": {"royal"}}, []string{"tier", "royal", "professional"}},
		{"an unknown peer", url.Values{"peer": {"nobody"}, "tier": {"professional"}}, []string{"unknown peer", "nobody"}},
		{"a display name", url.Values{"peer": {"Bob's agent"}, "tier": {"professional"}}, []string{"unknown peer", "display name"}},
		{"no peer", url.Values{"tier": {"professional"}}, []string{"peer: is required"}},
	} {
		st, body := b.post("/ui/policy/disclosure", c.form)
		want(t, c.name, st, body, http.StatusBadRequest, c.says...)
		if errorOn(body) == "" {
			t.Errorf("%s: no refusal on the page", c.name)
		}
	}
	st, body = b.post("/ui/policy/temperature", url.Values{"peer": {bobID}, "max": {"tepid"}})
	want(t, "a bad temperature", st, body, http.StatusBadRequest, "tepid", "cool, warm or hot")
	sameState(t, "the refused policy changes", before, stateOf(t, p.alice))

	// Granted professional: the calendar becomes eligible for him.
	st, body = b.post("/ui/policy/disclosure", url.Values{"peer": {bobID}, "tier": {"professional"}, "persona": {""}})
	want(t, "granting professional", st, body, http.StatusOK, "Granted", "professional", `id="peer-link"`)
	if r := row(t, body, "peer", bobID); !strings.Contains(r, `<td class="tier">professional</td>`) {
		t.Errorf("the grant is not in the map: %s", pageText(r))
	}
	pol, err := p.alice.c.Policy(ctx)
	if err != nil || pol.Disclosure["default"][bobID] != "professional" {
		t.Errorf("the daemon's policy after the grant: %+v, %v", pol, err)
	}
	st, body = b.get("/ui/peers/" + bobID)
	want(t, "bob's page after the grant", st, body, http.StatusOK, `<b id="tier">professional</b>`, "disclosure map grants it professional")
	if r := row(t, body, "cap", "calendar.availability"); !strings.Contains(r, ">eligible<") {
		t.Errorf("calendar for bob after the grant: %s", pageText(r))
	}
	// By alias, and capped at warm.
	if err := setAlias(p.alice, "bob", bobID); err != nil {
		t.Fatal(err)
	}
	st, body = b.post("/ui/policy/temperature", url.Values{"peer": {"bob"}, "max": {"warm"}})
	want(t, "capping bob at warm", st, body, http.StatusOK, "Capped")
	if pol, err := p.alice.c.Policy(ctx); err != nil || pol.MaxTemperature[bobID] != conditions.Warm {
		t.Errorf("the daemon's caps: %+v, %v", pol, err)
	}
	// Removing the grant: the default tier again.
	// Removing asks first, and changes nothing until confirmed.
	st, body = b.post("/ui/policy/disclosure", url.Values{"peer": {bobID}, "tier": {""}, "persona": {"default"}})
	want(t, "removing the grant, unconfirmed", st, body, http.StatusOK, "Remove the tier granted to", `name="confirm" value="yes"`)
	if pol, err := p.alice.c.Policy(ctx); err != nil || pol.Disclosure["default"][bobID] != "professional" {
		t.Errorf("the grant after an unconfirmed removal: %+v, %v", pol, err)
	}
	st, body = b.post("/ui/policy/disclosure", url.Values{"peer": {bobID}, "tier": {""}, "persona": {"default"}, "confirm": {"yes"}})
	want(t, "removing the grant", st, body, http.StatusOK, "Removed the run-time grant")
	if pol, err := p.alice.c.Policy(ctx); err != nil || pol.Disclosure["default"][bobID] != "" {
		t.Errorf("the grant after removing it: %+v, %v", pol, err)
	}
}

// TestCapsPage: the document, adding, editing and removing a capability,
// each refused with its reason (bad JSON, an invalid schema or tier, a
// name in use, an unknown name) without a change; and "seen as".
func TestCapsPage(t *testing.T) {
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	bobID := p.bob.peerID()

	st, body := b.get("/ui/caps")
	want(t, "caps", st, body, http.StatusOK, "calendar.availability", "min_disclosure=professional", "hidden from anyone not eligible", "config.toml")

	before := stateOf(t, p.alice)
	for _, c := range []struct {
		name, cap string
		status    int
		says      []string
	}{
		{"nothing", "", http.StatusBadRequest, []string{"capability: is empty"}},
		{"not JSON", "{name: x", http.StatusBadRequest, []string{"line 1", "nothing was changed"}},
		{"an invalid schema", `{"name": "bad.schema", "description": "x", "parameters": {"type": "nonsense"}}`, http.StatusBadRequest, []string{"parameters"}},
		{"an unknown tier", `{"name": "bad.tier", "description": "x", "conditions": {"min_disclosure": "royal"}}`, http.StatusBadRequest, []string{"min_disclosure", "royal"}},
		{"a name in use", `{"name": "ping", "description": "again"}`, http.StatusConflict, []string{"ping"}},
	} {
		st, body := b.post("/ui/caps/add", url.Values{"capability": {c.cap}})
		want(t, "adding "+c.name, st, body, c.status, c.says...)
		if errorOn(body) == "" {
			t.Errorf("adding %s: no refusal on the page", c.name)
		}
		if c.cap != "" && !strings.Contains(body, html.EscapeString(c.cap)) {
			t.Errorf("adding %s: the form lost what was typed", c.name)
		}
	}
	st, body = b.post("/ui/caps/remove", url.Values{"name": {"no.such"}})
	want(t, "removing an unknown capability", st, body, http.StatusNotFound, "no.such")
	st, body = b.get("/ui/caps/edit/no.such")
	want(t, "editing an unknown capability", st, body, http.StatusNotFound, "no capability")
	st, body = b.post("/ui/caps/edit/no.such", url.Values{"capability": {`{"name": "no.such", "description": "x"}`}})
	want(t, "saving an unknown capability", st, body, http.StatusNotFound, "no capability")
	for _, c := range []struct {
		name, cap string
		status    int
		says      []string
	}{
		{"an unknown tier", `{"name": "calendar.availability", "description": "x", "conditions": {"min_disclosure": "royal"}}`, http.StatusBadRequest, []string{"royal", "nothing was changed"}},
		{"a misspelt member", `{"name": "calendar.availability", "descripton": "x"}`, http.StatusBadRequest, []string{"descripton", "nothing was changed"}},
		{"two capabilities", `[{"name": "a.b", "description": "x"}, {"name": "c.d", "description": "y"}]`, http.StatusBadRequest, []string{"one capability"}},
		{"another's name", `{"name": "ping", "description": "x"}`, http.StatusConflict, []string{"ping", "another capability"}},
	} {
		st, body := b.post("/ui/caps/edit/calendar.availability", url.Values{"capability": {c.cap}})
		want(t, "saving "+c.name, st, body, c.status, c.says...)
	}
	sameState(t, "the refused capability changes", before, stateOf(t, p.alice))

	// Added, edited, removed: each is the daemon's document at once.
	st, body = b.post("/ui/caps/add", url.Values{"capability": {`{"name": "notes.read", "description": "Read my notes", "conditions": {"min_disclosure": "personal"}}`}})
	want(t, "adding notes.read", st, body, http.StatusOK, "Added", "notes.read", "min_disclosure=personal")
	if _, ok := p.alice.n.Document().Capability("notes.read"); !ok {
		t.Error("notes.read is not in the daemon's document")
	}
	st, body = b.get("/ui/caps/edit/notes.read")
	want(t, "the edit page", st, body, http.StatusOK, "Read my notes", `action="/ui/caps/edit/notes.read"`)
	st, body = b.post("/ui/caps/edit/notes.read", url.Values{"capability": {`{"name": "notes.read", "description": "Read my notes, kindly"}`}})
	want(t, "saving notes.read", st, body, http.StatusOK, "Saved notes.read", "Read my notes, kindly")
	if c, ok := p.alice.n.Document().Capability("notes.read"); !ok || c.Description != "Read my notes, kindly" || c.Conditions != nil {
		t.Errorf("notes.read after the edit: %+v", c)
	}
	seq := p.alice.n.Document().Seq
	st, body = b.post("/ui/caps/edit/notes.read", url.Values{"capability": {`{"name": "notes.read", "description": "Read my notes, kindly"}`}})
	want(t, "saving it unchanged", st, body, http.StatusOK, "unchanged")
	if p.alice.n.Document().Seq != seq {
		t.Error("saving an unchanged capability changed the document")
	}
	// A config capability edited: kept removed from config, added at run time.
	st, body = b.post("/ui/caps/edit/ping", url.Values{"capability": {`{"name": "ping", "description": "Answer pings, please"}`}})
	want(t, "editing ping", st, body, http.StatusOK, "Saved ping", "config.toml's version stays removed")
	// Removing asks first, and changes nothing until confirmed.
	seq = p.alice.n.Document().Seq
	st, body = b.post("/ui/caps/remove", url.Values{"name": {"notes.read"}})
	want(t, "removing notes.read, unconfirmed", st, body, http.StatusOK, "Remove the capability notes.read?", `name="confirm" value="yes"`, "Nothing has changed yet")
	if _, ok := p.alice.n.Document().Capability("notes.read"); !ok || p.alice.n.Document().Seq != seq {
		t.Error("removing notes.read, unconfirmed, changed the document")
	}
	st, body = b.post("/ui/caps/remove", url.Values{"name": {"notes.read"}, "confirm": {"yes"}})
	want(t, "removing notes.read", st, body, http.StatusOK, "Removed notes.read")
	if _, ok := p.alice.n.Document().Capability("notes.read"); ok {
		t.Error("notes.read is still in the daemon's document")
	}

	// Seen as bob, and as a hypothetical close, bound requester.
	st, body = b.get("/ui/caps?as=" + url.QueryEscape(bobID))
	want(t, "seen as bob", st, body, http.StatusOK, "As <a href")
	if r := row(t, seenTable(body), "cap", "diary.read"); !strings.Contains(r, "hidden: not in its view") {
		t.Errorf("the diary as bob: %s", pageText(r))
	}
	st, body = b.get("/ui/caps?tier=close&level=3&temperature=hot&persona=")
	want(t, "seen as a close, bound requester", st, body, http.StatusOK, "(hypothetical)")
	if r := row(t, seenTable(body), "cap", "diary.read"); !strings.Contains(r, ">eligible<") {
		t.Errorf("the diary as close: %s", pageText(r))
	}
	for q, says := range map[string]string{"tier=royal": "royal", "level=x": "level", "level=9": "level", "temperature=tepid": "tepid", "as=nobody": "unknown peer"} {
		st, body := b.get("/ui/caps?" + q)
		if st/100 != 4 || !strings.Contains(body, `id="seen-error"`) || !strings.Contains(body, says) {
			t.Errorf("seen as %s: %d, want a refusal naming %q\n%s", q, st, says, pageText(body))
		}
	}
}

// TestTrustPage: pinning compares fingerprints (a wrong one shows both,
// and changes nothing), revoking, and introduction tokens minted (shown
// once), listed and revoked.
func TestTrustPage(t *testing.T) {
	ctx := testContext(t)
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	bobID := p.bob.peerID()
	bobFP := p.bob.n.ID().Fingerprint()

	st, body := b.get("/ui/trust")
	want(t, "trust", st, body, http.StatusOK, p.alice.n.ID().Fingerprint(), bobFP)

	before := stateOf(t, p.alice)
	wrong := p.alice.n.ID().Fingerprint() // a real fingerprint, not bob's
	st, body = b.post("/ui/trust/pin", url.Values{"peer": {bobID}, "fingerprint": {wrong}})
	want(t, "pinning the wrong fingerprint", st, body, http.StatusBadRequest, "nothing was changed")
	if e := html.UnescapeString(errorOn(body)); !strings.Contains(e, wrong) || !strings.Contains(e, bobFP) {
		t.Errorf("the refusal does not show both fingerprints: %q", e)
	}
	for name, f := range map[string]url.Values{
		"no fingerprint":    {"peer": {bobID}},
		"no peer":           {"fingerprint": {bobFP}},
		"an unknown peer":   {"peer": {"nobody"}, "fingerprint": {bobFP}},
		"a token, no label": nil,
	} {
		path := "/ui/trust/pin"
		if f == nil {
			path, f = "/ui/intros", url.Values{"label": {""}}
		}
		st, body := b.post(path, f)
		if st/100 != 4 || errorOn(body) == "" {
			t.Errorf("%s: %d, want a refusal on the page\n%s", name, st, pageText(body))
		}
	}
	st, body = b.post("/ui/intros", url.Values{"label": {"Carol"}, "expires": {"soon"}})
	want(t, "a token with a bad expiry", st, body, http.StatusBadRequest, "expires", "7d")
	st, body = b.post("/ui/intros", url.Values{"label": {"Carol"}, "tier": {"royal"}})
	want(t, "a token with a bad tier", st, body, http.StatusBadRequest, "royal")
	st, body = b.post("/ui/intros/revoke", url.Values{"id": {"intro:nope"}})
	want(t, "revoking an unknown token", st, body, http.StatusNotFound, "intro:nope")
	sameState(t, "the refused trust changes", before, stateOf(t, p.alice))

	st, body = b.post("/ui/trust/pin", url.Values{"peer": {bobID}, "fingerprint": {bobFP}})
	want(t, "pinning bob", st, body, http.StatusOK, "2 (verified)", "pinned")
	if info, err := p.alice.c.PeerTrust(ctx, bobID); err != nil || info.Level != conditions.Verified {
		t.Errorf("bob's trust after pinning: %+v, %v", info, err)
	}
	st, body = b.post("/ui/trust/check", url.Values{"peer": {bobID}})
	want(t, "checking bob", st, body, http.StatusOK)
	// Revoking asks first, and changes nothing until confirmed.
	st, body = b.post("/ui/trust/revoke", url.Values{"peer": {bobID}})
	want(t, "revoking bob, unconfirmed", st, body, http.StatusOK, "Revoke trust in the key of", "refused", `name="confirm" value="yes"`)
	if info, err := p.alice.c.PeerTrust(ctx, bobID); err != nil || info.RevokedKey != "" {
		t.Errorf("bob's trust after an unconfirmed revocation: %+v, %v", info, err)
	}
	st, body = b.post("/ui/trust/revoke", url.Values{"peer": {bobID}, "confirm": {"yes"}})
	want(t, "revoking bob", st, body, http.StatusOK, "revoked")
	if info, err := p.alice.c.PeerTrust(ctx, bobID); err != nil || info.RevokedKey == "" {
		t.Errorf("bob's trust after revoking: %+v, %v", info, err)
	}

	st, body = b.post("/ui/intros", url.Values{"label": {"Carol"}, "expires": {"2d"}, "tier": {"professional"}, "persona": {""}})
	want(t, "minting a token", st, body, http.StatusOK, "Minted", "Carol", `id="token"`)
	tok := regexp.MustCompile(`(?s)<textarea id="token" readonly rows="3">(.*?)</textarea>`).FindStringSubmatch(body)
	if tok == nil {
		t.Fatalf("the token is not shown:\n%s", pageText(body))
	}
	// It is a real token: another daemon accepts it.
	held, err := p.bob.c.Introductions().Accept(ctx, html.UnescapeString(tok[1]))
	if err != nil || held.IssuerPeer != p.alice.peerID() {
		t.Errorf("the shown token, accepted by bob: %+v, %v", held, err)
	}
	// Shown once.
	st, body = b.get("/ui/trust")
	if strings.Contains(body, tok[1]) {
		t.Error("the token is shown again on the next page")
	}
	list, err := p.alice.c.Introductions().List(ctx)
	if err != nil || len(list.Issued) != 1 {
		t.Fatalf("intros: %+v, %v", list, err)
	}
	id := list.Issued[0].ID
	if r := row(t, body, "intro", id); !strings.Contains(r, "unused") || !strings.Contains(r, "professional") {
		t.Errorf("the token's row: %s", pageText(r))
	}
	st, body = b.post("/ui/intros/revoke", url.Values{"id": {id}})
	want(t, "revoking the token, unconfirmed", st, body, http.StatusOK, "Revoke the introduction token "+id+"?")
	st, body = b.post("/ui/intros/revoke", url.Values{"id": {id}, "confirm": {"yes"}})
	want(t, "revoking the token", st, body, http.StatusOK, "Revoked token "+id)
	if r := row(t, body, "intro", id); !strings.Contains(r, "revoked") {
		t.Errorf("the revoked token's row: %s", pageText(r))
	}
}

// TestAuditPages: the conversation is listed by day and peer, found by a
// search and by the refusals filter; its page shows each message in IFP-3
// form and as JSON, marks the refusal, and links to why it was refused;
// the why page shows what GET /v1/audit/why records for it.
func TestAuditPages(t *testing.T) {
	ctx := testContext(t)
	p := greet(t)
	b := newBrowser(t, p.alice)
	b.login()
	bobID := p.bob.peerID()

	st, body := b.get("/ui/audit")
	want(t, "audit", st, body, http.StatusOK, p.conv)
	list, err := p.alice.c.AuditConversations(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var conv gossip.AuditConversation
	for _, c := range list.Conversations {
		if c.ID == p.conv {
			conv = c
		}
	}
	day := conv.Last.UTC().Format("2006-01-02")
	for q, found := range map[string]bool{
		"day=" + day:                true,
		"day=2001-01-01":            false,
		"peer=" + bobID:             true,
		"peer=" + p.alice.peerID():  false,
		"q=calendar.availability":   true,
		"q=" + p.refusal:            true,
		"q=no+such+words+anywhere":  false,
		"refusals=1":                true,
		"refusals=1&peer=" + bobID:  true,
		"refusals=1&day=2001-01-01": false,
	} {
		st, body := b.get("/ui/audit?" + q)
		if st != http.StatusOK || strings.Contains(body, `data-conversation="`+p.conv+`"`) != found {
			t.Errorf("audit?%s: %d, lists the conversation: %v, want %v", q, st, !found, found)
		}
	}
	st, body = b.get("/ui/audit?day=yesterday")
	want(t, "a bad day", st, body, http.StatusBadRequest, "YYYY-MM-DD")

	st, body = b.get("/ui/audit/c/" + url.PathEscape(p.conv))
	want(t, "the conversation", st, body, http.StatusOK, "greeting", "IFP-3", "JSON", `class="entry refusal"`, p.refusal)
	ac, err := p.alice.c.AuditEntries(ctx, p.conv)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ac.Entries {
		r, err := gossip.RenderIFP3(e.Message, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The first line of each message's IFP-3 form is on the page.
		first, _, _ := strings.Cut(string(r), "\n")
		if !strings.Contains(body, html.EscapeString(first)) {
			t.Errorf("the page lacks the IFP-3 form of %s (%q)", e.Message.Headers.MessageID, first)
		}
	}
	// The refusal's why link, as a browser follows it.
	m := regexp.MustCompile(`<a class="why" href="(/ui/audit/why/` + regexp.QuoteMeta(p.refusal) + `\?conversation=[^"]+)">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no why link for the refusal %s on the conversation page", p.refusal)
	}
	whyLink := html.UnescapeString(m[1])
	if u, err := url.Parse(whyLink); err != nil || u.Query().Get("conversation") != p.conv {
		t.Errorf("the why link %q does not name the conversation %s", whyLink, p.conv)
	}
	if n := strings.Count(body, `<a class="why"`); n != 2 {
		t.Errorf("%d why links, want 2: ping's answer and the calendar's refusal", n)
	}
	st, body = b.get("/ui/audit/c/conv:nope")
	want(t, "an unknown conversation", st, body, http.StatusNotFound, "conv:nope")

	// Why: the page shows exactly what the daemon recorded: the refusal's
	// decision, with the condition that was not met.
	var ans whyAnswer
	if err := p.alice.c.GetJSON(ctx, "/v1/audit/why/"+url.PathEscape(p.refusal), &ans); err != nil {
		t.Fatalf("GET /v1/audit/why of the refusal: %v", err)
	}
	st, body = b.get(whyLink)
	checkDecisionShown(t, body, st, ans)
	if text := html.UnescapeString(body); !strings.Contains(text, `<tr class="unmet">`) || strings.Contains(text, `id="no-decision"`) {
		t.Errorf("the refusal's why page shows no unmet condition:\n%s", pageText(body))
	}
	st, body = b.get("/ui/audit/why/msg:nope")
	want(t, "why of an unknown message", st, body, http.StatusNotFound, `id="no-decision"`, "msg:nope")
}

// checkDecisionShown: the why page shows the recorded decision: its
// outcome, every fact and every condition with whether it was met.
func checkDecisionShown(t *testing.T, body string, st int, ans whyAnswer) {
	t.Helper()
	var dec decision
	if err := json.Unmarshal(ans.Decision, &dec); err != nil {
		t.Fatalf("the decision: %v", err)
	}
	want(t, "why", st, body, http.StatusOK, `id="decision"`, dec.Capability, dec.Outcome)
	text := html.UnescapeString(body)
	for k, v := range dec.Facts {
		if !strings.Contains(text, "<dt>"+k+"</dt><dd>"+factString(v)+"</dd>") {
			t.Errorf("the why page lacks the fact %s = %v", k, v)
		}
	}
	for _, c := range dec.Conditions {
		met := "no"
		if c["met"] == true {
			met = "yes"
		}
		if !strings.Contains(text, fmt.Sprintf("<td>%s</td><td>%s</td>", factString(c["condition"]), met)) {
			t.Errorf("the why page lacks the condition %v", c)
		}
	}
}
