package gossip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The seed corpora live in testdata/fuzz/<Target>/ and run as ordinary
// tests; `go test -run TestWriteFuzzSeeds -update` rewrites them from the
// sample message.

func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite the seed corpora")
	}
	m, _ := signedSample(t)
	c, _ := EncodeCBOR(m)
	j, _ := EncodeJSON(m)
	r, _ := RenderIFP3(m, nil)
	for target, seed := range map[string][]byte{"FuzzDecodeCBOR": c, "FuzzDecodeJSON": j, "FuzzParseIFP3": r} {
		dir := filepath.Join("testdata/fuzz", target)
		os.MkdirAll(dir, 0o755)
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", seed)
		if err := os.WriteFile(filepath.Join(dir, "sample"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func FuzzDecodeCBOR(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0xa0})
	f.Add([]byte{0xbf, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m *Message
		var err error
		withinFactor(t, len(b), func() { m, err = DecodeCBOR(b) })
		if err != nil {
			peerReadable(t, err)
			return
		}
		again, err := EncodeCBOR(m)
		if err != nil {
			t.Fatalf("decoded message does not re-encode: %v", err)
		}
		m2, err := DecodeCBOR(again)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		third, _ := EncodeCBOR(m2)
		if !bytes.Equal(again, third) {
			t.Fatal("encoding is not stable")
		}
		if _, err := EncodeJSON(m); err != nil {
			t.Fatalf("decoded CBOR message has no JSON form: %v", err)
		}
		// The signature's body bytes, assembled part by part (and from the
		// memo), are the body's plain RFC 8785 form.
		for range 2 {
			got, err := m.Body.canonical()
			if err != nil {
				return // a content with no canonical form (a huge number) has no signature either
			}
			if want := genericCanonical(t, m.Body); !bytes.Equal(got, want) {
				t.Fatalf("assembled body canonical form differs:\n got %s\nwant %s", got, want)
			}
		}
	})
}

// allocated is the bytes f allocates (the process's, measured around it:
// run single-threaded, as fuzz targets are).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// withinFactor fails when decoding an input of size bytes (decode)
// allocates more than DecodeFactor times that plus DecodeFloor.
func withinFactor(t *testing.T, size int, decode func()) {
	t.Helper()
	if n := allocated(decode); !WithinDecodeFactor(n, size) {
		t.Fatalf("decoding %d bytes allocated %d, over %d × the input + %d", size, n, DecodeFactor, DecodeFloor)
	}
}

// peerReadable fails unless a decode error names the member at fault (a
// *FieldError wrapping ErrInvalidMessage) without Go's words, or is
// ErrTooLarge.
func peerReadable(t *testing.T, err error) {
	t.Helper()
	var fe *FieldError
	if !errors.Is(err, ErrTooLarge) && (!errors.As(err, &fe) || !errors.Is(err, ErrInvalidMessage)) {
		t.Fatalf("decode error is not a FieldError: %v", err)
	}
	noGoWords(t, err)
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"ifp":4,"headers":{"sequence":1e400}}`))
	f.Add([]byte(`{"ifp":4,"ifp":4}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m *Message
		var err error
		withinFactor(t, len(b), func() { m, err = DecodeJSON(b) })
		if err != nil {
			peerReadable(t, err)
			return
		}
		c, err := EncodeCBOR(m)
		if err != nil {
			t.Fatalf("decoded JSON message has no CBOR form: %v", err)
		}
		if _, err := DecodeCBOR(c); err != nil {
			t.Fatalf("JSON message does not survive CBOR: %v", err)
		}
		j, _ := EncodeJSON(m)
		if _, err := DecodeJSON(j); err != nil {
			t.Fatalf("re-encoded JSON does not decode: %v", err)
		}
	})
}

func FuzzParseIFP3(f *testing.F) {
	f.Add([]byte("---\nifp: 3\n---\n"))
	f.Add([]byte("---\n---\n\n<!-- ifp-4 -->\n```json\n{}\n```\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseIFP3(b, func(int64) (string, bool) { return "msg:x", true })
		if err != nil {
			return
		}
		out, err := RenderIFP3(m, nil)
		if err != nil {
			t.Fatalf("parsed message does not render: %v", err)
		}
		back, err := ParseIFP3(out, nil)
		if err != nil {
			t.Fatalf("rendering does not parse: %v\n%s", err, out)
		}
		a, _ := EncodeCBOR(m)
		c, _ := EncodeCBOR(back)
		if !bytes.Equal(a, c) {
			t.Fatalf("render/parse changed the message:\n%s", out)
		}
	})
}

// FuzzVerifyBundle: no bundle makes verification panic or hang, and a
// bundle that does not verify says which part.
func FuzzVerifyBundle(f *testing.F) {
	if raw, err := os.ReadFile(auditVectorsFile); err == nil {
		var v auditVectors
		if json.Unmarshal(raw, &v) == nil {
			f.Add([]byte(v.Bundle))
		}
	}
	f.Add([]byte(`{"format":"ifaced-audit-bundle/1","keys":[],"conversation_id":"c","checkpoints":["x"],"records":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := VerifyBundle(b, nil)
		var bf *BundleFailure
		if err != nil && (!errors.As(err, &bf) || rep.Failure == nil) {
			t.Fatalf("a failure without its part: %v", err)
		}
	})
}
