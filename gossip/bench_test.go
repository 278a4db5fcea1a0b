package gossip

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// capabilityDocument is a 20-capability IFP-7 document as generic JSON, the
// size DESIGN.md §8 measures (about 13 KB).
func capabilityDocument() map[string]any {
	var caps []any
	for i := 0; i < 20; i++ {
		caps = append(caps, map[string]any{
			"name":        fmt.Sprintf("tool%02d.run", i),
			"description": strings.Repeat("Does something useful with the input and explains the result. ", 4),
			"parameters": map[string]any{"type": "object", "required": []any{"text"}, "properties": map[string]any{
				"text":      map[string]any{"type": "string", "description": "The text to work on"},
				"max_words": map[string]any{"type": "integer", "minimum": 1.0, "default": 200.0},
				"language":  map[string]any{"type": "string", "enum": []any{"en", "es", "de", "fr"}},
			}},
			"output_schema": map[string]any{"type": "object", "properties": map[string]any{"result": map[string]any{"type": "string"}}},
			"conditions":    map[string]any{"min_disclosure": "professional", "min_auth_level": 1.0},
			"price":         map[string]any{"amount": "0.05", "currency": "USDC"},
			"categories":    []any{"web"},
		})
	}
	return map[string]any{"ifp": 7.0, "agent_id": "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp", "seq": 1.0, "capabilities": caps}
}

// BenchmarkMessageSignVerify measures one signature and one verification of
// a message: a short greeting, and a greeting carrying a 20-capability
// document as a body part (signed_body covers it).
func BenchmarkMessageSignVerify(b *testing.B) {
	from, to := testIdentity(b, 1), testIdentity(b, 2)
	now := time.Now()
	small := sampleMessage(from, to)
	small.Headers.Phase, small.Body.Parts, small.Trace = PhaseGreeting, nil, nil
	withDoc := sampleMessage(from, to)
	withDoc.Headers.Phase, withDoc.Trace = PhaseGreeting, nil
	withDoc.Body.Parts = []Part{{ContentType: "application/json", Name: "capabilities", Content: capabilityDocument()}}
	for _, tc := range []struct {
		name string
		m    *Message
	}{{"small", small}, {"20-capability-document", withDoc}} {
		b.Run(tc.name+"/sign", func(b *testing.B) {
			for b.Loop() {
				tc.m.Security = nil
				if err := tc.m.Sign(from, now); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/verify", func(b *testing.B) {
			tc.m.Security = nil
			tc.m.Sign(from, now)
			for b.Loop() {
				if err := tc.m.Verify(from.PublicKey()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/cbor-roundtrip", func(b *testing.B) {
			for b.Loop() {
				c, err := EncodeCBOR(tc.m)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := DecodeCBOR(c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchGreeting is a warm greeting as ifaced sends one (the peer holds
// the view, so it is named, not attached): the proposal and the context
// granted as parts, the offer in the headers, signed.
func benchGreeting(tb testing.TB) *Message {
	from, to := testIdentity(tb, 1), testIdentity(tb, 2)
	now := time.Date(2026, 3, 4, 23, 58, 12, 0, time.UTC)
	sum := strings.Repeat("9f86d081884c7d65", 4)
	var offer []string
	for i := range 12 {
		offer = append(offer, fmt.Sprintf("tool%02d.run", i))
	}
	m := &Message{
		IFP: Version,
		Headers: Headers{
			MessageID: NewID("msg", now), Date: FormatDate(now), From: Agent{Agent: from.DID()}, To: []Agent{{Agent: to.DID()}},
			ConversationID: NewID("conv", now), Sequence: 1, Phase: PhaseGreeting, ContentType: DefaultContentType,
			Disclosure: "professional", Persona: "default", Capabilities: &CapabilityHeaders{Offer: offer},
		},
		Body: Body{
			Text: "Greetings from alice. I offer you 12 of my 20 capabilities; my signed view for you is the one you hold (sha256 " + sum[:16] + "…).",
			Parts: []Part{
				{ContentType: "application/json", Name: "greeting", Content: map[string]any{
					"temperature": "warm", "ifp_support": []any{3.0, 4.0, 5.0, 7.0}, "have_view": sum, "view_unchanged": sum}},
				{ContentType: "application/json", Name: "context", Content: map[string]any{
					"disclosure": "professional", "disclosure_outcome": "granted", "auth_level": 1.0,
					"temperature": "warm", "persona": "default"}},
			},
		},
	}
	if err := m.Sign(from, now); err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkRenderIFP3 renders a warm greeting as the audit's writer does,
// with the hand-written envelope (fast) and with yaml.v3's (yaml.v3), the
// whole message and the envelope alone.
func BenchmarkRenderIFP3(b *testing.B) {
	m := benchGreeting(b)
	env := greetingEnvelope(b)
	for _, path := range []struct {
		name  string
		write func(*bytes.Buffer, *envelope) error
	}{{"fast", writeEnvelope}, {"yaml.v3", writeEnvelopeYAML}} {
		b.Run("message/"+path.name, func(b *testing.B) {
			var out bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				out.Reset()
				if err := renderIFP3With(&out, m, nil, path.write); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("envelope/"+path.name, func(b *testing.B) {
			var out bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				out.Reset()
				if err := path.write(&out, &env); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
