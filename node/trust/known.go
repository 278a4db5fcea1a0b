package trust

import (
	"github.com/ifaced/ifaced/conditions"
	"github.com/libp2p/go-libp2p/core/peer"
)

// OwnerStanding reports whether the owner gave pid a standing of their
// own making — pinned or revoked its key, or pid was admitted with an
// introduction token the owner minted — and the agent ID established for
// pid (a level-3 document check; "" when none), under which the owner's
// disclosure map may name it. A document check alone is no standing: any
// stranger with a web server can pass one. The daemon's peer cache asks
// this to decide whose views it persists (node's peerGate).
func (b *Book) OwnerStanding(pid peer.ID) (owner bool, agentID string) {
	rec, _ := b.record(pid)
	if c := rec.Check; c != nil && c.Level >= int(conditions.Bound) {
		agentID = c.AgentID
	}
	return rec.PinnedKey != "" || rec.RevokedKey != "" || len(rec.Intros) > 0, agentID
}
