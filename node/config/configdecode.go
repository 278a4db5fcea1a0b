package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/pelletier/go-toml/v2"
)

// decodeConfig decodes config TOML into c, strictly, reporting every
// problem of shape at once: each unknown key (with the nearest known key
// of its table, "did you mean"), each value of the wrong type (with the
// type wanted and an example, taken from the defaults), each value a
// field cannot read (a duration that is not one), each a
// *negotiate.FieldError with its line.
//
// Decision: go-toml stops at the first value of the wrong type, and then
// reports no unknown key at all; its messages name Go types
// ("config.RatesConfig.Cool of type int"). So the file is first read as
// plain TOML (syntax errors come from there, with their line), and that
// tree is walked against the Config type by the rules go-toml decodes
// with (toml tags, matched exactly, then case-insensitively). Only a tree
// the walk accepts is decoded into c, by go-toml with unknown fields
// disallowed, which stays the last word: anything the walk lets through
// that go-toml refuses is still an error, with go-toml's message.
//
// The inline capability document ([[capabilities]], [agui]) is not walked
// here: package negotiate decodes it by its own strict rules.
func decodeConfig(src []byte, c *Config) error {
	var tree map[string]any
	if err := toml.Unmarshal(src, &tree); err != nil {
		return tomlError(err)
	}
	ck := &configChecker{}
	ck.walk("", tree, reflect.TypeOf(c).Elem(), reflect.ValueOf(DefaultConfig()).Elem())
	if len(ck.problems) > 0 {
		negotiate.Locate(errors.Join(ck.problems...), src, negotiate.FormatTOML, "")
		slices.SortStableFunc(ck.problems, func(a, b error) int { return lineOf(a) - lineOf(b) })
		return errors.Join(ck.problems...)
	}
	dec := toml.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return tomlError(err)
	}
	return nil
}

func lineOf(err error) int {
	var fe *negotiate.FieldError
	if errors.As(err, &fe) {
		return fe.Line
	}
	return 0
}

// configChecker collects the problems of one config tree.
type configChecker struct{ problems []error }

func (k *configChecker) bad(path, format string, args ...any) {
	if path == "" {
		path = "(file)"
	}
	k.problems = append(k.problems, &negotiate.FieldError{Field: path, Problem: fmt.Sprintf(format, args...)})
}

