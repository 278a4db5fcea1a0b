package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
)

// announceTopic is the daemon's GossipSub topic of capability
// announcements (node/announce.go).
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

// One GossipSub peer publishes large announcements, each from a brand-new
// author (a valid signature by a key nobody knows).
func TestAnnouncementFlood(t *testing.T) {
	enabled(t)
	target := Start(t, Options{Gossip: true})
	e := Establish(t, target)
	attacker := NewPeer(t, target)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	for len(topic.ListPeers()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the target never joined the announcement topic as the attacker's peer")
		}
		time.Sleep(100 * time.Millisecond) // GossipSub's subscription exchange has no event to wait on
	}
	n := scale(40, 400)
	payloads := make([][]byte, n)
	authors := make([]*identity.Identity, n)
	for i := range n {
		authors[i], _ = identity.Generate(nil)
		payloads[i] = announcement(t, authors[i], 900<<10)
	}
	t.Logf("one announcement: %d bytes", len(payloads[0]))
	before := target.Measure(t)
	for i := range n {
		key := authors[i].LibP2PKey()
		if err := topic.Publish(ctx, payloads[i], pubsub.WithSecretKeyAndPeerId(key, authors[i].PeerID())); err != nil {
			t.Fatalf("publishing announcement %d: %v", i, err)
		}
	}
	after := holds(t, target, e, before)
	perMessage := (after.CPU - before.CPU) / time.Duration(n)
	t.Logf("%d announcements from fresh authors: CPU +%s (%s each)", n, (after.CPU - before.CPU).Round(time.Millisecond), perMessage.Round(time.Millisecond/10))
}
