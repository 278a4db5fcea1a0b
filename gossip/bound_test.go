package gossip

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

var small = Bounds{MaxContainers: 4, MaxElements: 6, MaxDepth: 3}

// TestScanCounts: both scans count containers, elements (a map pair
// once) and depth alike, and refuse at the first count past its bound,
// naming it; what is not well-formed is left to the decoder.
func TestScanCounts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any // encoded both ways
		want  string
	}{
		{"scalar", "x", ""},
		{"within every bound", map[string]any{"a": []any{1, 2}, "b": map[string]any{"c": nil}}, ""}, // 3 containers, 2+2+1 = 5 elements, depth 2
		{"too many containers", []any{[]any{}, []any{}, []any{}, []any{}}, "more than 4 containers (arrays and maps) (counted 5"},
		{"too many elements", []any{1, 2, 3, 4, 5, 6, 7}, "more than 6 elements (array elements and map pairs)"},
		{"too many elements in all", []any{[]any{1, 2, 3}, []any{4, 5}}, "more than 6 elements"},
		{"too deep", []any{[]any{[]any{[]any{}}}}, "more than 3 levels of nesting (counted 4"},
	} {
		c, err := cborEnc.Marshal(tc.value)
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(tc.value)
		if err != nil {
			t.Fatal(err)
		}
		for codec, scan := range map[string]func() error{
			"CBOR": func() error { return ScanCBOR(c, small) },
			"JSON": func() error { return ScanJSON(j, small) },
		} {
			err := scan()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s %s: %v, want nil", tc.name, codec, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s %s: %v, want %q", tc.name, codec, err, tc.want)
			case tc.want != "" && (!errors.Is(err, ErrOverBound) || !errors.Is(err, ErrInvalidMessage)):
				t.Errorf("%s %s: %v does not wrap ErrOverBound and ErrInvalidMessage", tc.name, codec, err)
			}
		}
	}
	// Faults other than the counts are the decoder's to name.
	for _, b := range [][]byte{{0x9f, 0xff}, {0x85, 0x01}, {0xc1, 0x80}, {0x7b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x1c}} {
		if err := ScanCBOR(b, small); err != nil {
			t.Errorf("ScanCBOR(%x) = %v, want nil (the decoder refuses it)", b, err)
		}
	}
	// A head announcing more elements than the bound is refused before
	// anything else is read.
	if err := ScanCBOR([]byte{0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, small); !errors.Is(err, ErrOverBound) {
		t.Errorf("an array of 2^64-1 elements: %v, want ErrOverBound", err)
	}
	if err := ScanJSON([]byte(`[1,2,`), small); err != nil {
		t.Errorf("truncated JSON: %v, want nil", err)
	}
}

// twentyCapabilityView is the signed view of the 20-capability document of
// DESIGN.md §8 (node's twentyCapabilities), as a part content holds it,
// with n capabilities.
func capabilityView(n int) map[string]any {
	caps := make([]any, n)
	for i := range caps {
		caps[i] = map[string]any{
			"name":        fmt.Sprintf("tool%02d.run", i),
			"description": strings.Repeat("Does something useful with the input and explains the result. ", 4),
			"parameters": map[string]any{"type": "object", "required": []any{"text"}, "properties": map[string]any{
				"text":      map[string]any{"type": "string", "description": "The text to work on"},
				"max_words": map[string]any{"type": "integer", "minimum": 1, "default": 200},
				"language":  map[string]any{"type": "string", "enum": []any{"en", "es", "de", "fr"}},
			}},
			"output_schema": map[string]any{"type": "object", "properties": map[string]any{"result": map[string]any{"type": "string"}}},
			"conditions":    map[string]any{"min_auth_level": 1},
			"price":         map[string]any{"amount": "0.05", "currency": "USDC"},
			"categories":    []any{"web"},
			"eligible":      true,
		}
	}
	return map[string]any{"ifp": 7, "agent_id": "did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw", "seq": 4,
		"capabilities": caps, "ifp_support": []any{3, 4, 5, 6, 7}, "supported_tool_categories": []any{"web"},
		"signature": map[string]any{"alg": "ed25519", "key_id": "did:key:z6Mk#z6Mk", "created": "2026-03-04T23:58:12Z", "sig": "AAAA"}}
}

