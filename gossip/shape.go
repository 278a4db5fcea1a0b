package gossip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Naming decode errors. The decoders describe a mismatch in Go's terms
// ("cannot unmarshal UTF-8 text string into Go struct field
// gossip.Message.headers of type int64"), and the CBOR one names only the
// outermost field. A peer can act on neither. So when decoding into a
// Message fails, the input is decoded again without a target type and
// walked against messageShape, the IFP-4 structure, and the first member
// that does not fit is named by its IFP-4 path with what was expected and
// what came: "headers.sequence: expected an integer, got a text string".
// This costs a second decode, and only for input that is refused anyway.

// kind is what an IFP-4 member holds.
type kind uint8

const (
	kAny    kind = iota // any JSON value (part contents, extension values)
	kString             // a text string
	kInt                // an integer
	kBool               // true or false
	kObject             // an object with the members named in shape.members; others are ignored
	kMap                // an object with any member names, each value of shape elem
	kArray              // an array, each element of shape elem
)

type shape struct {
	kind    kind
	members map[string]*shape // kObject
	elem    *shape            // kMap, kArray
}

func object(members map[string]*shape) *shape { return &shape{kind: kObject, members: members} }
func arrayOf(elem *shape) *shape              { return &shape{kind: kArray, elem: elem} }

var (
	anyValue   = &shape{kind: kAny}
	text       = &shape{kind: kString}
	integer    = &shape{kind: kInt}
	boolean    = &shape{kind: kBool}
	texts      = arrayOf(text)
	agentShape = object(map[string]*shape{"agent": text, "display": text, "human": text})
)

// messageShape is the IFP-4 message as Message decodes it; a test holds it
// to the Go types.
var messageShape = object(map[string]*shape{
	"ifp": integer,
	"headers": object(map[string]*shape{
		"message_id":      text,
		"date":            text,
		"from":            agentShape,
		"to":              arrayOf(agentShape),
		"conversation_id": text,
		"sequence":        integer,
		"phase":           text,
		"content_type":    text,
		"subject":         text,
		"thread":          object(map[string]*shape{"in_reply_to": text, "references": texts}),
		"languages":       object(map[string]*shape{"content": text, "preferred": texts, "human": texts}),
		"disclosure":      text,
		"persona":         text,
		"priority":        text,
		"ttl_seconds":     integer,
		"capabilities":    object(map[string]*shape{"request": texts, "offer": texts}),
		"extensions":      {kind: kMap, elem: anyValue},
	}),
	"body": object(map[string]*shape{
		"text":  text,
		"parts": arrayOf(object(map[string]*shape{"content_type": text, "name": text, "content": anyValue})),
	}),
	"trace": object(map[string]*shape{
		"received": arrayOf(object(map[string]*shape{"by": text, "with": text, "at": text, "from": text})),
	}),
	"security": object(map[string]*shape{
		"signatures": arrayOf(object(map[string]*shape{
			"alg": text, "key_id": text, "created": text, "signed_headers": texts, "signed_body": boolean, "sig": text,
		})),
		"encryption": object(map[string]*shape{"scheme": text, "recipients": texts}),
	}),
})

// dialect names values as one encoding calls them.
type dialect struct {
	text, object string
	describe     func(v any) string
}

var (
	cborDialect = dialect{text: "a text string", object: "a map", describe: describeCBOR}
	jsonDialect = dialect{text: "a string", object: "an object", describe: describeJSON}
)

func (d dialect) expected(s *shape) string {
	switch s.kind {
	case kString:
		return d.text
	case kInt:
		return "an integer"
	case kBool:
		return "a boolean"
	case kObject, kMap:
		return d.object
	case kArray:
		return "an array"
	}
	return "a JSON value"
}

// describeCBOR names a value decoded from CBOR without a target type.
func describeCBOR(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case uint64, int64, *big.Int, big.Int:
		return "an integer"
	case float64, float32:
		return "a floating-point number"
	case string:
		return "a text string"
	case []byte:
		return "a byte string"
	case []any:
		return "an array"
	case map[any]any, map[string]any:
		return "a map"
	case cbor.SimpleValue:
		return "simple value " + strconv.Itoa(int(v))
	case cbor.Tag, cbor.RawTag, time.Time:
		return "a tag"
	}
	return "a value of another kind"
}

