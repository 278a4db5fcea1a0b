package peerid

import (
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Agent is the IFP-4 agent of a peer: its did:key, which binds the name
// in from/to to the key that signs.
func Agent(pid peer.ID) (gossip.Agent, error) {
	pub, err := identity.PublicKeyFromPeerID(pid)
	if err != nil {
		return gossip.Agent{}, err
	}
	return gossip.Agent{Agent: identity.DIDKey(pub)}, nil
}