// TestBoundsHeadroom measures the real documents MessageBounds are chosen
// from, and keeps at least four times the room the largest needs (see
// the Bounds comment for the figures).
func TestBoundsHeadroom(t *testing.T) {
	type doc struct {
		name string
		cbor []byte // either
		json []byte
	}
	var docs []doc
	greeting := func(name string, caps int) {
		from, to := testIdentity(t, 1), testIdentity(t, 2)
		m := sampleMessage(from, to)
		m.Headers.Phase = PhaseGreeting
		m.Body.Parts = []Part{{ContentType: "application/json", Name: "capabilities", Content: capabilityView(caps)},
			{ContentType: "application/json", Name: "greeting", Content: map[string]any{"temperature": "warm", "ifp_support": []any{3, 4, 7}}}}
		if err := m.Sign(from, testNow); err != nil {
			t.Fatal(err)
		}
		c, err := EncodeCBOR(m)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := EncodeJSON(m)
		docs = append(docs, doc{name + " (CBOR)", c, nil}, doc{name + " (JSON)", nil, j})
	}
	greeting("greeting with the 20-capability view", 20)
	greeting("greeting with a 256-capability view", 256)
	m, _ := signedSample(t)
	c, _ := EncodeCBOR(m)
	docs = append(docs, doc{"sample message (every member)", c, nil})
	for _, f := range []string{"../negotiate/testdata/document.json", "../negotiate/testdata/views/vectors.json",
		"../node/wire/testdata/conformance/signing.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc{f, nil, b})
	}
	var exchange struct {
		Messages []struct{ Name, Frame string }
	}
	b, err := os.ReadFile("../node/wire/testdata/conformance/exchange.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &exchange); err != nil {
		t.Fatal(err)
	}
	for _, e := range exchange.Messages {
		f, _ := hex.DecodeString(e.Frame)
		p, err := ReadFrame(bufio.NewReader(bytes.NewReader(f)))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc{"conformance exchange: " + e.Name, p, nil})
	}
	open := Bounds{MaxContainers: 1 << 30, MaxElements: 1 << 30, MaxDepth: 1 << 10}
	var most counter
	depth := 0
	for _, d := range docs {
		var c counter
		var fe *FieldError
		size := len(d.cbor) + len(d.json)
		if d.cbor != nil {
			c, fe = scanCBOR(d.cbor, open)
		} else {
			c, fe = scanJSON(d.json, open)
		}
		if fe != nil {
			t.Fatal(fe)
		}
		dd := c.Depth
		t.Logf("%-52s %8d bytes %6d containers %7d elements depth %2d", d.name, size, c.Containers, c.Elements, dd)
		most.Containers, most.Elements, depth = max(most.Containers, c.Containers), max(most.Elements, c.Elements), max(depth, dd)
		if d.cbor != nil && ScanCBOR(d.cbor, MessageBounds) != nil || d.json != nil && ScanJSON(d.json, MessageBounds) != nil {
			t.Errorf("%s is refused by MessageBounds", d.name)
		}
	}
	if most.Containers*4 > MessageBounds.MaxContainers || most.Elements*4 > MessageBounds.MaxElements || depth > MessageBounds.MaxDepth {
		t.Errorf("the largest documents need %d containers, %d elements, depth %d: MessageBounds %+v leave less than four times that",
			most.Containers, most.Elements, depth, MessageBounds)
	}
}

