package negotiate

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/ifaced/ifaced/conditions"
)

// Misspellings. Strict decoding (DecodeStrict) stops at the first member
// it does not know and can only say that it is unknown. An owner who
// wrote "desciption" and "min_disclosur" wants both at once, each with
// the member meant, so the files an owner writes (a capability file, a
// config's [[capabilities]]) are first walked for unknown members by
// MisspeltMembers, which the config loader (package node) shares.

// Nearest is the candidate closest to word by edit distance (case
// ignored), if it is close enough to be the word meant: at most a third
// of the word's letters differ (at least one may), or one is a prefix of
// the other ("max_stream" for "max_streams"). "" when none is.
func Nearest(word string, candidates []string) string {
	lw := strings.ToLower(word)
	best, bestDist := "", math.MaxInt
	for _, c := range candidates {
		d := levenshtein.ComputeDistance(lw, strings.ToLower(c))
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	lb := strings.ToLower(best)
	if bestDist <= max(1, len(word)/3) || (len(lw) >= 3 && (strings.HasPrefix(lb, lw) || strings.HasPrefix(lw, lb))) {
		return best
	}
	return ""
}

// viewOnlyMembers are members of a capability in a view (what a requester
// is shown), never written by an owner; Validate refuses them with a
// message of their own.
var viewOnlyMembers = []string{"eligible", "unmet"}

// CapabilityMembers are the members of a capability an owner writes, in
// the order of the IFP-7 tables.
func CapabilityMembers() []string {
	return slices.DeleteFunc(jsonNameList(reflect.TypeFor[Capability]()), func(n string) bool {
		return slices.Contains(viewOnlyMembers, n)
	})
}

// ConditionMembers are the members of a capability's conditions object.
func ConditionMembers() []string { return jsonNameList(reflect.TypeFor[conditions.Conditions]()) }

// jsonNameList is the JSON names of t's fields, in field order.
func jsonNameList(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// MisspeltMembers reports every member of v, a capability as a decoded
// JSON or TOML value found at path, that a capability does not have, and
// every member of its conditions object that is not a condition: each a
// *FieldError naming the nearest known member ("did you mean") or else
// listing them. A v that is not an object is left to the decoder.
func MisspeltMembers(path string, v any) []error {
	table, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var errs []error
	members := CapabilityMembers()
	for _, key := range slices.Sorted(maps.Keys(table)) {
		if slices.Contains(members, key) || slices.Contains(viewOnlyMembers, key) {
			continue
		}
		errs = append(errs, unknownMember(joinPath(path, key), key, "member of a capability", members))
	}
	conds, ok := table["conditions"].(map[string]any)
	if !ok {
		return errs
	}
	names := ConditionMembers()
	for _, key := range slices.Sorted(maps.Keys(conds)) {
		if !slices.Contains(names, key) {
			errs = append(errs, unknownMember(joinPath(path, "conditions."+key), key, "condition", names))
		}
	}
	return errs
}

// MisspeltDocumentMembers reports every top-level member of v, a
// capability document as a decoded value, that a document does not have,
// and MisspeltMembers of each of its capabilities.
func MisspeltDocumentMembers(v any) []error {
	table, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	var errs []error
	members := jsonNameList(reflect.TypeFor[Document]())
	for _, key := range slices.Sorted(maps.Keys(table)) {
		if !slices.Contains(members, key) {
			errs = append(errs, unknownMember(key, key, "member of a capability document", members))
		}
	}
	if list, ok := table["capabilities"].([]any); ok {
		for i, c := range list {
			errs = append(errs, MisspeltMembers(fmt.Sprintf("capabilities[%d]", i), c)...)
		}
	}
	return errs
}

func unknownMember(field, key, what string, known []string) error {
	if near := Nearest(key, known); near != "" {
		return &FieldError{Field: field, Problem: fmt.Sprintf("is not a known %s; did you mean %q?", what, near)}
	}
	return &FieldError{Field: field, Problem: fmt.Sprintf("is not a known %s (its members: %s)", what, strings.Join(known, ", "))}
}
