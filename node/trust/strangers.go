package trust

import (
	"github.com/ifaced/ifaced/node/internal/costlru"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Strangers' records. A trust record is persisted only once it holds
// something the owner made: a pinned or revoked key, or an introduction
// token the owner minted and the peer proved (ownerMade). What the daemon
// learns of any other peer — a refused introduction proof, an identity
// document check, failed or not — is kept in memory only, in a cache
// bounded by bytes (maxStrangerTrustBytes, least recently used evicted
// first), so a flood of fresh keys with bogus proofs or agent IDs neither
// creates records in the store nor grows memory without bound. A check
// kept there still spares a fetch at the peer's next greeting (docRecheck
// applies as for a stored one); a restart, or eviction, forgets it, and
// the next greeting checks again. Once the owner makes the peer known,
// its record, with what memory held, goes to the store.

// maxStrangerTrustBytes bounds the strangers' trust records in memory (by
// strangerTrustCost): some 8,000 records with a check and a refusal.
const maxStrangerTrustBytes = 4 << 20

// ownerMade reports whether rec holds anything the owner made, and so
// belongs in the store.
func ownerMade(rec store.TrustRecord) bool {
	return rec.PinnedKey != "" || rec.RevokedKey != "" || len(rec.Intros) > 0
}

// strangerTrustCost is what rec is counted as in the strangers' memory.
func strangerTrustCost(rec store.TrustRecord) int64 {
	n := len(rec.PeerID) + len(rec.Refusal) + 256
	if c := rec.Check; c != nil {
		n += len(c.AgentID) + len(c.URL) + len(c.Method) + len(c.Outcome) + len(c.Reason) + 128
	}
	return int64(n)
}

func newStrangerTrust() *costlru.Cache[peer.ID, store.TrustRecord] {
	return costlru.New[peer.ID, store.TrustRecord](maxStrangerTrustBytes)
}
