package gossip

import (
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
