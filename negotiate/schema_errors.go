package negotiate

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// schemaProblem is one reason a value fails a JSON Schema, reduced to
// where and why: At is the path inside the value (inside the schema
// itself when the metaschema refuses a schema), as dotted keys
// ("properties.days.type"); "" is the value as a whole.
type schemaProblem struct {
	At      string
	Problem string
}

// String is the problem as a schema's owner reads it:
// "is not valid JSON Schema: properties.days.type: must be one of …".
func (p schemaProblem) String() string {
	if p.At == "" {
		return "is not valid JSON Schema: " + p.Problem
	}
	return "is not valid JSON Schema: " + p.At + ": " + p.Problem
}

// schemaProblems reduces a validation error tree to its deepest causes,
// one line each, instead of the library's whole tree (allOf → allOf →
// anyOf → …), which for a mistyped "type" in a capability's parameters
// dumps the draft 2020-12 metaschema's structure at the owner.
//
// Decision (as Python jsonschema's best_match does): a failed anyOf or
// oneOf lists, of its alternatives, only those the value was of the
// right type for. `"type": "intger"` fails both "a known type name" and
// "an array of them"; the second is noise, so what is left is "must be
// one of …". Only when every alternative is a type mismatch are they all
// kept. Identical lines are said once.
func schemaProblems(ve *jsonschema.ValidationError) []schemaProblem {
	var out []schemaProblem
	seen := map[schemaProblem]bool{}
	for _, leaf := range deepestCauses(ve, 0) {
		p := schemaProblem{At: dottedPath(leaf.InstanceLocation), Problem: describeKind(leaf.ErrorKind)}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	// The library's order follows map iteration; a message should not.
	slices.SortStableFunc(out, func(a, b schemaProblem) int { return strings.Compare(a.At, b.At) })
	return out
}

// describeValidation lists why a value fails its schema, innermost
// failures only (schemaProblems), as "at /path: message" joined by "; ":
// the JSON Pointer of the value, as a requester's tools address it.
func describeValidation(ve *jsonschema.ValidationError) string {
	var lines []string
	seen := map[string]bool{}
	for _, leaf := range deepestCauses(ve, 0) {
		line := fmt.Sprintf("at /%s: %s", strings.Join(leaf.InstanceLocation, "/"), describeKind(leaf.ErrorKind))
		if !seen[line] {
			seen[line] = true
			lines = append(lines, line)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "; ")
}

// maxCauseDepth bounds the walk; a compiled schema's error tree is as deep
// as the schema, which checkValue bounds already.
const maxCauseDepth = 2 * MaxSchemaDepth

func deepestCauses(e *jsonschema.ValidationError, depth int) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 || depth > maxCauseDepth {
		return []*jsonschema.ValidationError{e}
	}
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		var kept, mismatched []*jsonschema.ValidationError
		for _, c := range e.Causes {
			leaves := deepestCauses(c, depth+1)
			if onlyTypeMismatches(leaves, e.InstanceLocation) {
				mismatched = append(mismatched, leaves...)
			} else {
				kept = append(kept, leaves...)
			}
		}
		if len(kept) > 0 {
			return kept
		}
		return mismatched
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, deepestCauses(c, depth+1)...)
	}
	return out
}

// onlyTypeMismatches: every leaf says the value at loc is of another type
// than the alternative wants.
func onlyTypeMismatches(leaves []*jsonschema.ValidationError, loc []string) bool {
	for _, l := range leaves {
		if _, ok := l.ErrorKind.(*kind.Type); !ok || !slicesEqual(l.InstanceLocation, loc) {
			return false
		}
	}
	return true
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// dottedPath writes a JSON Pointer's tokens as the field paths of
// FieldError do: "properties.days.type", "items[0]" for array indexes.
func dottedPath(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		if _, err := strconv.Atoi(t); err == nil && b.Len() > 0 {
			b.WriteString("[" + t + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	return b.String()
}

// describeKind is the failing keyword's message: the library's words
// without their "value " opening, and for a string that is not one of an
// enum's strings, the one it was probably meant to be.
func describeKind(k jsonschema.ErrorKind) string {
	if t, ok := k.(*kind.Type); ok {
		return fmt.Sprintf("is %s; want %s", article(t.Got), strings.Join(mapArticles(t.Want), " or "))
	}
	msg := strings.TrimPrefix(k.LocalizedString(printer), "value ")
	if e, ok := k.(*kind.Enum); ok {
		if got, ok := e.Got.(string); ok {
			if near := nearestString(got, e.Want); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
		}
	}
	return msg
}

// nearestString is the string of want closest to got by edit distance,
// when close enough to be the one meant (at most a third of got's
// letters differ, and at least one may).
func nearestString(got string, want []any) string {
	best, bestDist := "", -1
	for _, w := range want {
		s, ok := w.(string)
		if !ok {
			continue
		}
		if d := levenshtein.ComputeDistance(strings.ToLower(got), strings.ToLower(s)); bestDist < 0 || d < bestDist {
			best, bestDist = s, d
		}
	}
	if bestDist >= 0 && bestDist <= max(1, len(got)/3) {
		return best
	}
	return ""
}

// schemaCompileProblems says why a schema does not compile, as problems
// located inside the schema: what the metaschema refuses, or a reference
// this daemon will not follow.
func schemaCompileProblems(err error) []schemaProblem {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		return schemaProblems(ve)
	}
	var le *jsonschema.LoadURLError
	if errors.As(err, &le) && errors.Is(le.Err, errNoLoading) {
		ref := strings.TrimPrefix(le.URL, schemaBase)
		return []schemaProblem{{Problem: fmt.Sprintf("refers to %q: %v", ref, errNoLoading)}}
	}
	return []schemaProblem{{Problem: err.Error()}}
}

// article puts "a" or "an" before a JSON type name: "an array".
func article(typ string) string {
	if typ != "" && strings.ContainsRune("aeiou", rune(typ[0])) {
		return "an " + typ
	}
	return "a " + typ
}

func mapArticles(types []string) []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = article(t)
	}
	return out
}
