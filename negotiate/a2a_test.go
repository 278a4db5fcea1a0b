package negotiate

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/identity"
)

func newKey(t testing.TB) *identity.Identity {
	t.Helper()
	id, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// keys resolves the kids of the given identities and nothing else.
func keys(ids ...*identity.Identity) func(string) (ed25519.PublicKey, error) {
	return func(kid string) (ed25519.PublicKey, error) {
		for _, id := range ids {
			if id.KeyID() == kid {
				return id.PublicKey(), nil
			}
		}
		return nil, errors.New("not a trusted key")
	}
}

func signedCard(t testing.TB, id *identity.Identity) []byte {
	t.Helper()
	card := projectionDoc(t).View(researcher, nil).AgentCard(cardOptions())
	if err := card.Sign(id); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reorder re-serializes JSON with every object's members in reverse
// order, indented, and with "/" escaped: the same JSON value, other bytes.
func reorder(t testing.TB, raw []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	var write func(v any, indent string)
	write = func(v any, indent string) {
		switch v := v.(type) {
		case map[string]any:
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range v {
					if !yield(k) {
						return
					}
				}
			})
			slices.Reverse(keys)
			b.WriteString("{\n")
			for i, k := range keys {
				kb, _ := json.Marshal(k)
				fmt.Fprintf(&b, "%s  %s :  ", indent, kb)
				write(v[k], indent+"  ")
				if i < len(keys)-1 {
					b.WriteString(",")
				}
				b.WriteString("\n")
			}
			b.WriteString(indent + "}")
		case []any:
			b.WriteString("[ ")
			for i, e := range v {
				if i > 0 {
					b.WriteString(" , ")
				}
				write(e, indent)
			}
			b.WriteString(" ]")
		case string:
			sb, _ := json.Marshal(v)
			b.Write(bytes.ReplaceAll(sb, []byte("/"), []byte(`\/`)))
		default:
			sb, _ := json.Marshal(v)
			b.Write(sb)
		}
	}
	write(v, "")
	return b.Bytes()
}

