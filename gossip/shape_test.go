package gossip

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// TestMessageShapeMatchesTypes holds messageShape, which names decode
// errors, to the Go types messages decode into.
func TestMessageShapeMatchesTypes(t *testing.T) {
	var check func(path string, typ reflect.Type, s *shape)
	check = func(path string, typ reflect.Type, s *shape) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		want := map[reflect.Kind]kind{reflect.String: kString, reflect.Int: kInt, reflect.Int64: kInt, reflect.Bool: kBool,
			reflect.Struct: kObject, reflect.Slice: kArray, reflect.Map: kMap, reflect.Interface: kAny}[typ.Kind()]
		if s.kind != want {
			t.Errorf("%s: shape kind %d, Go type %s (want kind %d)", path, s.kind, typ, want)
			return
		}
		switch typ.Kind() {
		case reflect.Slice:
			check(path+"[]", typ.Elem(), s.elem)
		case reflect.Map:
			check(path+".*", typ.Elem(), s.elem)
		case reflect.Struct:
			names := map[string]bool{}
			for i := range typ.NumField() {
				f := typ.Field(i)
				if !f.IsExported() {
					continue
				}
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				names[name] = true
				sub, ok := s.members[name]
				if !ok {
					t.Errorf("%s: shape has no member %q", path, name)
					continue
				}
				check(join(path, name), f.Type, sub)
			}
			for name := range s.members {
				if !names[name] {
					t.Errorf("%s: shape has member %q, which %s does not", path, name, typ)
				}
			}
		}
	}
	check("", reflect.TypeOf(Message{}), messageShape)
}

// genericSample is the sample message as plain values: integers as
// int64, other numbers as float64, so that it encodes to CBOR as the
// Message does.
func genericSample(t *testing.T) map[string]any {
	m, _ := signedSample(t)
	j, err := EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var conv func(any) any
	conv = func(v any) any {
		switch v := v.(type) {
		case json.Number:
			if i, err := v.Int64(); err == nil {
				return i
			}
			f, _ := v.Float64()
			return f
		case []any:
			for i := range v {
				v[i] = conv(v[i])
			}
		case map[string]any:
			for k := range v {
				v[k] = conv(v[k])
			}
		}
		return v
	}
	return conv(v).(map[string]any)
}

// setPath sets the member at an IFP-4 path ("headers.to[0].agent") of a
// generic message.
func setPath(t *testing.T, root map[string]any, path string, value any) {
	var cur any = root
	toks := strings.FieldsFunc(strings.ReplaceAll(path, "[", ".["), func(r rune) bool { return r == '.' })
	for i, tok := range toks {
		last := i == len(toks)-1
		if strings.HasPrefix(tok, "[") {
			n, _ := strconv.Atoi(strings.Trim(tok, "[]"))
			a := cur.([]any)
			if last {
				a[n] = value
				return
			}
			cur = a[n]
			continue
		}
		m := cur.(map[string]any)
		if last {
			m[tok] = value
			return
		}
		cur = m[tok]
	}
	t.Fatalf("empty path")
}

