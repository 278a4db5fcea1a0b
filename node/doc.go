// Package node is the ifaced daemon: it wires identity, conditions,
// messages and documents to the network. The daemon is a set of
// components, each owning one idea, each a type with its own constructor
// that takes what it needs (logger, clock, store, host or a narrow
// interface) and never the Node:
//
//	door           every inbound message passes one admission pipeline
//	(door.go)      before anything acts on it: validate, establish the
//	               signer, verify, replay, rate, fit, audit; refusals are
//	               recorded once, as bounded summaries
//	Conversations  the stream protocols (/ifp/4/conversation,
//	               /ifp/7/capabilities, /ifp/7/update), the conversation
//	               table, greetings, capability requests and the update push
//	documents      the owner's capability document, its seq and the signed
//	               view each requester is shown
//	PolicyBook     the disclosure map and temperature caps, with the
//	               owner's run-time changes
//	trust.Book     levels, pins, revocations, introductions, identity
//	(node/trust)   document checks
//	invoker        runs admitted capability requests: conditions, schema,
//	               workload, the local agent (bridge), output
//	Inbox          the HTTP binding's door-facing side: the IFP-6 inbox,
//	               signed and anonymous requests, the view HTTP callers get
//	Mail           the relay service and the mailboxes it holds,
//	               reservations, the outbox, fetched mail
//	discovery      capabilityDHT, announcer (GossipSub), lanDiscovery
//	               (mDNS), importer, and the Discovery façade
//	keyLifecycle   peers' key succession, revocation and commitment
//	(rotation.go)  statements: checked in the door's verify step, followed
//	               after the audit (what the owner granted moves to the new
//	               peer ID; package trust decides)
//	keyNotices,    this daemon's own: RotateKey, CommitNextKey and the
//	keyGossip      revocations, delivered at start to every cached peer (a
//	(keyrotate.go, conversation, else its mailbox) and on a GossipSub topic
//	keygossip.go)  of their own; the commitment also in every greeting
//
// Node owns the configuration and the data directory, the libp2p host
// (TCP and QUIC, Noise and TLS, yamux, identify and ping, with a resource
// manager and a connection manager sized from the configuration), the
// store, the audit log and the event hub; it assembles the components
// (New, Close) and is the façade the control API (node/api), the HTTP
// binding (node/httpapi) and the command line call.
//
// One greeting, responder side, reads in one direction: Conversations
// (converse.go: handleConversation, answerGreeting) → wire.Stream.Read →
// door.admit (door.go; negotiate.ReadGreeting, checkView, the trust
// book's revocations, the rate limits, gossip.Conversation.Accept, the
// audit log) → keepView (the peer cache) → grant (trust.Book.LevelOf,
// negotiate.Policy.GrantTo) → greeting (documents.view) → send → serve.
//
// # Logging
//
// The daemon logs through the *slog.Logger it is given. go-libp2p logs
// through a process-wide handler (gologshim), which the command line points
// at the same handler before the host starts.
package node
