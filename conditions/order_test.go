package conditions_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/conditions"
)

func TestLevelString(t *testing.T) {
	for _, tc := range []struct {
		level conditions.Level
		want  string
		valid bool
	}{
		{conditions.NoLevel, "none", false},
		{conditions.Introduced, "0 (introduced)", true},
		{conditions.Signed, "1 (signed)", true},
		{conditions.Verified, "2 (verified)", true},
		{conditions.Bound, "3 (bound)", true},
		{4, "4 (invalid)", false},
		{-2, "-2 (invalid)", false},
	} {
		if got := tc.level.String(); got != tc.want {
			t.Errorf("Level(%d).String() = %q, want %q", int(tc.level), got, tc.want)
		}
		if got := tc.level.Valid(); got != tc.valid {
			t.Errorf("Level(%d).Valid() = %v, want %v", int(tc.level), got, tc.valid)
		}
	}
}

func TestLevelAtLeast(t *testing.T) {
	for _, tc := range []struct {
		name      string
		have, min conditions.Level
		want      bool
	}{
		{"equal level meets", conditions.Verified, conditions.Verified, true},
		{"higher level meets", conditions.Bound, conditions.Signed, true},
		{"one below fails", conditions.Signed, conditions.Verified, false},
		{"introduced meets 0", conditions.Introduced, conditions.Introduced, true},
		{"no level meets not even 0", conditions.NoLevel, conditions.Introduced, false},
		{"an invalid level above bound meets nothing", 9, conditions.Introduced, false},
		{"an invalid minimum is met by no one", conditions.Bound, 4, false},
		{"a minimum of NoLevel is invalid, met by no one", conditions.Bound, conditions.NoLevel, false},
	} {
		if got := tc.have.AtLeast(tc.min); got != tc.want {
			t.Errorf("%s: Level(%d).AtLeast(%d) = %v, want %v", tc.name, int(tc.have), int(tc.min), got, tc.want)
		}
	}
}

func TestTemperatureRank(t *testing.T) {
	for _, tc := range []struct {
		temp string
		rank int
		ok   bool
	}{
		{conditions.Cool, 0, true},
		{conditions.Warm, 1, true},
		{conditions.Hot, 2, true},
		{"", -1, false}, // Evaluate reads an empty fact as cool; the word itself is not a temperature
		{"Warm", -1, false},
		{"tepid", -1, false},
	} {
		rank, ok := conditions.TemperatureRank(tc.temp)
		if rank != tc.rank || ok != tc.ok {
			t.Errorf("TemperatureRank(%q) = %d, %v; want %d, %v", tc.temp, rank, ok, tc.rank, tc.ok)
		}
	}
}

func TestTierOrder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		custom []conditions.CustomTier
		want   []string
	}{
		{
			name: "standard tiers only",
			want: []string{"public", "professional", "professional-open", "community-trust", "personal", "close"},
		},
		{
			name:   "a custom tier goes directly after the tier it names",
			custom: []conditions.CustomTier{{Name: "colleagues", After: "professional"}},
			want:   []string{"public", "professional", "colleagues", "professional-open", "community-trust", "personal", "close"},
		},
		{
			name:   "after the highest tier",
			custom: []conditions.CustomTier{{Name: "family", After: "close"}},
			want:   []string{"public", "professional", "professional-open", "community-trust", "personal", "close", "family"},
		},
		{
			name: "two customs after the same tier keep their configuration order",
			custom: []conditions.CustomTier{
				{Name: "neighbours", After: "public"},
				{Name: "club", After: "public"},
			},
			want: []string{"public", "neighbours", "club", "professional", "professional-open", "community-trust", "personal", "close"},
		},
		{
			name: "a custom after a custom",
			custom: []conditions.CustomTier{
				{Name: "colleagues", After: "professional"},
				{Name: "team", After: "colleagues"},
			},
			want: []string{"public", "professional", "colleagues", "team", "professional-open", "community-trust", "personal", "close"},
		},
		{
			name: "a custom's followers stay with it, ahead of a later custom after the same tier",
			custom: []conditions.CustomTier{
				{Name: "a", After: "public"},
				{Name: "c", After: "public"},
				{Name: "b", After: "a"},
			},
			want: []string{"public", "a", "b", "c", "professional", "professional-open", "community-trust", "personal", "close"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := conditions.NewTierOrder(tc.custom)
			if err != nil {
				t.Fatalf("NewTierOrder: %v", err)
			}
			if got := o.Tiers(); !slices.Equal(got, tc.want) {
				t.Fatalf("Tiers() = %v\nwant %v", got, tc.want)
			}
			for i, tier := range tc.want {
				if r, ok := o.Rank(tier); r != i || !ok {
					t.Errorf("Rank(%q) = %d, %v; want %d, true", tier, r, ok, i)
				}
				if !o.Known(tier) {
					t.Errorf("Known(%q) = false", tier)
				}
			}
		})
	}
}

