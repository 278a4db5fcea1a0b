package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/policy"
)

// Policy is the disclosure map and temperature caps in force: config.toml
// with the run-time changes applied.
type Policy struct {
	DefaultTier           string                       `json:"default_tier"`
	Tiers                 []string                     `json:"tiers"` // in order, custom tiers placed
	Disclosure            map[string]map[string]string `json:"disclosure"`
	DefaultMaxTemperature string                       `json:"default_max_temperature"`
	MaxTemperature        map[string]string            `json:"max_temperature"`
}

// DisclosureChange grants a peer a tier under a persona; an empty tier
// removes the run-time grant.
type DisclosureChange struct {
	Persona string `json:"persona,omitempty"` // "default" when empty
	Peer    string `json:"peer"`
	Tier    string `json:"tier"`
}

// TemperatureChange caps a peer's temperature; empty removes the cap.
type TemperatureChange struct {
	Peer string `json:"peer"`
	Max  string `json:"max"`
}

// policyRoutes serves the owner's policy: the disclosure map and the
// temperature caps (GET /v1/policy, PUT /v1/policy/disclosure and
// /v1/policy/temperature), through the daemon's policy.Book; a change
// is told to the event stream.
type policyRoutes struct {
	book     policyBook
	standing standingNotifier
}

// policyBook is the owner's policy and its run-time changes (policy.Book).
type policyBook interface {
	policyReader
	SetDisclosure(persona, peer, tier string) error
	SetMaxTemperature(peer, max string) error
}

// policyReader is the owner's policy in force (policy.Book).
type policyReader interface {
	Current() negotiate.Policy
}

func (s *policyRoutes) policy(w http.ResponseWriter, r *http.Request) {
	p := s.book.Current()
	writeJSON(w, http.StatusOK, Policy{DefaultTier: p.DefaultTier, Tiers: p.Order.Tiers(), Disclosure: p.Map,
		DefaultMaxTemperature: p.DefaultMaxTemp, MaxTemperature: p.MaxTemp})
}

func (s *policyRoutes) setDisclosure(w http.ResponseWriter, r *http.Request) {
	var c DisclosureChange
	if e := decodeBody(r, &c); e != nil {
		writeError(w, e)
		return
	}
	if c.Peer == "" {
		writeError(w, badField("peer", "is required: a peer ID or agent ID"))
		return
	}
	if s.policyChanged(w, "tier", s.book.SetDisclosure(c.Persona, c.Peer, c.Tier)) {
		s.standing.StandingChanged(c.Peer, "the owner changed its disclosure tier")
	}
}

func (s *policyRoutes) setTemperature(w http.ResponseWriter, r *http.Request) {
	var c TemperatureChange
	if e := decodeBody(r, &c); e != nil {
		writeError(w, e)
		return
	}
	if c.Peer == "" {
		writeError(w, badField("peer", "is required: a peer ID or agent ID"))
		return
	}
	if s.policyChanged(w, "max", s.book.SetMaxTemperature(c.Peer, c.Max)) {
		s.standing.StandingChanged(c.Peer, "the owner changed its temperature cap")
	}
}

// policyChanged answers a policy change; true when it was made.
func (s *policyRoutes) policyChanged(w http.ResponseWriter, field string, err error) bool {
	switch {
	case errors.Is(err, policy.ErrInvalidPolicy):
		writeError(w, badField(field, "%v", err))
	case err != nil:
		writeError(w, internal(err))
	default:
		s.policy(w, nil)
		return true
	}
	return false
}

// Policy returns the policy in force.
func (c *Client) Policy(ctx context.Context) (*Policy, error) {
	var out Policy
	return &out, c.call(ctx, http.MethodGet, "/v1/policy", nil, &out)
}

// SetDisclosure changes a peer's tier under a persona.
func (c *Client) SetDisclosure(ctx context.Context, ch DisclosureChange) (*Policy, error) {
	var out Policy
	return &out, c.call(ctx, http.MethodPut, "/v1/policy/disclosure", ch, &out)
}

// SetTemperature changes a peer's temperature cap.
func (c *Client) SetTemperature(ctx context.Context, ch TemperatureChange) (*Policy, error) {
	var out Policy
	return &out, c.call(ctx, http.MethodPut, "/v1/policy/temperature", ch, &out)
}
