package discovery

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/ifaced/ifaced/node/internal/peerid"
	"github.com/ifaced/ifaced/node/p2phost"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
)

// addrFollower keeps the peer cache's addresses in step with libp2p's
// identify. The side that answers a greeting keeps the dialer's view as
// soon as the message is admitted, which can be before identify has said
// where the dialer listens (an inbound connection's remote address is an
// ephemeral port, not a place to dial); without this the record would say
// nothing of how to reach the peer until its next greeting.
//
// It only updates records the cache already holds (store.SetPeerAddrs),
// so a stranger's connection adds nothing; and its one subscription is
// read by one goroutine, so a burst of connections costs a queue, not a
// goroutine each. The queue is bounded (followerQueue): when it is full
// the event bus makes identify wait to emit, so it is made long enough
// that a write of a known peer's record (an fsync) does not hold up the
// identification of other connections behind it.
type addrFollower struct {
	host  host.Host
	store *store.Store
	log   *slog.Logger
	sub   event.Subscription
}

// followerQueue is how many identifications may wait for the follower:
// a few hundred bytes each.
const followerQueue = 1024

// newAddrFollower subscribes to identify's completions; run reads them.
func newAddrFollower(h host.Host, st *store.Store, log *slog.Logger) (*addrFollower, error) {
	sub, err := h.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted), eventbus.BufSize(followerQueue))
	if err != nil {
		return nil, fmt.Errorf("following peers' addresses: %w", err)
	}
	return &addrFollower{host: h, store: st, log: log, sub: sub}, nil
}

// run applies each completion until ctx ends or the subscription closes.
func (f *addrFollower) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-f.sub.Out():
			if !ok {
				return
			}
			f.follow(e.(event.EvtPeerIdentificationCompleted).Peer)
		}
	}
}

// follow gives pid's cached record the addresses the peerstore now holds.
func (f *addrFollower) follow(pid peer.ID) {
	if _, err := f.store.SetPeerAddrs(peerid.String(pid), p2phost.PeerAddrs(f.host, pid)); err != nil {
		f.log.Warn("keeping a peer's addresses", "peer", pid, "err", err)
	}
}

// Close ends the subscription.
func (f *addrFollower) Close() error { return f.sub.Close() }
