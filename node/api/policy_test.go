package api

import (
	"net/http"
	"testing"
)

func TestPolicyThroughTheAPI(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := testContext(t)
	p, err := d.c.Policy(ctx)
	if err != nil || p.DefaultTier != "public" || len(p.Tiers) != 6 || p.DefaultMaxTemperature != "cool" {
		t.Fatalf("policy: %+v %v", p, err)
	}
	p, err = d.c.SetDisclosure(ctx, DisclosureChange{Persona: "researcher", Peer: "12D3KooWpeer", Tier: "professional-open"})
	if err != nil || p.Disclosure["researcher"]["12D3KooWpeer"] != "professional-open" {
		t.Fatalf("set disclosure: %+v %v", p, err)
	}
	p, err = d.c.SetTemperature(ctx, TemperatureChange{Peer: "12D3KooWpeer", Max: "hot"})
	if err != nil || p.MaxTemperature["12D3KooWpeer"] != "hot" {
		t.Fatalf("set temperature: %+v %v", p, err)
	}
	_, err = d.c.SetDisclosure(ctx, DisclosureChange{Peer: "x", Tier: "bestie"})
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "tier" {
		t.Fatalf("bad tier: %+v", e)
	}
	_, err = d.c.SetTemperature(ctx, TemperatureChange{Peer: "x", Max: "boiling"})
	apiError(t, err, http.StatusBadRequest)
	_, err = d.c.SetDisclosure(ctx, DisclosureChange{Tier: "public"})
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "peer" {
		t.Fatalf("no peer: %+v", e)
	}
}
