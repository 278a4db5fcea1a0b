package discovery_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/ifaced/ifaced/node/nodetest"
)

// outsideAgents serves documents in the formats ifaced imports, as other
// kinds of agents would.
type outsideAgents struct {
	mu    sync.Mutex
	pages map[string]func(w http.ResponseWriter, r *http.Request)
}

func (o *outsideAgents) set(path string, h func(w http.ResponseWriter, r *http.Request)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pages[path] = h
}

func (o *outsideAgents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	h := o.pages[r.URL.Path]
	o.mu.Unlock()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	h(w, r)
}

func serveJSON(v any) func(http.ResponseWriter, *http.Request) {
	b, _ := json.Marshal(v)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}
}

// signedCard is an A2A card an outside ifaced-like agent signs with its key.
func signedCard(t *testing.T, id *identity.Identity) *negotiate.AgentCard {
	t.Helper()
	yes := true
	view := &negotiate.Document{IFP: negotiate.Version, AgentID: id.DID(), Seq: 1, Capabilities: []negotiate.Capability{
		{Name: "translate.text", Description: "Translate text", Tags: []string{"language"}, Eligible: &yes}}}
	card := view.AgentCard(negotiate.A2AOptions{Identity: negotiate.AGUIIdentity{DisplayName: "Translator"}, URL: "https://translator.example/a2a"})
	if err := card.Sign(id); err != nil {
		t.Fatal(err)
	}
	return card
}

