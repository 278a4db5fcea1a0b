// Package auditproof is the Merkle-tree half of ifaced's tamper-evident
// audit log (docs/audit.md is the specification): the RFC 9162 leaf and
// tree hashes, one day's tree as the home stores it (a file table, 16
// bytes a leaf, the stored hashes), inclusion proofs, and checkpoints —
// C2SP tlog checkpoints ("ifaced-audit/<day>", size, root, time) in C2SP
// signed notes, signed by the daemon's key under the name of its did:key.
// What the leaves are, when checkpoints are signed, and how a home or a
// bundle is verified is package gossip's (audit_tree.go, audit_verify.go,
// audit_bundle.go); this package knows nothing of messages.
//
// # Why golang.org/x/mod/sumdb/tlog and note, and not our own
//
// They are the Go checksum database's, kept by the Go team and already in
// this module's graph: RFC 6962/9162 hashing with proofs compatible with
// Certificate Transparency (tlog's own test checks them against CT's), a
// stored-hash layout in which appending a leaf writes two hashes on
// average and reads only the tree's right edge (so the daemon keeps that
// edge, at most 64 hashes, in memory and never reads a hash to append),
// record and consistency proofs, and the signed-note format the
// transparency-log ecosystem shares (C2SP, Sigstore, witnesses). Writing
// our own would have meant re-deriving exactly that and its test vectors.
// What they leave to us is done here: storage (buffered appends written at
// each checkpoint, a torn tail cut off at open), and the signer, which is
// the daemon's identity (identity.Identity.SignCheckpoint signs only texts
// that begin with "ifaced-audit/", so no checkpoint signature can pass for
// a message's, nor one of those for a checkpoint's). tlog's own checkpoint
// text ("go.sum database tree") is not used: ifaced's follows C2SP, with
// an origin per day.
package auditproof
