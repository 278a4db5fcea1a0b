package node

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/internal/testkit"
)

func TestRequestedToolCategoriesComeFirst(t *testing.T) {
	cfg := loopbackConfig()
	cfg.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "notes.write", "description": "Write a note", "categories": []string{"code_exec"}},
		{"name": "weather.search", "description": "Search the weather", "categories": []string{"search", "web"}},
		{"name": "diary.read", "description": "Read the diary", "categories": []string{"custom:diary"}, "advertise": "when-eligible",
			"conditions": map[string]any{"min_disclosure": "close"}},
	}
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	res, err := bob.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{ToolCategories: []string{"web", "nonsense", "voice", "search"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.CapNames(res.View); !strings.HasPrefix(got, "+weather.search") {
		t.Fatalf("view order %s, want the requested category first", got)
	}
	if !slices.Equal(res.GrantedToUs.ToolCategories, []string{"web", "search"}) {
		t.Fatalf("honoured categories %v, want [web search] (requested and supported, in the order asked)", res.GrantedToUs.ToolCategories)
	}
	// The view declares what it supports, and the hidden capability's
	// category is not among them.
	if !slices.Equal(res.View.SupportedCategories, []string{"code_exec", "search", "web"}) {
		t.Fatalf("supported_tool_categories %v", res.View.SupportedCategories)
	}
	// The reordered view is signed as sent.
	pub := alice.id.PublicKey()
	if _, err := res.View.VerifyCanonical(pub); err != nil {
		t.Fatalf("the reordered view does not verify: %v", err)
	}
	// Without a request, the document's order, and no categories granted.
	plain, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.CapNames(plain.View); !strings.HasPrefix(got, "+ping") || len(plain.GrantedToUs.ToolCategories) != 0 {
		t.Fatalf("unrequested view %s, categories %v", got, plain.GrantedToUs.ToolCategories)
	}
}
