package gossip

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ifaced/ifaced/identity"
)

var update = flag.Bool("update", false, "rewrite golden files")

var testNow = time.Date(2026, 3, 4, 23, 58, 12, 0, time.UTC)

func testIdentity(t testing.TB, seedByte byte) *identity.Identity {
	t.Helper()
	seed := bytes.Repeat([]byte{seedByte}, 32)
	id, err := identity.FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// sampleMessage uses every IFP-4 field, so codec and rendering tests cover
// all of them.
func sampleMessage(from, to *identity.Identity) *Message {
	return &Message{
		IFP: Version,
		Headers: Headers{
			MessageID:      "msg:01JNTP8R1S3X4V5W6Y7Z8A9BCD",
			Date:           "2026-03-04T23:58:12Z",
			From:           Agent{Agent: from.DID(), Display: "Pete's agent"},
			To:             []Agent{{Agent: to.DID()}},
			ConversationID: "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCE",
			Sequence:       2,
			Phase:          PhaseContext,
			ContentType:    DefaultContentType,
			Subject:        "What's current",
			Thread:         &Thread{InReplyTo: "msg:01JNTP8R1S3X4V5W6Y7Z8A9BCC", References: []string{"msg:01JNTP8R1S3X4V5W6Y7Z8A9BCC"}},
			Languages:      &Languages{Content: "en", Preferred: []string{"en", "es"}, Human: []string{"en"}},
			Disclosure:     "professional",
			Persona:        "researcher",
			Priority:       "normal",
			TTLSeconds:     604800,
			Capabilities:   &CapabilityHeaders{Request: []string{"calendar.availability"}, Offer: []string{"doc.summarize"}},
			Extensions:     map[string]any{"x-iface-context": "prism-vault", "x-count": float64(3), "x-nested": map[string]any{"a": []any{true, nil, "b", 1.5}}},
		},
		Body: Body{
			Text: "Here's what's current for Pete:\n\n**Active projects:** a protocol.\n",
			Parts: []Part{
				{ContentType: "application/json", Name: "task", Content: map[string]any{"intent": "meeting_request", "windows": []any{"2026-03-05T10:00:00Z"}, "weight": 0.25, "count": float64(12)}},
				{ContentType: "text/plain", Name: "note", Content: "plain €"},
			},
		},
		Trace: &Trace{Received: []TraceEntry{{By: "relay:https://relay.example", With: "https+ifp-4", At: "2026-03-04T23:58:13Z", From: from.DID()}}},
	}
}

func signedSample(t testing.TB) (*Message, *identity.Identity) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	m := sampleMessage(from, to)
	if err := m.Sign(from, testNow); err != nil {
		t.Fatal(err)
	}
	return m, from
}

func TestSignatureSurvivesTranscoding(t *testing.T) {
	m, from := signedSample(t)
	if err := m.Verify(from.PublicKey()); err != nil {
		t.Fatalf("fresh signature: %v", err)
	}
	// Signed before CBOR: CBOR → JSON → CBOR.
	c1, err := EncodeCBOR(m)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := DecodeCBOR(c1)
	if err != nil {
		t.Fatal(err)
	}
	j1, err := EncodeJSON(m1)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := DecodeJSON(j1)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := EncodeCBOR(m2)
	if err != nil {
		t.Fatal(err)
	}
	m3, err := DecodeCBOR(c2)
	if err != nil {
		t.Fatal(err)
	}
	for i, mm := range []*Message{m1, m2, m3} {
		if err := mm.Verify(from.PublicKey()); err != nil {
			t.Errorf("after hop %d: %v", i+1, err)
		}
	}
	if !bytes.Equal(c1, c2) {
		t.Errorf("deterministic CBOR differs after a JSON round trip:\n%x\n%x", c1, c2)
	}

	// Signed on JSON (as an HTTP client would send it), verified after CBOR.
	other, _ := identity.Generate(nil)
	jm := sampleMessage(other, from)
	jm.Headers.MessageID = "msg:from-json"
	raw, _ := json.Marshal(jm)
	parsed, err := DecodeJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := parsed.Sign(other, testNow); err != nil {
		t.Fatal(err)
	}
	signedJSON, _ := EncodeJSON(parsed)
	fromJSON, err := DecodeJSON(signedJSON)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := EncodeCBOR(fromJSON)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCBOR(cb)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(other.PublicKey()); err != nil {
		t.Fatalf("signed on JSON, verified after CBOR: %v", err)
	}
}

