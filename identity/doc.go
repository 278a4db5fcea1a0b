// Package identity owns who an ifaced daemon is and how it proves it: the
// Ed25519 key on disk, the identifiers derived from it (libp2p peer ID,
// did:key, IFP-5 key_id), IFP-5 identity documents (and whether one, or
// the DID document of a did:web, lists a given key), the signatures on
// messages and capability documents, level-0 introduction tokens, and the
// replay guard.
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
// For a message signature, object is
//
//	{
//	  "signature": {"alg": …, "key_id": …, "created": …,
//	                "signed_headers": [ … ], "signed_body": true|false},
//	  "headers":   {<each name in signed_headers>: <its IFP-4 value, or null if absent>},
//	  "body":      <the IFP-4 body: {"text": …, "parts": [ … ]}>   (only when signed_body)
//	}
//
// The signature's own parameters are signed, so neither the list of covered
// headers nor the key, time or algorithm can be changed without breaking it;
// signed_headers keeps the signer's order (it is an array) and may not
// repeat a name. A listed header that the message does not carry is signed
// as null, so adding it later breaks the signature.
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
// Ed25519 signatures are encoded as unpadded base64url ("sig"). A level-0
// introduction proof is an HMAC-SHA256 over the same message signing input,
// carried as a signature entry with alg "hmac-sha256" and key_id
// "intro:<token id>".
//
// The exact bytes are pinned by testdata/vectors.json (key, identifiers,
// message, signing input, signature), alongside RFC 8032 test 1 and the
// RFC 8785 examples.
//
// # Replay
//
// ReplayGuard rejects a message_id seen before and a date outside the
// window (default 24 h back, 5 min of clock skew either way). Check it only
// after a signature verified: otherwise a forger could burn the IDs of
// genuine messages. The seen-set is an interface so the daemon can persist
// it across restarts for the length of the window.
package identity
