package identity

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gowebpki/jcs"
)

// FuzzCanonicalizeAgreesWithReference holds the RFC 8785 engine to the
// reference library it replaced: whatever ifaced canonicalizes, gowebpki/jcs
// canonicalizes to the same bytes, and canonical bytes are a fixed point.
// ifaced may refuse more (duplicate member names, invalid UTF-8), never
// produce something else.
func FuzzCanonicalizeAgreesWithReference(f *testing.F) {
	files, _ := filepath.Glob("testdata/rfc8785/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{`{"b":[1e21,-0,0.1,1e-7,"\u20ac\ud83d\ude00"],"a":{"€":1,"\ud83d\ude00":2,"\uffff":3}}`,
		`[9007199254740993,123456789012345678901234567890,5e-324,1.7976931348623157e308]`, `"\u2028<>&"`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := CanonicalizeJSON(in)
		if err != nil {
			return
		}
		want, rerr := jcs.Transform(in)
		if rerr != nil {
			t.Fatalf("ifaced canonicalized %q to %q; the reference refuses it: %v", in, got, rerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("canonical forms differ for %q:\nifaced    %q\nreference %q", in, got, want)
		}
		again, err := CanonicalizeJSON(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("canonical bytes %q are not a fixed point: %q, %v", got, again, err)
		}
	})
}

// FuzzAppendCanonicalAgreesWithCanonicalize holds the direct writer to the
// engine: for values of the shapes signing inputs are made of, built from
// the fuzzer's strings and integers, AppendCanonical writes exactly
// Canonicalize's bytes, or fails where it fails.
func FuzzAppendCanonicalAgreesWithCanonicalize(f *testing.F) {
	f.Add("msg:01J", "did:key:z6Mk", int64(3), uint64(9007199254740992), true, 3.0)
	f.Add("\x00\x1f\b\t\n\f\r\"\\\u2028<>&\x7f", "€😀\uffff", int64(-9007199254740993), uint64(1<<63), false, math.Copysign(0, -1))
	f.Add("bad \xff utf-8", "ключ", int64(0), uint64(0), true, 9007199254740993.0)
	f.Add("", "x", int64(1), uint64(1), false, 1e21)
	f.Fuzz(func(t *testing.T, a, b string, n int64, u uint64, flag bool, x float64) {
		values := []any{
			a, b, n, u, int(n), flag, x, -x, float64(n), float64(u), []any{x, float64(n)}, nil, struct{}{}, []string{a, b}, []any{a, n, nil, []any{u}},
			map[string]any{"b": a, "a": n, "c": []any{b, flag, map[string]any{"z": u, "y": struct{}{}}}},
			map[string]any{a: b, b: n}, // keys from the fuzzer: maybe not ASCII, maybe equal
			messageParams{Alg: a, KeyID: b, Created: a, SignedHeaders: []string{b, a}, SignedBody: flag},
			map[string]any{"params": documentParams{Alg: a, KeyID: b, Created: b}, "f": 1.5},
			[]string(nil), []any(nil), map[string]any(nil),
			map[string]any{"s": []string(nil), "l": []any(nil), "m": map[string]any(nil), a: []any{map[string]any(nil), []string(nil)}},
		}
		for _, v := range values {
			want, werr := Canonicalize(v)
			got, gerr := AppendCanonical([]byte("prefix"), v)
			if (werr != nil) != (gerr != nil) {
				t.Fatalf("%#v: Canonicalize error %v, AppendCanonical error %v", v, werr, gerr)
			}
			if werr == nil && string(got) != "prefix"+string(want) {
				t.Fatalf("%#v:\nCanonicalize    %q\nAppendCanonical %q", v, want, got[len("prefix"):])
			}
		}
		p := messageParams{Alg: a, KeyID: b, Created: a, SignedHeaders: []string{b, a}, SignedBody: flag}
		want, werr := Canonicalize(p)
		got, gerr := p.appendCanonical(nil)
		if (werr != nil) != (gerr != nil) || string(got) != string(want) {
			t.Fatalf("signature parameters %#v:\nCanonicalize %q, %v\ncanonical    %q, %v", p, want, werr, got, gerr)
		}
	})
}
