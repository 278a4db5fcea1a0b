package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/nodetest"
)

func TestSendAndOutbox(t *testing.T) {
	relayCfg := nodetest.LoopbackConfig()
	relayCfg.Relay.Service = true
	_, relay := startDaemon(t, relayCfg)

	bobCfg := nodetest.LoopbackConfig()
	bobCfg.Relay.Use = []string{relay.Addrs()[0].String()}
	_, bob := startDaemon(t, bobCfg)
	home, alice := startDaemon(t, nil)
	a := home.Dir
	bobID := bob.ID().PeerID().String()
	mustRun(t, a, "connect", bob.Addrs()[0].String())

	wantLines(t, "send to a reachable peer", mustRun(t, a, "send", bobID, "--text", "Hello Bob."), "sent msg", "in conv")
	wantLines(t, "empty outbox", mustRun(t, a, "outbox"), "the outbox is empty")

	// Bob goes away; his cached document names his relay, where he holds
	// a slot, so the message is queued for his mailbox.
	deadline := time.Now().Add(10 * time.Second)
	for len(bob.Mail().RelayReservations()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := alice.QueryCapabilities(ctx, bob.ID().PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	bob.Close()
	for len(alice.Host().Network().ConnsToPeer(bob.ID().PeerID())) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	out := mustRun(t, a, "send", bobID, "--text", "Call me back.")
	wantLines(t, "send to a peer that is away", out, "queued msg", "mailbox relays")
	st := mustRun(t, a, "status", "--json")
	if !strings.Contains(st, `"relay_slots": []`) {
		t.Errorf("status --json: %s", st)
	}

	for _, args := range [][]string{{"send"}, {"send", bobID}, {"send", bobID, "--text", "  "}, {"outbox", "extra"}} {
		if r := ifaced(t, a, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage)\n%s", args, r.code, r.stderr)
		}
	}
	if r := ifaced(t, a, "send", "notapeer", "--text", "x"); r.code != 1 || !strings.Contains(r.stderr, "notapeer") {
		t.Errorf("send to nonsense: %d %q", r.code, r.stderr)
	}
}

func TestImportCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"message": "I summarize.", "actions": [{"name": "summarize", "description": "Summarize a document",
			"input_schema": {"type": "object"}, "output_schema": {"type": "object"}}]}`))
	}))
	defer srv.Close()
	home, _ := startDaemon(t, nil)
	a := home.Dir
	wantLines(t, "import", mustRun(t, a, "import", srv.URL+"/capabilities"), "(orchestrator, unsigned), 1 capabilities", "summarize  Summarize a document")
	wantLines(t, "import --list", mustRun(t, a, "import", "--list"), srv.URL+"/capabilities")
	wantLines(t, "find an imported capability", mustRun(t, a, "find", "summarize"), srv.URL+"/capabilities", "imported orchestrator, unsigned; conditions unknown")
	wantLines(t, "import --remove", mustRun(t, a, "import", "--remove", srv.URL+"/capabilities"), "forgot ")
	for _, args := range [][]string{{"import"}, {"import", "--list", "x"}, {"import", "a", "b"}} {
		if r := ifaced(t, a, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
	// A URL that is not http(s) is a mistake in the command line: exit 2,
	// as every such mistake (it was 1, issue 29).
	if r := ifaced(t, a, "import", "ftp://example.invalid"); r.code != 2 || !strings.Contains(r.stderr, "not an http(s) URL") {
		t.Errorf("import of an ftp URL: %d %q", r.code, r.stderr)
	}
}