func TestVerifyRejects(t *testing.T) {
	m, from := signedSample(t)
	stranger := testIdentity(t, 9)
	if err := m.Verify(stranger.PublicKey()); !errors.Is(err, ErrWrongKey) {
		t.Errorf("verify under another key: %v, want ErrWrongKey", err)
	}
	unsigned := sampleMessage(from, stranger)
	if err := unsigned.Verify(from.PublicKey()); !errors.Is(err, ErrUnsigned) {
		t.Errorf("unsigned: %v, want ErrUnsigned", err)
	}
	mutations := map[string]func(m *Message){
		"sequence":   func(m *Message) { m.Headers.Sequence++ },
		"phase":      func(m *Message) { m.Headers.Phase = PhaseClose },
		"body text":  func(m *Message) { m.Body.Text += "!" },
		"part":       func(m *Message) { m.Body.Parts[1].Content = "plain $" },
		"extension":  func(m *Message) { m.Headers.Extensions["x-new"] = "injected" },
		"disclosure": func(m *Message) { m.Headers.Disclosure = "close" },
		"added persona": func(m *Message) {
			m.Headers.Persona = ""
		},
	}
	for name, mutate := range mutations {
		c, _ := EncodeCBOR(m)
		mm, err := DecodeCBOR(c)
		if err != nil {
			t.Fatal(err)
		}
		mutate(mm)
		if err := mm.Verify(from.PublicKey()); !errors.Is(err, identity.ErrBadSignature) {
			t.Errorf("%s changed: %v, want ErrBadSignature", name, err)
		}
	}
	// A trace entry appended by a relay does not break the signature.
	c, _ := EncodeCBOR(m)
	mm, _ := DecodeCBOR(c)
	mm.Trace.Received = append(mm.Trace.Received, TraceEntry{By: "relay:r2", With: "libp2p+ifp-4", At: "2026-03-04T23:58:14Z"})
	if err := mm.Verify(from.PublicKey()); err != nil {
		t.Errorf("after a relay hop: %v", err)
	}
	// A signature leaving required headers out is refused even if valid.
	weak := sampleMessage(from, stranger)
	sig := identity.MessageSignature{Created: FormatDate(testNow), SignedHeaders: []string{"message_id"}, SignedBody: true}
	hv, body, _ := weak.SignedValues(&sig)
	if err := from.SignMessage(&sig, hv, body); err != nil {
		t.Fatal(err)
	}
	weak.addSignature(sig)
	if err := weak.Verify(from.PublicKey()); !errors.Is(err, ErrWeakSignature) {
		t.Errorf("weak signature: %v, want ErrWeakSignature", err)
	}
}