// bomb is a message whose part holds the container bomb of issue 13,
// [[{},{},…],…], filling a frame of about size bytes (CBOR, or JSON).
func bomb(t testing.TB, size int, asJSON bool) ([]byte, *Message) {
	t.Helper()
	m, _ := signedSample(t)
	m.Body.Parts = []Part{{ContentType: "application/json", Name: "x", Content: []any{[]any{}}}}
	shell, err := EncodeCBOR(m)
	if asJSON {
		shell, err = EncodeJSON(m)
	}
	if err != nil {
		t.Fatal(err)
	}
	per := 1 // {} in CBOR: a0
	if asJSON {
		per = 3 // {},
	}
	// Arrays of 16,000 maps each: the decoder's bound per array is 16,384.
	n := (size - len(shell) - 1024) / per
	var outer []any
	for n > 0 {
		k := min(n, 16000)
		maps := make([]any, k)
		for i := range maps {
			maps[i] = map[string]any{}
		}
		outer = append(outer, maps)
		n -= k
	}
	m.Body.Parts[0].Content = outer
	var b []byte
	if asJSON {
		b, err = json.Marshal(m)
	} else {
		b, err = cborEnc.Marshal(m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, m
}

// heapAfter runs f and reports the heap f left live (what it returned
// included, kept until after the measurement) and the bytes it allocated.
func heapAfter(f func() any) (live, allocated int64, out any) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out = f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc), int64(after.TotalAlloc - before.TotalAlloc), out
}

// TestContainerBombRefused: a 1 MiB CBOR frame and a 1 MB JSON body of
// tiny nested containers are refused before anything is decoded, naming
// the bound; the log gives the heap the same bytes cost without the bound
// (decoded, then a bogus signature checked), and with it.
func TestContainerBombRefused(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		codec, size := "CBOR", MaxMessageSize
		if asJSON {
			codec, size = "JSON", 1_000_000
		}
		b, built := bomb(t, size, asJSON)
		if len(b) > size {
			t.Fatalf("the %s bomb is %d bytes, over %d", codec, len(b), size)
		}
		// Without the bound, as before issue 13: the JSON decoder into a
		// message; the CBOR decoder into a generic value (its message
		// decoder now bounds every part); then the signature check of
		// the same message, with a bogus signature.
		liveBefore, _, kept := heapAfter(func() any {
			if asJSON {
				var m Message
				if err := jsonv2.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				return &m
			}
			var v any
			if _, err := cborDec.UnmarshalFirst(b, &v); err != nil {
				t.Fatal(err)
			}
			return v
		})
		runtime.KeepAlive(kept)
		kept = nil
		_, verifyAlloc, _ := heapAfter(func() any {
			built.Security.Signatures[0].Sig = "bogus" + built.Security.Signatures[0].Sig[5:]
			return built.Verify(testIdentity(t, 1).PublicKey())
		})
		built = nil

		liveAfter, allocAfter, got := heapAfter(func() any {
			var err error
			if asJSON {
				_, err = DecodeJSON(b)
			} else {
				_, err = DecodeCBOR(b)
			}
			return err
		})
		err, _ := got.(error)
		if !errors.Is(err, ErrOverBound) || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "containers") {
			t.Fatalf("%s bomb of %d bytes: %v, want a refusal naming the container bound", codec, len(b), err)
		}
		t.Logf("%s bomb, %d bytes: without the bound %.1f MiB live after decode, %.1f MiB allocated verifying a bogus signature; "+
			"with it refused (%v), %.2f MiB live, %.2f MiB allocated",
			codec, len(b), mib(liveBefore), mib(verifyAlloc), err, mib(max(liveAfter, 0)), mib(allocAfter))
		if allocAfter > int64(len(b)) {
			t.Errorf("%s bomb: the refusal allocated %d bytes, more than the input's %d", codec, allocAfter, len(b))
		}
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// TestDecodeFactorWorstCases: the densest messages MessageBounds let
// through — as many containers or elements as they allow, of the kinds
// that cost most decoded — decode within DecodeFactor and DecodeFloor, in
// both codecs.
func TestDecodeFactorWorstCases(t *testing.T) {
	arrays := func(n, per int, v func() any) any {
		out := make([]any, n)
		for k := range out {
			a := make([]any, per)
			for i := range a {
				a[i] = v()
			}
			out[k] = a
		}
		return out
	}
	per := 16000 // the CBOR decoder takes at most 16,384 per array
	for name, content := range map[string]any{
		"elements: small integers":  arrays(MessageBounds.MaxElements/per-1, per, func() any { return 0 }),
		"elements: floats":          arrays(MessageBounds.MaxElements/per-1, per, func() any { return 1.5 }),
		"elements: short strings":   arrays(MessageBounds.MaxElements/per-1, per, func() any { return "a" }),
		"containers: empty maps":    arrays(1, MessageBounds.MaxContainers-100, func() any { return map[string]any{} }),
		"containers: one pair each": arrays(1, MessageBounds.MaxContainers-100, func() any { return map[string]any{"a": 0} }),
		"text":                      strings.Repeat("x", MaxMessageSize-4096),
	} {
		m, _ := signedSample(t)
		m.Body.Parts = []Part{{ContentType: "application/json", Name: "x", Content: content}}
		c, err := cborEnc.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(m)
		for codec, decode := range map[string]func(b []byte) (*Message, error){"CBOR": DecodeCBOR, "JSON": DecodeJSON} {
			b := c
			if codec == "JSON" {
				b = j
			}
			if len(b) > MaxMessageSize {
				continue // JSON of a dense CBOR message may not fit
			}
			var err error
			var got *Message
			n := allocated(func() { got, err = decode(b) })
			if err != nil {
				t.Fatalf("%s, %s: %v", name, codec, err)
			}
			// Then its signature, bogus: the door checks it before it
			// knows it is bogus. Decoding and checking together stay
			// within the cost a reader charges the budget.
			got.Security.Signatures[0].Sig = "AAAA" + got.Security.Signatures[0].Sig[4:]
			v := allocated(func() { _ = got.Verify(testIdentity(t, 1).PublicKey()) })
			var counts Counts
			if codec == "CBOR" {
				counts, err = MeasureCBOR(b, MessageBounds)
			} else {
				counts, err = MeasureJSON(b, MessageBounds)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%-26s %s %8d bytes: %5.1f MiB allocated decoding, %5.1f MiB verifying a bogus signature; charged %5.1f MiB",
				name, codec, len(b), mib(int64(n)), mib(int64(v)), mib(counts.Cost(len(b))))
			if int64(n+v) > counts.Cost(len(b)) {
				t.Errorf("%s, %s: decoding and verifying allocated %d bytes, over the %d its counts are charged", name, codec, n+v, counts.Cost(len(b)))
			}
			if !WithinDecodeFactor(n, len(b)) {
				t.Errorf("%s, %s: %d bytes allocated decoding %d, over %d × + %d", name, codec, n, len(b), DecodeFactor, DecodeFloor)
			}
		}
	}
}

