package node

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

func (noPeers) Peer(string) (store.PeerRecord, error)  { return store.PeerRecord{}, store.ErrNotFound }
func (noPeers) PutPeer(store.PeerRecord) (bool, error) { return false, nil }
func (noPeers) DeletePeer(string) error                { return nil }

// strangerMessage is a pubsub message as the validator sees it: payload
// published by author, received from forwarder.
func strangerMessage(author, forwarder peer.ID, payload []byte) *pubsub.Message {
	return &pubsub.Message{Message: &pb.Message{From: []byte(author), Data: payload}, ReceivedFrom: forwarder}
}

// BenchmarkStrangerAnnouncement: the validator's cost, per hop, of one
// 900 KB announcement from a key this daemon does not know, as a flood
// from fresh keys makes every hop pay it.
//
//	go test ./node -run '^$' -bench BenchmarkStrangerAnnouncement -benchmem -count=1
func BenchmarkStrangerAnnouncement(b *testing.B) {
	for _, shape := range []string{"schemas", "containers"} {
		b.Run(shape, func(b *testing.B) { benchStrangerAnnouncement(b, shape) })
	}
}

func benchStrangerAnnouncement(b *testing.B, shape string) {
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
		pool = append(pool, signed{id.PeerID(), payload(b, bigView(b, id, 1, 900<<10, shape))})
	}
	b.Logf("announcement: %d bytes", len(pool[0].payload))
	fwd, _ := identity.Generate(nil)
	g := &announcer{host: h, deps: announcerDeps{peers: noPeers{}, keyRevoked: func(peer.ID) error { return nil }},
		now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: newTasks(context.Background()),
		highWater: map[peer.ID]uint64{}, requerying: map[peer.ID]bool{}}
	defer g.tasks.close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := pool[i%keys]
		g.validate(strangerMessage(s.author, fwd.PeerID(), s.payload))
	}
	b.StopTimer()
	b.ReportMetric(float64(g.accepted.Load()+g.rejected.Load())/float64(b.N), "verified/op")
}