var (
	durationType        = reflect.TypeFor[Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walk checks v, found at path, against the Go type t; def is the default
// value at that place (invalid when there is none), for examples.
func (k *configChecker) walk(path string, v any, t reflect.Type, def reflect.Value) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if def.IsValid() {
			if def.IsNil() {
				def = reflect.Value{}
			} else {
				def = def.Elem()
			}
		}
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		s, ok := v.(string)
		if !ok {
			k.wrongType(path, v, t, def)
			return
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			k.bad(path, "%v", err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Interface:
		// Any value: the inline document, decoded by package negotiate.
	case reflect.Struct:
		table, ok := v.(map[string]any)
		if !ok {
			k.wrongType(path, v, t, def)
			return
		}
		fields := tomlFields(t)
		for _, key := range slices.Sorted(maps.Keys(table)) {
			f, ok := fieldFor(fields, key)
			if !ok {
				k.unknownKey(path, key, fields)
				continue
			}
			var fdef reflect.Value
			if def.IsValid() {
				fdef = def.FieldByIndex(f.index)
			}
			k.walk(joinKey(path, key), table[key], f.typ, fdef)
		}
	case reflect.Map:
		table, ok := v.(map[string]any)
		if !ok {
			k.wrongType(path, v, t, def)
			return
		}
		for _, key := range slices.Sorted(maps.Keys(table)) {
			k.walk(joinKey(path, key), table[key], t.Elem(), reflect.Value{})
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			k.wrongType(path, v, t, def)
			return
		}
		for i, e := range list {
			var edef reflect.Value
			if def.IsValid() && def.Len() > 0 {
				edef = def.Index(0)
			}
			k.walk(fmt.Sprintf("%s[%d]", path, i), e, t.Elem(), edef)
			if path == "capabilities" {
				k.capabilityKeys(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			k.wrongType(path, v, t, def)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			k.wrongType(path, v, t, def)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(int64)
		if !ok {
			k.wrongType(path, v, t, def)
			return
		}
		if fits := reflect.New(t).Elem(); t.Kind() >= reflect.Uint && (n < 0 || fits.OverflowUint(uint64(n))) ||
			t.Kind() < reflect.Uint && fits.OverflowInt(n) {
			k.bad(path, "%d is out of range for this key", n)
		}
	case reflect.Float32, reflect.Float64:
		switch v.(type) {
		case float64, int64:
		default:
			k.wrongType(path, v, t, def)
		}
	}
}

// wrongType reports a value of the wrong type: what it is, what the key
// wants, and an example of what would work.
func (k *configChecker) wrongType(path string, v any, t reflect.Type, def reflect.Value) {
	if path == "" {
		k.bad(path, "is %s; want a table of keys", tomlKind(v))
		return
	}
	var units string
	if t == durationType {
		units = " (" + durationUnitWords + ")"
	}
	k.bad(path, "is %s; want %s, e.g. %s%s", tomlKind(v), wantWords(t), exampleFor(path, t, def), units)
}

// unknownKey reports a key that its table does not have, with the known
// key nearest to it by edit distance, or else every key of the table.
func (k *configChecker) unknownKey(table, key string, fields []tomlField) {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	where := "of [" + table + "]"
	if table == "" {
		where = "at the top level"
	}
	if near := negotiate.Nearest(key, names); near != "" {
		k.bad(joinKey(table, key), "is not a known key %s; did you mean %q?", where, near)
		return
	}
	k.bad(joinKey(table, key), "is not a known key %s (its keys: %s)", where, strings.Join(names, ", "))
}

// capabilityKeys reports every member of an inline [[capabilities]]
// table that a capability does not have, and every condition that is not
// one, at once and with "did you mean" (negotiate.MisspeltMembers, shared
// with standalone capability files): package negotiate, which decodes the
// table afterwards, stops at the first.
func (k *configChecker) capabilityKeys(path string, v any) {
	k.problems = append(k.problems, negotiate.MisspeltMembers(path, v)...)
}

// tomlField is one key of a config table.
type tomlField struct {
	name  string
	index []int
	typ   reflect.Type
}

// tomlFields lists the keys of a struct as go-toml decodes them: the toml
// tag's name, else the field name; "-" and unexported fields are none.
func tomlFields(t reflect.Type) []tomlField {
	var out []tomlField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, tomlField{name: name, index: f.Index, typ: f.Type})
	}
	return out
}

// fieldFor finds key's field: its exact name, else a name equal to it but
// for case, as go-toml matches.
func fieldFor(fields []tomlField, key string) (tomlField, bool) {
	for _, f := range fields {
		if f.name == key {
			return f, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f, true
		}
	}
	return tomlField{}, false
}

// joinKey appends a key to a dotted path, as negotiate.Locate reads it.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// tomlKind says what a decoded TOML value is, with the value when it is
// short enough to quote.
func tomlKind(v any) string {
	switch v := v.(type) {
	case string:
		return "a string (" + clipQuote(v) + ")"
	case int64:
		return fmt.Sprintf("an integer (%d)", v)
	case float64:
		return "a float (" + strconv.FormatFloat(v, 'g', -1, 64) + ")"
	case bool:
		return fmt.Sprintf("a boolean (%t)", v)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time, toml.LocalDate, toml.LocalDateTime, toml.LocalTime:
		return "a date-time"
	}
	return fmt.Sprintf("a %T", v)
}

func clipQuote(s string) string {
	const most = 40
	if r := []rune(s); len(r) > most {
		s = string(r[:most]) + "…"
	}
	return strconv.Quote(s)
}

// wantWords names the TOML type a Go type is written as.
func wantWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		return "a duration string"
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer (no quotes)"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		switch {
		case e == durationType || e.Kind() == reflect.String:
			return "an array of strings"
		case e.Kind() == reflect.Struct || e.Kind() == reflect.Map:
			return "an array of tables"
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "a table"
	}
	return "another type"
}

// exampleFor is a line that would work at path: `max_streams = 1024`, or
// for a table its header.
func exampleFor(path string, t reflect.Type, def reflect.Value) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if (t.Kind() == reflect.Struct && t != durationType && !reflect.PointerTo(t).Implements(textUnmarshalerType)) || t.Kind() == reflect.Map {
		return "[" + path + "] on a line of its own, its keys below it"
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Map && !strings.ContainsAny(path, ".[") {
		return "[[" + path + "]] on a line of its own before each one's keys"
	}
	key := path
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		if path[i] == '[' {
			return exampleValue(t, def, 0) // an element: the value alone
		}
		key = path[i+1:]
	}
	return key + " = " + exampleValue(t, def, 0)
}

