package converse

import (
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/internal/costlru"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// What the conversations hold, for the daemon's tests: Holds, OpenWith,
// HeldView, CheckView and Requester only read. Nothing here changes what
// the conversations hold, nor lets a view in without the door: the memory a greeting keeps is measured in this package's own
// tests (greetedmem_test.go), over the real components below it.

// Holds says whether the conversation id is in the table (open, or closed
// by one side and waiting for the other), and with which peer.
func (cs *Conversations) Holds(id string) (peer.ID, bool) {
	c := cs.conversation(id)
	if c == nil {
		return "", false
	}
	return c.peer, true
}

// OpenWith says whether some conversation with pid is open.
func (cs *Conversations) OpenWith(pid peer.ID) bool { return cs.conversationWith(pid) != nil }

// HeldView is the view of pid this daemon holds in its verified-view
// memory.
func (cs *Conversations) HeldView(pid peer.ID) (HeldView, bool) { return cs.peerViews.Get(pid) }

// HeldViewsFill is how full the verified-view memory is.
func (cs *Conversations) HeldViewsFill() costlru.Fill { return cs.peerViews.Fill() }

// CheckView checks the view m carries (or names as unchanged, said,
// against held) as a greeting's view is checked, and returns its
// document.
func (cs *Conversations) CheckView(pid peer.ID, m *gossip.Message, said string, required bool, held *HeldView) (*negotiate.Document, error) {
	pv, err := cs.checkView(pid, m, said, required, held)
	if err != nil {
		return nil, err
	}
	return pv.view.Doc, nil
}

// Requester is pid, at level under agentID, as a capability's conditions
// see it: with the introductions the trust book holds for it.
func (cs *Conversations) Requester(pid peer.ID, level conditions.Level, agentID string) negotiate.Requester {
	return cs.requester(pid, level, agentID)
}

// ErrorBody is the error body an error phase message carries.
func ErrorBody(m *gossip.Message) (wire.ErrorBody, bool) {
	var body wire.ErrorBody
	p, ok := m.Body.Part(partError)
	if !ok || decodePart(p, &body) != nil {
		return body, false
	}
	return body, true
}

// AnonymousPeer names the audit file of anonymous HTTP requests.
const AnonymousPeer = anonymousPeer
