// Package invoke runs capability requests for requesters the door
// admitted, on whichever transport they came: the conditions on the facts
// the daemon established, the parameters against the capability's
// schema, the workload limit (max_concurrent), the capabilities the daemon
// answers itself (standard.go), the local agent through the bridge
// (agent.go: its webhook, its event stream, or an MCP server), and the
// output against its schema; and, for the owner's audit, why it decided
// so. Invoker is the component, New builds it; how a request travels and
// is answered is the transport's (node/converse's request desk, the HTTP
// binding).
//
// Capability requests travel in a conversation: a probe whose
// headers.capabilities.request names one capability, with the parameters
// in a "parameters" part; the answer is a probe in reply to it with a
// "result" part, or an error message in reply to it. Neither closes the
// conversation: a refused request is a turn in the negotiation.
//
// The owner decides, in this order, each step audited: rate limit (by the
// conversation's temperature) → the capability exists for this requester
// and its conditions hold on the facts this daemon established (a hidden
// capability answers as a missing one) → workload (max_concurrent) → the
// parameters match the capability's schema → the local agent answers
// within agent.timeout → the result matches output_schema → signed reply.
//
// Why it decided so goes in the owner's audit log, on the entry of the
// answer or refusal (gossip.Decision, written in the same Record as the
// message): the facts this daemon established (level and how, tier,
// temperature, persona), each condition evaluated, met or not, the
// outcome and the wire code. A signed POST /invoke and an anonymous HTTP
// request, answered over HTTP rather than with a message, get an outcome
// entry in reply to the request that carries it. The decision never goes
// on the wire: a hidden capability's refusal says to the requester only
// what a missing one does, and to the owner why.
package invoke