// exampleValue is a TOML value of type t: the default def when it has
// one worth showing, else a stand-in.
func exampleValue(t reflect.Type, def reflect.Value, depth int) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if def.IsValid() {
			if def.IsNil() {
				def = reflect.Value{}
			} else {
				def = def.Elem()
			}
		}
	}
	has := def.IsValid() && !def.IsZero()
	switch {
	case t == durationType:
		if has {
			return strconv.Quote(def.Interface().(Duration).String())
		}
		return `"30s"`
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return `"…"`
	}
	switch t.Kind() {
	case reflect.String:
		if has {
			return clipQuote(def.String())
		}
		return `"…"`
	case reflect.Bool:
		if def.IsValid() {
			return strconv.FormatBool(def.Bool())
		}
		return "true"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if has {
			return strconv.FormatInt(def.Int(), 10)
		}
		return "10"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if has {
			return strconv.FormatUint(def.Uint(), 10)
		}
		return "10"
	case reflect.Float32, reflect.Float64:
		if has {
			return strconv.FormatFloat(def.Float(), 'g', -1, 64)
		}
		return "1.5"
	case reflect.Slice, reflect.Array:
		if depth > 2 {
			return "[…]"
		}
		var edef reflect.Value
		if def.IsValid() && def.Len() > 0 {
			edef = def.Index(0)
		}
		return "[" + exampleValue(t.Elem(), edef, depth+1) + "]"
	case reflect.Struct:
		if depth > 2 {
			return "{…}"
		}
		var parts []string
		for _, f := range tomlFields(t) {
			var fdef reflect.Value
			if def.IsValid() {
				fdef = def.FieldByIndex(f.index)
			}
			parts = append(parts, f.name+" = "+exampleValue(f.typ, fdef, depth+1))
			if len(parts) == 2 {
				break
			}
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	case reflect.Map:
		if depth > 2 {
			return "{…}"
		}
		return `{ "…" = ` + exampleValue(t.Elem(), reflect.Value{}, depth+1) + " }"
	}
	return "…"
}

// tomlError turns what go-toml reports into *negotiate.FieldErrors.
func tomlError(err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		var errs []error
		for _, e := range sm.Errors {
			line, _ := e.Position()
			errs = append(errs, &negotiate.FieldError{Field: strings.Join(e.Key(), "."), Line: line,
				Problem: "is not a known key"})
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		field := strings.Join(de.Key(), ".")
		if field == "" {
			field = "(syntax)"
		}
		return &negotiate.FieldError{Field: field, Line: line, Problem: strings.TrimPrefix(de.Error(), "toml: ")}
	}
	return &negotiate.FieldError{Field: "(file)", Problem: err.Error()}
}
