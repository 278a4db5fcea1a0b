package admit

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	manet "github.com/multiformats/go-multiaddr/net"
	"golang.org/x/time/rate"
)

// refusalBudget decides which refusals the door writes to the record of
// refusals, before anything of the refused message is summarised: a
// refusal is written only when each of its sources has a token left and
// so does the daemon as a whole. Its sources are the connection (the
// established peer: the stream's, or the verified signer) and the remote
// address (an IPv4 address, or an IPv6 /64, since one host commonly holds
// a whole /64); a refusal with neither (an HTTP body that did not decode)
// is charged to its transport, shared by all such senders. Beyond the
// budget a refusal is counted, not written, and the next record written
// says in Refusal.LeftOut how many were left out since the one before,
// and so does a record of its own every hour when any were (door.
// reportLeftOut), so a reader can always tell how many refusals there were.
//
// Why both: fresh peer IDs cost nothing, so the peer alone bounds one
// connection, the address bounds a host's many keys, and the daemon-wide
// bucket bounds a sender with many addresses. The table of sources is a
// least-recently-used cache of refusalSources entries: a source evicted
// and seen again starts with a full burst, which the daemon-wide bucket
// still bounds. With the defaults below, the record of refusals grows by
// at most refusalGlobalBurst summaries plus one per refusalGlobalEvery
// (a summary is a few KiB: gossip.SummariseRefusal), and at most a
// sixteenth of audit.max_mb a day (gossip.RefusalShare).
type refusalBudget struct {
	mu      sync.Mutex
	global  *rate.Limiter
	sources *simplelru.LRU[string, *rate.Limiter]
	leftOut atomic.Int64 // refusals not written since the last one written
}

// The refusal budget.
const (
	RefusalSourceBurst = 20               // refusals written at once for one peer or address
	RefusalSourceEvery = 30 * time.Second // then one per this, per source
	refusalGlobalBurst = 200              // for the whole daemon
	refusalGlobalEvery = 2 * time.Second
	refusalSources     = 4096 // sources remembered (least recently used evicted)
)

func newRefusalBudget() *refusalBudget {
	sources, err := simplelru.NewLRU[string, *rate.Limiter](refusalSources, nil)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &refusalBudget{global: rate.NewLimiter(rate.Every(refusalGlobalEvery), refusalGlobalBurst), sources: sources}
}

// take reports whether a refusal from sources may be written at t. When
// it may, leftOut is how many were not written since the last one that
// was (the caller gives them back with unwritten if the write fails).
func (b *refusalBudget) take(t time.Time, sources ...string) (ok bool, leftOut int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lims := make([]*rate.Limiter, 0, len(sources)+1)
	for _, s := range sources {
		lim, found := b.sources.Get(s)
		if !found {
			lim = rate.NewLimiter(rate.Every(RefusalSourceEvery), RefusalSourceBurst)
			b.sources.Add(s, lim)
		}
		lims = append(lims, lim)
	}
	lims = append(lims, b.global)
	for _, lim := range lims {
		if lim.TokensAt(t) < 1 {
			b.leftOut.Add(1)
			return false, 0
		}
	}
	for _, lim := range lims {
		lim.AllowN(t, 1)
	}
	return true, b.leftOut.Swap(0)
}

// unwritten counts n refusals as left out again: a write that failed.
func (b *refusalBudget) unwritten(n int64) { b.leftOut.Add(n) }

// refusalSourcesOf names the sources of a refusal: the established peer,
// the remote address (IPv4, or IPv6 /64), or else the transport.
func refusalSourcesOf(via string, established peer.ID, addr netip.Addr) []string {
	var out []string
	if established != "" {
		out = append(out, "peer "+established.String())
	}
	if addr.IsValid() {
		addr = addr.Unmap()
		if addr.Is6() {
			addr = netip.PrefixFrom(addr, 64).Masked().Addr()
		}
		out = append(out, "addr "+addr.String())
	}
	if len(out) == 0 {
		out = append(out, "via "+via)
	}
	return out
}

// remoteAddrOf is the IP address of a connection to p, if there is one.
func remoteAddrOf(conns network.Network, p peer.ID) netip.Addr {
	if p == "" {
		return netip.Addr{}
	}
	for _, c := range conns.ConnsToPeer(p) {
		ip, err := manet.ToIP(c.RemoteMultiaddr())
		if err != nil {
			continue // a relayed connection has no address of its own
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			return a
		}
	}
	return netip.Addr{}
}
