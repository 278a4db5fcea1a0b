package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"
)

// bigView is a signed public view of id at seq whose announcement is
// about target bytes. Shape "schemas": capabilities with long descriptions
// and parameter schemas of many small objects, as a rich agent's view
// might be. Shape "containers": parameters made of empty arrays, the most
// containers per byte JSON allows, which is what a hostile author sends
// (until negotiate.DecodeView bounds containers).
func bigView(tb testing.TB, id *identity.Identity, seq uint64, target int, shape string) *negotiate.Document {
	tb.Helper()
	d := &negotiate.Document{IFP: negotiate.Version, AgentID: id.DID(), Seq: seq}
	desc := strings.Repeat("Looks things up and answers. ", 60)
	for i := 0; i < negotiate.MaxCapabilities; i++ {
		c := negotiate.Capability{Name: fmt.Sprintf("cap.%d", i), Description: desc}
		switch shape {
		case "containers":
			c.Description = "x"
			arrays := make([]any, target/negotiate.MaxCapabilities/3)
			for j := range arrays {
				arrays[j] = []any{}
			}
			c.Parameters = map[string]any{"x": arrays}
		default:
			props := map[string]any{}
			for j := range 60 {
				props[fmt.Sprintf("p%d", j)] = map[string]any{"type": "string", "enum": []any{"a", "b"}}
			}
			c.Parameters = map[string]any{"type": "object", "properties": props}
		}
		d.Capabilities = append(d.Capabilities, c)
		if raw, _ := json.Marshal(d); len(raw) >= target {
			break
		}
	}
	if _, err := d.Sign(id, time.Now()); err != nil {
		tb.Fatal(err)
	}
	return d
}

// noPeers is a peer cache that knows nobody.
type noPeers struct{}

func (noPeers) Peer(string) (store.PeerRecord, error) { return store.PeerRecord{}, store.ErrNotFound }

func (noPeers) PutPeer(store.PeerRecord) (bool, error) { return false, nil }

func (noPeers) DeletePeer(string) error { return nil }

// strangerMessage is a pubsub message as the validator sees it: payload
// published by author, received from forwarder.
func strangerMessage(author, forwarder peer.ID, payload []byte) *pubsub.Message {
	return &pubsub.Message{Message: &pb.Message{From: []byte(author), Data: payload}, ReceivedFrom: forwarder}
}

// BenchmarkStrangerAnnouncement: the validator's cost, per hop, of one
// 900 KB announcement from a key this daemon does not know, as a flood
// from fresh keys makes every hop pay it, and of one just under
// maxAnnouncementSize: "verified" within the budget (a clock that moves on
// ten minutes per announcement refills every bucket; each is decoded and
// verified in full, as every one was before the budget, unless its size
// refuses it first), "over-budget" past it (ignored unread).
//
//	go test ./node/discovery -run '^$' -bench BenchmarkStrangerAnnouncement -benchmem -count=1
func BenchmarkStrangerAnnouncement(b *testing.B) {
	for _, shape := range []string{"schemas", "containers"} {
		for _, size := range []int{900 << 10, maxAnnouncementSize - 8<<10} {
			for _, mode := range []string{"verified", "over-budget"} {
				b.Run(fmt.Sprintf("%s/%dKiB/%s", shape, size>>10, mode), func(b *testing.B) { benchStrangerAnnouncement(b, shape, size, mode) })
			}
		}
	}
}

func benchStrangerAnnouncement(b *testing.B, shape string, size int, mode string) {
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	const keys = 8
	type signed struct {
		author  peer.ID
		payload []byte
	}
	var pool []signed
	for range keys {
		id, _ := identity.Generate(nil)
		// Encoded directly: encodeAnnouncement refuses to publish one over
		// maxAnnouncementSize, a hostile publisher does not.
		raw, _ := json.Marshal(bigView(b, id, 1, size, shape))
		p, err := announceEnc.Marshal(announcement{Seq: 1, View: raw})
		if err != nil {
			b.Fatal(err)
		}
		pool = append(pool, signed{id.PeerID(), p})
	}
	b.Logf("announcement: %d bytes", len(pool[0].payload))
	fwd, _ := identity.Generate(nil)
	clock := time.Now()
	now := func() time.Time { return clock }
	g := newAnnouncer(context.Background(), h, config.DiscoveryConfig{GossipStrangers: 30},
		announcerDeps{peers: noPeers{}, keyRevoked: func(peer.ID) error { return nil }},
		now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer g.tasks.Close()
	if mode == "over-budget" {
		for !g.budget.strangers.AllowN(clock, 1) {
		}
		for g.budget.strangers.AllowN(clock, 1) {
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if mode == "verified" {
			clock = clock.Add(10 * time.Minute)
		}
		s := pool[i%keys]
		g.validate(strangerMessage(s.author, fwd.PeerID(), s.payload))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N-int(g.throttled.Load()))/float64(b.N), "judged/op")
}
