// Package negotiate owns what an agent offers and what each peer is shown
// of it: the IFP-7 capability document and its validation, capability
// names and versions, the signed view a given requester may see under the
// owner's conditions and the verified view a peer sent, the greeting's
// proposal and the context the owner grants in answer (the persona, tier
// and temperature conditions are decided on), capability requests and
// their answers, the interop projections (AG-UI, A2A, the orchestrator
// actions contract, ACP tool categories) and the import of documents in
// those formats. It decides on facts the daemon established — package
// conditions evaluates them — and leaves keys to package identity and
// messages to package gossip.
//
// # The document
//
// Document is IFP-7 plus optional members a plain IFP-7 reader can ignore:
// seq (increases on every change; receivers never accept a lower one),
// relay preferences (IFP-8 §2.3), the agui block, and per capability an
// output_schema, a price, ACP tool categories, tags, and advertise.
// Parameters and output schemas are JSON Schema draft 2020-12, compiled
// without loading anything from outside the document: a schema is data
// from a possibly hostile peer and must not make the daemon read a file or
// the network.
//
// LoadDocument reads an owner's file (JSON or TOML) strictly: unknown
// members, duplicate keys and wrong types are errors, because a misspelt
// condition would otherwise be dropped and the capability opened to
// everyone. TOML is only syntax here: it is converted to JSON and decoded
// by the same rules. Every problem is a *FieldError naming the field path,
// the capability, and the source line.
//
// # Views
//
// View computes, from facts the owner's daemon established (package
// conditions), exactly what one requester may see. A capability marked
// advertise = "when-eligible" is absent from the view of anyone who does
// not meet its conditions, and Advertised never lists it, so it cannot
// leak through a DHT record or an announcement. A capability limited to
// other personas does not exist under the active one. Allow lists are
// never echoed.
//
// # Grants
//
// A greeting proposes; the owner grants (Policy.GrantTo). Every part of a
// grant rests on what the owner established for the requester
// (Requester: its peer ID, established agent ID, level, and the
// introduction tokens admitted for it), never on its claim. A proposed
// persona is granted only when the disclosure map names the requester
// under it, a token admitted for it names it, or the owner declared it
// open (Policy.OpenPersonas); otherwise the conversation is under the
// default persona, with a note that is the same whether the persona
// exists or not. The tier is the granted persona's map entry (else the
// default tier), raised to the highest tier the requester's tokens grant
// under that persona; a proposal can lower it, never raise it.
// Temperature is capped per peer. Within a conversation the level never
// goes down, nor the tier and temperature while the persona stays the
// same (Granted.Raise).
//
// # Signatures
//
// A document served on its own carries a signature over its canonical form
// (package identity, prefix "ifp/7/capability-document-signature/v1\n").
// Canonicalization costs far more than the signature itself, so Sign
// returns the canonical bytes for the caller to keep per seq. Documents
// are encoded by encoding/json's rules (the same canonical bytes as
// before, so the same signatures) through the faster go-json-experiment
// engine.
//
// # A peer's view, as received
//
// A peer's view is read leniently (DecodeView): IFP-2 asks a receiver to
// ignore the members it does not know, not to drop them. Members this
// package does not model — on the document, on a capability, inside its
// conditions — are kept as received (Extra, ConditionsExtra) and written
// back whenever the view is encoded, so they reach the peer cache, the
// console and the audit as they came; persona may be a string (as IFP-12
// writes it) or a list. encoding/json's Unmarshal reads documents the
// same way; only a strict decode (LoadDocument, DecodeStrict) refuses
// unknown members, and Validate refuses a document that kept any. Its signature is verified over the content as
// received (VerifyView): the RFC 8785 form of the view without its
// "signature" member, never this daemon's re-encoding of what it
// understood, which would refuse every extension as a bad signature.
// testdata/views holds
// conformance vectors: signed views, their key, and the result a receiver
// must reach.
//
// # Views on the wire
//
// SignView signs a view once and seals it as a message part's content
// (SignedView: the part, Sum — the hex SHA-256 of its RFC 8785 form, what
// a peer holding it names in have_view — and Key, which tells a changed
// view from a re-signed one). VerifyView turns the bytes a peer sent into
// a VerifiedView (its sum, canonical bytes, decoded document and the hash
// of the signed bytes), for the caller to keep per peer. A greeting's own
// parts — the proposal in headers.disclosure and headers.persona and the
// "greeting" part, the granted context in the "context" part — are read
// once by ReadGreeting, which refuses an unreadable part with a
// *gossip.FieldError naming the member (ErrInvalidGreeting), and written
// by Greeting.Write.
//
// # Names and versions
//
// A capability name is dot notation (CheckName, the rule Validate
// applies); a version is free text, and versions that are dotted integers
// compare (ParseVersion, VersionAtLeast), as a search for a minimum
// version needs.
package negotiate
