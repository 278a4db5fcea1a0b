package negotiate

import (
	"slices"
	"testing"

	"github.com/ifaced/ifaced/conditions"
)

// ConditionTerms lists every condition set, in its fixed order, and
// nothing for a capability without conditions.
func TestConditionTerms(t *testing.T) {
	level := conditions.Level(2)
	c := Capability{Name: "x", Conditions: &conditions.Conditions{MaxConcurrent: 3, Peers: []string{"p1", "p2"},
		Persona: []string{"family"}, Temperature: "warm", MinAuthLevel: &level, MinDisclosure: "close"}}
	want := []string{"min_disclosure=close", "min_auth_level=" + level.String(), "temperature=warm", "persona=family", "peers=p1,p2", "max_concurrent=3"}
	if got := c.ConditionTerms(); !slices.Equal(got, want) {
		t.Errorf("ConditionTerms = %q, want %q", got, want)
	}
	if got := (&Capability{Name: "y"}).ConditionTerms(); len(got) != 0 {
		t.Errorf("no conditions: %q", got)
	}
}
