package main

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/mcpserve"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPFirstToolsListComplete: the first tools/list of `ifaced mcp`
// already holds the tools of a peer the owner chose (an MCP host may list
// the tools once). Before, the event follower was started without waiting
// for it, and those tools came 20-70 ms later by list_changed.
func TestMCPFirstToolsListComplete(t *testing.T) {
	bin := buildIfaced(t)
	p := startMCPPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.bob.Greet(ctx, p.alice.ID().PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	want := mcpserve.ToolName(p.aliceID, "doc.summarize")
	for round := range 3 { // each a new server, listing at once
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
			&mcp.CommandTransport{Command: exec.Command(bin, "mcp", "--home", p.bobHome.Dir)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		tools, err := cs.ListTools(ctx, nil)
		cs.Close()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, tl := range tools.Tools {
			found = found || tl.Name == want
		}
		if !found {
			t.Fatalf("round %d: the first tools/list lacks %s, the tool of a pinned peer", round, want)
		}
	}
}

// TestMCPWaitsForTheDaemon: `ifaced mcp` started before the daemon serves
// at once (each tool saying no daemon runs, and how to start it) and
// follows the daemon once it starts. Before, it exited at once, and an
// MCP host that starts its servers with the session lost it for good.
func TestMCPWaitsForTheDaemon(t *testing.T) {
	bin := buildIfaced(t)
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if _, err := h.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	changed := make(chan struct{}, 16)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	}).Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "mcp", "--home", h.Dir)}, nil)
	if err != nil {
		t.Fatalf("ifaced mcp with no daemon yet: %v", err)
	}
	defer cs.Close()
	text := callFails(t, ctx, cs, "list_peers", map[string]any{})
	if !strings.Contains(text, "no ifaced is running") || !strings.Contains(text, "ifaced run") {
		t.Errorf("a tool with no daemon: %s", text)
	}
	// The daemon starts, with a pinned peer whose view it holds.
	id, _, err := h.Open(false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.New(nodetest.LoopbackConfig(), id, h, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv, err := api.Listen(n, h, "127.0.0.1:0", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, alice := startDaemon(t, agentConfig(t))
	if _, err := n.Connect(ctx, alice.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	if _, err := n.TrustBook().PinKey(alice.ID().PeerID(), alice.ID().Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Greet(ctx, alice.ID().PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	call(t, ctx, cs, "list_peers", map[string]any{}, nil)
	// The follower found the daemon and added the peer's tools, telling
	// the client.
	want := mcpserve.ToolName(alice.ID().PeerID().String(), "doc.summarize")
	for {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools.Tools {
			if tl.Name == want {
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the tools of the pinned peer never came once the daemon started")
		}
	}
}