// describeJSON names a value decoded from JSON with json.Number numbers.
func describeJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		if isIntegerLiteral(string(v)) {
			return "an integer"
		}
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return describeCBOR(v)
}

func isIntegerLiteral(s string) bool { return !strings.ContainsAny(s, ".eE") }

// mismatch returns the first member of v that does not have shape s, as
// a *FieldError, or nil. Members are visited in a fixed order (names
// sorted, elements by index), so the same input always names the same
// member. null is accepted anywhere: both decoders read it as absent.
func (d dialect) mismatch(v any, s *shape, path string) *FieldError {
	if v == nil {
		return nil
	}
	bad := func(problem string) *FieldError { return &FieldError{Field: path, Problem: problem} }
	wrong := func() *FieldError {
		return bad("expected " + d.expected(s) + ", got " + d.describe(v))
	}
	switch s.kind {
	case kAny:
		return d.jsonValue(v, path)
	case kString:
		if _, ok := v.(string); !ok {
			return wrong()
		}
	case kBool:
		if _, ok := v.(bool); !ok {
			return wrong()
		}
	case kInt:
		switch n := v.(type) {
		case int64:
		case uint64:
			if n > math.MaxInt64 {
				return bad(fmt.Sprintf("expected an integer from -2^63 to 2^63-1, got %d", n))
			}
		case *big.Int:
			return bad(fmt.Sprintf("expected an integer from -2^63 to 2^63-1, got %s", n))
		case json.Number:
			if _, err := strconv.ParseInt(string(n), 10, 64); err != nil {
				if isIntegerLiteral(string(n)) {
					return bad(fmt.Sprintf("expected an integer from -2^63 to 2^63-1, got %s", n))
				}
				return bad(fmt.Sprintf("expected an integer, got %s, a number with a fraction or an exponent", n))
			}
		default:
			return wrong()
		}
	case kArray:
		a, ok := v.([]any)
		if !ok {
			return wrong()
		}
		for i, e := range a {
			if fe := d.mismatch(e, s.elem, path+"["+strconv.Itoa(i)+"]"); fe != nil {
				return fe
			}
		}
	case kObject, kMap:
		members, keyProblem, ok := d.members(v, s.kind == kMap)
		if !ok {
			return wrong()
		}
		if keyProblem != "" {
			return bad(keyProblem)
		}
		for _, k := range sortedKeys(members) {
			sub := s.elem
			if s.kind == kObject {
				if sub = s.members[k]; sub == nil {
					continue // not an IFP-4 member: ignored
				}
			}
			if fe := d.mismatch(members[k], sub, join(path, k)); fe != nil {
				return fe
			}
		}
	}
	return nil
}

// members returns the text-keyed members of a decoded map. When all keys
// must be text (strict: free-form objects, which decode into Go maps), a
// key of another kind is a problem; in an object of named members it is
// an unknown member, which the decoder ignores.
func (d dialect) members(v any, strict bool) (map[string]any, string, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, "", true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			ks, isText := k.(string)
			if !isText {
				if strict {
					return nil, "has a map key that is " + d.describe(k) + "; keys are text strings", true
				}
				continue
			}
			out[ks] = e
		}
		return out, "", true
	}
	return nil, "", false
}