func TestTierOrderLookups(t *testing.T) {
	o, err := conditions.NewTierOrder([]conditions.CustomTier{{Name: "colleagues", After: "professional"}})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := o.Rank("profesional"); ok || r != -1 {
		t.Errorf("Rank of an unknown tier = %d, %v; want -1, false", r, ok)
	}
	if o.Known("Public") {
		t.Error("tier names are compared exactly: Known(\"Public\") = true")
	}
	for _, tc := range []struct{ a, b, want string }{
		{"professional", "colleagues", "professional"},
		{"colleagues", "professional-open", "colleagues"},
		{"close", "public", "public"},
		{"personal", "personal", "personal"},
		{"bogus", "public", "bogus"}, // unknown ranks below every known tier
		{"public", "", ""},
	} {
		if got := o.Min(tc.a, tc.b); got != tc.want {
			t.Errorf("Min(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}

	tiers := o.Tiers()
	tiers[0] = "changed"
	if o.Tiers()[0] != "public" {
		t.Error("Tiers() returned the order's own slice")
	}

	// A nil order is the standard one, so a caller that never configured tiers cannot panic.
	var nilOrder *conditions.TierOrder
	if !slices.Equal(nilOrder.Tiers(), conditions.DefaultTierOrder().Tiers()) {
		t.Errorf("nil order Tiers() = %v", nilOrder.Tiers())
	}
	if !nilOrder.AtLeast("close", "personal") {
		t.Error("nil order: close should meet personal")
	}
}

func TestStandardTiersCannotBeRedefinedByMutation(t *testing.T) {
	saved := slices.Clone(conditions.StandardTiers)
	defer copy(conditions.StandardTiers, saved)
	conditions.StandardTiers[0] = "everyone"
	o, err := conditions.NewTierOrder(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Known("public") || o.Known("everyone") {
		t.Errorf("editing StandardTiers changed the order: %v", o.Tiers())
	}
}

func TestNewTierOrderErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		custom []conditions.CustomTier
		want   []string // each must appear in the message
	}{
		{
			name:   "empty name",
			custom: []conditions.CustomTier{{Name: "", After: "public"}},
			want:   []string{"tiers.custom[0].name: is required"},
		},
		{
			name:   "name of a standard tier",
			custom: []conditions.CustomTier{{Name: "personal", After: "public"}},
			want:   []string{`tiers.custom[0].name: "personal" is already a tier (a standard tier)`},
		},
		{
			name: "name of an earlier custom tier",
			custom: []conditions.CustomTier{
				{Name: "colleagues", After: "professional"},
				{Name: "colleagues", After: "public"},
			},
			want: []string{`tiers.custom[1].name: "colleagues" is already a tier (defined at tiers.custom[0])`},
		},
		{
			name: "after an unknown tier",
			custom: []conditions.CustomTier{
				{Name: "a", After: "public"},
				{Name: "b", After: "public"},
				{Name: "c", After: "profesional"},
			},
			want: []string{`tiers.custom[2].after: "profesional" is not a known tier (known: public, professional, professional-open, community-trust, personal, close, a, b)`},
		},
		{
			name: "after a custom tier defined later",
			custom: []conditions.CustomTier{
				{Name: "team", After: "colleagues"},
				{Name: "colleagues", After: "professional"},
			},
			want: []string{`tiers.custom[0].after: "colleagues" is not a known tier`, "defined later, at tiers.custom[1]: define it first"},
		},
		{
			name:   "after missing",
			custom: []conditions.CustomTier{{Name: "colleagues"}},
			want:   []string{`tiers.custom[0].after: is required`},
		},
		{
			name:   "whitespace in the name",
			custom: []conditions.CustomTier{{Name: "close friends", After: "personal"}},
			want:   []string{`tiers.custom[0].name: "close friends" contains whitespace`},
		},
		{
			name:   "upper case in the name",
			custom: []conditions.CustomTier{{Name: "Colleagues", After: "professional"}},
			want:   []string{`tiers.custom[0].name: "Colleagues" contains upper case`},
		},
		{
			name:   "control character in the name",
			custom: []conditions.CustomTier{{Name: "team\x00", After: "professional"}},
			want:   []string{`tiers.custom[0].name: "team\x00" contains a non-printable character`},
		},
		{
			name: "every problem is reported, not only the first",
			custom: []conditions.CustomTier{
				{Name: "Upper", After: "public"},
				{Name: "ok", After: "nowhere"},
			},
			want: []string{"tiers.custom[0].name:", "tiers.custom[1].after:"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := conditions.NewTierOrder(tc.custom)
			if err == nil {
				t.Fatalf("NewTierOrder succeeded: %v", o.Tiers())
			}
			if !errors.Is(err, conditions.ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			var fe *conditions.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "tiers.custom[") {
				t.Errorf("error %q has no FieldError naming tiers.custom[i]", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %s\ndoes not contain\n  %s", err, w)
				}
			}
		})
	}
}