func TestDecodeErrorsNameTheMember(t *testing.T) {
	cases := []struct {
		path       string
		value      any
		cbor, json string // the expected problem in each encoding
	}{
		{"headers.sequence", "1", "expected an integer, got a text string", "expected an integer, got a string"},
		{"headers.sequence", 1.5, "expected an integer, got a floating-point number", "expected an integer, got 1.5, a number with a fraction or an exponent"},
		{"headers.sequence", uint64(1) << 63, "expected an integer from -2^63 to 2^63-1, got 9223372036854775808", "expected an integer from -2^63 to 2^63-1, got 9223372036854775808"},
		{"headers.sequence", []any{}, "expected an integer, got an array", "expected an integer, got an array"},
		{"ifp", "4", "expected an integer, got a text string", "expected an integer, got a string"},
		{"headers", []any{1}, "expected a map, got an array", "expected an object, got an array"},
		{"headers.to[0].agent", int64(7), "expected a text string, got an integer", "expected a string, got an integer"},
		{"headers.to", map[string]any{}, "expected an array, got a map", "expected an array, got an object"},
		{"headers.thread", "x", "expected a map, got a text string", "expected an object, got a string"},
		{"headers.thread.references[0]", false, "expected a text string, got a boolean", "expected a string, got a boolean"},
		{"headers.extensions", int64(5), "expected a map, got an integer", "expected an object, got an integer"},
		{"headers.ttl_seconds", "soon", "expected an integer, got a text string", "expected an integer, got a string"},
		{"body.parts[1].name", true, "expected a text string, got a boolean", "expected a string, got a boolean"},
		{"body.text", map[string]any{}, "expected a text string, got a map", "expected a string, got an object"},
		{"security.signatures[0].signed_body", "yes", "expected a boolean, got a text string", "expected a boolean, got a string"},
		{"security.signatures[0].signed_headers", "all", "expected an array, got a text string", "expected an array, got a string"},
		{"trace.received[0].at", int64(1), "expected a text string, got an integer", "expected a string, got an integer"},
	}
	for _, tc := range cases {
		g := genericSample(t)
		setPath(t, g, tc.path, tc.value)
		c, err := cbor.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		_, cerr := DecodeCBOR(c)
		checkFieldError(t, "CBOR", cerr, tc.path, tc.cbor)
		_, jerr := DecodeJSON(j)
		checkFieldError(t, "JSON", jerr, tc.path, tc.json)
	}

	// Map keys inside a free-form value must be text (CBOR allows others).
	g := genericSample(t)
	c, _ := cbor.Marshal(map[any]any{"ifp": 4, "headers": g["headers"], "body": map[any]any{
		"parts": []any{map[any]any{"content_type": "application/json", "content": map[any]any{"a": map[any]any{1: "x"}}}}}})
	_, err := DecodeCBOR(c)
	checkFieldError(t, "CBOR", err, "body.parts[0].content.a", "has a map key that is an integer; keys are text strings")
	// The message itself must be a map.
	c, _ = cbor.Marshal([]any{4})
	_, err = DecodeCBOR(c)
	checkFieldError(t, "CBOR", err, "", "expected a map, got an array")
	_, err = DecodeJSON([]byte(`"hello"`))
	checkFieldError(t, "JSON", err, "", "expected an object, got a string")
	// NaN where a JSON value goes.
	c, _ = cbor.Marshal(map[string]any{"ifp": 4, "headers": map[string]any{"extensions": map[string]any{"x": []any{math.NaN()}}}})
	_, err = DecodeCBOR(c)
	checkFieldError(t, "CBOR", err, "headers.extensions.x[0]", "NaN has no JSON form")
	_, err = DecodeJSON([]byte(`{"ifp":4,"body":{"parts":[{"content_type":"a","content":{"n":1e400}}]}}`))
	checkFieldError(t, "JSON", err, "body.parts[0].content.n", "number 1e400 is beyond the range of an IEEE 754 double")

	// Input that is not CBOR or JSON at all is named as such.
	syntax := []struct {
		enc, in, field, problem string
	}{
		{"CBOR", "\xff\x00\x13", "", "is not well-formed CBOR"},
		{"CBOR", "\xa2\x63ifp\x04\x63ifp\x04", "", "is not well-formed CBOR: map key ifp appears twice"},
		{"CBOR", "\xa1\x63ifp", "", "is not well-formed CBOR: unexpected EOF"},
		{"CBOR", "\xa1\x63ifp\x04\x00", "", "is followed by 1 bytes"},
		{"CBOR", "\xa1\x63ifp\xc1\x04", "ifp", "expected an integer, got a tag"},
		{"JSON", `{"ifp":4,"ifp":4}`, "ifp", "appears twice"},
		{"JSON", `{"ifp":4,"headers":{"subject":"a","subject":"b"}}`, "headers.subject", "appears twice"},
		{"JSON", `{"ifp":4`, "", "is not valid JSON: it ends before the message does"},
		{"JSON", `{"ifp":4} {}`, "", "is not valid JSON: invalid character '{' after top-level value"},
		{"JSON", "{\"ifp\":4,\"headers\":{\"subject\":\"\xff\"}}", "headers.subject", "is not valid JSON: invalid UTF-8"},
	}
	for _, tc := range syntax {
		var err error
		if tc.enc == "CBOR" {
			_, err = DecodeCBOR([]byte(tc.in))
		} else {
			_, err = DecodeJSON([]byte(tc.in))
		}
		checkFieldError(t, tc.enc, err, tc.field, tc.problem)
	}
}

func checkFieldError(t *testing.T, enc string, err error, field, problem string) {
	t.Helper()
	var fe *FieldError
	switch {
	case !errors.As(err, &fe):
		t.Errorf("%s %s: %v, want a *FieldError", enc, field, err)
	case !errors.Is(err, ErrInvalidMessage) || !errors.Is(err, ErrMalformed):
		t.Errorf("%s %s: %v is not ErrInvalidMessage and ErrMalformed", enc, field, err)
	case fe.Field != field || !strings.HasPrefix(fe.Problem, problem):
		t.Errorf("%s: %q: %q, want %q: %q…", enc, fe.Field, fe.Problem, field, problem)
	}
	if err != nil {
		noGoWords(t, err)
	}
}

// noGoWords fails when an error meant for a peer speaks of Go.
func noGoWords(t testing.TB, err error) {
	t.Helper()
	for _, w := range []string{"Go ", "gossip.", "int64", "interface {", "struct {", "struct field"} {
		if strings.Contains(err.Error(), w) {
			t.Errorf("error names Go types (%q): %v", w, err)
		}
	}
}

// TestValidateNamesNoGoTypes: a value no JSON has is named by its kind.
func TestValidateNamesNoGoTypes(t *testing.T) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	m := sampleMessage(from, to)
	m.Body.Parts[0].Content = map[string]any{"b": []byte("x")}
	m.Headers.Extensions = map[string]any{"s": cbor.SimpleValue(99)}
	err := m.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if errors.As(e, &fe) {
			fields = append(fields, fe.Field+": "+fe.Problem)
		}
	}
	sort.Strings(fields)
	want := []string{
		"body.parts[0].content.b: is a byte string, which is not a JSON value (send it as text, e.g. base64)",
		"headers.extensions.s: is simple value 99, which is not a JSON value",
	}
	if strings.Join(fields, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(fields, "\n"), strings.Join(want, "\n"))
	}
	noGoWords(t, err)
}