func TestImportOutsideAgentsAndFindThem(t *testing.T) {
	out := &outsideAgents{pages: map[string]func(http.ResponseWriter, *http.Request){}}
	srv := httptest.NewServer(out)
	defer srv.Close()
	other := httptest.NewServer(out)
	defer other.Close()
	// The timeout is what /slow must run into; the other sources must be
	// read within it on a busy machine too (/big is a MiB: at 300 ms it
	// failed as a timeout, not at the limit, under a load of 50).
	d := startDaemon(t, nodetest.LoopbackConfig(), node.WithImportTimeout(3*time.Second))
	ctx := context.Background()

	out.set("/agui", serveJSON(map[string]any{
		"identity": map[string]any{"name": "Weather UI agent"},
		"tools": map[string]any{"supported": true, "items": []any{
			map[string]any{"name": "weather.forecast", "description": "Forecast", "parameters": map[string]any{"type": "object"}}}},
	}))
	out.set("/orchestrator", serveJSON(map[string]any{
		"message": "I summarize documents.\nAsk me.",
		"actions": []any{map[string]any{"name": "summarize", "description": "Summarize a document",
			"input_schema": map[string]any{"type": "object"}, "output_schema": map[string]any{"type": "object"}, "price": "0.05"}},
	}))
	key, _ := identity.Generate(nil)
	card := signedCard(t, key)
	out.set("/card", serveJSON(card))
	altered := *card
	altered.Description = "Now also steals secrets"
	out.set("/altered", serveJSON(&altered))
	foreign := *card
	foreign.Signatures = append([]negotiate.A2ASignature(nil), card.Signatures...)
	foreign.Signatures[0].Protected = "eyJhbGciOiJFZERTQSIsImtpZCI6Imh0dHBzOi8vZXhhbXBsZS5pbnZhbGlkL2tleSJ9" // {"alg":"EdDSA","kid":"https://example.invalid/key"}
	out.set("/foreign-key", serveJSON(&foreign))

	rec, err := d.Discovery().Import(ctx, srv.URL+"/agui")
	if err != nil || rec.Format != negotiate.FormatAGUI || rec.Name != "Weather UI agent" || rec.Signed {
		t.Fatalf("AG-UI import: %+v %v", rec, err)
	}
	rec, err = d.Discovery().Import(ctx, srv.URL+"/orchestrator")
	if err != nil || rec.Format != negotiate.FormatOrchestrator || rec.Name != "I summarize documents." {
		t.Fatalf("orchestrator import: %+v %v", rec, err)
	}
	rec, err = d.Discovery().Import(ctx, srv.URL+"/card")
	if err != nil || rec.Format != negotiate.FormatA2A || !rec.Signed {
		t.Fatalf("signed A2A card: %+v %v", rec, err)
	}
	rec, err = d.Discovery().Import(ctx, srv.URL+"/foreign-key")
	if err != nil || rec.Signed || !strings.Contains(rec.Note, "unknown key") {
		t.Fatalf("a card signed with a key this daemon cannot resolve: %+v %v", rec, err)
	}

	// Hostile or broken sources are refused with the reason, and nothing is kept.
	out.set("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"actions": [`))
		w.Write([]byte(strings.Repeat(" ", negotiate.MaxImportSize)))
	})
	out.set("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/agui", http.StatusFound)
	})
	out.set("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	})
	out.set("/garbage", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"hello": "world"}`)) })
	for path, want := range map[string]string{
		"/altered":  "does not verify",
		"/big":      "limit",
		"/redirect": "another host",
		"/slow":     "timeout",
		"/garbage":  "not an AG-UI",
		"/missing":  "404",
	} {
		_, err := d.Discovery().Import(ctx, srv.URL+path)
		if !errors.Is(err, discovery.ErrImport) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an import error saying %q", path, err, want)
		}
	}
	if _, err := d.Discovery().Import(ctx, "ftp://example.invalid/x"); !errors.Is(err, discovery.ErrImport) {
		t.Errorf("an ftp URL: %v", err)
	}
	if recs, _ := d.Discovery().Imports(); len(recs) != 4 {
		t.Fatalf("%d imports kept, want 4", len(recs))
	}

	// find includes them, marked; with the DHT off, they are all it has,
	// and the error says the DHT was not searched (it was dropped before).
	found, err := d.Discovery().Find(ctx, "summarize", "", 0)
	if !errors.Is(err, discovery.ErrDHTOff) || len(found) != 1 || found[0].Status != discovery.FindImported || found[0].Source != srv.URL+"/orchestrator" ||
		found[0].Capability.Price == nil {
		t.Fatalf("find summarize: %+v %v", found, err)
	}
	found, err = d.Discovery().Find(ctx, "translate.text", "", 0)
	if !errors.Is(err, discovery.ErrDHTOff) || len(found) != 2 {
		t.Fatalf("find translate.text: %+v %v", found, err)
	}
	if _, err := d.Discovery().Find(ctx, "nothing.here", "", 0); !errors.Is(err, discovery.ErrDHTOff) {
		t.Fatalf("find with no DHT and no import: %v", err)
	}

	// A refresh picks up a change; a failed one keeps the last good document.
	out.set("/agui", serveJSON(map[string]any{"tools": map[string]any{"items": []any{
		map[string]any{"name": "weather.alerts", "description": "Alerts"}}}}))
	d.Discovery().RefreshImports(ctx)
	if found, _ := d.Discovery().Find(ctx, "weather.alerts", "", 0); len(found) != 1 {
		t.Fatalf("the refreshed AG-UI document: %+v", found)
	}
	out.set("/agui", nil)
	d.Discovery().RefreshImports(ctx)
	kept, err := d.Store().Imports().Get(srv.URL + "/agui")
	if err != nil || !strings.Contains(kept.LastError, "404") || !strings.Contains(string(kept.View), "weather.alerts") {
		t.Fatalf("after a failed refresh: %+v %v", kept, err)
	}
	if err := d.Discovery().RemoveImport(srv.URL + "/agui"); err != nil {
		t.Fatal(err)
	}
	if found, err := d.Discovery().Find(ctx, "weather.alerts", "", 0); len(found) != 0 || !errors.Is(err, discovery.ErrDHTOff) {
		t.Fatalf("a removed import is still found: %+v %v", found, err)
	}
}
