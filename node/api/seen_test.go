package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
)

// standings maps each capability of a Seen to its standing.
func standings(s *Seen) map[string]string {
	out := map[string]string{}
	for _, c := range s.Capabilities {
		out[c.Name] = c.Standing
	}
	return out
}

func seenCap(t *testing.T, s *Seen, name string) SeenCapability {
	t.Helper()
	for _, c := range s.Capabilities {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("seen lists no %s: %+v", name, s.Capabilities)
	return SeenCapability{}
}

// TestSeen: what a stranger, a named peer and a hypothetical requester
// are shown, capability by capability, follows the owner's policy and
// trust as they change, and each fact says how it was reached.
func TestSeen(t *testing.T) {
	ctx := testContext(t)
	cfg := aliceConfig("")
	cfg.Capabilities = append(cfg.Capabilities, map[string]any{"name": "work.notes", "description": "Notes for colleagues",
		"conditions": map[string]any{"persona": []any{"work"}}})
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	bobID := bob.peerID()

	// A stranger: level 1, the default tier, cool, the default persona.
	s, err := alice.c.Seen(ctx, SeenQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Peer != "" || s.Hypothetical || s.Facts.Level != conditions.Signed || s.Facts.Tier != cfg.Disclosure.Default || s.Facts.Temperature != conditions.Cool {
		t.Errorf("a stranger's facts: %+v (peer %q, hypothetical %v)", s.Facts, s.Peer, s.Hypothetical)
	}
	if s.Seq != alice.n.Document().Seq || len(s.Capabilities) != len(alice.n.Document().Capabilities) {
		t.Errorf("seq %d with %d capabilities; the document is seq %d with %d", s.Seq, len(s.Capabilities), alice.n.Document().Seq, len(alice.n.Document().Capabilities))
	}
	want := map[string]string{"ping": StandingEligible, "calendar.availability": StandingShown, "diary.read": StandingHidden, "work.notes": StandingAbsent}
	for name, st := range want {
		if got := standings(s)[name]; got != st {
			t.Errorf("a stranger: %s is %q, want %q", name, got, st)
		}
	}
	cal := seenCap(t, s, "calendar.availability")
	if len(cal.Unmet) != 1 || cal.Unmet[0].Condition != conditions.CondMinDisclosure || cal.Unmet[0].HowToMeet == "" {
		t.Errorf("calendar's unmet conditions for a stranger: %+v", cal.Unmet)
	}
	// The owner sees what is unmet for a hidden one too; its peers never do.
	if d := seenCap(t, s, "diary.read"); len(d.Unmet) == 0 {
		t.Error("a hidden capability's unmet conditions are not shown to the owner")
	}
	// What the stranger is shown is what its view holds.
	view := alice.n.Document().View(conditions.Facts{AuthLevel: conditions.Signed, Disclosure: cfg.Disclosure.Default, Temperature: conditions.Cool}, nil)
	var inView []string
	for _, c := range view.Capabilities {
		inView = append(inView, c.Name)
	}
	for name, st := range standings(s) {
		if shown := st == StandingEligible || st == StandingShown; shown != slices.Contains(inView, name) {
			t.Errorf("%s is %s, but the view a stranger is sent holds %q", name, st, inView)
		}
	}

	// Bob, named: his own facts, the default tier until he is granted more.
	s, err = alice.c.Seen(ctx, SeenQuery{Peer: bobID})
	if err != nil {
		t.Fatal(err)
	}
	if s.Peer != bobID || s.Hypothetical || !strings.Contains(s.Facts.TierHow, "default tier") || !strings.Contains(s.Facts.TemperatureHow, "default maximum") {
		t.Errorf("bob before any grant: %+v", s)
	}
	if _, err := alice.c.SetDisclosure(ctx, DisclosureChange{Peer: bobID, Tier: "professional"}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.c.SetTemperature(ctx, TemperatureChange{Peer: bobID, Max: conditions.Warm}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.c.TrustPeer(ctx, bobID, TrustAction{Verify: bob.n.ID().Fingerprint()}); err != nil {
		t.Fatal(err)
	}
	s, err = alice.c.Seen(ctx, SeenQuery{Peer: bobID})
	if err != nil {
		t.Fatal(err)
	}
	f := s.Facts
	if f.Tier != "professional" || !strings.Contains(f.TierHow, "disclosure map grants it professional") {
		t.Errorf("bob granted professional: tier %q (%s)", f.Tier, f.TierHow)
	}
	if f.Temperature != conditions.Warm || !strings.Contains(f.TemperatureHow, "its temperature cap") {
		t.Errorf("bob capped at warm: %q (%s)", f.Temperature, f.TemperatureHow)
	}
	if f.Level != conditions.Verified || !strings.Contains(strings.Join(f.LevelHow, " "), "pinned") {
		t.Errorf("bob pinned: level %v (%v)", f.Level, f.LevelHow)
	}
	if got := standings(s)["calendar.availability"]; got != StandingEligible {
		t.Errorf("bob granted professional: calendar is %q", got)
	}

	// A persona not established for him is not his, whatever is asked.
	s, err = alice.c.Seen(ctx, SeenQuery{Peer: bobID, Persona: "work"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Facts.Persona != "" || !strings.Contains(s.Facts.PersonaHow, "not one the owner established") || standings(s)["work.notes"] != StandingAbsent {
		t.Errorf("bob under an unestablished persona: %+v, work.notes %q", s.Facts, standings(s)["work.notes"])
	}
	// Hypothetical: his facts with a closer tier and the work persona.
	lvl := conditions.Bound
	s, err = alice.c.Seen(ctx, SeenQuery{Peer: bobID, Tier: "close", Level: &lvl})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Hypothetical || s.Facts.Tier != "close" || s.Facts.Level != conditions.Bound || standings(s)["diary.read"] != StandingEligible {
		t.Errorf("bob at close, bound: %+v, diary %q", s.Facts, standings(s)["diary.read"])
	}
	s, err = alice.c.Seen(ctx, SeenQuery{Persona: "work"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Hypothetical || s.Facts.Persona != "work" || standings(s)["work.notes"] != StandingEligible {
		t.Errorf("anyone under work: %+v, work.notes %q", s.Facts, standings(s)["work.notes"])
	}

	// An introduction token that grants more raises his tier.
	minted, err := alice.c.Introductions().Mint(ctx, IntroRequest{Label: "Bob", Disclosure: "personal"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.c.Introductions().Accept(ctx, minted.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.c.Connect(ctx, alice.n.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.c.Greet(ctx, GreetRequest{Peer: alice.peerID()}); err != nil {
		t.Fatal(err)
	}
	s, err = alice.c.Seen(ctx, SeenQuery{Peer: bobID})
	if err != nil {
		t.Fatal(err)
	}
	if s.Facts.Tier != "personal" || !strings.Contains(s.Facts.TierHow, "raised by an introduction token") {
		t.Errorf("bob introduced with personal: tier %q (%s)", s.Facts.Tier, s.Facts.TierHow)
	}
	// The default persona may be named.
	if _, err := alice.c.Seen(ctx, SeenQuery{Peer: bobID, Persona: negotiate.DefaultPersona}); err != nil {
		t.Errorf("persona default: %v", err)
	}
}

// TestSeenRefusesBadInput: each bad parameter is a 400 naming it, an
// unknown peer a 404.
func TestSeenRefusesBadInput(t *testing.T) {
	ctx := testContext(t)
	alice := startDaemon(t, nil)
	for _, c := range []struct {
		query, field string
		status       int
	}{
		{"tier=royal", "tier", http.StatusBadRequest},
		{"level=x", "level", http.StatusBadRequest},
		{"level=4", "level", http.StatusBadRequest},
		{"level=-2", "level", http.StatusBadRequest},
		{"temperature=tepid", "temperature", http.StatusBadRequest},
		{"persona=" + strings.Repeat("p", maxSeenPersona+1), "persona", http.StatusBadRequest},
		{"peer=nobody", "", http.StatusNotFound},
		{"peer=did:key:zNotAKey", "peer", http.StatusBadRequest},
	} {
		var out Seen
		err := alice.c.call(ctx, http.MethodGet, "/v1/seen?"+c.query, nil, &out)
		e := apiError(t, err, c.status)
		if e.Field != c.field || (c.field != "" && !strings.HasPrefix(e.Message, c.field+":")) {
			t.Errorf("%s: field %q, message %q; want the field %q named", c.query, e.Field, e.Message, c.field)
		}
	}
}
