package negotiate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
)

// withinFactor fails when decode, reading an input of size bytes,
// allocates more than gossip.DecodeFactor times that plus
// gossip.DecodeFloor (measured around it: fuzz targets run one input at a
// time).
func withinFactor(t *testing.T, size int, decode func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	decode()
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; !gossip.WithinDecodeFactor(n, size) {
		t.Fatalf("decoding %d bytes allocated %d, over %d × the input + %d", size, n, gossip.DecodeFactor, gossip.DecodeFloor)
	}
}

// FuzzLoadDocument feeds the owner's-file loader arbitrary bytes in both
// formats: it must return a document or an error, never panic or hang, and
// whatever it accepts must validate and canonicalize.
func FuzzLoadDocument(f *testing.F) {
	for _, name := range []string{"document.json", "document.toml"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, name == "document.toml")
	}
	f.Add([]byte(`{"ifp":7,"agent_id":"a","capabilities":[{"name":"x","description":"y","parameters":{"$ref":"#"}}]}`), false)
	f.Add([]byte("ifp = 7\n[[capabilities]]\nname = 1\n"), true)
	f.Fuzz(func(t *testing.T, src []byte, isTOML bool) {
		format := FormatJSON
		if isTOML {
			format = FormatTOML
		}
		d, err := LoadDocument(src, format, nil)
		if err != nil {
			if fes := fieldErrors(err); len(fes) == 0 {
				t.Fatalf("error without a FieldError: %v", err)
			}
			return
		}
		if err := d.Validate(nil); err != nil {
			t.Fatalf("loaded document does not validate: %v", err)
		}
		if _, err := d.Canonical(); err != nil {
			t.Fatalf("loaded document does not canonicalize: %v", err)
		}
	})
}

// FuzzDecodeView feeds a peer's view decoder and verifier arbitrary
// bytes: never a panic; a view that decodes encodes again, with every
// member it came with, and decodes to the same view; and a view that
// verifies is the vector key's.
func FuzzDecodeView(f *testing.F) {
	raw, err := os.ReadFile("testdata/views/vectors.json")
	if err != nil {
		f.Fatal(err)
	}
	var vs viewVectors
	if err := json.Unmarshal(raw, &vs); err != nil {
		f.Fatal(err)
	}
	for _, v := range vs.Vectors {
		canon, _ := identity.CanonicalizeJSON(v.View)
		f.Add(canon)
	}
	f.Add([]byte(`{"ifp":7,"agent_id":"a","capabilities":[{"name":"x","conditions":{"persona":"p","x":{"y":[1,{"z":null}]}},"x":1}],"x":[]}`))
	f.Add([]byte(`{"ifp":7,"agent_id":"a","capabilities":[{"name":"x","conditions":null}],"signature":{}}`))
	pub := vectorKey(f).PublicKey()
	f.Fuzz(func(t *testing.T, b []byte) {
		withinFactor(t, len(b), func() { _, _ = VerifyView(pub, b) })
		_, _ = withoutMember(b, "signature")
		var d *Document
		var err error
		withinFactor(t, len(b), func() { d, err = DecodeViewJSON(b) })
		if err != nil {
			if !errors.Is(err, ErrNotAView) {
				t.Fatalf("error that is not ErrNotAView: %v", err)
			}
			return
		}
		if d.Signature != nil {
			_, _ = d.VerifyCanonical(pub)
		}
		enc, err := json.Marshal(d)
		if err != nil {
			return // a view holding what JSON cannot carry back (a lone surrogate, say)
		}
		again, err := DecodeViewJSON(enc)
		if err != nil {
			t.Fatalf("a decoded view does not decode once encoded: %v\n%s", err, enc)
		}
		enc2, err := json.Marshal(again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzReadGreeting: any part contents give a greeting or an error
// wrapping ErrInvalidGreeting, never a panic.
func FuzzReadGreeting(f *testing.F) {
	f.Add([]byte(`{"temperature":"warm","ifp_support":[4,7],"requested_tool_categories":["web"],"have_view":"x"}`), []byte(`{"auth_level":1}`))
	f.Add([]byte(`"warm"`), []byte(`null`))
	f.Add([]byte(`{"ifp_support":[1e300]}`), []byte(`{"notes":[1]}`))
	f.Fuzz(func(t *testing.T, greeting, context []byte) {
		var gv, cv any
		if json.Unmarshal(greeting, &gv) != nil || json.Unmarshal(context, &cv) != nil {
			return
		}
		m := &gossip.Message{Body: gossip.Body{Parts: []gossip.Part{{Name: PartGreeting, Content: gv}, {Name: PartContext, Content: cv}}}}
		var err error
		withinFactor(t, len(greeting)+len(context), func() { _, err = ReadGreeting(m) })
		if err != nil && !errors.Is(err, ErrInvalidGreeting) {
			t.Fatalf("error that is not ErrInvalidGreeting: %v", err)
		}
	})
}
