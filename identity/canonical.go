package identity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// The RFC 8785 engine is jsontext.Value.Canonicalize from go-json-experiment
// (the module behind encoding/json/v2). On a 13 KB capability document it
// runs about 5.6 times faster than gowebpki/jcs (112 µs against 629 µs on
// a 2-core machine), and FuzzCanonicalizeAgreesWithReference checks that
// both produce the same bytes for any input either accepts.

// Canonicalize returns the RFC 8785 canonical JSON of v, which must marshal
// with encoding/json. It is the one place ifaced turns a value into the
// bytes a signature covers; callers that sign the same value repeatedly keep
// the result (a capability document is canonicalized once per seq).
func Canonicalize(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonicalizing: encoding JSON: %w", err)
	}
	return CanonicalizeJSON(raw)
}

// CanonicalizeJSON returns the RFC 8785 form of JSON text.
func CanonicalizeJSON(raw []byte) ([]byte, error) {
	v := jsontext.Value(bytes.Clone(raw))
	if err := v.Canonicalize(); err != nil {
		return nil, fmt.Errorf("canonicalizing: %w", err)
	}
	// jsontext writes a number beyond float64 (1e400) as the largest
	// float64; RFC 8785 §3.2.2.3 makes it an error. Such a number always
	// leaves this literal behind, so only then are the numbers looked at.
	if bytes.Contains(v, []byte(maxFloatLiteral)) {
		if err := checkNumberRange(raw); err != nil {
			return nil, fmt.Errorf("canonicalizing: %w", err)
		}
	}
	return v, nil
}

const maxFloatLiteral = "1.7976931348623157e+308"

// checkNumberRange refuses a JSON text holding a number that float64
// cannot hold.
func checkNumberRange(raw []byte) error {
	d := jsontext.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := d.ReadToken()
		if err != nil {
			return nil // the text was valid: this is its end
		}
		if tok.Kind() != '0' {
			continue
		}
		if f, err := strconv.ParseFloat(tok.String(), 64); err != nil && math.IsInf(f, 0) {
			return fmt.Errorf("number %s is out of the IEEE 754 double range", tok.String())
		}
	}
}

// canonicalObject assembles the canonical form of an object from members
// whose values are already canonical. Keys must be given in code-point
// order and need no escaping; both hold for the fixed keys used here.
func canonicalObject(members ...[]byte) []byte {
	// members alternate: key, canonical value.
	n := 2
	for _, m := range members {
		n += len(m) + 4
	}
	var b bytes.Buffer
	b.Grow(n)
	b.WriteByte('{')
	for i := 0; i < len(members); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.Write(members[i])
		b.WriteString(`":`)
		b.Write(members[i+1])
	}
	b.WriteByte('}')
	return b.Bytes()
}
