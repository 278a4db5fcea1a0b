package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
)

// TestHiddenChangeMovesNoProjection: a capability added that no HTTP
// caller qualifies for (advertise = "when-eligible", for close friends)
// changes nothing an HTTP caller can read: the well-known view (its
// bytes, so its seq, updated and signature) and its ETag, AG-UI's and the
// actions contract's GET /capabilities (bytes and ETag), and the A2A
// card (bytes, so its version). A change the caller can see moves them
// all.
func TestHiddenChangeMovesNoProjection(t *testing.T) {
	d := start(t, testConfig())
	paths := []string{"/.well-known/iface/capabilities", "/capabilities", "/.well-known/agent-card.json"}
	read := func() map[string]response {
		out := map[string]response{}
		for _, p := range paths {
			r := do(t, "GET", d.url+p, "", nil)
			if r.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", p, r.status, r.body)
			}
			out[p] = r
		}
		return out
	}
	version := func(r response) string {
		var card negotiate.AgentCard
		if err := json.Unmarshal(r.body, &card); err != nil {
			t.Fatal(err)
		}
		return card.Version
	}
	before := read()
	if _, err := d.n.UpdateDocument(func(doc *negotiate.Document) error {
		doc.Capabilities = append(doc.Capabilities, negotiate.Capability{Name: "vault.open", Description: "Open the vault",
			Advertise: negotiate.AdvertiseWhenEligible, Conditions: &conditions.Conditions{MinDisclosure: "close"}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	after := read()
	for _, p := range paths {
		if before[p].header.Get("ETag") != after[p].header.Get("ETag") {
			t.Errorf("GET %s: a hidden change moved the ETag: %s → %s", p, before[p].header.Get("ETag"), after[p].header.Get("ETag"))
		}
		if !bytes.Equal(before[p].body, after[p].body) {
			t.Errorf("GET %s: a hidden change changed the answer:\n%s\n→\n%s", p, before[p].body, after[p].body)
		}
	}
	card := "/.well-known/agent-card.json"
	if v0, v1 := version(before[card]), version(after[card]); v0 != v1 {
		t.Errorf("a hidden change moved the A2A card's version: %s → %s", v0, v1)
	}
	tag := before["/.well-known/iface/capabilities"].header.Get("ETag")
	if r := do(t, "GET", d.url+"/.well-known/iface/capabilities", "", nil, "If-None-Match", tag); r.status != http.StatusNotModified {
		t.Errorf("If-None-Match with the tag from before the hidden change: %d, want 304", r.status)
	}

	doc, err := d.n.UpdateDocument(func(doc *negotiate.Document) error {
		doc.Capabilities = append(doc.Capabilities, negotiate.Capability{Name: "news.read", Description: "Read the news"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	visible := read()
	for _, p := range paths {
		if visible[p].header.Get("ETag") == after[p].header.Get("ETag") {
			t.Errorf("GET %s: a visible change kept the ETag %s", p, after[p].header.Get("ETag"))
		}
	}
	if v := version(visible[card]); v != strconv.FormatUint(doc.Seq, 10) {
		t.Errorf("after the visible change the card's version is %s, want the document's seq %d", v, doc.Seq)
	}
}
