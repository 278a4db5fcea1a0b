package negotiate

import (
	"errors"
	"reflect"
	"slices"
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
		OpenPersonas:   []string{"artist"},
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
		{"open persona the map does not name", "peer-bob", "", Proposal{Persona: "artist"}, "public", OutcomeGranted, "cool", "artist", ""},
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

// TestGrantPersonaNeedsTheOwner: a persona is a fact the owner establishes,
// not one the requester claims.
func TestGrantPersonaNeedsTheOwner(t *testing.T) {
	p := &Policy{
		Order:       conditions.DefaultTierOrder(),
		DefaultTier: "public",
		Map: map[string]map[string]string{
			"default": {"peer-bob": "professional"},
			"family":  {"peer-mum": "close", "https://gran.example": "personal"},
		},
		DefaultMaxTemp: "cool",
		OpenPersonas:   []string{"open-house"},
	}
	cases := []struct {
		name          string
		r             Requester
		prop          Proposal
		persona, tier string
		outcome       string
		note          bool
	}{
		{"stranger proposing a mapped persona", Requester{PeerID: "peer-x"}, Proposal{Persona: "family"}, "", "public", OutcomeGranted, true},
		{"stranger proposing it with a tier", Requester{PeerID: "peer-x"}, Proposal{Persona: "family", Disclosure: "close"}, "", "public", OutcomeLowered, true},
		{"bob is mapped only under the default persona", Requester{PeerID: "peer-bob"}, Proposal{Persona: "family"}, "", "professional", OutcomeGranted, true},
		{"peer named under the persona", Requester{PeerID: "peer-mum"}, Proposal{Persona: "family"}, "family", "close", OutcomeGranted, false},
		{"established agent ID named under it", Requester{PeerID: "peer-g", AgentID: "https://gran.example"}, Proposal{Persona: "family", Disclosure: "close"}, "family", "personal", OutcomeLowered, false},
		{"token naming the persona, with a tier", Requester{PeerID: "peer-x", Introductions: []Introduction{{Persona: "family", Disclosure: "personal"}}},
			Proposal{Persona: "family"}, "family", "personal", OutcomeGranted, false},
		{"token naming the persona, no tier", Requester{PeerID: "peer-x", Introductions: []Introduction{{Persona: "family"}}},
			Proposal{Persona: "family"}, "family", "public", OutcomeGranted, false},
		{"the highest of several tokens' tiers", Requester{PeerID: "peer-x", Introductions: []Introduction{
			{Persona: "family", Disclosure: "professional"}, {Persona: "family", Disclosure: "community-trust"}, {Persona: "work", Disclosure: "close"}}},
			Proposal{Persona: "family"}, "family", "community-trust", OutcomeGranted, false},
		{"token floor below the map's tier", Requester{PeerID: "peer-mum", Introductions: []Introduction{{Persona: "family", Disclosure: "professional"}}},
			Proposal{Persona: "family"}, "family", "close", OutcomeGranted, false},
		{"token for the default persona", Requester{PeerID: "peer-x", Introductions: []Introduction{{Disclosure: "personal"}}},
			Proposal{}, "", "personal", OutcomeGranted, false},
		{"token named default", Requester{PeerID: "peer-x", Introductions: []Introduction{{Persona: DefaultPersona, Disclosure: "personal"}}},
			Proposal{Persona: DefaultPersona}, "", "personal", OutcomeGranted, false},
		{"token under another persona is no floor here", Requester{PeerID: "peer-x", Introductions: []Introduction{{Persona: "work", Disclosure: "close"}}},
			Proposal{}, "", "public", OutcomeGranted, false},
		{"token with a tier the owner does not use", Requester{PeerID: "peer-x", Introductions: []Introduction{{Persona: "family", Disclosure: "bestie"}}},
			Proposal{Persona: "family"}, "family", "public", OutcomeGranted, false},
		{"open persona", Requester{PeerID: "peer-x"}, Proposal{Persona: "open-house"}, "open-house", "public", OutcomeGranted, false},
		{"persona nobody has", Requester{PeerID: "peer-x"}, Proposal{Persona: "nonexistent"}, "", "public", OutcomeGranted, true},
		{"overlong persona", Requester{PeerID: "peer-x"}, Proposal{Persona: strings.Repeat("f", 129)}, "", "public", OutcomeGranted, true},
	}
	for _, tc := range cases {
		tc.r.Level = conditions.Signed
		g := p.GrantTo(tc.r, tc.prop)
		if g.Persona != tc.persona || g.Disclosure != tc.tier || g.DisclosureOutcome != tc.outcome || g.AuthLevel != conditions.Signed {
			t.Errorf("%s: got %+v", tc.name, g)
		}
		if got := slices.Contains(g.Notes, noteUnestablishedPersona); got != tc.note {
			t.Errorf("%s: persona note %v, want %v (notes %q)", tc.name, got, tc.note, g.Notes)
		}
	}

	// Whether the persona exists or not, the answer reads the same.
	stranger := Requester{PeerID: "peer-x", Level: conditions.Signed}
	exists := p.GrantTo(stranger, Proposal{Persona: "family", Disclosure: "personal", Temperature: "warm"})
	missing := p.GrantTo(stranger, Proposal{Persona: "nonexistent", Disclosure: "personal", Temperature: "warm"})
	if !reflect.DeepEqual(exists, missing) {
		t.Errorf("the grant tells an existing persona from a missing one:\n%+v\n%+v", exists, missing)
	}
	for _, n := range exists.Notes {
		if strings.Contains(n, "family") {
			t.Errorf("note names the persona: %q", n)
		}
	}

	// The conditions a view is decided on follow the grant: a stranger who
	// claims "family" does not see a family-only hidden capability.
	d := &Document{IFP: Version, AgentID: "a", Capabilities: []Capability{{Name: "family.photos", Description: "d",
		Advertise: AdvertiseWhenEligible, Conditions: &conditions.Conditions{Persona: []string{"family"}}}}}
	if v := d.View(exists.Facts("peer-x", 0), p.Order); len(v.Capabilities) != 0 {
		t.Error("a stranger claiming the persona sees its hidden capability")
	}
	if _, err := d.Decide("family.photos", exists.Facts("peer-x", 0), p.Order, 0); !errors.Is(err, ErrUnknownCapability) {
		t.Errorf("a stranger claiming the persona may invoke its capability: %v", err)
	}
	mum := p.GrantTo(Requester{PeerID: "peer-mum", Level: conditions.Signed}, Proposal{Persona: "family"})
	if _, err := d.Decide("family.photos", mum.Facts("peer-mum", 0), p.Order, 0); err != nil {
		t.Errorf("a peer the owner put under the persona may not invoke: %v", err)
	}

	// The deprecated Grant is GrantTo without introductions.
	if g := p.Grant("peer-mum", "", conditions.Signed, Proposal{Persona: "family"}); g.Persona != "family" || g.Disclosure != "close" {
		t.Errorf("Grant: %+v", g)
	}
}
