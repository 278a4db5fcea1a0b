package identity

import (
	"testing"
	"time"
)

// BenchmarkMessageSigningInput: the signing input of a greeting's headers,
// written directly (what MessageSigningInput does) and through the
// engine alone (Canonicalize of the headers and of the parameters, as
// before), with the same body bytes. Compare the two ns/op of one run.
func BenchmarkMessageSigningInput(b *testing.B) {
	sig := &MessageSignature{Alg: AlgEd25519, KeyID: "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK#z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
		Created: time.Date(2026, 11, 24, 18, 0, 0, 0, time.UTC).Format(time.RFC3339),
		SignedHeaders: []string{"message_id", "date", "from", "to", "conversation_id", "sequence", "phase", "content_type",
			"subject", "thread", "languages", "disclosure", "persona", "priority", "ttl_seconds", "capabilities", "extensions"},
		SignedBody: true}
	agent := map[string]any{"agent": "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", "display": "Alice's agent"}
	headers := map[string]any{"message_id": "msg:01JNTP8R1S3X4V5W6Y7Z8A9BCD", "date": "2026-11-24T18:00:00Z", "from": agent,
		"to": []any{map[string]any{"agent": "did:key:z6MkpTHR8VNsBxYAAWHut2Geadd9jSwuBV8xRoAnwWsdvktH"}}, "conversation_id": "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCE",
		"sequence": int64(1), "phase": "greeting", "content_type": "text/plain; charset=utf-8", "subject": nil, "thread": nil,
		"languages": nil, "disclosure": "public", "persona": nil, "priority": nil, "ttl_seconds": nil, "capabilities": nil, "extensions": nil}
	body := []byte(`{"parts":[{"content":{"proposal":{}},"content_type":"application/vnd.ifp.proposal+json"}],"text":"Hello"}`)
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := MessageSigningInput(sig, headers, body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("engine", func(b *testing.B) {
		for b.Loop() {
			hc, err := Canonicalize(headers)
			if err != nil {
				b.Fatal(err)
			}
			pc, err := Canonicalize(messageParams{sig.Alg, sig.KeyID, sig.Created, sig.SignedHeaders, sig.SignedBody})
			if err != nil {
				b.Fatal(err)
			}
			_ = append([]byte(MessagePrefix), canonicalObject([]byte("body"), body, []byte("headers"), hc, []byte("signature"), pc)...)
		}
	})
}
