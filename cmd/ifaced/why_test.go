package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/ifaced/ifaced/node/wire"
)

// TestAuditWhy: `ifaced audit --why` prints why alice answered or refused
// bob's requests, found by the request's ID or the answer's, readably and
// as JSON; an unknown ID, a malformed one, and --why used wrongly are
// refused.
func TestAuditWhy(t *testing.T) {
	aliceHome, alice := startDaemon(t, nodetest.AliceConfig())
	_, bob := startDaemon(t, nil)
	a := aliceHome.Dir
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := bob.Connect(ctx, alice.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	pid := alice.ID().PeerID()
	if _, err := bob.Greet(ctx, pid, negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	res, err := bob.Invoke(ctx, pid, "ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	var re *wire.RemoteError
	if _, err := bob.Invoke(ctx, pid, "calendar.availability", nil); !errors.As(err, &re) || re.Body.Code != wire.CodeConditionsNotMet {
		t.Fatalf("calendar: %v, want conditions_not_met", err)
	}
	// The calendar request's ID, from bob's audit log.
	entries, err := bob.Audit().Entries(res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	var calendar string
	for _, e := range entries {
		if h := e.Message.Headers; e.Direction == gossip.Sent && h.Capabilities != nil && len(h.Capabilities.Request) == 1 && h.Capabilities.Request[0] == "calendar.availability" {
			calendar = h.MessageID
		}
	}
	bobID := bob.ID().PeerID().String()

	out := mustRun(t, a, "audit", "--why", res.RequestID)
	wantLines(t, "audit --why (answered)", out, "capability    ping\n", "outcome       answered\n", "requester     "+bobID+" via libp2p\n",
		"request       "+res.RequestID+"\n", "conversation  "+res.ConversationID+"\n", "level         1 (signed only)\n", "tier          public\n",
		"temperature   cool\n", "persona       default\n", "no condition evaluated")

	out = mustRun(t, a, "audit", "--why", calendar)
	wantLines(t, "audit --why (refused)", out, "capability    calendar.availability\n", "outcome       refused (conditions_not_met)\n",
		"CONDITION       MET  DETAIL\n", "min_disclosure  no   required professional, have public; ask the owner",
		"min_auth_level  yes  required 1 (signed), have 1 (signed)\n")
	answer := regexpLine(t, out, "answer")
	if again := mustRun(t, a, "audit", "--why", strings.Fields(answer)[0]); again != out {
		t.Errorf("--why by the answer's ID:\n%s\nby the request's:\n%s", again, out)
	}

	var why api.AuditWhy
	if err := json.Unmarshal([]byte(mustRun(t, a, "audit", "--why", calendar, "--json")), &why); err != nil {
		t.Fatal(err)
	}
	if why.MessageID != calendar || why.Decision == nil || why.Decision.Code != "conditions_not_met" || len(why.Decision.Conditions) != 2 || why.Entry.Decision == nil {
		t.Errorf("audit --why --json: %+v", why)
	}

	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--why", "msg:01NOSUCHMESSAGE0000000000"}, 1, `no decision for message "msg:01NOSUCHMESSAGE0000000000"`},
		// A malformed ID is a mistake in the command line: exit 2, as
		// every such mistake (it was 1, issue 29).
		{[]string{"--why", "not an id"}, 2, "message_id \"not an id\" holds white space"},
		{[]string{"--why", ""}, 2, "--why takes the message ID"},
		{[]string{"--why", calendar, "--conversation", res.ConversationID}, 2, "--why takes no --conversation"},
		{[]string{"--why", calendar, "--peer", bobID}, 2, "--why takes no --conversation or --peer"},
	} {
		r := ifaced(t, a, append([]string{"audit"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.says) || r.stdout != "" {
			t.Errorf("audit %q: exit %d, stdout %q, stderr %q; want exit %d saying %q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.says)
		}
	}
	// A usage error touches nothing, not even the data directory.
	home := filepath.Join(t.TempDir(), "home")
	if r := ifaced(t, home, "audit", "--why", ""); r.code != 2 {
		t.Errorf("audit --why '' without a daemon: %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Error("audit --why '' created the data directory")
	}
}

// regexpLine is the value of the first "name  value" line of out.
func regexpLine(t *testing.T, out, name string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no %q line in\n%s", name, out)
	return ""
}
