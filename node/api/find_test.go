package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/discovery"
	"github.com/ifaced/ifaced/node/nodetest"
)

// inDHT puts the daemon of c in the DHT as a server, bootstrapping from boot.
func inDHT(c *config.Config, boot ...string) *config.Config {
	c.Discovery.DHT = config.DHTServer
	c.Discovery.Bootstrap = boot
	return c
}

func TestFind(t *testing.T) {
	ctx := testContext(t)
	alice := startDaemon(t, inDHT(aliceConfig("")))
	bob := startDaemon(t, inDHT(nodetest.LoopbackConfig(), alice.n.Addrs()[0].String()))

	// Bob knows no DHT peer until his bootstrap dial completes, and alice's
	// records go out once she has met one (bob): poll.
	var ans *FindAnswer
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		ans, err = bob.c.Find(ctx, "calendar.availability", "", 0)
		var e *Error
		switch {
		case errors.As(err, &e) && e.Code == CodeDHTUnavailable:
			ans = &FindAnswer{}
		case err != nil:
			t.Fatal(err)
		}
		if len(ans.Providers) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling observable state
	}
	if len(ans.Providers) != 1 || ans.Capability != "calendar.availability" {
		t.Fatalf("find: %+v", ans)
	}
	p := ans.Providers[0]
	if p.PeerID != alice.peerID() || p.Status != discovery.FindIneligible || p.Display != "Alice's agent" ||
		len(p.Why) != 1 || p.Why[0] != "needs min_disclosure professional, you have public" {
		t.Errorf("alice: %+v", p)
	}
	ans, err := bob.c.Find(ctx, "calendar.availability", "1.1", 5)
	if err != nil || ans.MinVersion != "1.1" || len(ans.Providers) != 1 || ans.Providers[0].Status != discovery.FindBelowMinVersion {
		t.Errorf("find at min version 1.1: %+v %v", ans, err)
	}
	if ans, err := bob.c.Find(ctx, "diary.read", "", 0); err != nil || len(ans.Providers) != 0 || ans.Providers == nil {
		t.Errorf("find hidden diary.read: %+v %v, want an empty list", ans, err)
	}

	for _, tc := range []struct {
		name, version string
		limit         int
		field         string
	}{
		{"Bad.Name", "", 0, "capability"},
		{"ping", "v2", 0, "min_version"},
		{"ping", "", discovery.MaxFindLimit + 1, "limit"},
		{"ping", "", -1, "limit"},
	} {
		_, err := bob.c.Find(ctx, tc.name, tc.version, tc.limit)
		if e := apiError(t, err, http.StatusBadRequest); e.Field != tc.field || e.Code != CodeBadRequest {
			t.Errorf("find %q %q %d: %+v, want field %s", tc.name, tc.version, tc.limit, e, tc.field)
		}
	}
	var out FindAnswer
	err = bob.c.call(ctx, http.MethodGet, "/v1/find/ping?limit=x", nil, &out)
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "limit" {
		t.Errorf("limit=x: %+v", e)
	}
	if _, err := bob.c.Find(ctx, "", "", 0); err == nil {
		t.Error("the client sent a find without a capability")
	}

	off := startDaemon(t, nil)
	_, err = off.c.Find(ctx, "ping", "", 0)
	if e := apiError(t, err, http.StatusServiceUnavailable); e.Code != CodeDHTUnavailable || !strings.Contains(e.Message, "the DHT is off") {
		t.Errorf("find with the DHT off: %+v", e)
	}
}
