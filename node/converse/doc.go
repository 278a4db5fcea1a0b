// Package converse owns ifaced's stream protocols and the conversation
// table: greetings (/ifp/4/conversation and the /ifp/7/capabilities query,
// both ways), the messages of open conversations, capability requests
// sent and served in them (the request desk, which hands each admitted
// request to node/invoke, and the table of answers this daemon's own
// requests await), the update push (/ifp/7/update) of a changed document
// to every peer in conversation, the record of what view each peer was
// sent, and the HTTP binding's door-facing side (Inbox). Every message it
// receives passes node/admit's door before anything acts on it; what a
// peer is granted comes from the policy with the requester the daemon
// established (node/trust), and what it is shown from node/owner's
// documents. New builds it from everything it needs (Deps) and registers
// its handlers; it subscribes to the owner's document changes itself.
package converse
