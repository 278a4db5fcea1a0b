// Package wire is the specification and the mechanics of ifaced's libp2p
// stream protocols: their IDs, framing, messages, limits, deadlines and
// error codes. A second implementation should be writable from this
// comment, the identity package comment (the signing input) and the
// conformance vectors in testdata/conformance, without reading Go code.
// What the daemon decides is in package node; this package moves
// verified-shaped bytes and names failures.
//
// Terms: a peer is a libp2p host whose Ed25519 key is its identity; its
// agent ID on the wire is its did:key ("did:key:z6Mk…", identity package);
// JSON means RFC 8259 JSON, canonical JSON the RFC 8785 form (JCS).
//
// # Protocols
//
//	/ifp/4/conversation/1.0.0  a conversation: signed IFP-4 messages in both
//	                           directions, the initiator's greeting first
//	                           and the responder's greeting (the answer)
//	                           second, then context, probe, recommend,
//	                           close and error messages until a close.
//	/ifp/7/capabilities/1.0.0  query: the greeting and its answer without
//	                           the conversation. The initiator writes one
//	                           greeting, the responder one answer; then
//	                           the initiator closes the stream, or writes
//	                           the next query's greeting on it (a query of
//	                           its own: a new conversation_id, sequence
//	                           1), answered in turn. The responder closes
//	                           a stream that stays idle, and may close one
//	                           after any answer (see Deadlines and idle
//	                           streams); an initiator whose next greeting
//	                           meets the end of the stream, with no
//	                           answer, asks again on a new stream.
//	/ifp/7/update/1.0.0        push: one signed message carrying the
//	                           sender's new view to a peer it has an open
//	                           conversation with; one signed answer.
//	/ifp/8/mailbox/1.0.0       store-and-forward at a relay (IFP-8): one
//	                           request frame, one response frame.
//	/ifp/8/mail-waiting/1.0.0  a mailbox relay's notice to a recipient
//	                           connected to it that mail waits there: no
//	                           bytes at all (an ifaced extension of IFP-8).
//
// Every stream belongs to the resource-manager service "ifaced".
//
// # Frames
//
// Every message is one frame: an unsigned varint (multiformats
// unsigned-varint: 7 bits per byte, least significant group first, high
// bit set on every byte but the last, minimally encoded, at most 9 bytes)
// with the payload length, then the payload: one CBOR item (RFC 8949) in
// core deterministic encoding (§4.2.1: definite lengths, shortest integer
// and float forms, map keys sorted bytewise by their encoding). A frame of
// a conversation, query or update holds an IFP-4 message as a CBOR map
// whose keys are the JSON member names below; a mailbox frame holds a
// mailbox request or response.
//
// Readers refuse, with invalid_format unless noted:
//
//	a length that is not minimal (81 00) or does not end within 9 bytes
//	a length of 0
//	a length over 1 MiB (1048576)        payload_too_large, before reading it
//	a stream that ends inside a frame
//	bytes after the CBOR item, or a payload that is not one CBOR item
//	duplicate map keys, indefinite lengths, tags, NaN and infinities,
//	nesting deeper than 40, more than 16384 elements in an array or
//	pairs in a map
//	an item past the container bounds (below), before decoding it
//
// A payload's buffer grows as its bytes arrive, and the memory a frame can
// cost is reserved before it is read (Memory, below).
//
// # Container bounds
//
// A decoder's memory follows the containers it builds, not the bytes it
// reads (one CBOR byte, a0, decodes to an empty map of some fifty bytes).
// So before decoding any item a stranger sent — a frame's payload, an
// HTTP request body, a capability view (a message part, a GossipSub
// announcement), a greeting's parts, a mailbox frame — a reader counts,
// over the raw encoding and without building anything:
//
//	containers  arrays and maps (JSON objects), at every depth
//	elements    their lengths added up: an array's elements and a map's
//	            pairs (a pair counts once)
//	depth       the nesting of containers; the outermost is at depth 1
//
// In CBOR the counts come from the heads alone: major types 4 and 5 give
// a container and its length (the length counts when the head is read),
// strings are skipped by their length, a tag adds nothing. In JSON they
// come from the token stream; a scalar at the top level counts nothing.
// The bounds, per item:
//
//	item                                   containers  elements  depth
//	IFP-4 message (frame, JSON body,            16384    131072     40
//	  signed POST /invoke, fetched mail)
//	capability view (in a part, announced)      16384    131072     40
//	a greeting's "greeting" or "context"          256      4096     16
//	  part (its content, alone)
//	mailbox frame                                2048      8192      8
//
// An item past any bound is refused as soon as the count passes it, with
// invalid_format and a message naming the count and the bound ("message:
// has more than 16384 containers (arrays and maps) (counted 16385 when
// the scan stopped; at most 16384 per item): …"); a view past them is not
// a view, and a greeting part past them is unreadable (invalid_format,
// naming the part). The bounds come from real documents: the largest, a
// greeting carrying a view of 256 capabilities (the most a view may list)
// with JSON Schema parameters, is 3,618 containers, 9,070 elements and 11
// deep; the 20-capability greeting of the design is 314, 810 and 11.
// Within them, decoding an item allocates at most 4 bytes per byte of it
// plus 24 MiB, whatever it holds (each decoder's fuzz target checks it);
// before them, a 1 MiB frame of [[{},{},…],…] decoded to 62 MiB.
//
// # Memory
//
// Before reading a frame's payload, a reader reserves 4 bytes per byte of
// its announced length (ReserveFactor: the payload, its buffer growing by
// doubling, and the decoded message, which for real documents is about
// twice the frame) from the stream's resource scope, and releases it once
// the message is decoded. Before decoding it, the reader takes the
// message's cost — 12 bytes per byte, 512 per container and 128 per
// element of its counts: an upper estimate of decoding it and checking
// its signature together — from a daemon-wide budget of
// limits.max_memory_mb / 2 (at least 48 MiB), of which senders not yet
// established (no verified greeting on the current connection) and HTTP
// bodies share three quarters, and holds it until the message is
// recorded in the audit log (which copies it twice, as JSON and as its
// rendering) or refused. An HTTP request body takes
// its cost from the same budget from before decoding until the message
// is admitted or refused. A reader that cannot reserve, or that waits for
// the budget longer than the read deadline, answers rate_limited
// (ErrOverloaded) without reading the frame, as for any other frame it
// could not read, and closes the stream; a mailbox relay resets it.
//
// # Messages
//
// A message is an IFP-4 object; as JSON (the HTTPS inbox, signed
// POST /invoke, the audit log) and as CBOR (frames) it has the same
// members. "?" marks an optional member; every string is UTF-8; an id is
// 1 to 256 bytes, printable, without white space; a date is an RFC 3339
// time (ifaced writes UTC seconds, 2026-03-04T23:58:12Z).
//
//	ifp                        integer, 4 (else unsupported_version)
//	headers.message_id         id, new for every message of a sender
//	headers.date               date, within the replay window (below)
//	headers.from               agent: {agent: string ≤512, display?: string
//	                           ≤256, human?: string ≤256}; on libp2p,
//	                           agent is the sender's did:key
//	headers.to                 array of 1 to 64 agents; holds the recipient
//	headers.conversation_id    id
//	headers.sequence           integer, 1 to 2^53-1 (see Conversations)
//	headers.phase              greeting, context, probe, recommend, close
//	                           or error
//	headers.content_type       string, the media type of body.text
//	                           ("text/markdown; charset=utf-8")
//	headers.subject?           string ≤1024
//	headers.thread?            {in_reply_to?: id, references?: [id] ≤256}
//	headers.languages?         {content?: string ≤64, preferred?: [string],
//	                           human?: [string]}
//	headers.disclosure?        string ≤128, a disclosure tier (IFP-12)
//	headers.persona?           string ≤128
//	headers.priority?          low, normal or urgent
//	headers.ttl_seconds?       integer, 0 to 2^53-1
//	headers.capabilities?      {request?: [string ≤256], offer?: [string ≤256]}
//	headers.extensions?        object of JSON values, kept as received
//	body.text?                 string
//	body.parts?                array of ≤64 parts: {content_type: string
//	                           ≤256, name?: string ≤256, content?: any
//	                           JSON value}
//	trace.received?            array of ≤64 hops: {by, with, at: date,
//	                           from?} (strings; appended by relays)
//	security.signatures        array of ≤8: {alg, key_id, created: date,
//	                           signed_headers: [header name], signed_body:
//	                           boolean, sig} (identity package comment)
//	security.encryption?       {scheme: string, recipients?: [string]}
//
// A part content and an extension value are any JSON value nested at most
// 32 deep, with no CBOR byte strings, tags, NaN or infinities, map keys
// that are text, and integers within -(2^53-1) to 2^53-1 (past 2^53 two
// integers have one RFC 8785 form, so one signature would cover both).
// A typed member must have its type: an integer member is a CBOR integer
// or a JSON number without fraction or exponent. null anywhere means
// absent. Members IFP-4 does not define are ignored and not forwarded.
// A refusal of a message that does not decode or validate names the member
// ("headers.sequence: expected an integer, got a text string"; package
// gossip, FieldError).
//
// # Signatures
//
// Every message carries an Ed25519 signature (alg "ed25519", key_id the
// sender's did:key + "#" + its multibase part, sig unpadded base64url)
// over the signing input defined in the identity package comment: a
// domain prefix, then the RFC 8785 form of the signature's parameters,
// the signed headers and the body, each in the signed form. The signed
// form leaves out every member IFP-4 defines whose value is null, false,
// "", 0, [] or {} (from the inside out, so "thread": {} is absent and
// signs as null), and keeps free-form values (part contents, extension
// values) exactly as received.
//
// A signature this daemon accepts covers every header — message_id, date,
// from, to, conversation_id, sequence, phase, content_type, subject,
// thread, languages, disclosure, persona, priority, ttl_seconds,
// capabilities, extensions (absent ones as null) — and the body
// (signed_body true); ifaced signs exactly that. Of the Ed25519 signatures,
// the first whose key_id does not name another did:key is tried, and
// only it; it must verify under the key of the stream's remote peer
// (wrong_key when every Ed25519 signature names another did:key, else
// invalid_signature). The vectors in testdata/conformance/signing.json
// pin the bytes.
//
// What a daemon received is kept with these signatures in its audit log,
// a tamper-evident log whose checkpoints the daemon signs; its records,
// checkpoints and evidence bundles, which a third party verifies offline,
// are specified in docs/audit.md (not on the wire: a bundle travels as a
// file the owner hands over).
//
// # Acceptance
//
// Every inbound message, on every transport (these streams, the HTTPS
// inbox, a signed POST /invoke, mail fetched from a mailbox), passes these
// steps in this order; the first that fails gives the refusal's code:
//
//	decode     the frame and its message decode and     invalid_format,
//	           validate, and so do the parts the        payload_too_large,
//	           receiver reads (a greeting's "greeting"  unsupported_version
//	           and "context" parts)
//	establish  the signer: the stream's remote peer     wrong_key,
//	           on libp2p; elsewhere the key the         unknown_sender,
//	           Ed25519 signature's key_id names.        invalid_format
//	           headers.from must be that signer's
//	           did:key. Off a stream, headers.to must
//	           name the receiver.
//	verify     the signature verifies under the         invalid_signature,
//	           signer's key; the owner has not revoked  key_revoked,
//	           it; a view the message carries (part     key_retired,
//	           "capabilities") is signed by the same    stale_seq
//	           key and not older than the one held;
//	           no revocation statement revoked the
//	           key, and a key a succession retired is
//	           inside its transition period; a key
//	           statement the message carries verifies
//	           (Key lifecycle)
//	replay     message_id not seen before from this     replay
//	           signer; date at most 24 h old and at
//	           most 5 min ahead (replay.window,
//	           replay.clock_skew; mail: the mailbox
//	           retention)
//	rate       per signer, by the conversation's        rate_limited
//	           temperature: 10 (cool), 30 (warm), 60
//	           (hot) messages a minute, a minute's
//	           worth at once ([rates]); an answer to
//	           one's own request and fetched mail are
//	           not counted
//	fit        the message fits its conversation        out_of_sequence
//	           (below)
//	audit      it is written to the audit log; only
//	           then is it acted on
//
// A refused message is acted on by nothing: the receiver records the
// refusal (a bounded summary, outside any conversation), answers with the
// code where the transport can carry an answer, and forgets the
// message_id again when the refusal came after the replay step, so the
// same message can be sent again once what refused it has changed (a rate
// limit, say).
//
// The replay step reads the receiver's clock, which may step while it
// runs (a laptop's sleep, NTP). A receiver 1 h ahead of its peer takes the
// peer's messages (an hour old to it) and the peer refuses its answers
// (an hour ahead); 1 h behind, it refuses them, code replay, saying how
// far ahead of its clock they are. A message_id is remembered for as long
// as its date could be inside the window, and the receiver remembers how
// far it forgot IDs (identity "Replay"): once its clock went back, a
// message dated before that reach is refused, code replay, unless it is
// dated within twice replay.clock_skew of the clock; so a message
// accepted once is refused again whichever way the clock stepped.
//
// # Conversations
//
// A conversation is one /ifp/4/conversation/1.0.0 stream between two
// peers, named by the conversation_id of its first message; from.agent is
// always the sender's did:key and to holds the recipient's. Sequence
// numbers count the messages of the whole conversation:
//
//   - the first message is the initiator's greeting, at sequence 1 (an
//     error may come first, refusing the stream);
//   - each side numbers its next message one more than the highest
//     sequence it has sent or received in the conversation, so a turn-
//     taking exchange reads 1, 2, 3, …; its headers.thread.in_reply_to
//     names the last message it received;
//   - a receiver accepts a message only if its sequence is higher than
//     that of every message it received from the peer before (gaps are
//     allowed; both sides sending at once may use one number twice);
//   - numbers stop at 2^53-1 (MaxSequence): a side that would need a
//     higher one starts a new conversation instead;
//   - a greeting may come again later and renegotiates (IFP-12); a
//     conversation_id already open is not opened twice, and of greetings
//     racing to open the same conversation_id (from one peer or several)
//     exactly one opens it: the first to be fitted claims the ID, and
//     every other is refused with out_of_sequence ("already open or
//     being opened");
//   - after a close (either side), only error messages may follow; the
//     side that sent the close closes its write direction.
//
// A message that does not fit is refused with out_of_sequence.
//
// # Greetings
//
// A greeting (phase greeting) carries in its headers the proposed
// disclosure tier (headers.disclosure) and persona (headers.persona), and
// in headers.capabilities.offer the names of the capabilities the
// recipient is eligible for now. Its body parts, each with content_type
// "application/json", in this order:
//
//	capabilities  the sender's signed IFP-7 view for the recipient: the
//	              sender's capability document as this recipient may see
//	              it, with a "signature" member {alg: "ed25519", key_id,
//	              created, sig} over the document without it (identity
//	              package comment, "ifp/7/capability-document-signature/v1\n"),
//	              by the same key as the message. Members: ifp (7),
//	              agent_id, seq (integer: the seq of the last change
//	              visible in this view, see Views; it never goes down for
//	              a recipient, which refuses a lower one than it holds:
//	              stale_seq),
//	              capabilities (array of {name, version?, description,
//	              parameters? (JSON Schema 2020-12), conditions?
//	              {min_disclosure?, min_auth_level? (0-3), temperature?,
//	              persona?, peers?, max_concurrent?}, output_schema?,
//	              price? {amount, currency}, categories?, tags?,
//	              advertise?, eligible (boolean), unmet? [unmet]}),
//	              ifp_support?, updated? (when that change was made),
//	              relay?, agui?,
//	              supported_tool_categories?. Members a receiver does not
//	              model are kept, and the signature is verified over the
//	              view as received. Left out when the sender says
//	              view_unchanged (below).
//	greeting      the proposal: {temperature? ("cool",
//	              "warm" or "hot"; cool when absent), ifp_support?
//	              ([integer], the IFP numbers the sender speaks),
//	              requested_tool_categories? ([string], ACP categories to
//	              put first), have_view? (string), view_unchanged?
//	              (string), acks? (boolean; see Acknowledgements)}. The tier and persona travel in the headers
//	              only; a receiver ignores disclosure or persona members
//	              here (older senders copied them). A member of the wrong
//	              type is refused (invalid_format, naming the member);
//	              members a receiver does not know are ignored.
//	context       only in the answer: what the responder grants the
//	              initiator, {disclosure: string, disclosure_outcome:
//	              "granted" | "accepted" | "lowered" | "declined",
//	              auth_level: integer 0-3, temperature: string, persona?:
//	              string, notes?: [string] (why the grant differs from
//	              the proposal), tool_categories?: [string] (the requested
//	              categories the view supports)}.
//
// The answer is the responder's greeting, in reply to the initiator's
// (sequence 2, thread.in_reply_to the greeting's message_id). Its
// headers.disclosure and persona, and its greeting part's temperature,
// are what the responder grants (its context part says so in full). The initiator
// requires the answer to carry a view or to say view_unchanged with the
// hash it named; a responder accepts a greeting without a view.
//
// have_view names the recipient's view the sender holds, verified: the
// lower-case hex SHA-256 of the RFC 8785 form of that view (the whole
// content of the "capabilities" part as received, signature included). A
// side whose view for the other still has exactly that hash may leave out
// its "capabilities" part in its next greeting or answer, and then says
// view_unchanged with the same hash; a side that no longer holds the view
// named does without it, and one that knows neither member sends its view
// every time, which always works. A view re-signed (new created time) has
// a new hash. testdata/conformance/exchange.json holds a cold greeting and
// its answer, then a warm greeting and answer that leave both views out,
// then a greeting refused with unavailable: a daemon with no room to
// record a new conversation (its disk below audit.min_free_mb, or its
// audit log's quota used up by the current day) answers a greeting with
// an error phase message of that code, and goes on with the
// conversations it has.
//
// A greeting may carry a level-0 introduction proof (IFP-5), when the
// sender's human holds an introduction token minted by the recipient's:
// an entry of security.signatures {alg: "hmac-sha256", key_id:
// "intro:<token id, 16 hex digits>", created, signed_headers (all),
// signed_body: true, sig: unpadded base64url of HMAC-SHA256(token
// secret, signing input)}, placed before the Ed25519 signature and made
// over the same signed form with its own parameters. A proof that does
// not verify does not refuse the greeting; the sender simply is not
// introduced.
//
// # Acknowledgements
//
// A frame written into a stream leaves the writer as soon as it is in
// its own buffers: when the path dies in that moment (the relay carrying
// a circuit killed before either side sees the connection close), the
// message is lost, and the writer cannot tell. So a greeting, or its
// answer, may say acks: true in its greeting part. It says two things
// of the conversation: its sender acknowledges each context message the
// other side says in it, and reads the acknowledgements of its own.
//
//   - A side acknowledges only when the other side's last greeting or
//     answer said acks (a later greeting may change it), and waits for
//     an acknowledgement only then: a peer that says nothing of acks (an
//     older daemon) is never sent one and never waited on.
//   - It acknowledges a context message once its door admitted the
//     message and recorded it in the audit log (Acceptance), and made
//     that record durable (ifaced commits it, as before it tells a relay
//     to let go of mail), whatever carried the message (the stream, or
//     the HTTPS inbox into the open conversation); the acknowledgement
//     goes on the conversation's stream. It never acknowledges an
//     acknowledgement. A context message it refuses is answered as under
//     Errors, in reply to it (thread.in_reply_to its message_id), so that
//     the sender reads the refusal rather than taking it for a loss.
//   - An acknowledgement is a message like any other (signed, numbered,
//     recorded by both sides), in the context phase, with
//     headers.thread.in_reply_to the acknowledged message's message_id,
//     no body.text, and one part "delivered" (application/json)
//     {"message_id": the same ID}. A context message whose "delivered"
//     part is not an object with a string message_id equal to its
//     in_reply_to is no acknowledgement, but an ordinary context message
//     (acknowledged, and passed to the agent). An acknowledgement is
//     not passed to the receiver's agent, whatever text or other parts
//     it carries (they are recorded). One naming a message the receiver
//     said, of the last 64 it said in the conversation, is not charged
//     to the sender's rate (Acceptance), once per message; any other is
//     charged like any message, recorded, and otherwise ignored.
//   - ifaced waits 4 s for an acknowledgement (converse.AckWait); past
//     that, or when the conversation ends first, it ends the
//     conversation and leaves the very same signed message at one of
//     the peer's mailbox relays (Mailbox). A recipient that did get it
//     drops the mailbox's copy as a replay (same message_id) for as long
//     as it remembers that ID: until the message's date plus
//     replay.window (24 h by default). A copy fetched later than that (a
//     recipient that went away for a day just after the path died) is
//     taken a second time; this version does not guard against it. A
//     peer that names no mailbox relay leaves the sender only the error:
//     the message may not have arrived. A message said without waiting
//     (say, rather than send) is acknowledged all the same, and nothing
//     is done when the acknowledgement does not come.
//
// testdata/conformance/exchange.json holds a warm greeting and answer
// that both say acks, a context message, and its acknowledgement.
//
// # Views
//
// A view is the owner's document as one requester may see it. Its seq and
// updated say when what it shows last changed, not when the document did,
// so that nothing a requester can observe — the view's seq, updated and
// signature, an HTTP ETag, the version of a projection (the A2A card's
// version is the view's seq), an update push, an announcement, a DHT
// record — moves for a change it cannot see (a capability advertised
// only when eligible, for requesters it does not qualify):
//
//   - The owner's document has a seq that grows with every change of its
//     content, and an updated time.
//   - A class of view is the facts it is cut for: the requester's level,
//     tier, temperature and persona, and its peer ID only where an allow
//     list (conditions.peers) names it.
//   - A class's mark is the content of its view (the view without seq,
//     updated and signature) and the document's seq and updated at which
//     that content last differed from the one before; a class first
//     shown takes the current document's seq and updated.
//   - A view is shown with its class's mark, but never with a lower seq
//     than the requester was shown before (its peer ID's highest, and the
//     updated that came with it): a requester moving to a class whose
//     mark is lower (a lowered tier, a cooler conversation) keeps the seq
//     it holds.
//   - The HTTP ETag of the view is "<seq>-<first 8 bytes of the content
//     key, hex>"; an A2A card's version is the view's seq.
//
// An implementation keeps the marks (and the requesters' highest seqs)
// across restarts. testdata/conformance/views.json pins the rule: the
// owner's successive documents, and the seq, updated and capabilities of
// the view each request is shown.
//
// # Capability requests
//
// A request is a probe whose headers.capabilities.request names exactly
// one capability (else invalid_format), with its parameters, any JSON
// value, in a part "parameters" (application/json; absent means null).
// The answer is a probe in reply to it (thread.in_reply_to the request's
// message_id) with headers.capabilities.offer [the name] and a part
// "result" (application/json) holding the agent's result, or an error
// message in reply to it. Several requests may be outstanding; answers
// come in any order. A refused request does not close the conversation,
// nor does a rate_limited answer; every other error does.
//
// # Update push
//
// When the sender's document changes, it opens /ifp/7/update/1.0.0 to each
// peer it has an open conversation with whose view changed, writes one
// message and closes its write direction:
//
//	phase            context
//	conversation_id  the open conversation's
//	sequence         the new view's seq (updates are ordered by seq, not
//	                 by the conversation's numbers; they are not counted
//	                 in its sequence)
//	subject          "capability update"
//	body             text, and a part "capabilities" with the new view
//
// The receiver refuses an update that is not a context message
// (out_of_sequence, before any other step: such a message is refused for
// its phase, whatever it carries), names no open conversation with the
// stream's peer (out_of_sequence), is over its rate, or carries a view
// older than the one held (stale_seq); otherwise it keeps the view and
// answers with one acknowledgement: phase context, the same
// conversation_id and sequence, thread.in_reply_to the update's
// message_id, a text body. A refusal is an error message (see Errors) on
// the same stream, which the pusher takes as the refusal of its update
// whatever it replies to. Then the receiver closes the stream.
//
// # Mailbox
//
// /ifp/8/mailbox/1.0.0 carries one request frame and one response frame,
// each a deterministic CBOR map with no unknown keys (MailboxRequest,
// MailboxResponse):
//
//	request   {op: "publish" | "retrieve" | "ack", to?: text (publish: the
//	          recipient's peer ID), message?: bytes (publish: an IFP-4
//	          message as CBOR, at most MaxMailMessage), limit?: integer
//	          (retrieve: at most this many, ≥ 0), ids?: [text] (ack)}
//	response  {ok: bool, id?: text (publish: the relay's mail ID),
//	          expires?: date (publish: when it drops the mail unfetched),
//	          messages?: [{id: text, message: bytes}] (retrieve), more?:
//	          bool (retrieve: more are waiting), acked?: integer (ack),
//	          error?: error body (below)}
//
// publish: the message must be signed by the stream's peer and the
// recipient registered at the relay (mailbox_refused), within quotas
// (mailbox_full); it is kept until acknowledged, for mailbox.retention
// (default 7 days) or until its date plus ttl_seconds if sooner, with a
// trace.received entry {by: "relay:/p2p/<relay peer ID>", with:
// "libp2p+ifp-8", at, from: <sender peer ID>} appended. retrieve: the
// stream's peer's waiting messages, oldest first, at most MaxMailBatch
// and a frame's worth; retrieving registers the peer. ack: deletes the
// peer's own messages by mail ID. An unknown op is invalid_format.
//
// The recipient takes each message it retrieves through its door like
// any (Acceptance), with the replay window widened to mailbox.retention,
// but fits it into no conversation: a message left at a mailbox is
// usually a greeting of a one-message conversation of its own, and may
// be a context message of a conversation that failed under it, left as
// it was signed (Acknowledgements); either is taken on its own, in the
// conversation_id it names, whatever that conversation's state.
//
// /ifp/8/mail-waiting/1.0.0 is a notice, not a message: after a publish
// it accepted, a relay whose recipient holds a circuit relay slot on it
// (and so is connected) opens a stream to the recipient with this
// protocol, without dialling, writes nothing after the protocol choice
// and closes it; one stream at a time per recipient, a publish taken
// meanwhile sending one more when it closes. The recipient reads
// nothing. If the stream's peer is one of the relays it uses (its
// relay.use), it closes the stream and retrieves its mail there at once,
// at most once a second per relay (a notice within the second is
// answered by one retrieve when the second is up); from any other peer
// it resets the stream and does nothing else. The notice carries nothing
// to trust or decode: the recipient learns what waits by retrieving, as
// it would at its poll. A recipient that does not speak the protocol
// refuses it in the protocol choice and fetches at its mailbox.poll, as
// before.
//
// # Key lifecycle
//
// A daemon that replaces its key (`ifaced key rotate`), revokes one
// (`ifaced key revoke`, or a revocation statement prepared at init) or
// commits to its next key (`ifaced key commit-next`, pre-rotation) tells
// its peers in an ordinary signed IFP-4 message carrying a part
//
//	{"name": "key_succession", "content_type": "application/json", "content": <succession statement>}
//	{"name": "key_revocation", "content_type": "application/json", "content": <revocation statement>}
//	{"name": "key_commitment", "content_type": "application/json", "content": <commitment statement>}
//
// (at most one of each per message; a revocation signed by the successor
// travels with the key_succession part that names its signer). The
// statements' form, signing input and the next-key digest are package
// identity's ("Key succession and revocation", "Pre-rotation"), pinned by
// identity/testdata/lifecycle-vectors.json. Such a message goes where
// any message goes: in a conversation when the peer is reachable (a
// greeting, then a context message carrying the part), else as a
// one-message conversation left at the peer's mailbox relays; the
// successor's daemon also announces successions and revocations on
// GossipSub. A daemon that committed to its next key carries its
// key_commitment part in every greeting it sends (opening or answering),
// so that every peer it meets observes the commitment before any
// succession. A receiver that predates pre-rotation ignores a
// key_commitment part, but refuses a succession carrying next_key_digest
// (invalid_format: a member it does not define).
//
// On GossipSub they travel on the topic /ifaced/key-lifecycle/1: each
// payload is one such message in deterministic CBOR (a one-message
// conversation addressed to the key the statement is about, signed by the
// pubsub author), at most 16 KiB; a hop forwards only what verifies, and
// takes through its door only statements about keys it met.
//
// The receiver checks the parts in the verify step, after the message's
// own signature — the commitment, then the succession, then the
// revocation — and a statement that does not verify, or that it will not
// follow, refuses the whole message: invalid_signature, naming sig_old,
// sig_new or sig; invalid_format naming the member; wrong_key for a
// revocation signed by a key other than the revoked one or its successor,
// a succession carried by a key other than its old or new key (unless the
// part only names the signer of a key_revocation beside it), or a
// commitment carried by a key other than its own; replay for a date more
// than 5 min ahead, or a succession older than the mailbox retention or
// the replay window, whichever is longer. A key_revocation proves
// itself, and any sender may carry it (the owner of a lost key publishes
// the statement prepared for it from another daemon). Once the message is
// admitted and audited, the receiver follows the statements in the same
// order. Every decision below is taken on the order in which the
// receiver observed the statements, never on a date a signer chose:
// dates bound freshness only.
//
//   - A succession A→B is followed when A is a peer the receiver has met
//     (a trust record, a policy entry, or a cached view) and B is not
//     someone the owner made known (a pin, a policy entry, an
//     introduction). It is refused with key_statement_refused when A
//     already has a successor here (a key has one; the same statement
//     again changes nothing), when B was itself succeeded (a key never
//     comes back), when A committed to another next key (below), or when A
//     was never met; with key_revoked when A or B is revoked here: by a
//     revocation statement observed before this succession, however either
//     is dated, or by the receiver's owner. What the owner granted A moves
//     to B: the pin (a level 2 pin stays level 2 only if A was pinned, and
//     is then a pin of B), disclosure-map entries and temperature caps,
//     introductions bound to A, the cached view and addresses, aliases.
//     Chains (A→B, then B→C) are followed one statement at a time.
//   - After date + transition_seconds, a message signed by A is refused
//     with key_retired, whose message names the successor.
//   - Once A→B is followed, nothing A signs takes anything from B: A makes
//     no other succession, and a revocation of A — signed by A or by B,
//     dated before or after the succession, carried by anyone — revokes A
//     only. B keeps what it was given; the receiver tells its owner, who
//     may revoke B by hand.
//   - A revocation of a key the receiver never met is refused
//     (key_statement_refused). A revoked key is refused at once, on every
//     transport, with key_revoked; received before any succession from
//     it, the revocation blocks every later one. It has no maximum age (a
//     statement prepared at init may be years old): it takes nothing but
//     its own key, from the moment it is observed. The receiver records
//     who signed it (the key itself, or its successor) and the transport
//     that brought it, and shows it as such, never as its owner's own
//     revocation.
//   - A key the receiver's owner revoked (`ifaced trust A --revoke`)
//     passes nothing to any successor: a succession from it is refused
//     with key_revoked, whenever it is dated. The block follows the
//     identity: revoking A also revokes every key linked to A by
//     successions the receiver followed (A's successors and the keys A
//     succeeded), and the owner is told which. Pinning a key again lifts
//     that key's revocation only.
//   - Pre-rotation: the first commitment the receiver observes from a key
//     A binds — a key_commitment statement carried in a message A signed,
//     or the next_key_digest of the succession that made A. A later
//     commitment from A naming another digest is refused
//     (key_statement_refused; the same one again is taken), and so is a
//     succession from A to any key whose digest is not the committed one,
//     and a succession whose next_key_digest contradicts a commitment its
//     new key made first. A commitment of a key already succeeded or
//     revoked binds nothing. So a thief of A's current key cannot rotate
//     the identity away: the committed key is kept offline.
//
// A receiver need not keep forever what strangers cause: statements about
// peers its owner did not make known may be held in memory, bounded, and
// forgotten oldest first or at a restart (ifaced holds at most 4,096);
// those about peers the owner made known, and its own, it keeps. The
// rules are pinned, as sequences of observed statements with the outcome
// of each, by node/trust/testdata/continuity-vectors.json.
//
// # Deadlines and idle streams
//
// A reader waits for each frame at most limits.stream_timeout (default
// 30 s), counted from when it starts to wait (after the previous frame it
// read), whatever it wrote meanwhile; a writer has the same time to write
// each frame.
//
// A stream on which no byte of a next frame arrived within that time is
// idle (ErrIdle, IsIdle). On a conversation this is its quiet end, not a
// failure: the waiting side closes the stream (both directions; the peer
// reads the end of the stream and ends the conversation too), sends no
// error message, records no refusal, and logs at debug level. Either side
// that wants the conversation kept sends something before the deadline;
// after an idle end, a new greeting opens a new conversation. On the
// one-shot protocols (query, update, mailbox) an idle responder closes
// the same way, and an idle requester counts the request as failed. A
// query stream waiting for the next query is idle the same way: the
// responder closes it quietly. ifaced keeps at most 256 query streams
// open between queries on each side (those it asks on, those it is
// asked on, of which peers its owner has not made known hold at most
// half; past that a stream carries one query), and closes one it asks
// on after half limits.stream_timeout without a query, before the
// responder's deadline would.
//
// A deadline that passes after a frame began (inside its length or
// payload) is a stalled peer: the stream is reset, without an answer.
//
// # Errors
//
// A failure the peer can act on is answered with a signed message in the
// error phase, numbered as the next message of the conversation (a
// refused first message: sequence 1, in its conversation_id, or in a new
// one when the message did not decode). A refused capability request, a
// rate_limited message, and a refused context message whose sender said
// acks (Acknowledgements) are answered in reply to them
// (thread.in_reply_to); other errors reply to the last message accepted,
// if any. The body has a text for humans and a part "error"
// (application/json) holding
//
//	{"code": string, "message": string, "expected"?: string,
//	 "hint"?: string, "retry_after_seconds"?: integer,
//	 "unmet"?: [{"condition": string, "required": string,
//	             "have": string, "how_to_meet": string}]}
//
// (IFP-1 §6.3: say what was expected and what would work; unmet names
// each failing condition: min_disclosure, min_auth_level, temperature,
// persona, peers, max_concurrent). Except where Capability requests says
// otherwise, the stream is then closed. When no answer can be written
// (the peer is gone, a deadline passed), the stream is reset.
//
// Each code has one sentinel error (ErrorOf; a received *RemoteError
// matches it with errors.Is) and one HTTP status (HTTPStatus, IFP-6 §3.2
// where it names one), from one table (errors.go). The HTTP bindings
// answer a refusal with that status and a body {"status": "error",
// "code", "message", …}. Codes, with the HTTP status of a refusal
// carrying them:
//
//	invalid_format       400  the frame or message does not decode or validate
//	payload_too_large    413  the frame is over 1 MiB
//	unsupported_version  400  ifp is not 4
//	invalid_signature    401  unsigned, malformed or non-verifying signature
//	wrong_key            401  signed by a key other than the stream's peer
//	key_revoked          401  the owner revoked trust in the sender's key, or a
//	                          revocation statement revoked it (Key lifecycle)
//	key_retired          401  the sender's key was succeeded by another and its
//	                          transition period is over; the message names the
//	                          successor's peer ID
//	key_statement_refused 409 a valid key statement this daemon will not follow:
//	                          its key was never met here, its successor is
//	                          already someone else's, its key already has
//	                          another successor, or committed to another next
//	                          key first (Key lifecycle)
//	replay               400  message_id seen before, or date outside the window
//	out_of_sequence      409  sequence, phase or conversation does not fit
//	stale_seq            409  a capability document older than the one held
//	conditions_not_met   403  the requester does not meet a capability's conditions
//	busy                 503  a capability is at its max_concurrent; retry later
//	unavailable          503  the daemon takes no new conversations for now (its
//	                          disk is low, or its audit log's quota is used up);
//	                          open conversations go on; retry later. On a full
//	                          disk also any message it cannot record, an
//	                          answer it cannot record (sent in its place), and
//	                          at a relay mail it cannot store (the sender
//	                          keeps it and retries)
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
// A receiver treats a code it does not know as internal_error.
//
// # Versions
//
// Each protocol ID carries the IFP number of what it moves and a version
// (/ifp/4/conversation/1.0.0); a message says its format in "ifp" (4), a
// view in its own "ifp" (7), and a greeting may list the IFP numbers its
// sender speaks (ifp_support; informative: this version chooses nothing
// by it). An incompatible change gets a new protocol ID or number, which
// a daemon offers beside the old one for as long as it serves peers of
// the older version; a compatible one adds optional members. What a peer
// is told when the other side lacks something, case by case, as this
// version does it:
//
//	a protocol ID it does not  libp2p's protocol negotiation (multistream-
//	  speak                    select) answers "na": nothing of ifaced is
//	                           read or answered, and the opener's stream
//	                           fails before its first frame is read
//	                           ("protocols not supported: [<ID>]"), and
//	                           the opener fails that operation with an
//	                           error carrying this text (a mailbox client
//	                           tries its next relay)
//	a message whose "ifp" is   unsupported_version, the field ifp, "is 5;
//	  not 4                    this daemon speaks IFP-4 messages (resend
//	                           with "ifp": 4)"
//	a phase it does not know   invalid_format, the field headers.phase,
//	                           naming the phases it knows
//	a member of a message      ignored: not checked, not signed over (the
//	  IFP-4 does not define    signed form has the defined members only),
//	                           not kept in the audit log, not forwarded.
//	                           headers.extensions and part contents are
//	                           kept exactly as received
//	a part it does not read    kept with the message (audit log, signature)
//	  (a name other than       and otherwise ignored
//	  capabilities, greeting,
//	  context, parameters,
//	  result, delivered, the
//	  key parts)
//	a member of the "greeting" ignored (the bounds leave room for them); a
//	  or "context" part it     member it knows with the wrong type is
//	  does not know            invalid_format naming it
//	a greeting without acks    the conversation goes on without
//	  (an older peer)          acknowledgements (Acknowledgements): its
//	                           context messages are not acknowledged, and
//	                           what is said to it is reported said once
//	                           written
//	a member of a view it      kept: the view is verified, stored and shown
//	  does not model           as received (its hash, have_view, covers it)
//	a view whose "ifp" is not  the message carrying it is refused:
//	  7                        invalid_format, "invalid capability view:
//	                           ifp is 8, want 7"
//	a key statement with a     invalid_format, naming the member: the
//	  member it does not       statements' members are fixed (identity
//	  define, or another type  package comment); a new form is a new type
//	                           and signing prefix
//	a mailbox frame member it  invalid_format: mailbox frames have no
//	  does not know            unknown keys, so a relay or client names the
//	                           member and the members it speaks ("member
//	                           "since" is not part of /ifp/8/mailbox/1.0.0
//	                           as this daemon speaks it (a request has op,
//	                           to, message, limit, ids); …"); an unknown
//	                           op is invalid_format too
//	an error code it does not  read as internal_error (Errors)
//	  know
//
// interop/compat runs the previous release against this one on loopback
// (greetings both ways, invocations, update pushes, mail through a
// mailbox) in CI.
//
// # Conformance vectors
//
// testdata/conformance holds four JSON files, written from the code and
// checked against it by TestConformance. Keys are RFC 8032 §7.1 test keys
// (TEST 1 alice, TEST 2 bob, TEST 3 carol), each given as {seed,
// public_key (hex), peer_id, did, key_id}; messages are IFP-4 JSON;
// frames are hex of the bytes on the stream (varint length and payload).
//
//	signing.json   {about, keys, intro_secrets: {token id: hex secret},
//	               cases: [{name, note, message, signatures: [{signer,
//	               signing_input, signing_input_hex, sig}]}]}: for each
//	               entry i of message.security.signatures, the signing
//	               input built from the message must equal signing_input
//	               (signing_input_hex is its UTF-8 bytes), and Ed25519 with
//	               the signer's seed (or HMAC-SHA256 with the secret of
//	               signer "intro:<id>") must give sig. The case "empty
//	               members are absent" has the signing input of "minimal".
//	exchange.json  {about, keys, messages: [{name, protocol, from, to,
//	               message, frame}]}: each frame decodes to message (and
//	               ifaced encodes message to frame), verifies by from's
//	               key, and fits its conversation at to; views verify by
//	               from's key; have_view and view_unchanged hash views as
//	               described under Greetings; the acknowledgement names
//	               the said message (Acknowledgements); the error part of
//	               the refusal has code unavailable.
//	refusals.json  {about, keys, cases: [{name, stage, frames | json,
//	               peer, code, field?, held?, at?, names?}]}: stage "read":
//	               reading the frames (or decoding the JSON request body)
//	               fails; "verify": they decode, but no signature by peer's
//	               key is acceptable; "conversation": every frame but the last is
//	               accepted in one conversation (as its recipient), the last
//	               is refused; "lifecycle": the frame verifies, but the
//	               receiver holds the key statement held (a succession or a
//	               revocation, package identity's form) and its clock reads
//	               at: a revoked key is refused, a retired one once at is
//	               past the statement's date + transition_seconds, and the
//	               refusal names the successor (names); "update": the frame
//	               is pushed on /ifp/7/update/1.0.0 by peer to a receiver
//	               holding no open conversation with it (one that is not a
//	               context message is refused before anything else, one
//	               that is names no open conversation). The refusal has
//	               code, and names field (an IFP-4 path) when given. The
//	               HTTPS inbox answers each json case with code and the
//	               HTTP status of that code.
//	views.json     {about, keys, documents: [document], requests: [{after,
//	               requester?, facts: {auth_level, disclosure,
//	               temperature?, persona?}, seq, updated, shows, note?}]}:
//	               documents are the owner's after each change; each
//	               request, in order, is shown the view of documents[after]
//	               for facts (requester: a key name, absent for a caller
//	               nobody remembers), with seq and updated by the rule of
//	               Views, showing the capabilities named.
package wire
