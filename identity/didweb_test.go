package identity

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDidWebURL(t *testing.T) {
	for _, tc := range []struct{ did, url string }{
		{"did:web:w3c-ccg.github.io", "https://w3c-ccg.github.io/.well-known/did.json"},
		{"did:web:w3c-ccg.github.io:user:alice", "https://w3c-ccg.github.io/user/alice/did.json"},
		{"did:web:example.com%3A3000:user:alice", "https://example.com:3000/user/alice/did.json"},
		{"did:web:127.0.0.1%3A8443", "https://127.0.0.1:8443/.well-known/did.json"},
		{"did:web:", ""},
		{"did:web:example.com/evil", ""},
		{"did:web:example.com:..", ""},
		{"did:web:example.com::x", ""},
		{"did:web:%2Fetc", ""},
		{"example.com", ""},
	} {
		got, err := DIDWebURL(tc.did)
		if (err != nil) != (tc.url == "") || got != tc.url {
			t.Errorf("DIDWebURL(%q) = %q, %v; want %q", tc.did, got, err, tc.url)
		}
	}
}

func TestDIDWebBinds(t *testing.T) {
	bob, _ := Generate(nil)
	other, _ := Generate(nil)
	const did = "did:web:example.com:people:bob"
	mb := strings.TrimPrefix(bob.DID(), "did:key:")
	method := func(typ, key string) map[string]any {
		return map[string]any{"id": did + "#key-1", "type": typ, "controller": did, "publicKeyMultibase": key}
	}
	doc := func(id string, methods []map[string]any, auth ...any) []byte {
		b, _ := json.Marshal(map[string]any{"@context": []string{"https://www.w3.org/ns/did/v1"}, "id": id,
			"verificationMethod": methods, "authentication": auth})
		return b
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		want error // nil: bound
		says string
	}{
		{"by relative reference", doc(did, []map[string]any{method("Ed25519VerificationKey2020", mb)}, "#key-1"), nil, ""},
		{"by absolute reference", doc(did, []map[string]any{method("Multikey", mb)}, did+"#key-1"), nil, ""},
		{"embedded", doc(did, nil, method("Multikey", mb)), nil, ""},
		{"not for authentication", doc(did, []map[string]any{method("Multikey", mb)}), ErrUnknownKey, "not under authentication"},
		{"another key", doc(did, []map[string]any{method("Multikey", strings.TrimPrefix(other.DID(), "did:key:"))}, "#key-1"), ErrUnknownKey, "does not list key " + bob.Fingerprint()},
		{"another type", doc(did, []map[string]any{method("JsonWebKey2020", mb)}, "#key-1"), ErrUnknownKey, "does not list key"},
		{"another DID", doc("did:web:example.com", []map[string]any{method("Multikey", mb)}, "#key-1"), ErrDIDMismatch, `has id "did:web:example.com"`},
		{"not JSON", []byte("<html>"), ErrInvalidDIDDocument, "not JSON"},
	} {
		err := DIDWebBinds(tc.raw, did, bob.PublicKey())
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want bound", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
}

func TestListsKey(t *testing.T) {
	bob, _ := Generate(nil)
	other, _ := Generate(nil)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	week := 7 * 24 * time.Hour
	d := NewDocument(bob, "https://bob.example/", "Bob", t0)
	if err := d.ListsKey(bob.PublicKey(), t0, week); err != nil {
		t.Errorf("active key: %v", err)
	}
	if err := d.ListsKey(other.PublicKey(), t0, week); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), other.Fingerprint()) {
		t.Errorf("a key not listed: %v, want ErrUnknownKey naming its fingerprint", err)
	}
	retired := t0.Add(24 * time.Hour)
	d.Keys[0].Status, d.Keys[0].RetiredDate = KeyRetired, retired.Format(time.RFC3339)
	if err := d.ListsKey(bob.PublicKey(), retired.Add(week-time.Second), week); err != nil {
		t.Errorf("retired within the transition: %v", err)
	}
	if err := d.ListsKey(bob.PublicKey(), retired.Add(week+time.Second), week); !errors.Is(err, ErrKeyRetired) {
		t.Errorf("retired past the transition: %v, want ErrKeyRetired", err)
	}
	d.Keys[0].Status, d.Keys[0].RetiredDate = KeyRevoked, ""
	if err := d.ListsKey(bob.PublicKey(), t0, week); !errors.Is(err, ErrKeyRevoked) {
		t.Errorf("revoked: %v, want ErrKeyRevoked", err)
	}
}
