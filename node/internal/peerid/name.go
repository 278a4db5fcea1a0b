package peerid

import (
	"log/slog"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Name is how a log line names a peer: its peer ID, followed, when
// the peer cache holds one, by the display name from the peer's own view
// in quotes (`12D3KooW… "Bob's agent"`), so a person reading the log
// knows who it is while a grep for the ID still finds every line. The
// display name is the peer's claim, not an identity: the ID decides. It
// is looked up only when the line is written (slog.LogValuer), so lines
// below the log level cost no store read; owners' local aliases are the
// command line's (cmd/ifaced), not the daemon's.
type Name struct {
	pid   peer.ID
	peers PeerCache
}

// PeerCache is where Name finds a peer's display name: the daemon's peer
// cache (*store.Store is one).
type PeerCache interface {
	Peer(peerID string) (store.PeerRecord, error)
}

// Named is pid as log lines name it, its display name read from peers
// when the line is written.
func Named(pid peer.ID, peers PeerCache) Name { return Name{pid: pid, peers: peers} }

// maxLoggedDisplay bounds the display name a log line carries.
const maxLoggedDisplay = 64

// LogValue implements slog.LogValuer.
func (p Name) LogValue() slog.Value {
	id := String(p.pid)
	if p.peers == nil {
		return slog.StringValue(id)
	}
	rec, err := p.peers.Peer(id)
	if err != nil || rec.Display == "" {
		return slog.StringValue(id)
	}
	return slog.StringValue(id + " \"" + gossip.Clip(rec.Display, maxLoggedDisplay) + "\"")
}
