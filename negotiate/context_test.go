package negotiate

import (
	"strings"
	"testing"

	"github.com/ifaced/ifaced/conditions"
)

func testPolicy() *Policy {
	return &Policy{
		Order:       conditions.DefaultTierOrder(),
		DefaultTier: "public",
		Map: map[string]map[string]string{
			"default":    {"peer-bob": "personal"},
			"researcher": {"peer-bob": "professional-open", "https://carol.example": "professional"},
		},
		DefaultMaxTemp: "cool",
		MaxTemp:        map[string]string{"peer-bob": "hot"},
	}
}

func TestGrant(t *testing.T) {
	p := testPolicy()
	cases := []struct {
		name          string
		peer, agent   string
		prop          Proposal
		tier, outcome string
		temp, persona string
		noteMentions  string
	}{
		{"stranger, nothing proposed", "peer-x", "", Proposal{}, "public", OutcomeGranted, "cool", "", ""},
		{"stranger asks for close", "peer-x", "", Proposal{Disclosure: "close"}, "public", OutcomeLowered, "cool", "", "lowered"},
		{"bob asks for less than allowed", "peer-bob", "", Proposal{Disclosure: "professional"}, "professional", OutcomeAccepted, "cool", "", ""},
		{"bob asks for exactly allowed", "peer-bob", "", Proposal{Disclosure: "personal"}, "personal", OutcomeAccepted, "cool", "", ""},
		{"bob as researcher", "peer-bob", "", Proposal{Persona: "researcher", Disclosure: "close"}, "professional-open", OutcomeLowered, "cool", "researcher", "lowered"},
		{"carol by agent id", "peer-c", "https://carol.example", Proposal{Persona: "researcher"}, "professional", OutcomeGranted, "cool", "researcher", ""},
		{"unknown tier", "peer-bob", "", Proposal{Disclosure: "bestie"}, "personal", OutcomeDeclined, "cool", "", "not a tier"},
		{"persona the map does not name", "peer-bob", "", Proposal{Persona: "artist"}, "public", OutcomeGranted, "cool", "artist", ""},
		{"stranger asks hot", "peer-x", "", Proposal{Temperature: "hot"}, "public", OutcomeGranted, "cool", "", "lowered to \"cool\""},
		{"bob asks hot", "peer-bob", "", Proposal{Temperature: "hot"}, "personal", OutcomeGranted, "hot", "", ""},
		{"bad temperature", "peer-bob", "", Proposal{Temperature: "boiling"}, "personal", OutcomeGranted, "cool", "", "boiling"},
	}
	for _, tc := range cases {
		g := p.Grant(tc.peer, tc.agent, conditions.Signed, tc.prop)
		if g.Disclosure != tc.tier || g.DisclosureOutcome != tc.outcome || g.Temperature != tc.temp || g.Persona != tc.persona || g.AuthLevel != conditions.Signed {
			t.Errorf("%s: got %+v", tc.name, g)
		}
		notes := strings.Join(g.Notes, "; ")
		if tc.noteMentions == "" && notes != "" || !strings.Contains(notes, tc.noteMentions) {
			t.Errorf("%s: notes %q, want mention of %q", tc.name, notes, tc.noteMentions)
		}
	}
}

func TestRaiseNeverLowers(t *testing.T) {
	order := conditions.DefaultTierOrder()
	first := Granted{Disclosure: "personal", AuthLevel: conditions.Verified, Temperature: "warm", Persona: "researcher"}
	later := Granted{Disclosure: "public", AuthLevel: conditions.Signed, Temperature: "cool", Persona: "researcher"}
	got := first.Raise(later, order)
	if got.Disclosure != "personal" || got.AuthLevel != conditions.Verified || got.Temperature != "warm" || got.Persona != "researcher" {
		t.Fatalf("Raise lowered something: %+v", got)
	}
	higher := Granted{Disclosure: "close", AuthLevel: conditions.Bound, Temperature: "hot", Persona: "researcher"}
	if got := first.Raise(higher, order); got.Disclosure != "close" || got.AuthLevel != conditions.Bound || got.Temperature != "hot" {
		t.Fatalf("Raise did not raise: %+v", got)
	}
	// Another persona takes its own grant; only the level carries over.
	work := Granted{Disclosure: "public", AuthLevel: conditions.Signed, Temperature: "cool", Persona: "work"}
	if got := first.Raise(work, order); got.Disclosure != "public" || got.Temperature != "cool" || got.AuthLevel != conditions.Verified || got.Persona != "work" {
		t.Fatalf("persona switch kept the other persona's grant: %+v", got)
	}
}
