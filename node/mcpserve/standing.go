package mcpserve

import (
	"fmt"
	"slices"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
)

// Whose capabilities become tools of their own, and which of them: this
// server's own computation from what the daemon holds, never a peer's word.

// chosen reports whether the owner chose the peer info describes, so that
// its capabilities may be tools of their own, and why (or why not). The
// owner chose it when it pinned its key, admitted it with an introduction
// token still in force, or granted it, under any persona, a disclosure
// tier above the default (config.toml's [disclosure.personas] or `ifaced
// policy`), by peer ID or by the agent ID established for it. A key
// revoked (by the owner or by a revocation statement) or retired by a
// succession is never chosen, whatever else holds.
func chosen(info trust.Info, pol *api.Policy, now time.Time) (bool, string) {
	switch {
	case info.RevokedKey != "" || info.RevokedBy != "" || info.Level < conditions.Introduced:
		return false, "its key is revoked"
	case info.SucceededBy != "":
		return false, "its key was succeeded by " + info.SucceededBy
	}
	for _, e := range info.Keys {
		if e.Kind == store.KeyRevocation && e.Peer == info.Peer {
			return false, "its key is revoked by a revocation statement"
		}
	}
	if info.PinnedKey != "" {
		return true, "the owner pinned its key"
	}
	for _, in := range info.Intros {
		if now.Before(in.Expires) {
			return true, fmt.Sprintf("the owner introduced it (token %q)", in.Label)
		}
	}
	if pol != nil {
		floor := slices.Index(pol.Tiers, pol.DefaultTier)
		for persona, peers := range pol.Disclosure {
			for _, key := range []string{info.Peer, info.AgentID} {
				if key == "" {
					continue
				}
				if tier, ok := peers[key]; ok && floor >= 0 && slices.Index(pol.Tiers, tier) > floor {
					return true, fmt.Sprintf("the owner grants it %s under %s", tier, persona)
				}
			}
		}
	}
	return false, "the owner has not pinned, introduced or granted it a tier above the default"
}

// self is this daemon as a peer's conditions may name it.
type self struct{ peerID, agentID string }

// usable reports whether this daemon may use c, a capability of a view a
// peer sent with the grant granted (nil: none came with it): the view
// must mark it eligible, and its conditions must be met by what this
// daemon holds — the grant the peer made it, or, without one, level 1
// (every libp2p peer signs) and no tier. A condition this daemon does not
// model fails, as does a tier it does not know: the peer's own tier order
// is not known here.
func usable(c negotiate.Capability, granted *negotiate.Granted, me self) bool {
	if c.Eligible == nil || !*c.Eligible || len(c.ConditionsExtra) > 0 {
		return false
	}
	f := conditions.Facts{Peer: me.peerID, AuthLevel: conditions.Signed}
	if granted != nil {
		f.AuthLevel, f.Disclosure, f.Temperature, f.Persona = granted.AuthLevel, granted.Disclosure, granted.Temperature, granted.Persona
	}
	conds := c.Conds()
	if len(conds.Peers) > 0 && me.agentID != "" && slices.Contains(conds.Peers, me.agentID) {
		conds.Peers = nil // named by its agent ID
	}
	return conditions.Evaluate(conds, f, nil, 0).Eligible()
}