func TestIntroProofOnMessage(t *testing.T) {
	issuer, guest := testIdentity(t, 1), testIdentity(t, 2)
	tok, err := identity.MintIntroduction(issuer.DID(), "guest", time.Hour, testNow, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := sampleMessage(guest, issuer)
	m.Headers.Phase = PhaseGreeting
	if err := m.AddIntroProof(tok, testNow); err != nil {
		t.Fatal(err)
	}
	if err := m.Sign(guest, testNow); err != nil {
		t.Fatal(err)
	}
	c, _ := EncodeCBOR(m)
	back, err := DecodeCBOR(c)
	if err != nil {
		t.Fatal(err)
	}
	proof, ok := back.IntroProof()
	if !ok {
		t.Fatal("introduction proof lost in transit")
	}
	hv, body, err := back.SignedValues(proof)
	if err != nil {
		t.Fatal(err)
	}
	rec := &identity.IssuedIntroduction{Introduction: *tok}
	if err := rec.Admit(guest.PeerID().String(), proof, hv, body, testNow); err != nil {
		t.Fatalf("admit: %v", err)
	}
	if err := back.Verify(guest.PublicKey()); err != nil {
		t.Fatalf("ed25519 signature beside the proof: %v", err)
	}
}

func TestValidate(t *testing.T) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	if err := sampleMessage(from, to).Validate(); err != nil {
		t.Fatalf("sample: %v", err)
	}
	cases := []struct {
		field  string
		mutate func(m *Message)
	}{
		{"headers.message_id", func(m *Message) { m.Headers.MessageID = "" }},
		{"headers.message_id", func(m *Message) { m.Headers.MessageID = "has space" }},
		{"headers.message_id", func(m *Message) { m.Headers.MessageID = strings.Repeat("x", MaxIDLen+1) }},
		{"headers.date", func(m *Message) { m.Headers.Date = "2026-03-04 23:58" }},
		{"headers.date", func(m *Message) { m.Headers.Date = "" }},
		{"headers.from.agent", func(m *Message) { m.Headers.From.Agent = "" }},
		{"headers.to", func(m *Message) { m.Headers.To = nil }},
		{"headers.to[0].agent", func(m *Message) { m.Headers.To[0].Agent = "" }},
		{"headers.conversation_id", func(m *Message) { m.Headers.ConversationID = "" }},
		{"headers.sequence", func(m *Message) { m.Headers.Sequence = 0 }},
		{"headers.sequence", func(m *Message) { m.Headers.Sequence = -3 }},
		{"headers.phase", func(m *Message) { m.Headers.Phase = "hello" }},
		{"headers.content_type", func(m *Message) { m.Headers.ContentType = "" }},
		{"headers.priority", func(m *Message) { m.Headers.Priority = "high" }},
		{"headers.ttl_seconds", func(m *Message) { m.Headers.TTLSeconds = -1 }},
		{"headers.thread.references[0]", func(m *Message) { m.Headers.Thread.References[0] = "" }},
		{"headers.capabilities.request[0]", func(m *Message) { m.Headers.Capabilities.Request[0] = "" }},
		{"headers.languages.preferred[1]", func(m *Message) { m.Headers.Languages.Preferred[1] = "" }},
		{"body.parts[0].content_type", func(m *Message) { m.Body.Parts[0].ContentType = "" }},
		{"body.parts[1].content", func(m *Message) { m.Body.Parts[1].Content = []byte("raw") }},
		{"headers.extensions.x-count", func(m *Message) { m.Headers.Extensions["x-count"] = map[any]any{1: 2} }},
		{"trace.received[0].at", func(m *Message) { m.Trace.Received[0].At = "now" }},
		{"trace.received[0].by", func(m *Message) { m.Trace.Received[0].By = "" }},
		{"security.signatures[0].alg", func(m *Message) {
			m.Security = &Security{Signatures: []identity.MessageSignature{{Alg: "rsa", KeyID: "k", Created: "2026-03-04T23:58:12Z", SignedHeaders: []string{"date"}, Sig: "x"}}}
		}},
		{"security.signatures[0].signed_headers[0]", func(m *Message) {
			m.Security = &Security{Signatures: []identity.MessageSignature{{Alg: "ed25519", KeyID: "k", Created: "2026-03-04T23:58:12Z", SignedHeaders: []string{"trust-score"}, Sig: "x"}}}
		}},
	}
	for _, tc := range cases {
		m := sampleMessage(from, to)
		tc.mutate(m)
		err := m.Validate()
		var fe *FieldError
		if !errors.Is(err, ErrInvalidMessage) || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s broken: Validate = %v, want a FieldError naming it", tc.field, err)
		}
	}
	m := sampleMessage(from, to)
	m.IFP = 3
	if err := m.Validate(); !errors.Is(err, ErrUnknownVersion) || !strings.Contains(err.Error(), `"ifp": 4`) {
		t.Errorf("ifp 3: %v, want ErrUnknownVersion saying what would work", err)
	}
	// Every problem is reported, not only the first.
	m = sampleMessage(from, to)
	m.Headers.Sequence, m.Headers.Phase = 0, "x"
	if err := m.Validate(); !strings.Contains(err.Error(), "headers.sequence") || !strings.Contains(err.Error(), "headers.phase") {
		t.Errorf("two problems, got: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	m, _ := signedSample(t)
	good, _ := EncodeCBOR(m)
	goodJSON, _ := EncodeJSON(m)

	dupKey := func() []byte {
		// {"ifp":4,"ifp":4,...} built by hand: a map with a repeated key.
		var b bytes.Buffer
		b.WriteByte(0xa2)
		enc, _ := cbor.Marshal("ifp")
		b.Write(enc)
		b.WriteByte(0x04)
		b.Write(enc)
		b.WriteByte(0x04)
		return b.Bytes()
	}()
	tagged, _ := cbor.Marshal(cbor.Tag{Number: 1, Content: 0})
	indef := []byte{0xbf, 0x63, 'i', 'f', 'p', 0x04, 0xff}
	cborCases := map[string]struct {
		in   []byte
		want error
	}{
		"empty":          {nil, ErrMalformed},
		"truncated":      {good[:len(good)/2], ErrMalformed},
		"trailing bytes": {append(append([]byte(nil), good...), 0x00), ErrMalformed},
		"duplicate key":  {dupKey, ErrMalformed},
		"tag":            {tagged, ErrMalformed},
		"indefinite map": {indef, ErrMalformed},
		"not a map":      {[]byte{0x01}, ErrMalformed},
		"oversized":      {make([]byte, MaxMessageSize+1), ErrTooLarge},
		"valid but empty message": {func() []byte {
			b, _ := cbor.Marshal(map[string]any{"ifp": 4})
			return b
		}(), ErrInvalidMessage},
	}
	for name, tc := range cborCases {
		if _, err := DecodeCBOR(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("CBOR %s: %v, want %v", name, err, tc.want)
		}
	}
	jsonCases := map[string]struct {
		in   string
		want error
	}{
		"empty":          {"", ErrMalformed},
		"truncated":      {string(goodJSON[:len(goodJSON)/2]), ErrMalformed},
		"duplicate key":  {`{"ifp":4,"ifp":4}`, ErrMalformed},
		"case folding":   {`{"IFP":4}`, ErrInvalidMessage},
		"bad utf-8":      {"{\"ifp\":4,\"headers\":{\"subject\":\"\xff\"}}", ErrMalformed},
		"wrong type":     {`{"ifp":"4"}`, ErrMalformed},
		"fractional seq": {`{"ifp":4,"headers":{"sequence":1.5}}`, ErrMalformed},
		"trailing":       {string(goodJSON) + "{}", ErrMalformed},
		"oversized":      {strings.Repeat(" ", MaxMessageSize+1), ErrTooLarge},
		"unknown ifp":    {strings.Replace(string(goodJSON), `"ifp":4`, `"ifp":9`, 1), ErrUnknownVersion},
	}
	for name, tc := range jsonCases {
		if _, err := DecodeJSON([]byte(tc.in)); !errors.Is(err, tc.want) {
			t.Errorf("JSON %s: %v, want %v", name, err, tc.want)
		}
	}
}

func TestCBORIsDeterministic(t *testing.T) {
	m, _ := signedSample(t)
	a, _ := EncodeCBOR(m)
	for i := 0; i < 20; i++ {
		b, _ := EncodeCBOR(m) // map iteration order varies between calls
		if !bytes.Equal(a, b) {
			t.Fatal("two encodings of one message differ")
		}
	}
}

func TestExtensionsPreserved(t *testing.T) {
	m, _ := signedSample(t)
	c, _ := EncodeCBOR(m)
	back, _ := DecodeCBOR(c)
	j, _ := EncodeJSON(back)
	again, _ := DecodeJSON(j)
	want, _ := identity.Canonicalize(m.Headers.Extensions)
	got, _ := identity.Canonicalize(again.Headers.Extensions)
	if !bytes.Equal(want, got) {
		t.Fatalf("extensions changed in transit:\n got %s\nwant %s", got, want)
	}
}

func TestIFP3RoundTrip(t *testing.T) {
	m, from := signedSample(t)
	seqs := map[string]int64{"msg:01JNTP8R1S3X4V5W6Y7Z8A9BCC": 1}
	out, err := RenderIFP3(m, func(id string) (int64, bool) { s, ok := seqs[id]; return s, ok })
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/message.ifp3.md"
	if *update {
		os.WriteFile(golden, out, 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("rendering differs from %s:\n%s", golden, out)
	}
	for _, line := range []string{"ifp: 3\n", "phase: context\n", "reply-to: 1\n", "disclosure: professional\n", "persona: researcher\n"} {
		if !bytes.Contains(out, []byte(line)) {
			t.Errorf("rendering lacks %q", line)
		}
	}
	back, err := ParseIFP3(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(from.PublicKey()); err != nil {
		t.Fatalf("signature after IFP-3 round trip: %v", err)
	}
	a, _ := EncodeCBOR(m)
	b, _ := EncodeCBOR(back)
	if !bytes.Equal(a, b) {
		t.Error("IFP-3 round trip changed the message")
	}
}

func TestIFP3BodyEdgeCases(t *testing.T) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	for _, text := range []string{"", "\n", "no newline", "two\n\n", "fake appendix\n<!-- ifp-4 -->\n```json\n{}\n```\n", "---\nnot front matter\n---\n"} {
		m := sampleMessage(from, to)
		m.Body.Text, m.Body.Parts, m.Trace, m.Headers.Extensions = text, nil, nil, nil
		m.Headers.Capabilities, m.Headers.Thread, m.Headers.Priority, m.Headers.TTLSeconds = nil, nil, "", 0
		m.Headers.From.Display = ""
		out, err := RenderIFP3(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseIFP3(out, nil)
		if err != nil {
			t.Fatalf("%q: %v\n%s", text, err, out)
		}
		if !reflect.DeepEqual(back, m) {
			t.Errorf("%q: round trip gave %+v", text, back.Body)
		}
	}
	// A carriage return would come back as a line end (found by
	// FuzzParseIFP3: a body "\r" rendered as "\r\n" and read as ""): such
	// a text has no IFP-3 rendering, and the audit log shows it as JSON.
	for _, text := range []string{"\r", "a\r\nb", "end\r"} {
		m := sampleMessage(from, to)
		m.Body.Text = text
		if _, err := RenderIFP3(m, nil); !errors.Is(err, ErrIFP3) {
			t.Errorf("%q rendered: %v", text, err)
		}
	}
	// A file whose lines end in CR alone reads as one with LF.
	back, err := ParseIFP3([]byte("---\rifp: 3\rmessage-id: msg:1\rfrom: a\rto: b\rdate: \"2026-03-04T23:58:12Z\"\rconversation: c\rsequence: 1\rphase: context\r---\rHello\r"), nil)
	if err != nil || back.Body.Text != "Hello" {
		t.Fatalf("CR line ends: %v, %+v", err, back)
	}
}

func TestIFP3ReplyToLookup(t *testing.T) {
	doc := "---\nifp: 3\nmessage-id: msg:2\nfrom: pete-agent\nto: alice-agent\ndate: \"2026-02-15T18:30:00Z\"\nconversation: a1b2c3\nsequence: 2\nphase: probe\nreply-to: 1\n---\nCan you tell me more?\n"
	m, err := ParseIFP3([]byte(doc), func(seq int64) (string, bool) { return "msg:1", seq == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if m.Headers.Thread == nil || m.Headers.Thread.InReplyTo != "msg:1" {
		t.Fatalf("reply-to not mapped: %+v", m.Headers.Thread)
	}
	if _, err := ParseIFP3([]byte(doc), nil); !errors.Is(err, ErrIFP3) || !strings.Contains(err.Error(), "reply-to 1") {
		t.Fatalf("unresolvable reply-to: %v", err)
	}
	noID := strings.Replace(doc, "message-id: msg:2\n", "", 1)
	if m, err := ParseIFP3([]byte(noID), func(int64) (string, bool) { return "msg:1", true }); err != nil || !strings.HasPrefix(m.Headers.MessageID, "msg:") {
		t.Fatalf("hand-written IFP-3 without message-id: %v", err)
	}
}

func TestIFP3Rejects(t *testing.T) {
	m, _ := signedSample(t)
	good, _ := RenderIFP3(m, nil)
	cases := map[string]string{
		"no front matter":   "hello\n",
		"unclosed envelope": "---\nifp: 3\n",
		"unknown field":     strings.Replace(string(good), "ifp: 3\n", "ifp: 3\ntrust-score: 9\n", 1),
		"wrong ifp":         strings.Replace(string(good), "ifp: 3\n", "ifp: 4\n", 1),
		"bad yaml":          strings.Replace(string(good), "ifp: 3\n", "ifp: [3\n", 1),
		"unclosed appendix": strings.TrimSuffix(string(good), "```\n"),
		"bad appendix":      strings.Replace(string(good), `"parts"`, `"partz"`, 1),
		"invalid message":   strings.Replace(string(good), "sequence: 2\n", "sequence: 0\n", 1),
		"oversized":         "---\n" + strings.Repeat("x", MaxIFP3Size),
	}
	for name, in := range cases {
		if _, err := ParseIFP3([]byte(in), nil); err == nil {
			t.Errorf("%s: parsed", name)
		} else if name == "unknown field" && !strings.Contains(err.Error(), "trust-score") {
			t.Errorf("unknown field: error does not name it: %v", err)
		}
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID("msg", testNow), NewID("msg", testNow)
	if a == b || !strings.HasPrefix(a, "msg:") || len(a) != 4+26 {
		t.Fatalf("NewID gave %q and %q", a, b)
	}
}
