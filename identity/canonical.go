package identity

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

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
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalizing: %w", err)
	}
	return out, nil
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
