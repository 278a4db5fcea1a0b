// Package mail owns reachability and store-and-forward: the circuit relay
// v2 service and the IFP-8 mailboxes it holds for others (at a relay),
// this daemon's reservations on the relays it uses and the circuit
// addresses they give the host (Reach, built before the host), the outbox
// of messages for peers that are away, and the mail it fetches for
// itself, which passes node/admit's door like any message. Send says
// text in a conversation when the peer is reachable (node/converse) and
// leaves it at the peer's mailbox relays otherwise. New builds it and
// starts reachability; RunOutbox delivers what waits.
package mail
