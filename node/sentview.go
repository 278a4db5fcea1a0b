package node

import (
	"errors"
	"fmt"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// What a peer holds: each time this daemon sends a peer a view of the
// owner's document (its greeting, the answer to one, an update push),
// the store keeps a small record of it (store.SentView: when, how, the
// seq, the grant it was cut for, the capabilities eligible and shown),
// so that the owner's console can show what the peer holds beside what
// it would be shown at its next greeting under today's policy.

// How a view was sent (store.SentView.Via).
const (
	SentInGreeting = "greeting"           // a conversation's greeting, or the answer to one
	SentInQuery    = "capabilities query" // a capabilities query, or the answer to one
	SentInUpdate   = "update"             // pushed in an open conversation after the document changed
)

// noteSent records v as the last view sent to pid, cut for g. A failure
// to record is logged: it must not fail what was sent.
func (cs *Conversations) noteSent(pid peer.ID, v *signedView, g negotiate.Granted, convID, via string) {
	rec := store.SentView{PeerID: idString(pid), At: cs.now(), Via: via, ConversationID: convID, Seq: v.Doc.Seq, Sum: v.Sum,
		Tier: g.Disclosure, Level: int(g.AuthLevel), Temperature: g.Temperature, Persona: g.Persona,
		Eligible: []string{}, Shown: []string{}}
	for _, c := range v.Doc.Capabilities {
		if c.Eligible != nil && *c.Eligible {
			rec.Eligible = append(rec.Eligible, c.Name)
		} else {
			rec.Shown = append(rec.Shown, c.Name)
		}
	}
	if err := cs.store.PutSentView(rec); err != nil {
		cs.log.Warn("recording the view sent", "peer", cs.named(pid), "err", err)
	}
}

// SentView is the record of the last view this daemon sent pid; false
// when it holds none (nothing was sent since it started, for a stranger,
// or ever, for a known peer; or a stranger's record was evicted).
func (n *Node) SentView(pid peer.ID) (store.SentView, bool, error) {
	v, err := n.store.SentView(idString(pid))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.SentView{}, false, nil
	case err != nil:
		return store.SentView{}, false, fmt.Errorf("reading the view sent to %s: %w", pid, err)
	}
	return v, true, nil
}

// noteGreeted records the view c's greeting carried, once it was sent on
// a stream of proto.
func (cs *Conversations) noteGreeted(c *conv, proto protocol.ID) {
	c.gmu.Lock()
	v, g := c.greeted, c.granted
	c.gmu.Unlock()
	if v == nil {
		return
	}
	if proto == wire.Conversation {
		cs.noteSent(c.peer, v, g, c.ID, SentInGreeting)
	} else {
		cs.noteSent(c.peer, v, g, "", SentInQuery)
	}
}
