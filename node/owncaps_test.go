package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/mcpagent"
	"github.com/ifaced/ifaced/node/owner"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func capability(name, description string, conds map[string]any) negotiate.Capability {
	c := negotiate.Capability{Name: name, Description: description}
	if conds != nil {
		var k conditions.Conditions
		if err := negotiate.DecodeValue(conds, &k); err != nil {
			panic(err)
		}
		c.Conditions = &k
	}
	return c
}

// originsOf writes a daemon's capabilities as "name:origin" in document
// order, then "-removed" and "?left-out" entries.
func originsOf(d *testDaemon) string {
	_, origins, removed, leftOut := d.Capabilities().Origins()
	var s []string
	for _, o := range origins {
		s = append(s, o.Name+":"+o.Origin)
	}
	for _, r := range removed {
		s = append(s, "-"+r)
	}
	for _, l := range leftOut {
		s = append(s, "?"+l.Name)
	}
	return strings.Join(s, " ")
}

// TestRuntimeCapabilitiesKeptAcrossRestart: what caps add and caps remove
// do is there after a restart, under the same seq (before: the added
// capability was gone and the removed one back, under a seq one higher,
// and nothing said so); the config wins where it meets the run-time
// changes; a run-time capability the config no longer allows is left out,
// said so, and forgotten by a remove.
func TestRuntimeCapabilitiesKeptAcrossRestart(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Tiers.Custom = []conditions.CustomTier{{Name: "lab", After: "professional"}}
	alice := startDaemon(t, cfg)
	caps := alice.Capabilities()
	if got := originsOf(alice); got != "ping:config calendar.availability:config diary.read:config" {
		t.Fatalf("at start: %s", got)
	}

	if _, err := caps.Add([]negotiate.Capability{capability("weather.forecast", "Forecast the weather", map[string]any{"temperature": "warm"}),
		capability("news.headlines", "Headlines", nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := caps.Remove("ping"); err != nil { // from the config
		t.Fatal(err)
	}
	if _, err := caps.Remove("news.headlines"); err != nil { // added at run time
		t.Fatal(err)
	}
	// Refused changes change nothing.
	if _, err := caps.Add([]negotiate.Capability{capability("lab.notes", "Notes", nil), capability("diary.read", "again", nil)}); !errors.Is(err, owner.ErrCapabilityExists) {
		t.Errorf("adding a name in use: %v", err)
	}
	_, err := caps.Add([]negotiate.Capability{capability("lab.notes", "Notes", nil), {Name: "no.description"}})
	var fe *negotiate.FieldError
	if !errors.As(err, &fe) || fe.Field != "capabilities[1].description" {
		t.Errorf("an invalid one among several: %v", err)
	}
	if _, err := caps.Remove("ping"); !errors.Is(err, owner.ErrNoCapability) {
		t.Errorf("removing it again: %v", err)
	}
	if _, err := caps.Add([]negotiate.Capability{capability("lab.bench", "Book the bench", map[string]any{"min_disclosure": "lab"})}); err != nil {
		t.Fatal(err)
	}
	want := "calendar.availability:config diary.read:config weather.forecast:runtime lab.bench:runtime -ping"
	seq := alice.Document().Seq
	if got := originsOf(alice); got != want || seq != 5 {
		t.Fatalf("after the changes: seq %d, %s", seq, got)
	}

	alice.Close()
	alice = restartDaemon(t, alice)
	if got := originsOf(alice); got != want || alice.Document().Seq != seq {
		t.Fatalf("after a restart: seq %d (want %d), %s\nwant %s", alice.Document().Seq, seq, got, want)
	}
	if c, _ := alice.Document().Capability("weather.forecast"); c.Conds().Temperature != "warm" {
		t.Errorf("weather.forecast came back as %+v", c)
	}
	if err := alice.Document().Verify(alice.id.PublicKey()); err != nil {
		t.Errorf("the document after a restart: %v", err)
	}

	// The config takes weather.forecast over and no longer has ping; it
	// drops the custom tier lab.bench names.
	next := aliceConfig("")
	next.Capabilities = slices.DeleteFunc(next.Capabilities, func(c map[string]any) bool { return c["name"] == "ping" })
	next.Capabilities = append(next.Capabilities, map[string]any{"name": "weather.forecast", "description": "The config's forecast"})
	alice.Close()
	alice.cfg = next
	alice = restartDaemon(t, alice)
	if got := originsOf(alice); got != "calendar.availability:config diary.read:config weather.forecast:config ?lab.bench" {
		t.Fatalf("after the config changed: %s", got)
	}
	if c, _ := alice.Document().Capability("weather.forecast"); c.Description != "The config's forecast" || alice.Document().Seq != seq+1 {
		t.Errorf("the config's weather.forecast: %+v, seq %d", c, alice.Document().Seq)
	}
	if _, _, _, leftOut := alice.Capabilities().Origins(); len(leftOut) != 1 || !strings.Contains(leftOut[0].Problem, `"lab" is not a known tier`) {
		t.Errorf("left out: %+v", leftOut)
	}
	// The left-out one comes back with its tier; remove forgets it.
	alice.Close()
	alice.cfg = cfg
	alice = restartDaemon(t, alice)
	if _, ok := alice.Document().Capability("lab.bench"); !ok {
		t.Fatalf("lab.bench with its tier again: %s", originsOf(alice))
	}
	alice.Close()
	alice.cfg = next
	alice = restartDaemon(t, alice)
	seq = alice.Document().Seq
	if _, err := alice.Capabilities().Remove("lab.bench"); err != nil || alice.Document().Seq != seq {
		t.Fatalf("forgetting a left-out one: %v, seq %d (was %d)", err, alice.Document().Seq, seq)
	}
	alice.Close()
	alice.cfg = cfg
	alice = restartDaemon(t, alice)
	if got := originsOf(alice); got != "ping:config calendar.availability:config diary.read:config" {
		t.Fatalf("with the first config again: %s", got)
	}
}

// TestUpdateDocumentIsNotKept: a change through Node.UpdateDocument (the
// MCP agent's path, and programs embedding the daemon) is shown as
// unsaved, and is not there after a restart.
func TestUpdateDocumentIsNotKept(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, capability("scratch.pad", "Scratch", nil))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := originsOf(alice); !strings.HasSuffix(got, "scratch.pad:"+owner.OriginUnsaved) {
		t.Fatalf("origins: %s", got)
	}
	alice.Close()
	alice = restartDaemon(t, alice)
	if _, ok := alice.Document().Capability("scratch.pad"); ok {
		t.Errorf("an unsaved change came back: %s", originsOf(alice))
	}
	if rc, err := alice.Store().Own().RuntimeCapabilities(); err != nil || len(rc.Added) != 0 {
		t.Errorf("stored: %+v %v", rc, err)
	}
}

// TestRuntimeCapabilitiesWithAnMCPServer: with an MCP server as the local
// agent, a capability added at run time stays through the server's tool
// list changes and comes back after a restart beside the server's tools,
// which are never kept as run-time additions (they come back from the
// server), under the same seq; removing a tool says how to restrict it.
func TestRuntimeCapabilitiesWithAnMCPServer(t *testing.T) {
	srv, url := weatherServer(t)
	cfg := loopbackConfig()
	cfg.Agent.MCP = &mcpagent.Config{URL: url, Prefix: "weather", Default: &mcpagent.Overlay{}} // every tool offered: the owner says so
	alice := startDaemon(t, cfg)
	if _, err := alice.Capabilities().Add([]negotiate.Capability{capability("news.headlines", "Headlines", nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Capabilities().Remove("weather.forecast"); !errors.Is(err, owner.ErrMCPTool) || !strings.Contains(err.Error(), "[agent.mcp.tools.<tool>]") {
		t.Errorf("removing an MCP tool: %v", err)
	}
	seq := alice.Document().Seq
	alice.Close()
	alice = restartDaemon(t, alice)
	if alice.Document().Seq != seq {
		t.Errorf("a restart moved the seq from %d to %d: %s", seq, alice.Document().Seq, originsOf(alice))
	}
	evs, stop := alice.Subscribe()
	defer stop()
	mcp.AddTool(srv, &mcp.Tool{Name: "alerts", Description: "Weather alerts"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no alerts"}}}, nil, nil
	})
	waitEvent(t, evs, func(e events.Event) bool {
		return e.Type == events.EventDocument && strings.HasPrefix(e.Detail, fmt.Sprintf("seq %d,", seq+1))
	})
	want := "gossip.exchange:config message.receive:config message.reply:config identity.verify:config capabilities.get:config ping:config " +
		"news.headlines:runtime weather.alerts:mcp weather.diary_read:mcp weather.fail:mcp weather.forecast:mcp weather.liar:mcp weather.plans:mcp"
	if got := originsOf(alice); got != want {
		t.Fatalf("after the tools changed:\n%s\nwant\n%s", got, want)
	}
	rc, err := alice.Store().Own().RuntimeCapabilities()
	if err != nil || len(rc.Added) != 1 || addedName(t, rc.Added[0]) != "news.headlines" || len(rc.Removed) != 0 {
		t.Fatalf("kept: %+v %v", rc, err)
	}

	seq = alice.Document().Seq
	alice.Close()
	alice = restartDaemon(t, alice)
	if got := originsOf(alice); got != want || alice.Document().Seq != seq {
		t.Fatalf("after a restart: seq %d (want %d)\n%s\nwant\n%s", alice.Document().Seq, seq, got, want)
	}
	if rc, _ := alice.Store().Own().RuntimeCapabilities(); len(rc.Added) != 1 {
		t.Errorf("kept after the restart: %+v", rc)
	}
}

// addedName is the name of a capability the owner added at run time, as
// kept (its JSON).
func addedName(t *testing.T, raw []byte) string {
	t.Helper()
	var c struct{ Name string }
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("a kept capability does not decode: %v", err)
	}
	return c.Name
}