// jsonValue checks a free-form value for what the decoders refuse in it:
// map keys that are not text, NaN and infinities, tags, numbers beyond a
// double. Byte strings and other non-JSON values decode, and Validate
// names them.
func (d dialect) jsonValue(v any, path string) *FieldError {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return &FieldError{Field: path, Problem: fmt.Sprintf("%v has no JSON form", x)}
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return &FieldError{Field: path, Problem: fmt.Sprintf("%v has no JSON form", x)}
		}
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return &FieldError{Field: path, Problem: fmt.Sprintf("number %s is beyond the range of an IEEE 754 double", x)}
		}
	case cbor.Tag, cbor.RawTag, time.Time, *big.Int, big.Int:
		return &FieldError{Field: path, Problem: "is a tag; tags are not allowed"}
	case []any:
		for i, e := range x {
			if fe := d.jsonValue(e, path+"["+strconv.Itoa(i)+"]"); fe != nil {
				return fe
			}
		}
	case map[any]any, map[string]any:
		members, keyProblem, _ := d.members(x, true)
		if keyProblem != "" {
			return &FieldError{Field: path, Problem: keyProblem}
		}
		for _, k := range sortedKeys(members) {
			if fe := d.jsonValue(members[k], join(path, k)); fe != nil {
				return fe
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// cborLocate decodes CBOR without a target type for mismatch: the
// message decoder's limits, but maps keyed by anything, and tags, NaN
// and infinities let through so that they can be named where they are.
var cborLocate cbor.DecMode

func init() {
	var err error
	cborLocate, err = cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsAllowed,
		MaxNestedLevels:  MaxValueDepth + 8,
		MaxArrayElements: 16384,
		MaxMapPairs:      16384,
		NaN:              cbor.NaNDecodeAllowed,
		Inf:              cbor.InfDecodeAllowed,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// cborDecodeError turns the error of decoding b into a Message into a
// *FieldError that names the member at fault.
func cborDecodeError(b []byte, cause error) *FieldError {
	var v any
	if _, err := cborLocate.UnmarshalFirst(b, &v); err != nil {
		return &FieldError{Field: "", Problem: "is not well-formed CBOR: " + plainCBORError(err)}
	}
	if fe := cborDialect.mismatch(v, messageShape, ""); fe != nil {
		return fe
	}
	return &FieldError{Field: "", Problem: "does not decode as an IFP-4 message: " + plainCBORError(cause)}
}

// plainCBORError is the text of a CBOR library error without the
// library's prefix, and without Go type names (which would mean nothing
// to the peer).
func plainCBORError(err error) string {
	var dup *cbor.DupMapKeyError
	if errors.As(err, &dup) {
		return fmt.Sprintf("map key %v appears twice", dup.Key)
	}
	var key *cbor.InvalidMapKeyTypeError
	if errors.As(err, &key) {
		return "a map key is an array or a map; keys are text strings"
	}
	s := strings.TrimPrefix(err.Error(), "cbor: ")
	for _, goWord := range []string{"Go ", "interface {", "map[", "[]", "struct {"} {
		if strings.Contains(s, goWord) {
			return "a value does not fit the IFP-4 message structure"
		}
	}
	return s
}

// jsonDecodeError turns the error of decoding b into a Message into a
// *FieldError that names the member at fault.
func jsonDecodeError(b []byte, cause error) *FieldError {
	var generic any
	if err := jsonv2.Unmarshal(b, &generic); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return &FieldError{Field: "", Problem: "is not valid JSON: it ends before the message does"}
		}
		var se *jsontext.SyntacticError
		if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return &FieldError{Field: pointerPath(se.JSONPointer), Problem: fmt.Sprintf("appears twice (at byte %d)", se.ByteOffset)}
		}
		if errors.As(err, &se) {
			return &FieldError{Field: pointerPath(se.JSONPointer),
				Problem: fmt.Sprintf("is not valid JSON: %v (at byte %d)", strings.TrimPrefix(se.Err.Error(), "jsontext: "), se.ByteOffset)}
		}
		// Not a syntax error (a number beyond a double, say): the walk
		// below, with numbers as written, names it.
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err == nil {
		if fe := jsonDialect.mismatch(v, messageShape, ""); fe != nil {
			return fe
		}
	}
	var se *jsonv2.SemanticError
	if errors.As(cause, &se) && se.JSONPointer != "" {
		return &FieldError{Field: pointerPath(se.JSONPointer), Problem: "does not fit the IFP-4 message structure"}
	}
	return &FieldError{Field: "", Problem: "does not decode as an IFP-4 message"}
}

// pointerPath writes a JSON Pointer (RFC 6901) as an IFP-4 path:
// "/headers/to/0/agent" is "headers.to[0].agent".
func pointerPath(p jsontext.Pointer) string {
	var path string
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 64); err == nil && tok != "" {
			path += "[" + tok + "]"
			continue
		}
		path = join(path, tok)
	}
	return path
}
