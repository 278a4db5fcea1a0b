package identity

import (
	"bytes"
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
