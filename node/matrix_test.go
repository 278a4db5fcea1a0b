package node

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/wire"
)

// TestConditionMatrix runs every condition type, alone and combined, for
// a requester below, at and above the requirement, across real daemons:
// the owner decides each request on what it established about the peer.
func TestConditionMatrix(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(events.InvocationAnswer{Result: "ok"})
	}))
	defer hook.Close()
	cfg := loopbackConfig()
	cfg.Agent.Webhook = hook.URL
	cfg.Rates = config.RatesConfig{Cool: 1000, Warm: 1000, Hot: 1000}
	cfg.Capabilities = nil
	alice := startDaemon(t, cfg)
	below, at, above := startDaemon(t, nil), startDaemon(t, nil), startDaemon(t, nil)
	ctx := context.Background()

	two := conditions.Verified
	caps := []negotiate.Capability{
		{Name: "tier.professional", Description: "x", Conditions: &conditions.Conditions{MinDisclosure: "professional"}},
		{Name: "level.verified", Description: "x", Conditions: &conditions.Conditions{MinAuthLevel: &two}},
		{Name: "temp.warm", Description: "x", Conditions: &conditions.Conditions{Temperature: "warm"}},
		{Name: "persona.researcher", Description: "x", Conditions: &conditions.Conditions{Persona: []string{"researcher"}}},
		{Name: "peers.listed", Description: "x", Conditions: &conditions.Conditions{Peers: []string{at.pid().String(), above.pid().String()}}},
		{Name: "combined", Description: "x", Conditions: &conditions.Conditions{MinDisclosure: "professional", MinAuthLevel: &two, Temperature: "warm"}},
		{Name: "hidden.combined", Description: "x", Advertise: negotiate.AdvertiseWhenEligible,
			Conditions: &conditions.Conditions{MinDisclosure: "professional", MinAuthLevel: &two, Temperature: "warm"}},
	}
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error { d.Capabilities = caps; return nil }); err != nil {
		t.Fatal(err)
	}
	// The owner's facts: "at" gets exactly each requirement, "above" more.
	set := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, persona := range []string{"", "researcher"} {
		set(alice.Policy().SetDisclosure(persona, at.pid().String(), "professional"))
		set(alice.Policy().SetDisclosure(persona, above.pid().String(), "close"))
	}
	set(alice.Policy().SetMaxTemperature(at.pid().String(), "warm"))
	set(alice.Policy().SetMaxTemperature(above.pid().String(), "hot"))
	_, err := alice.TrustBook().PinKey(at.pid(), at.id.Fingerprint())
	set(err)
	_, err = alice.TrustBook().PinKey(above.pid(), above.id.Fingerprint())
	set(err)

	requesters := []struct {
		name string
		d    *testDaemon
		prop negotiate.Proposal
	}{
		// "below" asks for everything; only the owner's facts count.
		{"below", below, negotiate.Proposal{Disclosure: "close", Temperature: "hot"}},
		{"at", at, negotiate.Proposal{Disclosure: "professional", Temperature: "warm", Persona: "researcher"}},
		{"above", above, negotiate.Proposal{Disclosure: "close", Temperature: "hot", Persona: "researcher"}},
	}
	want := map[string]map[string]wire.Code{ // "" means answered
		"below": {"tier.professional": wire.CodeConditionsNotMet, "level.verified": wire.CodeConditionsNotMet,
			"temp.warm": wire.CodeConditionsNotMet, "persona.researcher": wire.CodeUnknownCapability,
			"peers.listed": wire.CodeConditionsNotMet, "combined": wire.CodeConditionsNotMet,
			"hidden.combined": wire.CodeUnknownCapability},
		"at":    {},
		"above": {},
	}
	for _, r := range requesters {
		connect(t, r.d, alice)
		if _, err := r.d.Greet(ctx, alice.pid(), r.prop); err != nil {
			t.Fatalf("%s greets: %v", r.name, err)
		}
		for _, c := range caps {
			_, err := r.d.Invoke(ctx, alice.pid(), c.Name, nil)
			wantCode := want[r.name][c.Name]
			switch {
			case wantCode == "" && err != nil:
				t.Errorf("%s invokes %s: %v", r.name, c.Name, err)
			case wantCode != "" && err == nil:
				t.Errorf("%s invokes %s: answered, want %s", r.name, c.Name, wantCode)
			case wantCode != "":
				if b := remoteCode(t, err); b.Code != wantCode {
					t.Errorf("%s invokes %s: %s, want %s (%s)", r.name, c.Name, b.Code, wantCode, b.Message)
				} else if c.Name == "combined" && len(b.Unmet) != 3 {
					t.Errorf("combined: %d unmet conditions listed, want 3: %+v", len(b.Unmet), b.Unmet)
				} else if c.Name == "peers.listed" && len(b.Unmet) == 1 && b.Unmet[0].Required != "an allow-listed peer" {
					t.Errorf("peers: the refusal shows %q", b.Unmet[0].Required)
				}
			}
		}
	}
}
