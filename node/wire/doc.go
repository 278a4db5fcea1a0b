// Package wire is the specification and the mechanics of ifaced's libp2p
// stream protocols: their IDs, framing, limits, deadlines and error codes.
// What the daemon does with a message is decided in package node; this
// package only moves verified-shaped bytes and names failures.
//
// # Protocols
//
//	/ifp/7/capabilities/1.0.0  query: the greeting exchange of a conversation
//	                           without the conversation — one signed greeting
//	                           in (the requester's view for the responder in
//	                           part "capabilities", the proposal in part
//	                           "greeting"), one signed greeting out (the
//	                           responder's view in "capabilities", the granted
//	                           context in "context"); then the stream closes.
//	                           Each side names the other's view it holds in
//	                           its "greeting" part (have_view: the hex SHA-256
//	                           of its RFC 8785 form); a side whose view still
//	                           has that hash leaves out "capabilities" from its
//	                           next greeting or answer and says view_unchanged
//	                           (the hash). A side that no longer holds the
//	                           view named simply does without it. The same
//	                           holds for the greetings of a conversation.
//	/ifp/4/conversation/1.0.0  a conversation: signed IFP-4 messages in both
//	                           directions, the initiator's greeting first and
//	                           the responder's greeting (its view for the
//	                           initiator and the granted context) second, then
//	                           context, probe, recommend, close and error
//	                           phases in any order until a close.
//	/ifp/7/update/1.0.0        push: one signed message (phase context) carrying
//	                           the sender's new view (part "capabilities") to a
//	                           peer in conversation; the answer is one signed
//	                           message, an acknowledgement or an error.
//	/ifp/8/mailbox/1.0.0       store-and-forward at a relay (IFP-8): one request
//	                           frame, one response frame (MailboxRequest and
//	                           MailboxResponse, deterministic CBOR maps with
//	                           no unknown keys). publish {to, message}: the
//	                           message (an IFP-4 message as CBOR bytes, at most
//	                           MaxMailMessage) must be signed by the stream's
//	                           peer and the recipient registered at the relay;
//	                           the answer names the relay's mail ID and when
//	                           the mail expires. retrieve {limit}: the stream's
//	                           peer's waiting messages, oldest first, each with
//	                           the relay's trace.received entry appended, at
//	                           most MaxMailBatch and a frame's worth, with
//	                           "more" when others wait; retrieving registers
//	                           the peer. ack {ids}: deletes the peer's own
//	                           messages. Refusals carry an ErrorBody under
//	                           "error" with the codes below.
//
// Capability requests travel in a conversation: a probe whose
// headers.capabilities.request names one capability, its parameters in a
// "parameters" part (application/json); the answer is a probe in reply to
// it (thread.in_reply_to) with a "result" part, or an error message in
// reply to it. A refused request does not close the conversation, nor does
// a rate_limited answer; every other error does.
//
// # Frames
//
// Every message is one frame: an unsigned varint (multiformats unsigned-
// varint, minimally encoded) with the payload length, then the payload, one
// deterministic CBOR item (RFC 8949 §4.2.1) holding an IFP-4 message
// (package gossip). Limits:
//
//	frame payload       at most 1 MiB (gossip.MaxMessageSize); a larger
//	                    announced length is refused before allocation
//	read deadline       limits.stream_timeout (default 30 s) for each frame
//	write deadline      the same, for each frame
//	idle conversation   a conversation stream with no frame for the read
//	                    deadline is closed
//
// # Acceptance
//
// A message is accepted only if it decodes, validates, names a supported
// IFP version (4), carries an Ed25519 signature covering the required
// headers and the body, made by the key of the stream's remote peer ID,
// has a message_id not seen before and a date inside the replay window,
// and fits the conversation's sequence.
//
// # Errors
//
// A failure the peer can act on is answered with a signed message in the
// error phase whose "error" part (content type application/json) holds
//
//	{"code": "...", "message": "...", "expected": "...", "hint": "...",
//	 "unmet": [ ... ], "retry_after_seconds": N}
//
// (IFP-1 §6.3: say what was expected and what would work), after which the
// stream is closed. Each code has one sentinel error (ErrorOf; a received
// *RemoteError matches it with errors.Is) and one HTTP status (HTTPStatus,
// IFP-6 §3.2 where it names one), from one table (errors.go). Codes, with
// the HTTP status of a refusal carrying them:
//
//	invalid_format       400  the frame or message does not decode or validate
//	payload_too_large    413  the frame is over 1 MiB
//	unsupported_version  400  ifp is not 4
//	invalid_signature    401  unsigned, malformed or non-verifying signature
//	wrong_key            401  signed by a key other than the stream's peer
//	key_revoked          401  the owner revoked trust in the sender's key
//	replay               400  message_id seen before, or date outside the window
//	out_of_sequence      409  sequence, phase or conversation does not fit
//	stale_seq            409  a capability document older than the one held
//	conditions_not_met   403  the requester does not meet a capability's conditions
//	busy                 503  a capability is at its max_concurrent; retry later
//	unknown_capability   404  no such capability is offered to this requester
//	rate_limited         429  too many messages; retry after the given time
//	invalid_params       400  the parameters fail the capability's JSON Schema
//	                          (each failing location is named)
//	agent_unavailable    503  no local agent is listening (no webhook, no event
//	                          subscriber)
//	agent_timeout        504  the local agent did not answer in time
//	agent_error          502  the local agent failed, or its result did not
//	                          match the capability's output_schema
//	mailbox_refused      404  (mailbox) the recipient is not registered here
//	mailbox_full         503  (mailbox) a quota is used up
//	unknown_sender       401  (HTTP, relayed mail) the signing key names no
//	                          sender this daemon can resolve
//	not_found            404  (HTTP) no such endpoint
//	internal_error       500  this daemon failed; nothing was accepted
//
// When no answer can be written (the peer is gone, or a deadline passed),
// the stream is reset and the failure logged.
package wire