// edit decodes a card, applies f, and encodes it again.
func edit(t testing.TB, raw []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAgentCardSignVerify(t *testing.T) {
	id, other := testKey(t), newKey(t)
	raw := signedCard(t, id)

	card, err := VerifyAgentCard(raw, keys(id))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if card.Name != "Pete's agent" || len(card.Skills) != 3 || len(card.Signatures) != 1 {
		t.Fatalf("verified card read wrong: %+v", card)
	}

	// The protected header is exactly what §8.4.2 asks for.
	hdr, _ := base64.RawURLEncoding.DecodeString(card.Signatures[0].Protected)
	if want := `{"alg":"EdDSA","typ":"JOSE","kid":"` + id.KeyID() + `"}`; string(hdr) != want {
		t.Errorf("protected header %s, want %s", hdr, want)
	}
	// The signature is over BASE64URL(header) "." BASE64URL(JCS(card without signatures)).
	payload, _ := card.SigningPayload()
	if bytes.Contains(payload, []byte("signatures")) {
		t.Error("the payload includes the signatures")
	}
	sig, _ := base64.RawURLEncoding.DecodeString(card.Signatures[0].Signature)
	input := card.Signatures[0].Protected + "." + base64.RawURLEncoding.EncodeToString(payload)
	if !ed25519.Verify(id.PublicKey(), []byte(input), sig) {
		t.Error("signature is not a plain JWS over the detached JCS payload")
	}

	// A did:key kid carries its own key.
	if _, err := VerifyAgentCard(raw, identity.PublicKeyFromKeyID); err != nil {
		t.Errorf("did:key resolver: %v", err)
	}

	cases := []struct {
		name string
		raw  []byte
		keys func(string) (ed25519.PublicKey, error)
		want error
	}{
		{"re-serialized: other key order, white space, escapes", reorder(t, raw), keys(id), nil},
		{"description altered", edit(t, raw, func(m map[string]any) { m["description"] = "Evil agent" }), keys(id), ErrAgentCardBadSignature},
		{"skill added", edit(t, raw, func(m map[string]any) {
			m["skills"] = append(m["skills"].([]any), map[string]any{"id": "x", "name": "x", "description": "x", "tags": []any{"x"}})
		}), keys(id), ErrAgentCardBadSignature},
		{"member added", edit(t, raw, func(m map[string]any) { m["iconUrl"] = "" }), keys(id), ErrAgentCardBadSignature},
		{"member removed", edit(t, raw, func(m map[string]any) { delete(m, "provider") }), keys(id), ErrAgentCardBadSignature},
		{"url redirected", edit(t, raw, func(m map[string]any) { m["url"] = "https://evil.example/a2a" }), keys(id), ErrAgentCardBadSignature},
		{"0.3 protocolVersion of neither signed interface", edit(t, raw, func(m map[string]any) { m["protocolVersion"] = "0.4.0" }), keys(id), ErrAgentCardBadSignature},
		{"0.3 protocolVersion naming the signed 1.0 interface", edit(t, raw, func(m map[string]any) { m["protocolVersion"] = "1.0" }), keys(id), nil},
		{"1.0 interface removed", edit(t, raw, func(m map[string]any) { m["supportedInterfaces"] = m["supportedInterfaces"].([]any)[1:] }), keys(id), ErrAgentCardBadSignature},
		{"wrong key for the kid", raw, func(string) (ed25519.PublicKey, error) { return other.PublicKey(), nil }, ErrAgentCardBadSignature},
		{"unknown kid", raw, keys(other), ErrAgentCardUnknownKey},
		{"no signatures member", edit(t, raw, func(m map[string]any) { delete(m, "signatures") }), keys(id), ErrAgentCardUnsigned},
		{"empty signatures", edit(t, raw, func(m map[string]any) { m["signatures"] = []any{} }), keys(id), ErrAgentCardUnsigned},
		{"alg none", edit(t, raw, func(m map[string]any) {
			m["signatures"].([]any)[0].(map[string]any)["protected"] = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"` + id.KeyID() + `"}`))
		}), keys(id), ErrAgentCardUnsupported},
		{"critical header", edit(t, raw, func(m map[string]any) {
			m["signatures"].([]any)[0].(map[string]any)["protected"] = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":"` + id.KeyID() + `","crit":["b64"],"b64":false}`))
		}), keys(id), ErrAgentCardUnsupported},
		{"header without kid", edit(t, raw, func(m map[string]any) {
			m["signatures"].([]any)[0].(map[string]any)["protected"] = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA"}`))
		}), keys(id), ErrAgentCardMalformed},
		{"padded base64", edit(t, raw, func(m map[string]any) {
			s := m["signatures"].([]any)[0].(map[string]any)
			s["signature"] = s["signature"].(string) + "=="
		}), keys(id), ErrAgentCardMalformed},
		{"duplicate member", bytes.Replace(raw, []byte(`{"name":`), []byte(`{"name":"Someone else","name":`), 1), keys(id), ErrAgentCardMalformed},
		{"not an object", []byte(`[1,2]`), keys(id), ErrAgentCardMalformed},
		{"null", []byte(`null`), keys(id), ErrAgentCardMalformed},
		{"truncated", raw[:len(raw)/2], keys(id), ErrAgentCardMalformed},
		{"too many signatures", edit(t, raw, func(m map[string]any) {
			s := m["signatures"].([]any)
			for len(s) <= MaxAgentCardSignatures {
				s = append(s, s[0])
			}
			m["signatures"] = s
		}), keys(id), ErrAgentCardMalformed},
		{"too large", append(raw, bytes.Repeat([]byte(" "), MaxAgentCardSize)...), keys(id), ErrAgentCardMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			card, err := VerifyAgentCard(tc.raw, tc.keys)
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("want it verified, got %v", err)
			case tc.want == nil && card.Name != "Pete's agent":
				t.Fatalf("verified card read wrong: %+v", card)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("got %v, want %v", err, tc.want)
			case tc.want != nil && card != nil:
				t.Fatal("a card was returned with an error")
			}
			if err != nil {
				t.Logf("%v", err) // the messages are part of the interface: read them
			}
		})
	}
}

