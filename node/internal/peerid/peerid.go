// Package peerid is how the daemon writes a peer's ID as text: String
// remembers the text form of the IDs it is asked (peer.ID.String encodes
// base58 afresh at every call), and Named is how a log line names a peer.
package peerid

import (
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/libp2p/go-libp2p/core/peer"
)

// memo remembers the text form of the peer IDs the daemon handles:
// peer.ID.String encodes base58 afresh at every call (about 1.5 µs for an
// Ed25519 ID), and the path of one greeting asked it some twenty times,
// 5 % of its CPU. The form is a pure function of the ID, so sharing one
// memo between daemons in a process changes nothing but the cost; it is
// bounded, and a stranger flood only cycles it.
var memo, _ = lru.New[peer.ID, string](memoSize)

// memoSize bounds the memo.
const memoSize = 4096

// String is p.String(), remembered.
func String(p peer.ID) string {
	if s, ok := memo.Get(p); ok {
		return s
	}
	s := p.String()
	memo.Add(p, s)
	return s
}
