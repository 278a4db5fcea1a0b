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
// Besides these, each capability a peer's cached view marks eligible for
// this daemon is a tool of its own, named <capability>__<last 8 characters
// of the peer ID> (e.g. doc.summarize__x9LmQ2aB), whose input schema is the
// capability's parameters from that view (wrapped as {"params": …} when
// the parameters are not an object) and whose output schema is the view's
// output_schema when that is an object. When a peer's view changes (the
// daemon's peer_view event), its tools are replaced, which the SDK
// announces as notifications/tools/list_changed (on a subscriptions/listen
// stream for 2026-07-28 clients).
//
// Annotations: the list_*, read_*, find_agents and show_peer tools are
// read-only (find_agents and show_peer are open-world: they ask peers);
// greet_peer and send_message are additive and open-world; invoke and the
// per-capability tools are open-world and may be destructive (what a peer's
// capability does is the peer's).
//
// # Resources
//
//	ifaced://peers                      the peer cache (JSON)
//	ifaced://peers/{peer}               the view a peer showed this daemon (JSON)
//	ifaced://audit/{conversation_id}    a conversation's audit entries (JSON; the ID percent-encoded, conv%3A…)
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
// how to meet it), what was expected and what would work.
//
// # Bounds
//
// Peers are strangers, and their views reach an LLM: at most MaxPeerTools
// (64) per-capability tools in all and MaxToolsPerPeer (16) per peer, a
// description cut to 1 KiB, a schema over 64 KiB left out (the capability
// stays reachable through invoke), and a schema the SDK refuses (for
// example x-mcp-header annotations) leaves that tool out with a log line.
// read_messages keeps the last InboxSize (256) messages, each text cut to
// 8 KiB (the whole message is in the audit); an agent that reads too late
// is told how many it missed. find_agents looks at most 256 cached peers.
package mcpserve
