package identity

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Direct canonical writing. A signing input holds two small canonical
// objects built afresh for every signature made or checked: the signed
// header values and the signature parameters. Canonicalize spends most of
// its time on them in encoding/json's reflection and then re-reading the
// result (about 20 µs per signing input, four per greeting on each
// daemon). AppendCanonical writes the values they are made of directly
// and hands anything else to Canonicalize, so the bytes are always the
// engine's: FuzzAppendCanonicalAgreesWithCanonicalize checks it.

// CanonicalAppender is a value that writes its own RFC 8785 form, as
// Canonicalize would write the value it encodes to. A type implements it
// when it is signed often and its form is simple (gossip's signed agent).
type CanonicalAppender interface {
	AppendCanonical(dst []byte) ([]byte, error)
}

// maxExactInteger is 2^53: an integer of at most this magnitude is written
// by RFC 8785 (ECMAScript number serialisation) as its decimal digits.
const maxExactInteger = 1 << 53

// AppendCanonical appends the RFC 8785 form of v to dst, byte for byte as
// Canonicalize(v) would return it. Strings, booleans, nil, integers of at
// most 2^53 in magnitude, []string, []any, map[string]any with ASCII keys
// (a nil one written as null, as encoding/json writes it),
// struct{} and CanonicalAppender are written directly; any other value,
// and a string that is not valid UTF-8 (encoding/json replaces its bad
// bytes), goes through Canonicalize.
func AppendCanonical(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		if out, ok := AppendCanonicalString(dst, x); ok {
			return out, nil
		}
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int:
		return appendInteger(dst, int64(x), v)
	case int64:
		return appendInteger(dst, x, v)
	case uint64:
		if x <= maxExactInteger {
			return strconv.AppendUint(dst, x, 10), nil
		}
	case float64:
		// An integral float64 (what JSON decoding makes of every number)
		// is written as ECMAScript writes it: its digits, and 0 for -0.
		if x == math.Trunc(x) && x >= -maxExactInteger && x <= maxExactInteger {
			return strconv.AppendInt(dst, int64(x), 10), nil
		}
	case struct{}:
		return append(dst, "{}"...), nil
	case []string:
		return appendCanonicalList(dst, x)
	case []any:
		return appendCanonicalList(dst, x)
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), nil // as encoding/json writes a nil map
		}
		if out, ok, err := appendCanonicalMap(dst, x); ok || err != nil {
			return out, err
		}
	case CanonicalAppender:
		return x.AppendCanonical(dst)
	}
	c, err := Canonicalize(v)
	if err != nil {
		return nil, err
	}
	return append(dst, c...), nil
}

func appendInteger(dst []byte, n int64, v any) ([]byte, error) {
	if n >= -maxExactInteger && n <= maxExactInteger {
		return strconv.AppendInt(dst, n, 10), nil
	}
	c, err := Canonicalize(v)
	if err != nil {
		return nil, err
	}
	return append(dst, c...), nil
}

// appendCanonicalList writes a list, or null for a nil one, as
// encoding/json writes a nil slice.
func appendCanonicalList[E any](dst []byte, xs []E) ([]byte, error) {
	if xs == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	for i, e := range xs {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = AppendCanonical(dst, e); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendCanonicalMap writes m with its members in RFC 8785 order. That
// order compares UTF-16 code units, which for ASCII keys is byte order;
// a map with any other key is left to Canonicalize (ok false).
func appendCanonicalMap(dst []byte, m map[string]any) ([]byte, bool, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		for i := 0; i < len(k); i++ {
			if k[i] >= utf8.RuneSelf {
				return dst, false, nil
			}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst, _ = AppendCanonicalString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = AppendCanonical(dst, m[k]); err != nil {
			return nil, false, fmt.Errorf("member %q: %w", k, err)
		}
	}
	return append(dst, '}'), true, nil
}

// AppendCanonicalString appends s as an RFC 8785 string (§3.2.2.2: '"'
// and '\' escaped, control characters as \b \t \n \f \r or \u00XX with
// lowercase hex, everything else as it is) and reports true, or appends
// nothing and reports false when s is not valid UTF-8.
func AppendCanonicalString(dst []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return dst, false
	}
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), true
}
