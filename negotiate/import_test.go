package negotiate

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/identity"
)

func noKeys(kid string) (ed25519.PublicKey, error) { return nil, ErrAgentCardUnknownKey }

func TestImportReadsEachFormat(t *testing.T) {
	merged := `{"identity": {"name": "Both"}, "tools": {"items": [{"name": "a", "description": "A", "parameters": {"type": "object"}},
		{"name": "b", "description": "B"}]}, "message": "hi", "actions": [{"name": "a", "description": "A",
		"input_schema": {"type": "object", "required": ["x"]}, "output_schema": {}, "price": "0.10"}]}`
	imp, err := Import([]byte(merged), "http://x/capabilities", noKeys)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Format != FormatAGUI || imp.Name != "Both" || len(imp.Document.Capabilities) != 2 {
		t.Fatalf("merged: %+v", imp)
	}
	a := imp.Document.Capabilities[0]
	if a.Name != "a" || a.Price == nil || a.Price.Amount != "0.10" || !strings.Contains(mustMarshal(t, a.Parameters), "required") {
		t.Fatalf("the action's schema and price should win: %+v", a)
	}
	for _, c := range imp.Document.Capabilities {
		if c.Eligible != nil {
			t.Fatalf("an import cannot know eligibility: %+v", c)
		}
	}
	for name, raw := range map[string]string{
		"not JSON":         `{"tools": `,
		"not an object":    `[1, 2]`,
		"unknown shape":    `{"hello": "world"}`,
		"tools wrong type": `{"tools": "many"}`,
	} {
		if _, err := Import([]byte(raw), "http://x", noKeys); err == nil {
			t.Errorf("%s: imported", name)
		}
	}
	if _, err := Import([]byte(`{"hello": "world"}`), "http://x", noKeys); !errors.Is(err, ErrNotImportable) {
		t.Errorf("unknown shape: %v", err)
	}
}

func TestImportVerifiesSignedCards(t *testing.T) {
	id, _ := identity.Generate(nil)
	yes := true
	view := &Document{IFP: Version, AgentID: id.DID(), Seq: 1, Capabilities: []Capability{{Name: "x.y", Description: "X", Eligible: &yes}}}
	card := view.AgentCard(A2AOptions{URL: "https://example.invalid/a2a"})
	if err := card.Sign(id); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(card)
	resolve := func(kid string) (ed25519.PublicKey, error) { return identity.PublicKeyFromKeyID(kid) }
	imp, err := Import(raw, "https://example.invalid/card", resolve)
	if err != nil || !imp.Signed || imp.Format != FormatA2A || imp.Document.Capabilities[0].Name != "x.y" {
		t.Fatalf("signed card: %+v %v", imp, err)
	}
	if imp, err := Import(raw, "https://example.invalid/card", noKeys); err != nil || imp.Signed || imp.Note == "" {
		t.Fatalf("a key this daemon cannot resolve: %+v %v", imp, err)
	}
	altered := strings.Replace(string(raw), `"X"`, `"Y"`, 1)
	if _, err := Import([]byte(altered), "https://example.invalid/card", resolve); !errors.Is(err, ErrAgentCardBadSignature) {
		t.Fatalf("an altered card: %v", err)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func FuzzImport(f *testing.F) {
	f.Add([]byte(`{"tools": {"items": [{"name": "a", "description": "A"}]}}`))
	f.Add([]byte(`{"message": "m", "actions": [{"name": "a", "input_schema": {}, "price": "1"}]}`))
	f.Add([]byte(`{"name": "n", "skills": [{"id": "s", "tags": ["t"]}], "signatures": [{"protected": "e30", "signature": "AA"}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		imp, err := Import(raw, "http://fuzz", noKeys)
		if err != nil {
			return
		}
		if imp.Document == nil || len(imp.Document.Capabilities) > maxImportedCapabilities {
			t.Fatalf("imported %+v", imp)
		}
		for _, c := range imp.Document.Capabilities {
			if c.Name == "" || c.Eligible != nil {
				t.Fatalf("imported capability %+v", c)
			}
		}
	})
}
