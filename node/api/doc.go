// Package api is the daemon's local control surface and its client: an
// HTTP/JSON API on a Unix socket in the data directory and a loopback
// address, through which the command line (its first client) and the
// local agent drive a running ifaced.
//
// # Finding and trusting the daemon
//
// The API grants full control of the daemon. It listens on two doors: a
// Unix socket, <home>/api.sock (mode 0600), and a loopback TCP address
// (Listen refuses any other address, and answers 403 to a request from a
// non-loopback address and, on Linux, to one on a connection that a
// process of another user than the daemon's opened: peeruid.go). Every
// request carries
//
//	Authorization: Bearer <token>
//
// where the token is the content of <home>/api.token: 32 random bytes in
// hex, mode 0600, so only the owner of the data directory can read it. A
// missing or wrong token is 401. Listen makes a new token at every start,
// written (atomically) before anything listens, so the token of an earlier
// run opens nothing. It then creates the socket (in a private directory,
// given its mode, and only then renamed into place; a socket left by a
// daemon that died is replaced once nothing answers on it, and one that
// answers means another daemon runs for this home, which is an error),
// listens on TCP, and writes the bound address to <home>/api.addr (mode
// 0600). Close removes api.addr and api.sock.
//
// Dial, the client, prefers the socket. The daemon refuses to start on a
// home that group or others may write (config.Home.CheckPermissions), and
// Dial refuses such a home too, so a socket there was made by the owner's
// own processes: what answers on it is the daemon. A socket where nothing
// answers is ErrNoDaemon, and Dial does not go on to TCP: api.addr is then
// just as stale.
//
// Only when there is no socket (the home's path is too long for one, or it
// was removed) does Dial use the address in api.addr, and there a stale
// file is dangerous: after an unclean stop, any local process may now
// listen on that port. So on every TCP connection, before any request with
// the token, the client sends
//
//	GET /v1/hello?nonce=<32 fresh random bytes in hex>
//
// with no token, and the daemon answers {"proof": hex(HMAC-SHA256(token,
// "ifaced control API hello v1\n" + nonce))}. Only a process that holds the
// token can answer; the client checks the proof and otherwise closes the
// connection without sending anything else (ErrNoDaemon and ErrUnproven).
// This was chosen over comparing the listening process with a pid file:
// it needs no /proc or platform calls, and it holds through a forwarder
// (the network lab reaches daemons in other network namespaces through
// one). A process that relayed the hello to the real daemon could pass it,
// but only while that daemon runs, and a running daemon has rewritten
// api.addr with its own address and answers on the socket, which the
// client prefers. A missing api.addr, or one where nothing answers, is
// ErrNoDaemon.
//
// # Endpoints
//
// Every path starts with /v1; bodies are JSON objects of at most 1 MiB.
// openapi.json in this package describes them all in OpenAPI 3.1, with the
// schemas of every body (see openapi.go).
//
//	GET    /v1/hello?nonce=N          no token: the daemon's proof that it holds the token (above)
//	GET    /v1/openapi.json           that description
//	GET    /metrics                   Prometheus metrics, text exposition (metrics.go, node/metrics; docs/metrics.md)
//	GET    /v1/status                 this daemon: peer ID, did, fingerprint, addresses, document seq, counts, uptime
//	GET    /v1/peers                  the peer cache, with each peer's age, staleness and whether it is connected
//	GET    /v1/peers/{peer}           one peer's entry of that list, from the cache and connections alone (never asks the peer)
//	POST   /v1/connect                {"addr": multiaddr ending in /p2p/<peer ID>} → {"peer": peer ID}
//	GET    /v1/caps                   the owner's signed capability document
//	GET    /v1/caps/{peer}[?refresh=1] the cached view of a peer; refresh (or no cached view) asks the peer
//	POST   /v1/caps                   one capability object, or an array of them → the new document (409 when a name exists); kept across restarts
//	DELETE /v1/caps/{name}            remove a capability → the new document; kept removed across restarts (409 for an MCP tool)
//	GET    /v1/document               the owner's document with where each capability comes from (config, runtime, mcp)
//	GET    /v1/seen[?peer=P&tier=T&level=L&temperature=X&persona=Y]  what a peer, or a hypothetical requester, is shown of the document and why, and what the peer holds: the view last sent it (seen.go)
//	POST   /v1/greet                  {"peer", "disclosure", "persona", "temperature", "tool_categories"} → the greeting's result
//	GET    /v1/conversations          the open conversations
//	DELETE /v1/conversations/{id}     send the close phase in one → the message sent
//	POST   /v1/say                    {"conversation_id", "phase", "text"} → the message sent
//	POST   /v1/send                   {"peer", "text"} → said in a conversation, or queued for the peer's mailbox relays
//	GET    /v1/outbox                 messages waiting to be left at a peer's mailbox, with attempts and last error
//	GET    /v1/find/{capability}[?min_version=V&limit=N] providers from the DHT and imports, each with its status
//	POST|GET|DELETE /v1/mcp           MCP over streamable HTTP (node/mcpserve; mounted by the daemon with Server.Mount)
//	POST   /v1/ui/login-code          [{"page": true}] → a one-time login URL for the owner's console, and with page a 0600 page file leading to it (node/console; mounted by the daemon with Server.MountUI)
//	GET|POST /ui/…                    the console's pages, for a browser: its session cookie in place of the token, and Host and Origin checks (MountUI)
//	POST   /v1/imports                {"url"} → the imported agent (fetched again when posted again)
//	GET    /v1/imports                the imported agents
//	DELETE /v1/imports?url=U          forget an imported agent
//	GET    /v1/audit[?peer=P]         the recorded conversations, newest first
//	GET    /v1/audit?conversation=ID  one conversation's entries and the path of its .md file
//	GET    /v1/audit/why/{message_id} the decision on a capability request, by its ID or its answer's: the entry and why
//	GET    /v1/audit/refusals[?day=D&at=T&peer=P&code=C&q=TEXT&limit=N] the record of refusals, newest first, searched (refusals.go)
//	GET    /v1/audit/proof?conversation=ID | ?message=ID   how its records stand in the tamper-evident log (docs/audit.md)
//	GET    /v1/audit/bundle?conversation=ID | ?message=ID  its evidence bundle, which verifies with nothing else
//	GET    /v1/audit/receipt/{message_id} the receipt of a message a peer sent, to hand to that peer
//	GET    /v1/events                 server-sent events, one per events.Event
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
//	data: <the events.Event as JSON>
//
// followed by a blank line, with a comment line every 15 seconds so idle
// connections stay open. The stream is subscribed before the response
// headers are sent, so a client that has the headers misses nothing after
// them. It ends when the client goes away, the daemon stops, or the client
// falls behind; in the last case its final event is events_lost, and the
// client catches up from the audit log before subscribing again. A
// subscriber is the local agent (invocations wait for its answer) unless
// it asks for ?role=observer (Client.Observe): the MCP endpoint follows
// events that way, so that its presence alone does not make a peer's
// invocation wait agent.timeout for an answer nobody gives.
//
// # What the API holds of the daemon
//
// Listen takes the concrete *node.Node, which cmd/ifaced builds, and
// groupsFor (groups.go), the one place in this package that holds it,
// hands each route group (the trust endpoints, the proofs, the event
// stream, ...) only what the group uses, typed as small interfaces the
// group declares beside its handlers. Most are the methods used on one
// component (trust.Book, trust.Held, gossip.AuditLog,
// converse.Conversations, policy.Book, owner.Capabilities, mail.Mail, the
// discovery), so a test can hand a group the real component or a real
// daemon's node (node/nodetest); the rest are the node's own façade:
// greeting and capability queries (which also mark the peer as one the
// owner asked for), the peer cache, the record of views sent, the event
// stream. Listen keeps the concrete node rather than an interface of its
// own: the API as a whole uses some twenty of the node's methods, and one
// interface holding them all would mirror Node instead of saying what
// any endpoint needs.
package api
