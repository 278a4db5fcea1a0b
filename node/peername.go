package node

import (
	"log/slog"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// peerName is how a log line names a peer: its peer ID, followed, when
// the peer cache holds one, by the display name from the peer's own view
// in quotes (`12D3KooW… "Bob's agent"`), so a person reading the log
// knows who it is while a grep for the ID still finds every line. The
// display name is the peer's claim, not an identity: the ID decides. It
// is looked up only when the line is written (slog.LogValuer), so lines
// below the log level cost no store read; owners' local aliases are the
// command line's (cmd/ifaced), not the daemon's.
type peerName struct {
	pid   peer.ID
	peers interface {
		Peer(peerID string) (store.PeerRecord, error)
	}
}

// maxLoggedDisplay bounds the display name a log line carries.
const maxLoggedDisplay = 64

// LogValue implements slog.LogValuer.
func (p peerName) LogValue() slog.Value {
	id := p.pid.String()
	if p.peers == nil {
		return slog.StringValue(id)
	}
	rec, err := p.peers.Peer(id)
	if err != nil || rec.Display == "" {
		return slog.StringValue(id)
	}
	return slog.StringValue(id + " \"" + gossip.Clip(rec.Display, maxLoggedDisplay) + "\"")
}

// named is pid as log lines name it (peerName).
func (cs *Conversations) named(pid peer.ID) slog.LogValuer {
	return peerName{pid: pid, peers: cs.store}
}

// named is pid as log lines name it (peerName).
func (mb *Mail) named(pid peer.ID) slog.LogValuer { return peerName{pid: pid, peers: mb.store} }
