package negotiate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Capability names and versions. A name is dot notation (IFP-7:
// calendar.availability): lowercase segments of letters, digits, '_' and
// '-', each starting with a letter, joined by dots, at most MaxNameLen
// bytes. A version is free text of at most MaxVersionLen bytes without
// white space ("1" when absent); versions that are dotted integers ("2",
// "1.3.0") can be compared, and a search for a minimum version compares
// only those.

// MaxVersionLen bounds a capability's version.
const MaxVersionLen = 32

var (
	// ErrInvalidName: not a capability name.
	ErrInvalidName = errors.New("invalid capability name")
	// ErrInvalidVersion: not a version of dotted integers.
	ErrInvalidVersion = errors.New("invalid version")
)

// CheckName returns nil when name is a capability name a document may
// hold, else an error wrapping ErrInvalidName that says why. It is the
// rule Validate applies.
func CheckName(name string) error {
	if p := nameProblem(name); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidName, p)
	}
	return nil
}

func nameProblem(name string) string {
	switch {
	case name == "":
		return "is required (dot notation, e.g. calendar.availability)"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("is %d bytes, at most %d", len(name), MaxNameLen)
	case !capNameRE.MatchString(name):
		return fmt.Sprintf("%q is not dot notation: lowercase segments of letters, digits, _ and -, each starting with a letter, joined by dots", name)
	}
	return ""
}

// ParseVersion reads a version of dotted integers ("2", "1.3.0"), as a
// search for a minimum version names it. The error wraps
// ErrInvalidVersion.
func ParseVersion(v string) ([]int, error) {
	if len(v) > MaxVersionLen {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidVersion, len(v), MaxVersionLen)
	}
	parts := strings.Split(v, ".")
	out := make([]int, len(parts))
	for i, p := range parts {
		k, err := strconv.Atoi(p)
		if err != nil || k < 0 || p == "" || p[0] == '+' {
			return nil, fmt.Errorf("%w: %q is not dotted integers (e.g. 2 or 1.3)", ErrInvalidVersion, v)
		}
		out[i] = k
	}
	return out, nil
}

// VersionAtLeast compares version v (a capability's, "" meaning "1") with
// want as dotted integers, a missing part counting as 0 ("1.0" equals
// "1"). A version that is not dotted integers is not at least anything.
func VersionAtLeast(v string, want []int) bool {
	if v == "" {
		v = "1"
	}
	have, err := ParseVersion(v)
	if err != nil {
		return false
	}
	for i := range max(len(have), len(want)) {
		var h, m int
		if i < len(have) {
			h = have[i]
		}
		if i < len(want) {
			m = want[i]
		}
		if h != m {
			return h > m
		}
	}
	return true
}

// FormatVersion writes a parsed version back ("1.3.0").
func FormatVersion(v []int) string {
	s := make([]string, len(v))
	for i, k := range v {
		s[i] = strconv.Itoa(k)
	}
	return strings.Join(s, ".")
}
