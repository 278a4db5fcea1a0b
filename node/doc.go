// Package node is the ifaced daemon's assembly: it builds the components,
// each a package of its own with one constructor that takes what it needs
// (logger, clock, store, host, or a small interface the component
// declares) and never the Node, wires the late links between them as
// subscriptions (owner.Document.OnChange) or method values, and closes
// them in reverse. The components, lowest first (cmd/ifaced's layer test
// holds the imports to this order):
//
//	node/trust     levels, pins, revocations, introductions, who is known
//	node/config    the configuration, its strict decoding, the data
//	               directory (Home)
//	node/events    the event hub the local agent and the console follow
//	node/policy    the disclosure map and temperature caps, with the
//	               owner's run-time changes
//	node/p2phost   the libp2p host: transports, security, the resource
//	               and connection managers, the listen addresses claimed
//	node/admit     the door: every inbound message passes one admission
//	               pipeline before anything acts on it (validate, establish
//	               the signer, verify, replay, rate, fit, audit)
//	node/owner     the owner's capability document, its seq and the signed
//	               view each requester is shown
//	node/invoke    runs admitted capability requests: conditions, schema,
//	               workload, the local agent (bridge), output
//	node/keys      peers' key succession, revocation and commitment
//	               statements (checked at the door, followed after the
//	               audit) and this daemon's own on disk
//	node/keys/tell this daemon's key statements delivered to its peers
//	node/converse  the stream protocols (/ifp/4/conversation,
//	               /ifp/7/capabilities, /ifp/7/update), the conversation
//	               table, greetings, capability requests, the update push,
//	               and the HTTP binding's door-facing side (Inbox)
//	node/mail      the relay service and the mailboxes it holds,
//	               reservations, the outbox, fetched mail
//	node/capdht    the capability DHT: kad-dht under /ifaced, the bounded
//	               store of others' provider records, the provide loop
//	node/discovery Find, the GossipSub announcements, mDNS, the imports
//	               of outside agents and the follower of peers' addresses
//	node/metrics   the Prometheus registry: the figures the components
//	               count, read at each scrape, and the scraper's listener
//
// Node owns the store, the audit log and the replay window, assembles the
// components (New, Close), and is the façade the control API (node/api),
// the HTTP binding (node/httpapi) and the command line call.
//
// One greeting, responder side, reads in one direction: node/converse
// (handleConversation, answerGreeting) → wire.Stream.Read → node/admit
// (Door.Admit: negotiate.ReadGreeting, checkView, the trust book's
// revocations, the rate limits, gossip.Conversation.Accept, the audit
// log) → keepView (the peer cache) → grant (trust.Book.LevelOf,
// negotiate.Policy.GrantTo) → greeting (owner.Document.View) → send →
// serve.
//
// # Logging
//
// The daemon logs through the *slog.Logger it is given; each component's
// logger carries component=NAME. go-libp2p logs through a process-wide
// handler (gologshim), which the command line points at the same handler
// before the host starts.
package node