func TestAgentCardSignatures(t *testing.T) {
	id, next := testKey(t), newKey(t)
	card := projectionDoc(t).View(researcher, nil).AgentCard(cardOptions())
	if err := card.Sign(id); err != nil {
		t.Fatal(err)
	}
	first := card.Signatures[0]
	// Signing again by the same key replaces its signature; another key adds one.
	if err := card.Sign(id); err != nil {
		t.Fatal(err)
	}
	if len(card.Signatures) != 1 || card.Signatures[0].Signature != first.Signature {
		t.Fatalf("re-signing by the same key: %+v", card.Signatures)
	}
	if err := card.Sign(next); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(card)
	// Either key alone verifies: a rotation can be announced on the card.
	for _, k := range []*identity.Identity{id, next} {
		if _, err := VerifyAgentCard(raw, keys(k)); err != nil {
			t.Errorf("verifying with one of two signers: %v", err)
		}
	}
	// Neither key: both reasons are reported.
	_, err := VerifyAgentCard(raw, keys())
	if !errors.Is(err, ErrAgentCardUnknownKey) || !strings.Contains(err.Error(), "signatures[1]") {
		t.Errorf("no trusted key: %v", err)
	}
}

// FuzzVerifyAgentCard feeds the card verifier arbitrary bytes. It must
// never panic, every error must be one of its sentinels, and whatever it
// accepts must have exactly the canonical content of the one card the
// test key signed: a re-serialization, never a different card.
func FuzzVerifyAgentCard(f *testing.F) {
	// A small signed card keeps the fuzzer's minimization cheap.
	id := testKey(f)
	tiny := (&Document{IFP: 7, AgentID: "a", Capabilities: []Capability{{Name: "x", Description: "X", Eligible: ptr(true)}}}).
		AgentCard(A2AOptions{URL: "u"})
	if err := tiny.Sign(id); err != nil {
		f.Fatal(err)
	}
	signed, _ := json.Marshal(tiny)
	want, _, err := agentCardPayload(signed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(signed)
	f.Add(reorder(f, signed))
	f.Add(edit(f, signed, func(m map[string]any) { m["name"] = "x" }))
	f.Add(edit(f, signed, func(m map[string]any) { delete(m, "signatures") }))
	f.Add([]byte(`{"signatures":[{"protected":"eyJhbGciOiJFZERTQSIsImtpZCI6IngifQ","signature":""}]}`))
	f.Add([]byte(`{"signatures":[{"protected":"","signature":""}],"name":1e400}`))
	f.Add([]byte(`{"a":"\ud800","signatures":null}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	sentinels := []error{ErrAgentCardMalformed, ErrAgentCardUnsigned, ErrAgentCardUnsupported, ErrAgentCardUnknownKey, ErrAgentCardBadSignature}
	f.Fuzz(func(t *testing.T, raw []byte) {
		card, err := VerifyAgentCard(raw, keys(id))
		if err != nil {
			if card != nil {
				t.Fatal("card returned with an error")
			}
			if !slices.ContainsFunc(sentinels, func(s error) bool { return errors.Is(err, s) }) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		got, sigs, err := agentCardPayload(raw)
		if err != nil {
			t.Fatalf("accepted a card whose payload cannot be read: %v\n%s", err, raw)
		}
		if bytes.Equal(got, want) {
			return
		}
		// Not this run's card, but perhaps one the same (deterministic)
		// key signed in an earlier version of this test, kept in the fuzz
		// cache. Ed25519 is deterministic: the key signed exactly this
		// payload only if signing it again gives the card's signature.
		for _, s := range sigs {
			mine, err := id.LibP2PKey().Sign(jwsSigningInput(s.Protected, got))
			if err == nil && base64.RawURLEncoding.EncodeToString(mine) == s.Signature {
				return
			}
		}
		t.Fatalf("accepted a card the key never signed:\n%s", raw)
	})
}
