// Package api is the daemon's local control surface and its client: an
// HTTP/JSON API on a loopback address through which the command line (its
// first client) and the local agent drive a running ifaced.
//
// # Finding and trusting the daemon
//
// The API grants full control of the daemon, so it listens on loopback
// only (Listen refuses any other address, and answers 403 to a request
// from a non-loopback address) and every request carries
//
//	Authorization: Bearer <token>
//
// where the token is the content of <home>/api.token: 32 random bytes in
// hex, created by the first Listen with mode 0600, so only the owner of the
// data directory can read it. A missing or wrong token is 401. Listen
// writes the address it bound to <home>/api.addr (mode 0600) and removes it
// on Close; Dial reads both files, which is how a client finds a daemon
// started on port 0. A missing api.addr, or one where nothing answers, is
// ErrNoDaemon.
//
// # Endpoints
//
// Every path starts with /v1; bodies are JSON objects of at most 1 MiB.
//
//	GET    /v1/status                 this daemon: peer ID, did, fingerprint, addresses, document seq, counts, uptime
//	GET    /v1/peers                  the peer cache, with each peer's age, staleness and whether it is connected
//	POST   /v1/connect                {"addr": multiaddr ending in /p2p/<peer ID>} → {"peer": peer ID}
//	GET    /v1/caps                   the owner's signed capability document
//	GET    /v1/caps/{peer}[?refresh=1] the cached view of a peer; refresh (or no cached view) asks the peer
//	POST   /v1/caps                   one capability object → the new document (409 when the name exists)
//	DELETE /v1/caps/{name}            remove a capability → the new document
//	POST   /v1/greet                  {"peer", "disclosure", "persona", "temperature", "tool_categories"} → the greeting's result
//	GET    /v1/conversations          the open conversations
//	POST   /v1/say                    {"conversation_id", "phase", "text"} → the message sent
//	POST   /v1/send                   {"peer", "text"} → said in a conversation, or queued for the peer's mailbox relays
//	GET    /v1/outbox                 messages waiting to be left at a peer's mailbox, with attempts and last error
//	GET    /v1/find/{capability}[?min_version=V&limit=N] providers from the DHT and imports, each with its status
//	POST   /v1/imports                {"url"} → the imported agent (fetched again when posted again)
//	GET    /v1/imports                the imported agents
//	DELETE /v1/imports?url=U          forget an imported agent
//	GET    /v1/audit[?peer=P]         the recorded conversations, newest first
//	GET    /v1/audit?conversation=ID  one conversation's entries and the path of its .md file
//	GET    /v1/events                 server-sent events, one per node.Event
//	POST   /v1/invoke                 {"peer", "capability", "params"} → the peer's result (502 with its refusal)
//	POST   /v1/invocations/{id}       the local agent's answer to an invocation event: {"result"} | {"error": {"message"}}
//	GET    /v1/policy                 the disclosure map and temperature caps in force
//	PUT    /v1/policy/disclosure      {"persona", "peer", "tier"} ("" removes the run-time grant) → the policy
//	PUT    /v1/policy/temperature     {"peer", "max"} ("" removes the run-time cap) → the policy
//	GET    /v1/trust[/{peer}]         trust records (see trust.go for these and the introduction endpoints)
//	POST   /v1/trust/{peer}, POST|GET /v1/intros, DELETE /v1/intros/{id}, POST /v1/intros/accept
//
// {peer}, like the peer member of a greeting, is a peer ID, a did:key, or
// an agent ID or display name the peer cache holds for exactly one peer.
//
// # Errors
//
// Every error is a JSON object (see Error):
//
//	{"error": "say: conversation_id is required", "code": "bad_request", "field": "conversation_id"}
//
// with 400 for bad input (field names the member at fault), 401 and 403 as
// above, 404 for an unknown endpoint, peer, conversation or capability, 405
// for a method the endpoint does not take, 409 for a conflict (a capability
// name already in use, a closed conversation), 413 for a body over 1 MiB,
// 502 when the peer failed or answered with an error (peer_error then holds
// the peer's wire error body, with its unmet conditions), and 504 when the
// peer did not answer in time.
//
// # Events
//
// GET /v1/events streams what node.Node.Subscribe delivers, each event as
//
//	event: <type>
//	data: <the node.Event as JSON>
//
// followed by a blank line, with a comment line every 15 seconds so idle
// connections stay open. The stream is subscribed before the response
// headers are sent, so a client that has the headers misses nothing after
// them. It ends when the client goes away, the daemon stops, or the client
// falls behind; in the last case its final event is events_lost, and the
// client catches up from the audit log before subscribing again.
package api
