package conditions

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Sentinel errors. Compare with errors.Is: the concrete errors carry the
// field, the values and the advice.
var (
	// ErrInvalid marks conditions or tier configuration that cannot be
	// used; the error names the offending field.
	ErrInvalid = errors.New("invalid conditions")
	// ErrNotMet marks a request whose conditions the requester does not meet.
	ErrNotMet = errors.New("conditions not met")
	// ErrBusy marks a request refused only because the capability is at its
	// max_concurrent limit; retrying later may succeed.
	ErrBusy = errors.New("capability busy")
)

// FieldError is one problem with one field of a conditions object or of the
// tier configuration. It wraps [ErrInvalid].
type FieldError struct {
	Field   string // as written in configuration or on the wire, e.g. "min_disclosure", "tiers.custom[2].after"
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Unwrap lets errors.Is(err, ErrInvalid) hold for every FieldError.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Level is an IFP-5 authentication level: 0 introduced, 1 signed, 2 verified, 3 bound.
type Level int

const (
	NoLevel    Level = -1 // an unauthenticated caller (e.g. unsigned HTTP): meets no min_auth_level
	Introduced Level = 0  // holds an introduction token the owner minted
	Signed     Level = 1  // its messages verify under the key of its peer ID
	Verified   Level = 2  // the owner pinned its key, or its identity document lists the key
	Bound      Level = 3  // its identifier (https URL, did:web) resolves to a document binding the key
)

var levelNames = [...]string{"introduced", "signed", "verified", "bound"}

// String renders the level the way requirements are explained to people:
// "none" for [NoLevel], "2 (verified)" for a valid level.
func (l Level) String() string {
	switch {
	case l == NoLevel:
		return "none"
	case l.Valid():
		return fmt.Sprintf("%d (%s)", int(l), levelNames[l])
	default:
		return fmt.Sprintf("%d (invalid)", int(l))
	}
}

// Valid reports whether l is one of the four IFP-5 levels (0..3).
func (l Level) Valid() bool { return l >= Introduced && l <= Bound }

// AtLeast reports whether a requester at level l meets a minimum of min.
// Only valid levels meet anything, so NoLevel meets not even 0, and an
// invalid minimum is met by no one.
func (l Level) AtLeast(min Level) bool { return l.Valid() && min.Valid() && l >= min }

// Temperatures, from coolest to hottest.
const (
	Cool = "cool"
	Warm = "warm"
	Hot  = "hot"
)

// TemperatureRank returns the position of t in cool < warm < hot. The empty
// string is not a temperature here; [Evaluate] reads an empty fact as cool.
func TemperatureRank(t string) (int, bool) {
	switch t {
	case Cool:
		return 0, true
	case Warm:
		return 1, true
	case Hot:
		return 2, true
	}
	return -1, false
}

// standardTiers is what this package uses; StandardTiers is a copy for
// readers, so that a caller appending to or editing it changes nothing here.
var standardTiers = [...]string{"public", "professional", "professional-open", "community-trust", "personal", "close"}

// StandardTiers are the IFP-12 §3.3 disclosure tiers, lowest first.
var StandardTiers = append([]string(nil), standardTiers[:]...)

// CustomTier places an owner-defined tier directly after an existing tier.
type CustomTier struct {
	Name  string `json:"name" toml:"name"`
	After string `json:"after" toml:"after"`
}

// TierOrder is the owner's total order of disclosure tiers. It is immutable,
// so one value may be shared by every conversation. A nil *TierOrder behaves
// as [DefaultTierOrder].
type TierOrder struct {
	tiers []string
	rank  map[string]int
}

// NewTierOrder builds the standard order with the custom tiers inserted, each
// directly after the tier it names (a standard tier or an earlier custom
// one). Customs placed after the same tier keep their configuration order,
// and a custom tier's own followers stay with it: with a after public,
// b after a, c after public, the order starts public, a, b, c, professional.
//
// Every error is a [*FieldError] naming tiers.custom[i].name or
// tiers.custom[i].after; all problems are returned, joined.
func NewTierOrder(custom []CustomTier) (*TierOrder, error) {
	known := make(map[string]bool, len(standardTiers)+len(custom))
	definedAt := make(map[string]int, len(custom)) // first index where a custom name appears, for advice on forward references
	for i, c := range custom {
		if _, dup := definedAt[c.Name]; !dup {
			definedAt[c.Name] = i
		}
	}
	for _, t := range standardTiers {
		known[t] = true
	}
	order := make([]string, 0, len(standardTiers)+len(custom)) // names in "known" order, for messages
	order = append(order, standardTiers[:]...)

	// followers[t] lists, in configuration order, the customs placed directly after t.
	followers := make(map[string][]string)
	var errs []error
	for i, c := range custom {
		nameField := fmt.Sprintf("tiers.custom[%d].name", i)
		afterField := fmt.Sprintf("tiers.custom[%d].after", i)
		ok := true
		if problem := tierNameProblem(c.Name); problem != "" {
			errs = append(errs, fieldErr(nameField, "%s", problem))
			ok = false
		} else if known[c.Name] {
			where := fmt.Sprintf("defined at tiers.custom[%d]", definedAt[c.Name])
			if isStandardTier(c.Name) {
				where = "a standard tier"
			}
			errs = append(errs, fieldErr(nameField, "%q is already a tier (%s)", c.Name, where))
			ok = false
		}
		switch {
		case c.After == "":
			errs = append(errs, fieldErr(afterField, "is required: name the tier %q follows (known: %s)", c.Name, strings.Join(order, ", ")))
			ok = false
		case !known[c.After]:
			hint := ""
			if j, later := definedAt[c.After]; later && j > i {
				hint = fmt.Sprintf("; it is defined later, at tiers.custom[%d]: define it first", j)
			}
			errs = append(errs, fieldErr(afterField, "%q is not a known tier (known: %s)%s", c.After, strings.Join(order, ", "), hint))
			ok = false
		}
		if !ok {
			continue
		}
		known[c.Name] = true
		order = append(order, c.Name)
		followers[c.After] = append(followers[c.After], c.Name)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	o := &TierOrder{rank: make(map[string]int, len(order))}
	// Depth-first: each tier, then what follows it, in configuration order.
	// Every custom names an earlier tier, so this is a forest with the
	// standard tiers as roots and the walk terminates.
	var walk func(t string)
	walk = func(t string) {
		o.rank[t] = len(o.tiers)
		o.tiers = append(o.tiers, t)
		for _, f := range followers[t] {
			walk(f)
		}
	}
	for _, t := range standardTiers {
		walk(t)
	}
	return o, nil
}

// tierNameProblem says what is wrong with a custom tier name, or "" if
// nothing is. Names are compared byte for byte, so only one spelling of each
// is allowed: lower case, no spaces or control characters.
func tierNameProblem(name string) string {
	if name == "" {
		return "is required"
	}
	for _, r := range name {
		switch {
		case unicode.IsSpace(r):
			return fmt.Sprintf("%q contains whitespace", name)
		case unicode.IsUpper(r):
			return fmt.Sprintf("%q contains upper case; tier names are lower case", name)
		case !unicode.IsPrint(r) || r == unicode.ReplacementChar:
			return fmt.Sprintf("%q contains a non-printable character", name)
		}
	}
	return ""
}

func isStandardTier(t string) bool {
	for _, s := range standardTiers {
		if s == t {
			return true
		}
	}
	return false
}

var defaultOrder = func() *TierOrder {
	o, err := NewTierOrder(nil)
	if err != nil {
		panic(err) // unreachable: the standard tiers alone are always valid
	}
	return o
}()

// DefaultTierOrder is the standard tiers only.
func DefaultTierOrder() *TierOrder { return defaultOrder }

func (o *TierOrder) orDefault() *TierOrder {
	if o == nil {
		return defaultOrder
	}
	return o
}

// Rank returns the position of tier in the order, lowest 0.
func (o *TierOrder) Rank(tier string) (int, bool) {
	r, ok := o.orDefault().rank[tier]
	if !ok {
		return -1, false
	}
	return r, true
}

// Tiers returns the tiers, lowest first. The slice is a copy.
func (o *TierOrder) Tiers() []string {
	return append([]string(nil), o.orDefault().tiers...)
}

// Known reports whether tier is in the order.
func (o *TierOrder) Known(tier string) bool {
	_, ok := o.Rank(tier)
	return ok
}

// Min returns the lower of two tiers, for capping a proposed tier by the one
// the disclosure map grants. An unknown tier ranks below every known one, so
// it wins; if both rank the same, a is returned.
func (o *TierOrder) Min(a, b string) string {
	ra, _ := o.Rank(a)
	rb, _ := o.Rank(b)
	if rb < ra {
		return b
	}
	return a
}

// AtLeast reports whether a requester granted tier meets a minimum of min.
// An unknown tier meets nothing, and an unknown minimum is met by nothing.
func (o *TierOrder) AtLeast(tier, min string) bool {
	rt, ok1 := o.Rank(tier)
	rm, ok2 := o.Rank(min)
	return ok1 && ok2 && rt >= rm
}
