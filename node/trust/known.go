package trust

import (
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Who the owner made known. A peer is known when the owner made it so:
//
//   - the owner pinned or revoked its key, or it was admitted with an
//     introduction token the owner minted (OwnerStanding);
//   - the owner's disclosure map names it (by peer ID, or by the agent ID
//     established for it at level 3) with a tier above public under any
//     persona, or the temperature caps name it (Policy);
//   - the owner asked to greet it or query it through the control API or
//     the command line (OwnerAsked), in this run.
//
// Greetings this daemon starts by itself (LAN and DHT discovery, an
// announcement's query, mail delivery) make nobody known: a stranger can
// cause them. What is known decides what the daemon keeps on disk and
// never evicts for a stranger: the peer cache persists known peers' views
// (store.PeerGate), the audit log never prunes their files, and this
// Book writes their key statements (keyrecords.go).

// Policy is the owner's policy in force, which may name peers (node/policy's
// Book is one). A nil Policy names nobody.
type Policy interface {
	InForce() *negotiate.Policy
}

// maxAskedPeers bounds the peers remembered as greeted at the owner's
// request (a peer ID each); the owner's own requests, so rarely near it.
const maxAskedPeers = 4096

func newAsked() *lru.Cache[peer.ID, struct{}] {
	c, _ := lru.New[peer.ID, struct{}](maxAskedPeers)
	return c
}

// OwnerAsked records that the owner asked to greet pid.
func (b *Book) OwnerAsked(pid peer.ID) { b.asked.Add(pid, struct{}{}) }

// Known reports whether the owner made peerID known (see above).
func (b *Book) Known(peerID string) bool {
	pid, err := peer.Decode(peerID)
	if err != nil {
		return false
	}
	if b.asked.Contains(pid) {
		return true
	}
	owner, agentID := b.OwnerStanding(pid)
	if owner {
		return true
	}
	if b.policy == nil {
		return false
	}
	pol := b.policy.InForce()
	if _, ok := pol.MaxTemp[peerID]; ok {
		return true
	}
	if agentID != "" {
		if _, ok := pol.MaxTemp[agentID]; ok {
			return true
		}
	}
	floor, ok := b.order.Rank("public")
	if !ok {
		floor = 0
	}
	for _, peers := range pol.Map {
		for _, key := range []string{peerID, agentID} {
			if key == "" {
				continue
			}
			if tier, ok := peers[key]; ok {
				if r, ok := b.order.Rank(tier); ok && r > floor {
					return true
				}
			}
		}
	}
	return false
}

// OwnerStanding reports whether the owner gave pid a standing of their
// own making — pinned or revoked its key, or pid was admitted with an
// introduction token the owner minted — and the agent ID established for
// pid (a level-3 document check; "" when none), under which the owner's
// disclosure map may name it. A document check alone is no standing: any
// stranger with a web server can pass one.
func (b *Book) OwnerStanding(pid peer.ID) (owner bool, agentID string) {
	rec, _ := b.record(pid)
	if c := rec.Check; c != nil && c.Level >= int(conditions.Bound) {
		agentID = c.AgentID
	}
	return rec.PinnedKey != "" || rec.RevokedKey != "" || len(rec.Intros) > 0, agentID
}
