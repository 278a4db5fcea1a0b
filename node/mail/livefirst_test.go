package mail

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// TestMailGoesToALiveRelayFirst: the relays a message may be left at are
// tried connected ones first, in the document's order, then the others.
// In the document's order alone, the relay that just died (named first)
// cost its dial's timeout before the live one was tried: 5 s when its
// QUIC address is dialled, which nothing answers.
func TestMailGoesToALiveRelayFirst(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { mn.Close() })
	var hs []peer.AddrInfo
	self, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		h, err := mn.GenPeer()
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()})
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Connected to the second and the fourth; the first and third are
	// dead or away.
	for _, i := range []int{1, 3} {
		if err := self.Connect(ctx, hs[i]); err != nil {
			t.Fatal(err)
		}
	}
	mb := newMail(mailDeps{host: self, now: time.Now})
	got := mb.liveFirst(hs)
	want := []peer.AddrInfo{hs[1], hs[3], hs[0], hs[2]}
	if !slices.EqualFunc(got, want, func(a, b peer.AddrInfo) bool { return a.ID == b.ID }) {
		t.Fatalf("order %v, want %v (connected first, each part in the document's order)", ids(got), ids(want))
	}
}

func ids(infos []peer.AddrInfo) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.ID.ShortString())
	}
	return out
}
