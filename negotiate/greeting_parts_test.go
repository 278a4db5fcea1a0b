package negotiate

import (
	"reflect"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
)

// greetingPartsOf writes g with Greeting.Write and returns the contents of
// its greeting and context parts.
func greetingPartsOf(t testing.TB, g Greeting) (greeting, context any) {
	t.Helper()
	var m gossip.Message
	g.Write(&m, nil)
	for _, p := range m.Body.Parts {
		switch p.Name {
		case PartGreeting:
			greeting = p.Content
		case PartContext:
			context = p.Content
		}
	}
	return greeting, context
}

// checkGreetingParts: the parts Greeting.Write builds member by member
// are the values JSONValue makes of the same structs, the form every
// transport carries and signs.
func checkGreetingParts(t testing.TB, g Greeting) {
	t.Helper()
	gotGreeting, gotContext := greetingPartsOf(t, g)
	wantGreeting, err := JSONValue(greetingPart{Temperature: g.Temperature, IFPSupport: g.IFPSupport,
		ToolCategories: g.ToolCategories, HaveView: g.HaveView, ViewUnchanged: g.ViewUnchanged, Acks: g.Acks})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotGreeting, wantGreeting) {
		t.Fatalf("greeting part:\n built %#v\n JSON  %#v", gotGreeting, wantGreeting)
	}
	if g.Granted == nil {
		if gotContext != nil {
			t.Fatalf("a context part without a grant: %#v", gotContext)
		}
		return
	}
	wantContext, err := JSONValue(g.Granted)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotContext, wantContext) {
		t.Fatalf("context part:\n built %#v\n JSON  %#v", gotContext, wantContext)
	}
}

func TestGreetingPartsAsJSONValue(t *testing.T) {
	full := &Granted{Disclosure: "trusted", DisclosureOutcome: OutcomeLowered, AuthLevel: conditions.Verified,
		Temperature: conditions.Warm, Persona: "work", Notes: []string{"disclosure \"x\" lowered"}, ToolCategories: []string{"web", "files"}}
	for _, g := range []Greeting{
		{},
		{Proposal: Proposal{Temperature: conditions.Cool, IFPSupport: []int{4, 7, 12}, ToolCategories: []string{"web"},
			HaveView: "ab12", ViewUnchanged: "cd34", Acks: true}},
		{Granted: &Granted{}},
		{Granted: &Granted{AuthLevel: conditions.NoLevel}},
		{Proposal: Proposal{IFPSupport: []int{}, ToolCategories: []string{}}, Granted: full},
		{Proposal: Proposal{Temperature: "bad \xff utf-8", ToolCategories: []string{"ok", "\xfe"}},
			Granted: &Granted{Persona: "\xc3", Notes: []string{"fine", "bad \xff"}}},
	} {
		checkGreetingParts(t, g)
	}
}

// FuzzGreetingPartsAsJSONValue holds the member-by-member parts to
// JSONValue's for any strings and numbers.
func FuzzGreetingPartsAsJSONValue(f *testing.F) {
	f.Add("cool", "web", "ab", "work", "note", 4, 1, true)
	f.Add("bad \xff", "\xfe", "", "", "", -1, -1, false)
	f.Fuzz(func(t *testing.T, temp, cat, sum, persona, note string, ifp, level int, granted bool) {
		g := Greeting{Proposal: Proposal{Temperature: temp, IFPSupport: []int{ifp}, ToolCategories: []string{cat},
			HaveView: sum, ViewUnchanged: sum, Acks: granted}}
		if granted {
			g.Granted = &Granted{Disclosure: cat, DisclosureOutcome: note, AuthLevel: conditions.Level(level),
				Temperature: temp, Persona: persona, Notes: []string{note}, ToolCategories: []string{cat}}
		}
		checkGreetingParts(t, g)
	})
}
