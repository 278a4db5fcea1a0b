package api

import (
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/owner"
	"github.com/ifaced/ifaced/node/wire"
)

// The request and response bodies of the endpoints, shared by the server
// and the client so the two cannot drift apart.

// Error codes of an Error.
const (
	CodeBadRequest       = "bad_request"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeTooLarge         = "too_large"
	CodePeerError        = "peer_error"       // the peer answered with an error phase message
	CodePeerFailed       = "peer_failed"      // the exchange with the peer failed otherwise
	CodePeerUnreachable  = "peer_unreachable" // the peer could not be dialed
	CodePeerTimeout      = "peer_timeout"
	CodeInternal         = "internal_error"
)

// Error is the body of every error answer, and what the client returns
// for one.
type Error struct {
	Status    int             `json:"-"` // the HTTP status
	Message   string          `json:"error"`
	Code      string          `json:"code"`
	Field     string          `json:"field,omitempty"`      // the request member at fault (400)
	PeerError *wire.ErrorBody `json:"peer_error,omitempty"` // what the peer answered (502)
}

func (e *Error) Error() string { return e.Message }

// Status describes the running daemon.
type Status struct {
	PeerID         string   `json:"peer_id"`
	DID            string   `json:"did"`
	Fingerprint    string   `json:"fingerprint"`
	Home           string   `json:"home"`
	API            string   `json:"api"`
	Addrs          []string `json:"addrs"`
	Seq            uint64   `json:"seq"`          // of the owner's capability document
	Capabilities   int      `json:"capabilities"` // in the owner's document
	Conversations  int      `json:"conversations"`
	ConnectedPeers int      `json:"connected_peers"`
	UptimeSeconds  int64    `json:"uptime_seconds"`
	RelayService   bool     `json:"relay_service"` // this daemon serves circuit relay v2
	RelaySlots     []string `json:"relay_slots"`   // relays this daemon holds a live slot on
	Outbox         int      `json:"outbox"`        // messages waiting for a peer's mailbox
	// Connections are the live connections, at most MaxStatusConnections
	// of them (ConnectedPeers counts every peer).
	Connections []Connection `json:"connections"`
}

// StaleAfter is the age past which a cached peer view is reported stale:
// the peer has not confirmed it for a day, so it may have changed.
const StaleAfter = 24 * time.Hour

// Peer is one peer the daemon knows: from the peer cache, or connected
// without a cached view yet (Cached false, Seq 0).
type Peer struct {
	PeerID     string `json:"peer_id"`
	AgentID    string `json:"agent_id,omitempty"`
	Display    string `json:"display,omitempty"`
	Seq        uint64 `json:"seq"`
	AgeSeconds int64  `json:"age_seconds"`
	Stale      bool   `json:"stale"`
	Cached     bool   `json:"cached"`
	Connected  bool   `json:"connected"` // through a relay too (Via says which)
	// Via is "direct" when a connection to the peer is direct, "relay"
	// when it is reached only through a relay (a limited connection), ""
	// when not connected.
	Via string `json:"via,omitempty"`
	// Addrs are the addresses the peer was last reached at (the cache);
	// LiveAddrs those of its open connections, a circuit address for a
	// relayed one.
	Addrs     []string `json:"addrs,omitempty"`
	LiveAddrs []string `json:"live_addrs,omitempty"`
}

// Connection is one live connection.
type Connection struct {
	Peer      string `json:"peer"`
	Addr      string `json:"addr"`      // the remote multiaddr (a /p2p-circuit one through a relay)
	Via       string `json:"via"`       // "direct" or "relay"
	Direction string `json:"direction"` // "inbound" or "outbound"
}

// MaxStatusConnections bounds Status.Connections.
const MaxStatusConnections = 64

// PeerList is the answer of GET /v1/peers.
type PeerList struct {
	Peers []Peer `json:"peers"`
}

// ConnectRequest is the body of POST /v1/connect.
type ConnectRequest struct {
	Addr string `json:"addr"`
}

// ConnectResult is the answer of POST /v1/connect.
type ConnectResult struct {
	Peer string `json:"peer"`
}

// Sources of a PeerCaps.
const (
	SourceCache = "cache" // the view held in the peer cache
	SourceQuery = "query" // the peer was just asked
)

// OwnDocument is the owner's document as the owner sees it: the signed
// document (as GET /v1/caps serves it), where each of its capabilities
// comes from (owner.OriginConfig, OriginRuntime, OriginMCP,
// OriginUnsaved), the config's capabilities removed at run time, and
// capabilities added at run time that are kept but left out because they
// no longer validate.
type OwnDocument struct {
	Document *negotiate.Document       `json:"document"`
	Origins  []owner.CapabilityOrigin  `json:"origins"`
	Removed  []string                  `json:"removed,omitempty"`
	LeftOut  []owner.LeftOutCapability `json:"left_out,omitempty"`
}

// PeerCaps is the view a peer showed this daemon: which of its
// capabilities this daemon may use, and for the others what is missing.
type PeerCaps struct {
	PeerID      string              `json:"peer_id"`
	AgentID     string              `json:"agent_id,omitempty"`
	Display     string              `json:"display,omitempty"`
	Seq         uint64              `json:"seq"`
	FetchedAt   time.Time           `json:"fetched_at"`
	AgeSeconds  int64               `json:"age_seconds"`
	Stale       bool                `json:"stale"`
	Source      string              `json:"source"`
	GrantedToUs *negotiate.Granted  `json:"granted_to_us,omitempty"` // what the peer granted when it sent the view
	View        *negotiate.Document `json:"view"`
}

// GreetRequest is the body of POST /v1/greet: the peer and what to
// propose to it.
type GreetRequest struct {
	Peer           string   `json:"peer"`
	Disclosure     string   `json:"disclosure,omitempty"`
	Persona        string   `json:"persona,omitempty"`
	Temperature    string   `json:"temperature,omitempty"`
	ToolCategories []string `json:"tool_categories,omitempty"`
}

// ConversationList is the answer of GET /v1/conversations.
type ConversationList struct {
	Conversations []converse.ConversationInfo `json:"conversations"`
}

// SayRequest is the body of POST /v1/say.
type SayRequest struct {
	// ConversationID names the conversation; without it, Peer's newest
	// open conversation is the one.
	ConversationID string       `json:"conversation_id,omitempty"`
	Peer           string       `json:"peer,omitempty"`
	Phase          gossip.Phase `json:"phase"`
	Text           string       `json:"text"`
}

// AuditList is the answer of GET /v1/audit without a conversation.
type AuditList struct {
	Conversations []gossip.AuditConversation `json:"conversations"`
	Warning       string                     `json:"warning,omitempty"` // files that could not be read
}

// AuditConversation is the answer of GET /v1/audit?conversation=ID.
type AuditConversation struct {
	ConversationID string              `json:"conversation_id"`
	File           string              `json:"file,omitempty"` // the .md file a person can open
	Entries        []gossip.AuditEntry `json:"entries"`
	Warning        string              `json:"warning,omitempty"` // torn lines that were skipped
}
