package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// announceTopic is the daemon's GossipSub topic of capability
// announcements (node/discovery/announce.go).
const announceTopic = "/ifaced/capabilities.update/1"

// announcement is one announcement's payload: CBOR {seq, view}, the view
// a signed public view as JSON.
func announcement(t testing.TB, id *identity.Identity, size int) []byte {
	t.Helper()
	d := &negotiate.Document{IFP: 7, AgentID: id.DID(), Seq: 1}
	n := max(1, size/4000)
	for i := range n {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: fmt.Sprintf("cap.n%d", i), Description: strings.Repeat("a", 3900)})
	}
	if _, err := d.Sign(id, time.Now()); err != nil {
		t.Fatal(err)
	}
	view, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	b, err := enc.Marshal(struct {
		Seq  uint64 `cbor:"seq"`
		View []byte `cbor:"view"`
	}{1, view})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// graftWatch is a pubsub tracer that reports when its host grafts a given
// peer onto its mesh of the announcement topic.
type graftWatch struct {
	of      peer.ID
	grafted chan struct{}
	once    sync.Once
}

func (g *graftWatch) Graft(p peer.ID, topic string) {
	if p == g.of && topic == announceTopic {
		g.once.Do(func() { close(g.grafted) })
	}
}
func (*graftWatch) OnNewOutboundStream(peer.ID, protocol.ID) {}
func (*graftWatch) OnClosedOutboundStream(peer.ID)           {}
func (*graftWatch) Join(string)                              {}
func (*graftWatch) Leave(string)                             {}
func (*graftWatch) Prune(peer.ID, string)                    {}
func (*graftWatch) ValidateMessage(*pubsub.Message)          {}
func (*graftWatch) DeliverMessage(*pubsub.Message)           {}
func (*graftWatch) RejectMessage(*pubsub.Message, string)    {}
func (*graftWatch) DuplicateMessage(*pubsub.Message)         {}
func (*graftWatch) ThrottlePeer(peer.ID)                     {}
func (*graftWatch) RecvRPC(*pubsub.RPC)                      {}
func (*graftWatch) SendRPC(*pubsub.RPC, peer.ID)             {}
func (*graftWatch) DropRPC(*pubsub.RPC, peer.ID)             {}
func (*graftWatch) UndeliverableMessage(*pubsub.Message)     {}

// watcher is a GossipSub peer connected to the target alone: what it
// receives from fresh authors is what the target verified and forwarded.
type watcher struct {
	mu   sync.Mutex
	from map[peer.ID]int
	got  chan peer.ID
}

func watch(ctx context.Context, t *testing.T, target *Target) *watcher {
	t.Helper()
	p := NewPeer(t, target)
	g := &graftWatch{of: target.PeerID, grafted: make(chan struct{})}
	ps, err := pubsub.NewGossipSub(ctx, p.Host, pubsub.WithRawTracer(g))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(announceTopic)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := topic.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.grafted:
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher never grafted the target onto its announcement mesh")
	}
	w := &watcher{from: map[peer.ID]int{}, got: make(chan peer.ID, 1024)}
	go func() {
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return
			}
			w.mu.Lock()
			w.from[m.GetFrom()]++
			w.mu.Unlock()
			select {
			case w.got <- m.GetFrom():
			default:
			}
		}
	}()
	return w
}

// await waits until an announcement by author reaches the watcher.
func (w *watcher) await(t *testing.T, author peer.ID) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case a := <-w.got:
			if a == author {
				return
			}
		case <-deadline:
			t.Fatalf("the announcement of %s, an author the owner pinned, never reached the watcher through the target", author)
		}
	}
}

// count is how many announcements of authors reached the watcher.
func (w *watcher) count(authors []*identity.Identity) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range authors {
		n += w.from[a.PeerID()]
	}
	return n
}

// One GossipSub peer publishes large announcements, each from a brand-new
// author (a valid signature by a key nobody knows): ones within the
// announcement size limit, then 900 KB ones. A second peer, connected to
// the target alone, counts what the target forwards; an announcement by
// an author the owner pinned marks the end of the first round (and shows
// that the path works).
func TestAnnouncementFlood(t *testing.T) {
	enabled(t)
	target := Start(t, Options{Gossip: true})
	e := Establish(t, target)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := watch(ctx, t, target)
	attacker := NewPeer(t, target)
	ps, err := pubsub.NewGossipSub(ctx, attacker.Host)
	if err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(announceTopic)
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(topic.ListPeers(), target.PeerID) {
		if time.Now().After(deadline) {
			t.Fatal("the target never joined the announcement topic as the attacker's peer")
		}
		time.Sleep(100 * time.Millisecond) // GossipSub's subscription exchange has no event to wait on
	}
	publish := func(id *identity.Identity, payload []byte) {
		t.Helper()
		if err := topic.Publish(ctx, payload, pubsub.WithSecretKeyAndPeerId(id.LibP2PKey(), id.PeerID())); err != nil {
			t.Fatalf("publishing: %v", err)
		}
	}
	n := scale(40, 400)
	start := time.Now()
	before := target.Measure(t)
	for round, size := range []int{240 << 10, 900 << 10} {
		payloads := make([][]byte, n)
		authors := make([]*identity.Identity, n)
		for i := range n {
			authors[i], _ = identity.Generate(nil)
			payloads[i] = announcement(t, authors[i], size)
		}
		from := target.Measure(t)
		for i := range n {
			publish(authors[i], payloads[i])
		}
		wait, done := context.WithTimeout(ctx, 30*time.Second)
		after := target.WaitQuiet(wait, t)
		done()
		if size <= 256<<10 {
			// Within the size limit the target reads them all, so an
			// announcement by a pinned author after them shows they are
			// done. Past the limit GossipSub drops the attacker's stream at
			// the first one, and nothing more comes through it.
			known, _ := identity.Generate(nil)
			target.Pin(t, known)
			publish(known, announcement(t, known, 4<<10))
			w.await(t, known.PeerID())
		}
		spent := after.CPU - from.CPU
		forwarded := w.count(authors)
		allowed := 6 + 6*int(time.Since(start)/time.Minute+1)
		t.Logf("round %d: %d announcements of %d bytes from fresh authors: CPU +%s (%s each), %d forwarded (the budget of one forwarding peer allows %d)",
			round+1, n, len(payloads[0]), spent.Round(time.Millisecond), (spent / time.Duration(n)).Round(time.Millisecond/10), forwarded, allowed)
		if forwarded > allowed {
			t.Errorf("%d announcements from fresh authors through one peer were forwarded, over its budget of %d", forwarded, allowed)
		}
	}
	holds(t, target, e, before)
}
