package p2phost

import (
	"slices"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/multiformats/go-multiaddr"
)

// PeerCache is where the addresses a peer was last reached at are kept
// (the store's peer records).
type PeerCache interface {
	Peer(peerID string) (store.PeerRecord, error)
}

// DialHints gives the peerstore what the cache knows of how to reach pid
// (the addresses it was last reached at, and its circuit addresses through
// the relays its document names), so a peer met before can be greeted
// again after restarts and relay changes without being told its address.
func DialHints(h host.Host, cache PeerCache, pid peer.ID) {
	if h.Network().Connectedness(pid) == network.Connected {
		return
	}
	rec, err := cache.Peer(pid.String())
	if err != nil {
		return
	}
	urls := slices.Clone(rec.Addrs)
	if view, err := negotiate.DecodeView(rec.View); err == nil && view.Relay != nil {
		urls = append(urls, view.Relay.URLs...)
	}
	var addrs []multiaddr.Multiaddr
	for _, u := range urls {
		a, err := multiaddr.NewMultiaddr(u)
		if err != nil {
			continue
		}
		if rest, last := multiaddr.SplitLast(a); last != nil && last.Code() == multiaddr.P_P2P {
			if last.Value() != pid.String() {
				continue
			}
			a = rest
		}
		if len(a) > 0 {
			addrs = append(addrs, a)
		}
	}
	h.Peerstore().AddAddrs(pid, addrs, peerstore.TempAddrTTL)
}

// PeerAddrs lists the addresses the peerstore holds for pid, sorted: the
// peerstore returns them in no fixed order, and the peer cache compares
// lists to decide whether a write is needed (an fsync per greeting, when
// the order alone changed).
func PeerAddrs(h host.Host, pid peer.ID) []string {
	var out []string
	for _, a := range h.Peerstore().Addrs(pid) {
		out = append(out, a.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}
