package node

import (
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p/core/peer"
)

// peerIDs remembers the text form of the peer IDs the daemon handles:
// peer.ID.String encodes base58 afresh at every call (about 1.5 µs for an
// Ed25519 ID), and the path of one greeting asked it some twenty times,
// 5 % of its CPU. The form is a pure function of the ID, so sharing one
// memo between daemons in a process changes nothing but the cost; it is
// bounded, and a stranger flood only cycles it.
var peerIDs, _ = lru.New[peer.ID, string](4096)

// idString is p.String(), remembered.
func idString(p peer.ID) string {
	if s, ok := peerIDs.Get(p); ok {
		return s
	}
	s := p.String()
	peerIDs.Add(p, s)
	return s
}
