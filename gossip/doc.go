// Package gossip owns the Inter-Face message: the IFP-4 structured form
// (headers, body, trace, security), its validation, its two wire codecs
// (deterministic CBOR for libp2p streams, JSON for HTTP and storage), its
// signatures over the IFP-4 form, and its IFP-3 rendering for humans.
//
// # One message, several encodings
//
// A Message is the IFP-4 object. Signatures (package identity) cover its
// canonical JSON form, never the bytes of an encoding, so a message signed
// before CBOR encoding verifies after CBOR → JSON → CBOR, and one signed
// from JSON verifies after CBOR. For that to hold, every value in a message
// must be a JSON value: Validate refuses CBOR byte strings, NaN, infinities,
// non-string map keys and integers beyond 2^53-1 (MaxSafeInteger, which
// also bounds headers.sequence and headers.ttl_seconds) inside part
// contents and extensions, and dates are kept as the strings that were
// signed rather than re-formatted.
//
// ifaced signs every header (HeaderNames; absent ones as null) and the
// body. A signature it accepts must cover at least RequiredSignedHeaders and
// the body; otherwise replay protection and conversation state would rest
// on fields an intermediary could change.
//
// # Decoding untrusted bytes
//
// DecodeCBOR and DecodeJSON refuse input over MaxMessageSize, and input
// past the container bounds (MessageBounds: containers, elements and
// nesting, counted over the raw bytes; bound.go), before decoding, then
// refuse duplicate map keys (a parser differential would let
// two readers see two messages under one signature), CBOR tags and
// indefinite lengths, trailing bytes, and field names that match only when
// case is ignored. Decoded messages are validated. Every problem, whether
// the bytes do not decode or the message does not validate, is a
// *FieldError naming the IFP-4 path ("headers.sequence") and what was
// wrong in words a peer can read ("expected an integer, got a text
// string"; never Go's types), and wraps ErrInvalidMessage; bytes that do
// not decode also wrap ErrMalformed. A decode error is named by decoding
// the input again without a target type and walking it against the IFP-4
// structure (shape.go), which the bounds make as safe as the first
// decoding. Unknown top-level and header members are ignored
// (IFP-2: ignore what you do not understand) and are not forwarded;
// headers.extensions is kept whole.
//
// # IFP-3
//
// RenderIFP3 and ParseIFP3 map between IFP-4 and the IFP-3 human-readable
// form following IFP-4 §4; what IFP-3 cannot express goes into a JSON
// appendix after the body, so the round trip is lossless and signatures
// still verify on the parsed message.
//
// # Conversations, frames and the audit log
//
// Conversation keeps the sequence and phase rules of one conversation;
// WriteFrame and ReadFrame carry one CBOR message per varint-length frame.
// AuditLog keeps the IFP-3 §5 audit trail: every message sent and
// received, recorded before the daemon acts on it (and fsynced as the
// sync policy says) in a JSONL file per peer and UTC day, beside a
// human-readable Markdown file of the same entries (marker lines followed
// by IFP-3 renderings, and the decision on each capability request)
// rendered by a background writer; audit.go and audit_writer.go say how.
// With WithSigner the log is tamper-evident: every record is a leaf of its
// day's Merkle tree, checkpoints are signed by the daemon's key, deletions
// by policy are recorded before they happen, VerifyAuditLog checks a home
// offline and evidence bundles verify with nothing else (audit_tree.go,
// audit_verify.go, audit_bundle.go, package gossip/auditproof; the
// specification, with its conformance vectors, is docs/audit.md).
package gossip
