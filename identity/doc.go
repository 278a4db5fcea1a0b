// Package identity owns who an ifaced daemon is and how it proves it: the
// Ed25519 key on disk, the identifiers derived from it (libp2p peer ID,
// did:key, IFP-5 key_id), IFP-5 identity documents (and whether one, or
// the DID document of a did:web, lists a given key), the signatures on
// messages and capability documents, level-0 introduction tokens, the key
// succession and revocation statements (succession.go), and the replay
// guard.
//
// # One key, three names
//
// The daemon has one Ed25519 key. Its public key gives
//
//   - the libp2p peer ID (identity multihash of the libp2p public-key protobuf),
//   - the did:key: "did:key:z" + base58btc(0xed 0x01 || public key),
//   - the IFP-5 key_id: did + "#" + the did's multibase part, so that a
//     verifier can recover the public key from the key_id alone.
//
// The fingerprint that humans compare out of band is "SHA256:" followed by
// the unpadded standard base64 of SHA-256(public key), as ssh prints it.
//
// The private key is kept in a PKCS#8 PEM file of mode 0600. LoadKey refuses
// a file that group or others may read, and the key is never printed or
// logged: Identity implements slog.LogValuer and fmt.Stringer with the peer
// ID only.
//
// # Signing input
//
// A signature covers the IFP-4 form of a message, never the bytes of one
// encoding, so a message signed before CBOR encoding still verifies after it
// travelled as JSON through an HTTPS inbox or through a relay. The bytes
// signed are
//
//	signing input = prefix || JCS(object)
//
// where JCS is RFC 8785 canonical JSON and prefix is a fixed ASCII string
// that separates the kinds of thing signed, so that no signature over one
// kind can be replayed as another:
//
//	message signatures:             "ifp/5/message-signature/v1\n"
//	capability-document signatures: "ifp/7/capability-document-signature/v1\n"
//
// The same key also signs the checkpoints of the daemon's tamper-evident
// audit log (docs/audit.md): C2SP signed notes, signed as they are, whose
// text begins with CheckpointPrefix, "ifaced-audit/" — never "ifp/", so no
// checkpoint signature passes for one of the signatures above, nor one of
// them for a checkpoint's (SignCheckpoint signs nothing else).
//
// For a message signature, object is
//
//	{
//	  "signature": {"alg": …, "key_id": …, "created": …,
//	                "signed_headers": [ … ], "signed_body": true|false},
//	  "headers":   {<each name in signed_headers>: <its value in the signed form, or null if absent>},
//	  "body":      <the body in the signed form: {"text": …, "parts": [ … ]}>   (only when signed_body)
//	}
//
// The signature's own parameters are signed, so neither the list of covered
// headers nor the key, time or algorithm can be changed without breaking it;
// signed_headers keeps the signer's order (it is an array) and may not
// repeat a name. The signature object always has exactly these five
// members, signed_body included when false. A listed header that the
// signed form leaves out is signed as null, so adding it later breaks the
// signature.
//
// # The signed form
//
// Headers and body are signed in their signed form: the IFP-4 JSON form
// of the message with this rule applied, from the innermost members out:
//
//	A member of an object IFP-4 defines — a header; a member of
//	headers.from, of an entry of headers.to, of headers.thread,
//	headers.languages or headers.capabilities; a member of the body or of
//	a body part — whose value is null, false, the empty string "", the
//	number 0, an empty array [] or an empty object {} is absent. Every
//	other member is present.
//
// Applied from the inside out, an object whose members are all absent is
// itself empty and so absent: "thread": {} and "thread": {"references": []}
// are absent, and the header is signed as null. Array elements are never
// absent (an entry of headers.to stays, whatever it holds). The rule stops
// at free-form values, which are signed exactly as received: a part's
// "content" (absent only when it is null) and the value of each member of
// headers.extensions (present whatever it is: {"x": ""} is signed as it
// is; "extensions" itself is absent when it has no members). Members IFP-4
// does not define are not part of the signed form. No member is ever
// added: a sender that means a default (ttl_seconds 0, no subject) says it
// by leaving the member out, and either spelling signs the same.
//
// Which headers a signature must cover is the verifier's policy, not part
// of the signing input. ifaced signs, and requires every accepted
// signature to cover, all seventeen IFP-4 headers — message_id, date,
// from, to, conversation_id, sequence, phase, content_type, subject,
// thread, languages, disclosure, persona, priority, ttl_seconds,
// capabilities, extensions — and the body (signed_body true); see package
// gossip (HeaderNames, RequiredSignedHeaders).
//
// For a capability document, object is
//
//	{"signature": {"alg": …, "key_id": …, "created": …}, "document": <the document without its "signature" member>}
//
// Both objects have fixed key sets, so their canonical form can be assembled
// from the canonical bytes of their members ("body" < "headers" <
// "signature" and "document" < "signature" in code-point order). That is how
// the canonical bytes of a document are computed once per seq and reused for
// every signature and verification (see DocumentSigningInput).
//
// Ed25519 signatures are encoded as unpadded base64url ("sig"), in its
// one canonical form: the unused low bits of the last character must be
// zero (RFC 4648 §3.5), so a signature has one spelling and a flipped
// padding bit is not the same signature written another way. A level-0
// introduction proof is an HMAC-SHA256 over the same message signing input,
// carried as a signature entry with alg "hmac-sha256" and key_id
// "intro:<token id>".
//
// The exact bytes are pinned by testdata/vectors.json (key, identifiers,
// message, signing input, signature), alongside RFC 8032 test 1 and the
// RFC 8785 examples.
//
// # Key succession and revocation
//
// A daemon that replaces its key says so in a succession statement, and a
// key that must no longer be believed is named in a revocation statement.
// Both are JSON objects with fixed members, signed like everything else:
//
//	signing input = prefix || JCS(statement without its signature members)
//
//	succession statements: "ifp/5/key-succession/v1\n"
//	revocation statements: "ifp/5/key-revocation/v1\n"
//
// A succession statement is
//
//	{"type": "key_succession",
//	 "old_key_id": <key_id of the key replaced>, "new_key_id": <key_id of its successor>,
//	 "date": <RFC 3339, UTC, to the second: the old key's retired_date>,
//	 "transition_seconds": <0 … 31536000: how long after date the old key still verifies>,
//	 "next_key_digest"?: <the new key's commitment to its own successor (Pre-rotation)>,
//	 "sig_old": <Ed25519 by the old key>, "sig_new": <Ed25519 by the new key>}
//
// and both signatures cover the same bytes: the prefix and the canonical
// form of the members other than sig_old and sig_new (five, or six with
// next_key_digest; a statement without it is signed exactly as before
// pre-rotation existed). A statement
// only one key signed does not verify; the two keys must differ. The
// successor's identity document lists the old key with status "retired"
// and retired_date = date (RetireFor), and a retired key verifies a
// message created up to date + transition_seconds (Document.KeyStatusAt).
//
// A revocation statement is
//
//	{"type": "key_revocation", "key_id": <the revoked key>,
//	 "date": <RFC 3339, UTC, to the second: nothing the key signed after it is believed>,
//	 "reason": <at most 256 bytes, "" when none; always present>,
//	 "signer": <key_id of the signing key>, "sig": <Ed25519 by signer>}
//
// signed over the prefix and the canonical form of the five members other
// than sig. Exactly two keys may sign one: the revoked key itself (a
// statement prepared while the owner held it, kept offline, whose date is
// when it was prepared), or the key that succeeded it, and then the
// succession statement from key_id to signer travels with the revocation
// (Revocation.Verify takes it). Any other signer is refused
// (ErrStatementSigner). A revoked key is refused from the moment the
// statement is received, whatever date its messages claim. A statement's
// date says when it was made and bounds its freshness; it never decides
// what a statement does to another: a receiver decides that by the order
// in which it observed them (node/wire "Key lifecycle").
//
// # Pre-rotation
//
// A key may commit, before it is replaced, to the key that will replace
// it, by publishing only that key's digest; the next key itself stays
// offline until the succession. A receiver that observed the commitment
// refuses a succession from the key to any other key, so that whoever
// steals the current key cannot rotate the identity to one of their own.
// The digest of an Ed25519 public key pub (its 32 bytes) is
//
//	next_key_digest = "sha256:" || base64url-unpadded(SHA-256("ifp/5/next-key/v1\n" || pub))
//
// (NextKeyDigest: 50 ASCII characters). A commitment statement is
//
//	{"type": "key_commitment", "key_id": <the committing key>,
//	 "next_key_digest": <digest of the key that will succeed it>,
//	 "date": <RFC 3339, UTC, to the second: when it was made>,
//	 "sig": <Ed25519 by key_id>}
//
// signed over "ifp/5/key-commitment/v1\n" and the canonical form of the
// four members other than sig. A succession statement carries the
// commitment of its new key in next_key_digest, signed by both keys, so
// that each rotation commits to the next. A digest may not be that of a
// key the statement itself names (ErrMalformedStatement, naming
// next_key_digest).
//
// Statements are decoded strictly (DecodeSuccession, DecodeRevocation,
// DecodeCommitment): at most 4096 bytes, no member they do not define. The
// exact bytes are pinned by testdata/lifecycle-vectors.json.
//
// # Replay
//
// ReplayGuard rejects a message_id seen before and a date outside the
// window (default 24 h back, 5 min of clock skew either way). Check it only
// after a signature verified: otherwise a forger could burn the IDs of
// genuine messages. The seen-set is an interface so the daemon can persist
// it across restarts for the length of the window. It keeps an ID until
// its date leaves the window plus twice the skew, and remembers the
// latest time it was pruned at (PrunedTo): a clock that ran ahead, pruned,
// and came back finds the dates it pruned inside the window again, so the
// guard refuses (ErrStale) a message whose ID the set may have forgotten,
// unless it is dated within twice the skew of the clock (a clock put right
// after running far ahead would otherwise refuse every message until it
// caught up with the prune).
//
// # Versions
//
// Every form here says its version where a verifier reads it first: the
// signing prefixes end in /v1, an identity document's "ifp" is 5, a
// statement's "type" names its form. A newer form is a new prefix, ifp
// number or type, never new meaning for old bytes, so an older verifier
// refuses it and says why rather than misreading it: a document whose
// ifp is not 5 fails Validate ("ifp: must be 5, got 6", ErrInvalidDocument),
// a statement with a member this version does not define fails its
// decoder, and one of another type its verification, naming the member
// or the type (ErrMalformedStatement; on the wire invalid_format, node/wire
// "Versions"), and a signature made under another prefix does not verify.
package identity
