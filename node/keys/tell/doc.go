// Package tell delivers the key statements this daemon gave (a rotation's
// succession, a revocation, a commitment to the next key) to the peers
// that should hear of them: at start, to every peer in the cache not
// reached yet, through the mail component (in a conversation or at the
// peer's mailbox relays), recording who was told; and, with [discovery]
// gossip, on the key statement topic, whose validator passes what others
// publish through the one door. It lists the retired key in this
// daemon's identity document. Checking and following statements peers
// send is node/keys'; the statements on disk are node/keys' too.
package tell
