package gossip

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/ifaced/ifaced/identity"
)

// genericCanonical is the body's RFC 8785 form computed the slow, obvious
// way, ignoring any canonical bytes a part holds.
func genericCanonical(t testing.TB, b Body) []byte {
	t.Helper()
	plain := struct {
		Text  string       `json:"text,omitempty"`
		Parts []partFields `json:"parts,omitempty"`
	}{Text: b.Text}
	for _, p := range b.Parts {
		plain.Parts = append(plain.Parts, partFields{p.ContentType, p.Name, p.Content})
	}
	c, err := identity.Canonicalize(plain)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBodyCanonicalMatchesGenericCanonicalization(t *testing.T) {
	for name, b := range map[string]Body{
		"empty":         {},
		"text only":     {Text: "Hello <you> & \u2028 \U0001F600 \"quoted\""},
		"parts only":    {Parts: []Part{{ContentType: "application/json", Content: map[string]any{"b": 1.0, "a": []any{"x", nil}}}}},
		"no content":    {Text: "t", Parts: []Part{{ContentType: "text/plain", Name: "n"}}},
		"empty content": {Parts: []Part{{ContentType: "application/json", Name: "e", Content: map[string]any{}}}},
		"unicode names": {Parts: []Part{{ContentType: "a/b; x=\"€\"", Name: "\U0001F600", Content: "s"}}},
		"document": {Text: "Greetings", Parts: []Part{
			{ContentType: "application/json", Name: "capabilities", Content: capabilityDocument()},
			{ContentType: "application/json", Name: "greeting", Content: map[string]any{"temperature": "warm"}},
		}},
	} {
		got, err := b.canonical()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := genericCanonical(t, b); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// A greeting carrying a large view, decoded from CBOR twice: the second
// verification finds the canonical bytes in the memo, and still refuses an
// altered view (the altered CBOR has another hash).
func TestMemoizedContentVerifiesLikeFreshContent(t *testing.T) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	m := sampleMessage(from, to)
	m.Trace = nil
	m.Body.Parts = []Part{{ContentType: "application/json", Name: "capabilities", Content: capabilityDocument()}}
	if err := m.Sign(from, time.Now()); err != nil {
		t.Fatal(err)
	}
	enc, err := EncodeCBOR(m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		got, err := DecodeCBOR(enc)
		if err != nil {
			t.Fatal(err)
		}
		if got.Body.Parts[0].rawSum == nil {
			t.Fatal("a large content was decoded without its hash")
		}
		if err := got.Verify(from.PublicKey()); err != nil {
			t.Fatalf("decode %d: %v", i, err)
		}
		if _, ok := memo.get(*got.Body.Parts[0].rawSum); !ok {
			t.Fatalf("decode %d: canonical content not memoized", i)
		}
		c, _ := got.Body.Parts[0].CanonicalContent()
		want, _ := identity.Canonicalize(capabilityDocument())
		if !bytes.Equal(c, want) {
			t.Fatalf("decode %d: canonical content differs from the document's", i)
		}
	}

	altered := *m
	doc := capabilityDocument()
	doc["seq"] = 2.0
	altered.Body.Parts = []Part{{ContentType: "application/json", Name: "capabilities", Content: doc}}
	enc, err = EncodeCBOR(&altered)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCBOR(enc)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(from.PublicKey()); !errors.Is(err, identity.ErrBadSignature) {
		t.Fatalf("altered view: got %v, want %v", err, identity.ErrBadSignature)
	}
}

func TestPartJSONUsesKnownCanonicalBytes(t *testing.T) {
	doc := capabilityDocument()
	canon, err := identity.Canonicalize(doc)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := SealContent(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := sealed.Part("application/json", "capabilities")
	j, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(j, canon) {
		t.Fatalf("the part's JSON does not carry its canonical content: %.200s", j)
	}
	var back Part
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	again, err := identity.Canonicalize(back.Content)
	if err != nil || !bytes.Equal(again, canon) {
		t.Fatalf("the content read back is another value: %v", err)
	}
	// Its CBOR is the plain part's.
	plainCBOR, _ := cborEnc.Marshal(partFields{p.ContentType, p.Name, doc})
	if got, err := cborEnc.Marshal(p); err != nil || !bytes.Equal(got, plainCBOR) {
		t.Fatalf("sealed part's CBOR differs from the plain part's: %v", err)
	}
	// A part without known bytes encodes its content as before.
	plain, _ := json.Marshal(Part{ContentType: "text/plain", Content: "x"})
	if string(plain) != `{"content_type":"text/plain","content":"x"}` {
		t.Fatalf("plain part: %s", plain)
	}
}

func TestCanonicalMemoStaysWithinItsBudget(t *testing.T) {
	m := newMemo[[]byte](64 << 10)
	big := []byte(strings.Repeat("x", 4<<10))
	for i := range 100 {
		m.add(sha256.Sum256([]byte{byte(i)}), big, len(big))
		if m.bytes > m.max {
			t.Fatalf("after %d entries the memo holds %d bytes, budget %d", i+1, m.bytes, m.max)
		}
	}
	if _, ok := m.get(sha256.Sum256([]byte{99})); !ok {
		t.Fatal("the newest entry was evicted")
	}
	if _, ok := m.get(sha256.Sum256([]byte{0})); ok {
		t.Fatal("the oldest entry survived past the budget")
	}
	m.add(sha256.Sum256([]byte("huge")), make([]byte, m.max), m.max)
	if _, ok := m.get(sha256.Sum256([]byte("huge"))); ok {
		t.Fatal("a content larger than an eighth of the budget was kept")
	}
}

// The appendix written member by member is MarshalIndent's, byte for byte,
// when no part content is known canonically; with a sealed part it is the
// same JSON value, indented, first from scratch and then from the memo.
func TestAppendixMatchesMarshalIndent(t *testing.T) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	m := sampleMessage(from, to)
	m.Headers.Capabilities = &CapabilityHeaders{Offer: []string{"a<b>&c"}}
	m.Body.Parts = append(m.Body.Parts, Part{ContentType: "application/json", Content: map[string]any{"x": []any{1.0, "é\u2028"}}})
	if err := m.Sign(from, testNow); err != nil {
		t.Fatal(err)
	}
	for name, app := range map[string]appendix{
		"empty":    {},
		"parts":    {Parts: m.Body.Parts},
		"security": {Security: m.Security},
		"all":      {Headers: &appendixHeaders{Capabilities: m.Headers.Capabilities, Priority: "urgent"}, Parts: m.Body.Parts, Trace: m.Trace, Security: m.Security},
	} {
		var got bytes.Buffer
		if err := writeAppendix(&got, &app); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := jsonv1.MarshalIndent(app, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got.Bytes(), want)
		}
	}

	sealed, err := SealContent(capabilityDocument())
	if err != nil {
		t.Fatal(err)
	}
	app := appendix{Parts: []Part{sealed.Part("application/json", "capabilities"), {ContentType: "text/plain", Content: "x"}}, Security: m.Security}
	var renders [2]bytes.Buffer
	for i := range renders {
		if err := writeAppendix(&renders[i], &app); err != nil {
			t.Fatal(err)
		}
	}
	if renders[0].String() != renders[1].String() {
		t.Fatal("the memoized rendering differs from the first")
	}
	want, _ := jsonv1.MarshalIndent(app, "", "  ")
	a, err := identity.CanonicalizeJSON(renders[0].Bytes())
	if err != nil {
		t.Fatalf("rendering is not JSON: %v\n%s", err, renders[0].Bytes())
	}
	b, _ := identity.CanonicalizeJSON(want)
	if !bytes.Equal(a, b) {
		t.Fatalf("rendering holds another value:\n%s", renders[0].Bytes())
	}
	if !bytes.Contains(renders[0].Bytes(), []byte("\n      \"content\": {\n        \"agent_id\"")) {
		t.Errorf("the sealed content is not indented under its part:\n%.400s", renders[0].Bytes())
	}
}

// A content decoded from the memo is a copy: changing one message's
// content changes no other message's. And only verified contents get there.
func TestMemoizedContentIsNotShared(t *testing.T) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	m := sampleMessage(from, to)
	doc := capabilityDocument()
	// Unique per run: the memo is the process's, and -count=N runs again.
	doc["marker"] = fmt.Sprintf("TestMemoizedContentIsNotShared %d", time.Now().UnixNano())
	m.Body.Parts = []Part{{ContentType: "application/json", Name: "capabilities", Content: doc}}
	m.Trace = nil
	if err := m.Sign(from, testNow); err != nil {
		t.Fatal(err)
	}
	enc, err := EncodeCBOR(m)
	if err != nil {
		t.Fatal(err)
	}
	first, err := DecodeCBOR(enc)
	if err != nil {
		t.Fatal(err)
	}
	// Only content under a signature that verified enters the memos.
	if err := first.Verify(to.PublicKey()); err == nil {
		t.Fatal("verified under the wrong key")
	}
	if _, ok := decodedMemo.get(*first.Body.Parts[0].rawSum); ok {
		t.Fatal("content whose signature did not verify was memoized")
	}
	if err := first.Verify(from.PublicKey()); err != nil {
		t.Fatal(err)
	}
	if _, ok := decodedMemo.get(*first.Body.Parts[0].rawSum); !ok {
		t.Fatal("verified content was not memoized")
	}
	c := first.Body.Parts[0].Content.(map[string]any)
	c["agent_id"] = "changed"
	c["capabilities"].([]any)[0].(map[string]any)["name"] = "changed"
	for range 2 {
		again, err := DecodeCBOR(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !again.Body.Parts[0].fromMemo {
			t.Fatal("decoded again, not copied from the memo")
		}
		got := again.Body.Parts[0].Content.(map[string]any)
		if got["agent_id"] == "changed" || got["capabilities"].([]any)[0].(map[string]any)["name"] == "changed" {
			t.Fatal("a change to one decoded message shows in another")
		}
		if want, _ := identity.Canonicalize(doc); !bytes.Equal(mustCanonical(t, got), want) {
			t.Fatal("the content decoded again differs from the document")
		}
	}
}

func mustCanonical(t *testing.T, v any) []byte {
	t.Helper()
	c, err := identity.Canonicalize(v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The decoded memo holds what its budget says: filled far past its budget
// with distinct capability documents, the heap it keeps alive stays
// within a quarter of the budget above it (the LRU's own entries and the
// allocator's size classes are not counted by the estimate).
func TestDecodedMemoStaysWithinItsBudget(t *testing.T) {
	const budget = 4 << 20
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	m := newMemo[any](budget)
	for i := 0; i < 1000; i++ {
		doc := capabilityDocument()
		doc["marker"] = fmt.Sprint(i)
		// As DecodeCBOR gives it: float64 numbers, []any and map[string]any.
		raw, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var decoded any
		if err := json.Unmarshal(raw, &decoded); err != nil {
			t.Fatal(err)
		}
		v, cost := copyValue(decoded)
		m.add(sha256.Sum256(raw), v, cost)
	}
	held := heap() - before
	runtime.KeepAlive(m)
	t.Logf("decoded memo: budget %d KiB, counted %d KiB, heap held %d KiB", budget>>10, m.bytes>>10, held>>10)
	if held > budget*5/4 {
		t.Errorf("the memo keeps %d KiB of heap alive for a budget of %d KiB", held>>10, budget>>10)
	}
}
