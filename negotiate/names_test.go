package negotiate

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	for _, good := range []string{"ping", "calendar.availability", "a.b-c.d_e", "x1.y2", strings.Repeat("a", MaxNameLen)} {
		if err := CheckName(good); err != nil {
			t.Errorf("CheckName(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"", "Bad Name", "Calendar", "a..b", ".a", "a.", "1a", "a.1b", "a b", strings.Repeat("a", MaxNameLen+1)} {
		if err := CheckName(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("CheckName(%q) = %v, want ErrInvalidName", bad, err)
		}
	}
	// Validate applies the same rule, with the same words.
	d := Document{IFP: Version, AgentID: "a", Capabilities: []Capability{{Name: "Bad Name", Description: "d"}}}
	fes := fieldErrors(d.Validate(nil))
	if len(fes) != 1 || fes[0].Field != "capabilities[0].name" || !strings.Contains(CheckName("Bad Name").Error(), fes[0].Problem) {
		t.Errorf("Validate: %v", fes)
	}
}

func TestVersions(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		ok         bool
	}{
		{"1", "1", true}, {"1.0", "1", true}, {"1", "1.0.0", true}, {"2", "1.9", true},
		{"1.10", "1.9", true}, {"1.2", "1.10", false}, {"1", "2", false}, {"0.9", "1", false},
		{"2.0-beta", "1", false}, {"v2", "1", false}, {"", "1", true}, {"", "1.1", false},
	} {
		want, err := ParseVersion(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		if got := VersionAtLeast(tc.have, want); got != tc.ok {
			t.Errorf("VersionAtLeast(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.ok)
		}
		if FormatVersion(want) != tc.want {
			t.Errorf("FormatVersion(ParseVersion(%q)) = %q", tc.want, FormatVersion(want))
		}
	}
	for _, bad := range []string{"", "v2", "1.", ".1", "1..2", "-1", "+1", "1.x", "99999999999999999999", strings.Repeat("1.", 20) + "1"} {
		if _, err := ParseVersion(bad); !errors.Is(err, ErrInvalidVersion) {
			t.Errorf("ParseVersion(%q) = %v, want ErrInvalidVersion", bad, err)
		}
	}
}
