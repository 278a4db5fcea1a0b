package converse

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// streamPair opens n streams from one mocknet peer to another and returns
// the opener's ends, and a channel on which the other side reports each
// stream's end (the opener closed it).
func streamPair(t *testing.T, n int) (peer.ID, []*wire.Stream, <-chan struct{}) {
	t.Helper()
	net, err := mocknet.FullMeshConnected(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	a, b := net.Hosts()[0], net.Hosts()[1]
	ended := make(chan struct{}, n)
	b.SetStreamHandler(wire.Capabilities, func(s network.Stream) {
		io.Copy(io.Discard, s) // until the opener closes
		s.Close()
		ended <- struct{}{}
	})
	var out []*wire.Stream
	for range n {
		s, err := a.NewStream(context.Background(), b.ID(), wire.Capabilities)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, wire.NewStream(s, time.Minute))
	}
	return b.ID(), out, ended
}

// The kept query streams are bounded: past the bound, and for a peer that
// has one kept already, a stream is closed instead of kept; a kept stream
// is handed out once.
func TestKeptQueriesBounded(t *testing.T) {
	pid, streams, ended := streamPair(t, 3)
	k := newKeptQueries(time.Hour, 1)
	k.put(pid, streams[0])
	k.put(pid, streams[1]) // pid has one kept
	<-ended
	k.put("other", streams[2]) // no room
	<-ended
	if got := k.take(pid); got != streams[0] {
		t.Fatalf("take: %v, want the stream kept first", got)
	}
	if got := k.take(pid); got != nil {
		t.Errorf("a second take: %v, want none", got)
	}
	k.put(pid, streams[0])
	k.closeAll()
	<-ended
	if got := k.take(pid); got != nil {
		t.Errorf("take after closeAll: %v, want none", got)
	}
}

// A kept stream left idle is closed by its keeper, and is no longer
// handed out.
func TestKeptQueryClosedWhenIdle(t *testing.T) {
	pid, streams, ended := streamPair(t, 1)
	k := newKeptQueries(10*time.Millisecond, 4)
	k.put(pid, streams[0])
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle kept stream was not closed")
	}
	if got := k.take(pid); got != nil {
		t.Errorf("take after the idle close: %v, want none", got)
	}
}

// The query streams peers keep open to this daemon are bounded, and
// strangers hold at most half of them: a flood of fresh keys leaves room
// for the owner's peers.
func TestKeptSlotsStrangersHalf(t *testing.T) {
	k := &keptSlots{max: 4}
	for i := range 2 {
		if !k.take(true) {
			t.Fatalf("stranger %d found no slot of 4 with %d taken", i+1, i)
		}
	}
	if k.take(true) {
		t.Fatal("a third stranger took a slot: strangers hold at most half")
	}
	for i := range 2 {
		if !k.take(false) {
			t.Fatalf("known peer %d found no slot with strangers holding their half", i+1)
		}
	}
	if k.take(false) {
		t.Fatal("a fifth stream took a slot of 4")
	}
	k.give(true)
	if k.take(false) != true {
		t.Error("a known peer found no slot after a stranger's was given back")
	}
	if k.take(true) {
		t.Error("a stranger took a slot with all 4 taken")
	}
}
