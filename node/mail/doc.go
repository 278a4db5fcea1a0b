// Package mail owns reachability and store-and-forward: the circuit relay
// v2 service and the IFP-8 mailboxes it holds for others (at a relay),
// this daemon's reservations on the relays it uses and the circuit
// addresses they give the host (Reach, built before the host), the outbox
// of messages for peers that are away, and the mail it fetches for
// itself, which passes node/admit's door like any message. Send says
// text in a conversation when the peer is reachable (node/converse) and
// leaves it at the peer's mailbox relays otherwise. New builds it and
// starts reachability; RunOutbox delivers what waits.
//
// Mail that arrives while its recipient is connected to the relay is
// fetched at once, not at the recipient's next mailbox.poll (issue 27: in
// the network lab the message sent as the relay carrying a conversation
// died waited 59.7 s for it). Two designs were weighed:
//
//   - The recipient fetches when it loses or remakes a connection or
//     reservation. It does already on each reservation, which delivers
//     what waited while it was away; but when one relay dies the sender
//     leaves its message at another relay the recipient is still on, and
//     later than the recipient noticed the death (after its own greeting
//     failed): a fetch then finds nothing, and the message waits for the
//     poll all the same.
//   - The relay tells the recipient that mail waits, when it takes the
//     message. This is what was chosen: the relay is the one party that
//     knows the moment, and the recipient is connected to it anyway (it
//     holds a slot there). The notice (wire.MailWaiting) is a stream with
//     no bytes: it carries nothing to decode or trust, and the recipient
//     learns what waits by the retrieve it would make at its poll.
//
// What a notice can make a daemon do is bounded: it is heard only from
// the relays the owner configured (relay.use), the stream of anyone else
// is reset unread; and the fetches that notices prompt are at most one a
// second per relay (waitingGap), a notice within the second coalesced
// into one fetch when it is up. A relay tells a recipient only while it
// holds a slot there, one notice at a time per recipient. The poll stays,
// for relays that do not send notices and for a notice lost with its
// connection.
package mail
