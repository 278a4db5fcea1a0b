package gossip

import (
	"bytes"
	"testing"

	"github.com/ifaced/ifaced/identity"
)

// signingInput is the exact input of m's first signature.
func signingInput(t *testing.T, m *Message) []byte {
	t.Helper()
	sig := &m.Security.Signatures[0]
	headers, body, err := m.SignedValues(sig)
	if err != nil {
		t.Fatal(err)
	}
	in, err := identity.MessageSigningInput(sig, headers, body)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestSignedFormRule: a member whose value is null, false, "", 0, [] or
// {} is absent from the signed form, from the inside out, so that
// spelling "nothing" one way or another never changes a signature; free-
// form values (part contents, extension values) are signed as they are.
func TestSignedFormRule(t *testing.T) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	bare := func() *Message {
		return &Message{IFP: Version, Headers: Headers{
			MessageID: "msg:1", Date: "2026-03-04T23:58:12Z", From: Agent{Agent: from.DID()}, To: []Agent{{Agent: to.DID()}},
			ConversationID: "conv:1", Sequence: 1, Phase: PhaseGreeting, ContentType: DefaultContentType,
		}, Body: Body{Text: "hello", Parts: []Part{{ContentType: "application/json", Content: map[string]any{}}}}}
	}
	ref := bare()
	if err := ref.Sign(from, testNow); err != nil {
		t.Fatal(err)
	}
	want := signingInput(t, ref)

	same := map[string]func(*Message){
		"display and human empty": func(m *Message) { m.Headers.From.Display, m.Headers.To[0].Human = "", "" },
		"thread {}":               func(m *Message) { m.Headers.Thread = &Thread{} },
		"thread with empty array": func(m *Message) { m.Headers.Thread = &Thread{References: []string{}} },
		"languages {}":            func(m *Message) { m.Headers.Languages = &Languages{Preferred: []string{}} },
		"capabilities {}":         func(m *Message) { m.Headers.Capabilities = &CapabilityHeaders{Request: []string{}} },
		"extensions {}":           func(m *Message) { m.Headers.Extensions = map[string]any{} },
		"ttl_seconds 0":           func(m *Message) { m.Headers.TTLSeconds = 0 },
		"subject empty":           func(m *Message) { m.Headers.Subject = "" },
		"part name empty":         func(m *Message) { m.Body.Parts[0].Name = "" },
	}
	for name, mutate := range same {
		m := bare()
		mutate(m)
		m.Security = ref.Security
		if got := signingInput(t, m); !bytes.Equal(got, want) {
			t.Errorf("%s changes the signed form:\n got %s\nwant %s", name, got, want)
		}
		if err := m.Verify(from.PublicKey()); err != nil {
			t.Errorf("%s: the signature does not verify: %v", name, err)
		}
		// Through JSON and CBOR, whatever each makes of the empty member.
		for _, enc := range []func(*Message) (*Message, error){
			func(m *Message) (*Message, error) { j, _ := EncodeJSON(m); return DecodeJSON(j) },
			func(m *Message) (*Message, error) { c, _ := EncodeCBOR(m); return DecodeCBOR(c) },
		} {
			back, err := enc(m)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := back.Verify(from.PublicKey()); err != nil {
				t.Errorf("%s, transcoded: %v", name, err)
			}
		}
	}

	// Free-form values are signed as they are: an empty content, or an
	// extension whose value is "", is something.
	differ := map[string]func(*Message){
		"content null":    func(m *Message) { m.Body.Parts[0].Content = nil },
		"content \"\"":    func(m *Message) { m.Body.Parts[0].Content = "" },
		"extension \"\"":  func(m *Message) { m.Headers.Extensions = map[string]any{"x": ""} },
		"extension {}":    func(m *Message) { m.Headers.Extensions = map[string]any{"x": map[string]any{}} },
		"thread in reply": func(m *Message) { m.Headers.Thread = &Thread{InReplyTo: "msg:0"} },
		"ttl_seconds 1":   func(m *Message) { m.Headers.TTLSeconds = 1 },
	}
	for name, mutate := range differ {
		m := bare()
		mutate(m)
		m.Security = ref.Security
		if got := signingInput(t, m); bytes.Equal(got, want) {
			t.Errorf("%s does not change the signed form", name)
		}
		if err := m.Verify(from.PublicKey()); err == nil {
			t.Errorf("%s: the signature still verifies", name)
		}
	}

	// An absent header is signed as null; so is one that is present but empty.
	m := bare()
	m.Headers.Thread = &Thread{}
	m.Security = ref.Security
	headers, _, _ := m.SignedValues(&m.Security.Signatures[0])
	if v, ok := headers["thread"]; !ok || v != nil {
		t.Errorf("thread {} is signed as %v (present %v), want null", v, ok)
	}
}

