package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/nodetest"
)

func TestFindVerb(t *testing.T) {
	for _, args := range [][]string{
		{"find"},
		{"find", "calendar.availability", "ping"},
		{"find", "Calendar Availability"},
		{"find", "calendar.availability", "--min-version", "v2"},
		{"find", "calendar.availability", "--limit", "0"},
		{"find", "calendar.availability", "--bogus"},
	} {
		if r := ifaced(t, t.TempDir(), args...); r.code != 2 || r.stderr == "" {
			t.Errorf("%q: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}

	aliceCfg := nodetest.AliceConfig()
	aliceCfg.Discovery.DHT = config.DHTServer
	_, alice := startDaemon(t, aliceCfg)
	bobCfg := nodetest.LoopbackConfig()
	bobCfg.Discovery.DHT = config.DHTServer
	bobCfg.Discovery.Bootstrap = []string{alice.Addrs()[0].String()}
	bobHome, _ := startDaemon(t, bobCfg)
	b := bobHome.Dir
	aliceID := alice.ID().PeerID().String()

	// Bob knows no DHT peer until his bootstrap dial completes, and alice's
	// records go out once she has met one (bob): poll.
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := ifaced(t, b, "find", "calendar.availability")
		if r.code != 0 && !strings.Contains(r.stderr, "no DHT server reachable") {
			t.Fatalf("find: exit %d\n%s", r.code, r.stderr)
		}
		out = r.stdout
		if strings.Contains(out, aliceID) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling observable state
	}
	wantLines(t, "find", out, "calendar.availability: 1 provider, 0 you may use now",
		"PEER", "DISPLAY", "VERSION", "STATUS", aliceID,
		"ineligible: needs min_disclosure professional, you have public", "`ifaced caps PEER`")
	wantLines(t, "find --min-version", mustRun(t, b, "find", "calendar.availability", "--min-version", "2"),
		"below min version: offers version 1, below 2")
	var ans api.FindAnswer
	if err := json.Unmarshal([]byte(mustRun(t, b, "find", "--json", "calendar.availability")), &ans); err != nil ||
		len(ans.Providers) != 1 || ans.Providers[0].PeerID != aliceID {
		t.Errorf("find --json: %+v %v", ans, err)
	}
	wantLines(t, "find hidden", mustRun(t, b, "find", "diary.read"), "no providers of diary.read found")

	offHome, _ := startDaemon(t, nil)
	r := ifaced(t, offHome.Dir, "find", "ping")
	if r.code != 1 || !strings.Contains(r.stderr, "ifaced find: finding providers of \"ping\": the DHT is off") {
		t.Errorf("find with the DHT off: exit %d %q", r.code, r.stderr)
	}
}
