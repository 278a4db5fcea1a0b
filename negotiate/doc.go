// Package negotiate owns what an agent offers and what each peer is shown
// of it: the IFP-7 capability document, its validation, its signature, and
// the view a given requester may see under the owner's conditions. (The
// capability requests and the interop projections — AG-UI, A2A, the
// orchestrator actions contract, ACP tool categories — join it as the
// daemon grows.)
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
// # Signatures
//
// A document served on its own carries a signature over its canonical form
// (package identity, prefix "ifp/7/capability-document-signature/v1\n").
// Canonicalization costs far more than the signature itself, so Sign
// returns the canonical bytes for the caller to keep per seq.
//
// # A peer's view, as received
//
// A peer's view is read leniently (DecodeView): IFP-2 asks a receiver to
// ignore the members it does not know, not to drop them. Members this
// package does not model — on the document, on a capability, inside its
// conditions — are kept as received (Extra, ConditionsExtra) and written
// back whenever the view is encoded, so they reach the peer cache, the
// console and the audit as they came; persona may be a string (as IFP-12
// writes it) or a list. Its signature is verified over the content as
// received (VerifyView): the RFC 8785 form of the view without its
// "signature" member, never this daemon's re-encoding of what it
// understood, which would refuse every extension as a bad signature and
// let a form this daemon normalizes pass as signed. testdata/views holds
// conformance vectors: signed views, their key, and the result a receiver
// must reach.
package negotiate
