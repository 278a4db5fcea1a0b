package admit

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The budget: per peer, per address (IPv6 by /64) and for the daemon;
// beyond it refusals are counted and the next one written says how many;
// the table of sources is bounded.
func TestRefusalBudget(t *testing.T) {
	t0 := time.Now()
	b := newRefusalBudget()
	a4 := netip.MustParseAddr("192.0.2.7")
	written := 0
	for range 2 * RefusalSourceBurst {
		if ok, _ := b.take(t0, refusalSourcesOf(ViaLibp2p, "peer-a", a4)...); ok {
			written++
		}
	}
	if written != RefusalSourceBurst {
		t.Errorf("one peer wrote %d refusals at once, want %d", written, RefusalSourceBurst)
	}
	// Another key on the same address has nothing left; another address,
	// its own budget. Two addresses in one IPv6 /64 share one.
	if ok, _ := b.take(t0, refusalSourcesOf(ViaLibp2p, "peer-b", a4)...); ok {
		t.Error("a second key on a spent address wrote a refusal")
	}
	v6a, v6b := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2:ffff::9")
	// The next one written, whoever sends it, says how many were left out.
	if ok, left := b.take(t0, refusalSourcesOf(ViaLibp2p, "peer-c", v6a)...); !ok || left != RefusalSourceBurst+1 {
		t.Errorf("a fresh source: written %v, %d left out before it, want %d", ok, left, RefusalSourceBurst+1)
	}
	for range RefusalSourceBurst - 1 {
		b.take(t0, refusalSourcesOf(ViaLibp2p, "peer-c", v6a)...)
	}
	if ok, _ := b.take(t0, refusalSourcesOf(ViaLibp2p, "peer-d", v6b)...); ok {
		t.Error("a second address in a spent IPv6 /64 wrote a refusal")
	}
	// Later, the spent source writes again.
	if ok, left := b.take(t0.Add(RefusalSourceEvery), refusalSourcesOf(ViaLibp2p, "peer-a", a4)...); !ok || left != 1 {
		t.Errorf("after the wait: written %v, %d left out, want 1", ok, left)
	}
	// The daemon's budget bounds many sources; the table stays bounded.
	b = newRefusalBudget()
	written = 0
	for i := range 2 * refusalSources {
		addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if ok, _ := b.take(t0, refusalSourcesOf(ViaLibp2p, peer.ID(fmt.Sprint("p", i)), addr)...); ok {
			written++
		}
	}
	if written != refusalGlobalBurst || b.sources.Len() > refusalSources {
		t.Errorf("%d sources wrote %d refusals at once, table of %d; want %d, at most %d", 2*refusalSources, written, b.sources.Len(), refusalGlobalBurst, refusalSources)
	}
}
