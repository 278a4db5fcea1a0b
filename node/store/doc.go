// Package store is the daemon's embedded, crash-safe store: the one file in
// the data directory that remembers what ifaced learned while it ran. It
// holds:
//
//   - the peer cache: for each peer, the last capability view it showed us
//     and verified, where to reach it, and when we fetched and when it
//     last changed (PeerRecord) — in the file for known peers, in memory
//     for strangers (see "The peer cache" below);
//   - the seen set: message IDs with their expiry, so that replay
//     protection (identity.ReplayGuard) survives a restart;
//   - the owner's own capability document and its seq, and the owner's
//     run-time capability changes (caps add, caps remove) written with it
//     (owncaps.go), and the marks of the views it showed (own.go,
//     SaveViewMarks);
//   - trust records (pins, revocations, identity-document checks) and
//     introduction tokens minted here and held from others (buckets
//     "trust", "intros_issued", "intros_held");
//   - key lifecycle records: the key successions, revocations and
//     commitments this daemon gave or followed (bucket "key_lifecycle",
//     keys.go);
//   - the owner's run-time policy changes: disclosure tiers and
//     temperature caps set through the control API (bucket "policy");
//   - the views sent: for each peer, a small record of the last view of
//     the owner's document this daemon sent it (SentView: when, how, the
//     seq, the grant, the capabilities eligible and shown), kept like the
//     peer cache (bucket "sent" for known peers, memory for strangers;
//     sent.go).
//
// The caller chooses where the file lives (normally inside the data
// directory); the package never guesses a path. Open creates the file with
// mode 0600, because the cache shows who this agent talks to.
//
// # Crash safety
//
// The store sits on bbolt: every write is one transaction, fsynced on
// commit, and a transaction is either wholly in the file or not at all. A
// daemon killed at any moment therefore restarts with the peer cache, the
// seen IDs and its own document exactly as of its last acknowledged write.
// That matters for more than convenience: a seen set that lost entries
// would accept a replayed message, a peer cache that lost its seq would
// accept a rolled-back document, and an own document whose seq went
// backwards would be refused by every peer that cached the newer one.
//
// bbolt locks the file, so a second daemon pointed at the same data
// directory fails to open it within about a second with ErrLocked instead
// of waiting for ever or sharing the file.
//
// # Seq rules
//
// A capability document's seq only grows. PutPeer enforces that for cached
// peers: a lower seq is refused (ErrStaleSeq) and nothing changes; the same
// seq with the same document hash is a refresh, which moves FetchedAt
// forward and replaces Addrs and Context when the new record carries them;
// the same seq with a different hash is another view of the same document
// (a peer shows each requester the view its context allows, and that
// context can rise within a seq) and replaces the record; a higher seq
// replaces it too. Either replacement sets ChangedAt. SaveOwnDocument
// refuses a seq that is not higher than the stored one, so a restarted
// daemon cannot publish a second document under a seq it already used.
//
// # The peer cache
//
// A fresh key costs nothing to make, so a greeting from one must not cost
// this daemon a write of its view (up to about 1 MiB, with an fsync). The
// file holds the views of known peers only; the daemon says who they are
// through SetPeerGate (package node's peerGate: peers the owner pinned,
// revoked or introduced, named in the disclosure map above public or in
// the temperature caps, or asked to greet). Every other peer's record is
// a stranger's: kept in memory, bounded by bytes (MaxStrangerBytes, 8 MiB;
// the least recently put evicted first, one at a time), read back by Peer
// and Peers like the file's, and forgotten at a restart. A stranger later
// made known moves to the file at its next greeting; a record in the file
// stays there. The seq rules below apply to both.
//
// # Bounds
//
// Every bucket a stranger can make grow has a cap with eviction; the
// others grow only by the owner's acts:
//
//   - peers: only known peers (above); strangers' records live in memory.
//   - sent: only known peers; strangers' records live in a memory bounded
//     by bytes (MaxSentStrangerBytes, 4 MiB, least recently sent evicted
//     first), which never holds a known peer's.
//   - seen and seen_by_expiry: at most MaxSeenIDs (250,000) IDs; past it
//     the IDs that expire first are evicted (seen.go says why).
//   - trust: only records holding something the owner made (package
//     trust keeps strangers' refusals and checks in memory, bounded).
//   - key_lifecycle: package trust caps the records strangers' statements
//     cause (trust.MaxStrangerKeyRecords, oldest first evicted), never
//     counting or evicting the owner's own nor those about peers the
//     owner made known (keys.go).
//   - intros_issued and intros_held, own, policy, imports: the owner's
//     acts only (minting, accepting, configuring, importing); in own, the
//     view marks record is bounded by its writer (package node: a capped
//     number of classes and of peers' floors).
//   - the mail buckets: mail.go.
//
// # Layout
//
// Buckets "peers" (key: peer ID), "seen" (key: message ID), "seen_by_expiry"
// (key: big-endian expiry in Unix nanoseconds followed by the message ID,
// so Prune walks only the expired prefix) and "own" hold JSON records;
// "meta" holds schema_version, written when the file is created (below).
// A record that fails to decode is reported with
// its bucket and key and wraps ErrCorrupt; PutPeer refuses to overwrite a
// corrupt peer record (its seq cannot be compared), so a caller that wants
// to replace it calls DeletePeer first.
//
// JSON values (View, Context, the own document) are stored compacted, with
// HTML characters left unescaped, so canonical (RFC 8785) bytes come back
// unchanged.
//
// # Schema versions
//
// meta/schema_version (a JSON integer) names the file's layout;
// SchemaVersion is the one this package reads and writes (1 since
// v0.1.0). A new bucket needs no new version: Open creates the buckets it
// lacks, and an older ifaced leaves a bucket it does not know alone. A
// change to what an existing bucket holds (a record's shape, a key's
// encoding, a bucket split or renamed) does. Open (migrate.go) then:
//
//   - opens a file of the current version as it is;
//   - migrates a file of an older version that the list of migrations
//     reaches: it first writes a consistent copy of the file beside it,
//     <file>.schema-<N>.bak (mode 0600), which the older ifaced still
//     reads, then runs each migration from N to N+1 in one bbolt
//     transaction that also sets schema_version to N+1, logging
//     "store: migrating the schema" once and "store: migrated" per step
//     (WithLog). A migration that fails leaves the file at the version
//     before it, and nothing of it in the file;
//   - refuses a file of a newer version, or one older than the oldest
//     migration, with a SchemaError (errors.Is ErrSchemaVersion) naming
//     the file, its version, the version this ifaced reads and what to
//     do: run the newer ifaced, or restore the copy from before the
//     upgrade (docs/upgrading.md). It changes nothing in the file.
//
// To change the layout: raise SchemaVersion by one; append to migrations
// a Migration{From: the old version, What: one line for the log, Run:
// the change, inside the transaction it is given}; make the package's
// readers and writers use the new layout only; and add a test that makes
// a file of the old version (a store from the previous release:
// interop/compat/testdata holds one), opens it, and checks every record
// came through. Keep the old migrations: a user may skip releases. The
// package's tests prove the machinery with migrations registered from
// the test (migrate_test.go); the product has none yet.
package store
