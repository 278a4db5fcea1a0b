// Package conditions decides whether a requester may use a capability, and
// when it may not, says what was required, what the requester has, and how to
// meet it: errors as negotiation (IFP-1 §6.3).
//
// A capability in an IFP-7 document may carry a conditions object:
//
//	{"min_disclosure": "professional", "min_auth_level": 2, "temperature": "warm",
//	 "persona": ["researcher"], "peers": ["12D3KooW..."], "max_concurrent": 4}
//
// The package owns that object (its JSON form and its validation against the
// owner's configuration) and its evaluation. It imports nothing else from
// ifaced and does no I/O, so the rules below are all in this one room.
//
// # Facts, never claims
//
// [Evaluate] judges [Conditions] against [Facts]: what the owner's daemon
// established itself about the requester in this conversation. The peer ID is
// the one whose key verified the message, the authentication level is the one
// the daemon proved (introduction token, signature, pinned key, bound
// identity document), the disclosure tier is what the owner's disclosure map
// grants (a tier proposed in a greeting is capped by the map before it gets
// here), the temperature is what was negotiated under the owner's per-peer
// maximum. Nothing the requester asserts about itself reaches this package
// unchecked; that is the caller's job and the reason Facts has no field for a
// claim.
//
// # Explaining a decision
//
// [Evaluate] reports what failed, for the requester. [Explain] reports
// every condition a capability sets, met or not, with what it required
// and what the requester had: the owner's answer to "why was this request
// answered (or refused)?", recorded in the audit log. Its unmet entries
// are Evaluate's, word for word, so the two never disagree.
//
// # Orders
//
// Authentication levels (IFP-5) are 0 introduced < 1 signed < 2 verified <
// 3 bound. An unauthenticated caller (for example unsigned HTTP) has
// [NoLevel], which meets no min_auth_level at all, not even 0: level 0 is
// itself something proved (an introduction token the owner minted). Such a
// caller, with no peer either, has no key: the advice it gets ([Unmet]
// HowToMeet) starts with signing with a key of its own, and never tells it
// to have "your key" pinned or "your tier" raised, which it does not have.
//
// Temperatures are cool < warm < hot; a condition names the minimum, and a
// conversation without a negotiated temperature is cool.
//
// Disclosure tiers (IFP-12 §3.3) are, in order, public < professional <
// professional-open < community-trust < personal < close. An owner may add
// custom tiers, each placed directly after a tier it names ([NewTierOrder]);
// the resulting [TierOrder] is total, and a condition met at one tier is met
// at every tier above it.
//
// # Failing closed
//
// Evaluate never panics and never grants by accident. A fact it does not
// recognise (an unknown tier or temperature, an out-of-range level) ranks
// below everything; a condition that [Conditions.Validate] would reject (an
// unknown tier, level 7) is never met. Unknown fields in a conditions object
// are a decoding error rather than being ignored, because an ignored
// condition is a condition silently lifted.
//
// # Absent is not ineligible
//
// A persona is a face the owner shows; a capability restricted to some
// personas does not exist under the others. So a persona mismatch
// ([Decision.Absent]) is not a lock the requester can work toward, and the
// caller should answer as if the capability did not exist rather than show it
// with its conditions: listing it, or echoing the persona names in an error,
// would tie together personas the owner keeps apart. The Unmet entry still
// names the personas so the owner's own logs and audit trail are precise.
// The default persona (Facts.Persona "") has no name, so a capability
// restricted to named personas never exists under it.
// Every other unmet condition is ineligibility: the capability is there, and
// the answer says what would open it.
//
// Workload is different again: max_concurrent is transient, so a capability
// that is only busy ([Decision.Busy]) is still eligible ([Decision.Eligible])
// and shown as available; the refusal carries a retry hint instead.
//
// # The allow list is never echoed
//
// The peers condition is an allow list of peer IDs or agent ids the owner
// chose. Who is on it is the owner's business, and telling a refused
// requester would reveal the owner's relationships to whoever asks. So an
// unmet peers condition says only that the capability is limited to peers the
// owner chose: Required is "an allow-listed peer", and neither the Unmet
// entry nor [Decision.Error] ever contains an entry of the list.
package conditions
