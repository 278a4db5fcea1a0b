package node

import (
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

// peerGate decides which peers are known, so that the peer cache
// persists their views (store.PeerGate); every other peer's view lives in
// the store's bounded memory for strangers and is gone at a restart. A
// peer is known when the owner made it so:
//
//   - the owner pinned or revoked its key, or it was admitted with an
//     introduction token the owner minted (trust.Book.OwnerStanding);
//   - the owner's disclosure map names it (by peer ID, or by the agent ID
//     established for it at level 3) with a tier above public under any
//     persona, or the temperature caps name it;
//   - the owner asked to greet it or query it through the control API or
//     the command line (Node.Greet, Node.QueryCapabilities), in this run.
//
// Greetings this daemon starts by itself (LAN and DHT discovery, an
// announcement's query, mail delivery) make nobody known: a stranger can
// cause them. A peer once persisted stays in the file (its record no
// longer grows the bucket), and forgetting it is the owner's (DeletePeer).
type peerGate struct {
	trust  *trust.Book
	policy *PolicyBook
	order  *conditions.TierOrder
	asked  *lru.Cache[peer.ID, struct{}] // peers the owner asked to greet, this run
}

// maxAskedPeers bounds the peers remembered as greeted at the owner's
// request (a peer ID each); the owner's own requests, so rarely near it.
const maxAskedPeers = 4096

func newPeerGate(t *trust.Book, p *PolicyBook, order *conditions.TierOrder) *peerGate {
	g := &peerGate{trust: t, policy: p, order: order}
	g.asked, _ = lru.New[peer.ID, struct{}](maxAskedPeers)
	return g
}

// ownerAsked records that the owner asked to greet pid.
func (g *peerGate) ownerAsked(pid peer.ID) { g.asked.Add(pid, struct{}{}) }

// known is the store.PeerGate.
func (g *peerGate) known(peerID string) bool {
	pid, err := peer.Decode(peerID)
	if err != nil {
		return false
	}
	if g.asked.Contains(pid) {
		return true
	}
	owner, agentID := g.trust.OwnerStanding(pid)
	if owner {
		return true
	}
	pol := g.policy.current()
	if _, ok := pol.MaxTemp[peerID]; ok {
		return true
	}
	if agentID != "" {
		if _, ok := pol.MaxTemp[agentID]; ok {
			return true
		}
	}
	floor, ok := g.order.Rank("public")
	if !ok {
		floor = 0
	}
	for _, peers := range pol.Map {
		for _, key := range []string{peerID, agentID} {
			if key == "" {
				continue
			}
			if tier, ok := peers[key]; ok {
				if r, ok := g.order.Rank(tier); ok && r > floor {
					return true
				}
			}
		}
	}
	return false
}
