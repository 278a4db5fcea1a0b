// Package keys is the key lifecycle: this daemon's own key rotated,
// committed or revoked (the `ifaced key` commands, which work on the data
// directory while the daemon is stopped: keyrotate.go), and the key
// statements peers send, checked in the door's verify step and followed
// once the message carrying them is audited (Lifecycle, rotation.go):
// what the owner granted an old peer ID moves to its successor, and what a
// revocation refuses is refused. The rules (observed order, pre-rotation)
// are the trust book's; the statements' form is package identity's; how
// they travel is node/wire's "Key lifecycle". Telling peers of this
// daemon's own statements (at start, by mail, on GossipSub) is
// node/keys/tell's. New builds the Lifecycle; it imports no component
// above the trust book and the policy.
package keys