// The signed header values are written directly (identity.AppendCanonical,
// signedAgent.AppendCanonical): for every header of messages full of
// awkward values the bytes are those identity.Canonicalize writes.
func TestSignedHeadersWrittenAsTheEngineWrites(t *testing.T) {
	from := testIdentity(t, 1)
	awkward := []string{"", "plain", "quote \" backslash \\ tab \t nl \n", "\x01\x1f\x7f", "€ 😀 \u2028 <>&", "bad \xff utf-8"}
	for i, s := range awkward {
		m := &Message{IFP: Version, Headers: Headers{
			MessageID: "msg:" + s, Date: "2026-03-04T23:58:12Z", From: Agent{Agent: from.DID(), Display: s, Human: s},
			To:             []Agent{{Agent: s}, {}, {Display: s}},
			ConversationID: "conv:1", Sequence: int64(i + 1), Phase: PhaseGreeting, ContentType: DefaultContentType,
			Subject: s, Persona: s, TTLSeconds: MaxSafeInteger, Thread: &Thread{InReplyTo: s, References: []string{s}},
			Languages: &Languages{Content: "en", Preferred: []string{s}}, Capabilities: &CapabilityHeaders{Request: []string{s}},
			Extensions: map[string]any{"x-" + s: s, "n": 1.5},
		}}
		sig := m.newSignature(testNow)
		headers, _, err := m.SignedValues(&sig)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range headers {
			want, err := identity.Canonicalize(v)
			if err != nil {
				t.Fatalf("%q: header %s: %v", s, name, err)
			}
			got, err := identity.AppendCanonical(nil, v)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%q: header %s:\n direct %s (%v)\n engine %s", s, name, got, err, want)
			}
		}
		want, _ := identity.Canonicalize(headers)
		if got, err := identity.AppendCanonical(nil, headers); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%q: the headers object:\n direct %s (%v)\n engine %s", s, got, err, want)
		}
	}
}

// Nil Go containers in a part's content or an extension are signed as the
// null they travel as: the signature still verifies after the message
// goes through CBOR and JSON and comes back as decoded values.
func TestNilContainersSignAsTheyTravel(t *testing.T) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	for name, content := range map[string]any{
		"nil list":           map[string]any{"x": []any(nil)},
		"nil map":            map[string]any{"x": map[string]any(nil)},
		"nil string list":    map[string]any{"x": []string(nil)},
		"nested in a list":   map[string]any{"x": []any{map[string]any(nil), []any(nil)}},
		"nil map as content": map[string]any(nil),
	} {
		m := &Message{IFP: Version, Headers: Headers{
			MessageID: "msg:1", Date: "2026-03-04T23:58:12Z", From: Agent{Agent: from.DID()}, To: []Agent{{Agent: to.DID()}},
			ConversationID: "conv:1", Sequence: 1, Phase: PhaseGreeting, ContentType: DefaultContentType,
			Extensions: map[string]any{"x-a": []any(nil), "x-b": map[string]any(nil)},
		}, Body: Body{Text: "hello", Parts: []Part{{ContentType: "application/json", Content: content}}}}
		if err := m.Sign(from, testNow); err != nil {
			t.Fatal(err)
		}
		for codec, round := range map[string]func(*Message) (*Message, error){
			"CBOR": func(m *Message) (*Message, error) {
				b, err := EncodeCBOR(m)
				if err != nil {
					return nil, err
				}
				return DecodeCBOR(b)
			},
			"JSON": func(m *Message) (*Message, error) {
				b, err := EncodeJSON(m)
				if err != nil {
					return nil, err
				}
				return DecodeJSON(b)
			},
		} {
			back, err := round(m)
			if err != nil {
				t.Fatalf("%s through %s: %v", name, codec, err)
			}
			if err := back.Verify(from.PublicKey()); err != nil {
				t.Errorf("%s through %s: the signature no longer verifies: %v", name, codec, err)
			}
		}
	}
}