// BenchmarkScan: what the bound costs a message within it, the
// 256-capability greeting, before it is decoded (compare
// BenchmarkDecode256). go test ./gossip -run '^$' -bench 'Scan|Decode256'
func BenchmarkScan(b *testing.B) {
	from, to := testIdentity(b, 1), testIdentity(b, 2)
	m := sampleMessage(from, to)
	m.Body.Parts = []Part{{ContentType: "application/json", Name: "capabilities", Content: capabilityView(256)}}
	c, _ := EncodeCBOR(m)
	j, _ := EncodeJSON(m)
	b.Run("CBOR", func(b *testing.B) {
		b.SetBytes(int64(len(c)))
		b.ReportAllocs()
		for b.Loop() {
			if err := ScanCBOR(c, MessageBounds); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("JSON", func(b *testing.B) {
		b.SetBytes(int64(len(j)))
		b.ReportAllocs()
		for b.Loop() {
			if err := ScanJSON(j, MessageBounds); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecode256 decodes the message BenchmarkScan scans.
func BenchmarkDecode256(b *testing.B) {
	from, to := testIdentity(b, 1), testIdentity(b, 2)
	m := sampleMessage(from, to)
	m.Body.Parts = []Part{{ContentType: "application/json", Name: "capabilities", Content: capabilityView(256)}}
	c, _ := EncodeCBOR(m)
	b.SetBytes(int64(len(c)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCBOR(c); err != nil {
			b.Fatal(err)
		}
	}
}
