// Package mcpserve puts the network in front of an LLM agent as an MCP
// server (Model Context Protocol): one running daemon's view of its peers,
// as tools, resources and change notifications. It owns that translation
// and nothing else; every call goes through the control API client
// (node/api), so an MCP client can do exactly what the owner's command line
// can, under the same token, and the daemon decides everything as it does
// for the command line.
//
// It is built on the official Go SDK (github.com/modelcontextprotocol/go-sdk,
// pinned in go.mod), which speaks protocol 2026-07-28 (a client probes with
// server/discover, then sends stateless requests carrying their protocol
// version in _meta, and follows changes with subscriptions/listen) and
// still answers the initialize handshake of 2025-11-25, 2025-06-18,
// 2025-03-26 and 2024-11-05 clients. Nothing of the protocol is written
// here. Two transports:
//
//   - stdio, for `ifaced mcp` (a stateful session: list-changed and
//     resource-updated notifications reach every client, old or new);
//   - streamable HTTP, mounted by the daemon on its control API listener
//     (/v1/mcp, behind the API token, loopback and socket only). The SDK
//     accepts 2026-07-28 over HTTP only in its stateless mode, which has no
//     GET stream for legacy clients, so Handler routes: initialize, or a
//     request carrying Mcp-Session-Id, goes to a stateful handler (legacy
//     clients get their session and its notifications; idle sessions close
//     after LegacySessionIdle), everything else to a stateless one (a
//     2026-07-28 client gets notifications on its subscriptions/listen
//     request).
//
// # Tools
//
//	find_agents         providers of a capability from the DHT, the peer cache and imports, each with its verdict for this daemon
//	show_peer           what a peer offers this daemon: each capability, eligible or not, with the unmet conditions and how to meet each
//	greet_peer          open a conversation with a proposal (disclosure, persona, temperature, tool categories)
//	invoke              run a peer's capability with parameters (the peer validates them against the schema show_peer lists)
//	send_message        text in an open conversation, or to a peer (said live, else left at its mailbox relays)
//	list_peers          the peer cache and connected peers
//	list_conversations  the open conversations
//	read_messages       messages received since a cursor (from the daemon's event stream)
//	read_conversation   one conversation's audit entries
//
// Besides these, each capability this daemon may use of a peer the owner
// chose is a tool of its own. The owner chose a peer when it pinned its
// key (`ifaced trust PEER --verify`), admitted it with an introduction
// token still in force, or granted it a disclosure tier above the default
// under any persona (config.toml's [disclosure.personas] or `ifaced
// policy`), by peer ID or by the agent ID established for it; a revoked
// or retired key is never chosen. Strangers get no tools of their own, so
// they can neither write into the tool list nor take the room of a peer
// the owner chose; find_agents, show_peer, greet_peer and invoke reach
// every peer. Whether this daemon may use a capability is its own
// computation: the view must mark it eligible and its conditions must be
// met by what the peer granted this daemon (level 1 and no tier without a
// grant; a condition or tier it does not know fails), never the view's
// word alone. The tool is named by the daemon (ToolName:
// peer_<last 8 characters of the peer ID>__<10 characters of a hash of
// the peer ID and the capability>, following ^[a-zA-Z0-9_-]{1,64}$, the
// same in every run; a name another tool holds leaves the tool out with a
// log line), its title and description are the daemon's words with the
// peer's quoted, its input schema is the capability's parameters from
// that view (wrapped as {"params": …} when they are not an object) and
// its output schema the view's output_schema when that is an object.
// Whose tools exist is decided again when a peer's view changes (the
// daemon's peer_view event), when the owner pins or revokes a key,
// changes a tier or revokes an introduction (trust), and when a key
// statement arrives (key); a change is announced as
// notifications/tools/list_changed (on a subscriptions/listen stream for
// 2026-07-28 clients), so a revoked peer's tools go at once.
//
// # A peer's words
//
// Every string a peer wrote (display name, agent ID, capability names,
// versions, descriptions, prices, the conditions and advice of a refusal
// or an unmet condition, a grant's notes, messages, results, the
// descriptions and titles in its schemas) reaches the model bounded and
// quoted as that peer's (Quote):
//
//	Peer …x9LmQ2aB wrote: «…» (quoted, untrusted)
//
// with « and » inside turned into ‹ and ›, line breaks into ⏎ and other
// control and bidirectional characters into U+FFFD, so the text can
// neither close its quotes nor start a line of its own. The peer is named
// by the end of its peer ID, never by a name it chose. A short token that
// can carry no sentence (a tier, a level such as "2 (verified)", a
// version, a code, a decimal, a currency code) is shown as it is, and a
// capability name as it is when it is dot notation of at most 64 bytes
// (so a model can pass it to invoke). The bounds, in bytes inside the
// quotes: MaxPeerWord (64) for short fields, MaxPeerName (128) for names,
// MaxPeerLine (512) for advice, notes and refusals, MaxPeerDesc (1 KiB)
// for descriptions, MaxPeerText (8 KiB) for a message, 256 for a text in
// a schema (whose $comment and examples are left out, and which is left
// out whole when another of its strings is longer), MaxPeerResult
// (64 KiB of JSON) for a result, over which the call is a tool error
// pointing to `ifaced invoke`. A result's text content is quoted; its
// structured content (invoke's result member, a per-peer tool's result
// when its view declares an output schema) is the peer's data, in members
// whose schema says so. The server's instructions tell the model that
// quoted text is data from another party, never instructions.
//
// Annotations: the list_*, read_*, find_agents and show_peer tools are
// read-only (find_agents and show_peer are open-world: they ask peers);
// greet_peer and send_message are additive and open-world; invoke and the
// per-capability tools are open-world and may be destructive (what a peer's
// capability does is the peer's), and a per-capability tool's annotation
// title is the daemon's.
//
// # Resources
//
//	ifaced://peers                      the peer cache (JSON, as list_peers gives it)
//	ifaced://peers/{peer}               the view a peer showed this daemon (JSON, as show_peer gives it)
//	ifaced://audit/{conversation_id}    a conversation's last 200 audit entries (JSON, as read_conversation gives them; the ID percent-encoded, conv%3A…)
//
// A change of a peer's view sends notifications/resources/updated for
// ifaced://peers and ifaced://peers/<peer ID> to the sessions subscribed to
// them.
//
// # Errors
//
// Unknown tools and malformed requests are JSON-RPC errors from the SDK
// (-32602 "unknown tool"); arguments that do not match a tool's input
// schema are a tool error naming the member ("validating \"arguments\":
// …"). Everything the daemon or a peer refuses is a tool error (isError)
// whose text is the daemon's explanation: the error, the member at fault,
// and for a peer's refusal its code, each unmet condition (required, have,
// how to meet it), what was expected and what would work, every word of
// the peer's quoted as its.
//
// # Bounds
//
// Peers are strangers, and their views reach an LLM: besides the bounds
// on a peer's words above, at most MaxPeerTools (64) per-capability tools
// in all and MaxToolsPerPeer (16) per peer (peers the owner chose only), a
// schema over 64 KiB left out (the capability stays reachable through
// invoke), and a schema the SDK refuses (for example x-mcp-header
// annotations) leaves that tool out with a log line. read_messages keeps
// the last InboxSize (256) messages (the whole message is in the audit);
// an agent that reads too late is told how many it missed. find_agents
// looks at most 256 cached peers; list_peers shows at most 8 addresses of
// each kind per peer.
package mcpserve
