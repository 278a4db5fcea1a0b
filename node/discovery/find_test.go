package discovery

import (
	"errors"
	"testing"

	"github.com/ifaced/ifaced/negotiate"
)

func TestFindVersions(t *testing.T) {
	for _, tc := range []struct {
		have, want string
		ok         bool
	}{
		{"1", "1", true}, {"1.0", "1", true}, {"1", "1.0.0", true}, {"2", "1.9", true},
		{"1.10", "1.9", true}, {"1.2", "1.10", false}, {"1", "2", false}, {"0.9", "1", false},
		{"2.0-beta", "1", false}, {"v2", "1", false},
	} {
		want, err := negotiate.ParseVersion(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		if got := negotiate.VersionAtLeast(tc.have, want); got != tc.ok {
			t.Errorf("VersionAtLeast(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.ok)
		}
	}
	for _, bad := range []string{"", "v2", "1.", ".1", "1..2", "-1", "+1", "1.x", "99999999999999999999"} {
		if _, err := negotiate.ParseVersion(bad); !errors.Is(err, negotiate.ErrInvalidVersion) {
			t.Errorf("ParseVersion(%q) = %v, want ErrInvalidVersion", bad, err)
		}
	}
}
