package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// signedDoc is a minimal capability view of id at seq, signed by signer.
func signedDoc(t testing.TB, id, signer *identity.Identity, seq uint64, caps ...string) *negotiate.Document {
	t.Helper()
	d := &negotiate.Document{IFP: negotiate.Version, AgentID: id.DID(), Seq: seq}
	for _, c := range caps {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: c, Description: "does " + c})
	}
	if _, err := d.Sign(signer, time.Now()); err != nil {
		t.Fatal(err)
	}
	return d
}

func payload(t testing.TB, d *negotiate.Document) []byte {
	t.Helper()
	b, err := encodeAnnouncement(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAnnouncementDecoderRefuses(t *testing.T) {
	id, _ := identity.Generate(nil)
	good := payload(t, signedDoc(t, id, id, 4, "ping"))
	enc, _ := cbor.CoreDetEncOptions().EncMode()
	mk := func(v any) []byte {
		b, err := enc.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	view := func(d *negotiate.Document) []byte { b, _ := json.Marshal(d); return b }
	unsigned := &negotiate.Document{IFP: negotiate.Version, AgentID: id.DID(), Seq: 4,
		Capabilities: []negotiate.Capability{{Name: "ping", Description: "x"}}}
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, gossip.ErrMalformed},
		{"garbage", []byte("\xff\xfe not cbor"), gossip.ErrMalformed},
		{"truncated", good[:len(good)/2], gossip.ErrMalformed},
		{"one byte short", good[:len(good)-1], gossip.ErrMalformed},
		{"trailing bytes", append(slices.Clone(good), 0x00), gossip.ErrMalformed},
		{"oversized", make([]byte, maxAnnouncementSize+1), gossip.ErrTooLarge},
		{"not a map", mk([]any{4, "x"}), gossip.ErrMalformed},
		{"unknown key", mk(map[string]any{"seq": 4, "view": view(unsigned), "extra": 1}), gossip.ErrMalformed},
		{"no view", mk(map[string]any{"seq": 4}), gossip.ErrMalformed},
		{"seq zero", mk(map[string]any{"seq": 0, "view": view(unsigned)}), gossip.ErrMalformed},
		{"view not JSON", mk(map[string]any{"seq": 4, "view": []byte("{nope")}), negotiate.ErrNotAView},
		{"view not IFP-7", mk(map[string]any{"seq": 4, "view": []byte(`{"ifp":6,"agent_id":"x","seq":4,"capabilities":[]}`)}), negotiate.ErrNotAView},
		{"seq differs from the view's", mk(map[string]any{"seq": 5, "view": view(unsigned)}), gossip.ErrMalformed},
		{"unsigned view", mk(map[string]any{"seq": 4, "view": view(unsigned)}), gossip.ErrMalformed},
		{"indefinite length", append([]byte{0xbf}, append(good[1:], 0xff)...), gossip.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeAnnouncement(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "decoding announcement: ") {
				t.Errorf("error %q does not say what failed", err)
			}
		})
	}
	if v, err := decodeAnnouncement(good); err != nil || v.Seq != 4 {
		t.Fatalf("a good payload: %v", err)
	}
	if _, err := verifyAnnouncement(id.PeerID(), good); err != nil {
		t.Fatalf("verifying a good payload: %v", err)
	}
	other, _ := identity.Generate(nil)
	if _, err := verifyAnnouncement(other.PeerID(), good); err == nil {
		t.Fatal("a view verified under another author's key")
	}
}

func FuzzDecodeAnnouncement(f *testing.F) {
	id, _ := identity.Generate(nil)
	d := &negotiate.Document{IFP: negotiate.Version, AgentID: id.DID(), Seq: 3,
		Capabilities: []negotiate.Capability{{Name: "ping", Description: "x"}}}
	if _, err := d.Sign(id, time.Now()); err != nil {
		f.Fatal(err)
	}
	good, err := encodeAnnouncement(d)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/3])
	f.Add([]byte{0xa0})
	f.Add([]byte{0xbf, 0xff})
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeAnnouncement(b)
		if err != nil {
			if v != nil {
				t.Fatal("a view with an error")
			}
			return
		}
		if v.Seq == 0 || v.Signature == nil {
			t.Fatalf("accepted an unsigned or seq-less view: %+v", v)
		}
		_, _ = verifyAnnouncement(id.PeerID(), b)
	})
}

// TestAnnounceBudget: the budget's buckets with an injected clock.
func TestAnnounceBudget(t *testing.T) {
	clock := time.Now()
	b := newAnnounceBudget(30, func() time.Time { return clock })
	key := func() peer.ID { id, _ := identity.Generate(nil); return id.PeerID() }
	fwds := make([]peer.ID, 10)
	for i := range fwds {
		fwds[i] = key()
	}
	// Fresh authors through ten forwarders: each forwarder's share (6),
	// all of them together 30.
	allowed := map[peer.ID]int{}
	total := 0
	for i := range 200 {
		if b.allow(key(), fwds[i%len(fwds)], false) {
			allowed[fwds[i%len(fwds)]]++
			total++
		}
	}
	if total != 30 {
		t.Errorf("%d strangers' announcements allowed at once, want 30", total)
	}
	for f, n := range allowed {
		if n > 6 {
			t.Errorf("forwarder %s got %d, its share is 6", f, n)
		}
	}
	// One stranger: two, then one per five minutes, whatever the forwarders.
	clock = clock.Add(time.Hour)
	author := key()
	n := 0
	for i := range 10 {
		if b.allow(author, fwds[i], false) {
			n++
		}
	}
	if n != strangerAuthorBurst {
		t.Errorf("one stranger got %d, want %d", n, strangerAuthorBurst)
	}
	// A refused stranger gave back what the shared buckets reserved.
	if got := b.strangers.TokensAt(clock); got < 30-strangerAuthorBurst-0.5 {
		t.Errorf("refusals spent the shared bucket: %.1f tokens left", got)
	}
	clock = clock.Add(strangerAuthorEvery)
	if !b.allow(author, fwds[0], false) {
		t.Error("the stranger's bucket did not refill")
	}
	// A known author is not charged to the strangers' buckets.
	known := key()
	for range 40 {
		b.allow(key(), fwds[1], false) // spend forwarder 1's share
	}
	n = 0
	for range 100 {
		if b.allow(known, fwds[1], true) {
			n++
		}
	}
	if n != knownAuthorBurst {
		t.Errorf("a known author got %d through a spent forwarder, want its own burst %d", n, knownAuthorBurst)
	}
	// The tables are bounded.
	for range maxBudgetAuthors + 100 {
		clock = clock.Add(time.Second)
		b.allow(key(), key(), false)
	}
	if b.authors.Len() > maxBudgetAuthors || b.forwarders.Len() > maxBudgetForwarders {
		t.Errorf("tables grew to %d authors and %d forwarders", b.authors.Len(), b.forwarders.Len())
	}
	// gossip_strangers = 0: no stranger at all, known authors still.
	none := newAnnounceBudget(0, func() time.Time { return clock })
	if none.allow(key(), key(), false) || !none.allow(known, key(), true) {
		t.Error("gossip_strangers = 0 let a stranger through, or stopped a known author")
	}
}

// TestAnnounceScoreParamsValid: pubsub accepts the score parameters (it
// validates them only when a router starts).
func TestAnnounceScoreParamsValid(t *testing.T) {
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	params, thresholds := announceScore()
	if _, err := pubsub.NewGossipSub(ctx, h, pubsub.WithPeerScore(params, thresholds)); err != nil {
		t.Fatal(err)
	}
	// The thresholds in announceScore's comment: 4, 5 and 9 invalid
	// announcements cross them (-1 × n²).
	for _, c := range []struct {
		n         float64
		threshold float64
	}{{4, thresholds.GossipThreshold}, {5, thresholds.PublishThreshold}, {9, thresholds.GraylistThreshold}} {
		w := params.Topics[announceTopic].InvalidMessageDeliveriesWeight
		if w*c.n*c.n >= c.threshold || w*(c.n-1)*(c.n-1) < c.threshold {
			t.Errorf("%v invalid announcements do not first cross %v", c.n, c.threshold)
		}
	}
}

// TestAnnouncementKnownByTrustOrCache: with no budget for strangers at
// all, an author the peer cache holds, or one the trust book holds above
// signed (pinned, introduced, document-checked), is still verified; any
// other is ignored before its announcement is decoded.
func TestAnnouncementKnownByTrustOrCache(t *testing.T) {
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pinned, cachedID, stranger := mustID(t), mustID(t), mustID(t)
	st := openTestStore(t)
	knownDoc := signedDoc(t, cachedID, cachedID, 1, "ping")
	a, err := verifyAnnouncement(cachedID.PeerID(), payload(t, knownDoc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutPeer(store.PeerRecord{PeerID: cachedID.PeerID().String(), AgentID: knownDoc.AgentID, Seq: 1,
		DocHash: a.hash, View: a.raw, FetchedAt: time.Now(), ChangedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	g := newAnnouncer(context.Background(), h, config.DiscoveryConfig{GossipStrangers: 0},
		announcerDeps{peers: st, keyRevoked: func(peer.ID) error { return nil },
			trusted: func(p peer.ID) bool { return p == pinned.PeerID() }},
		time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer g.tasks.Close()
	fwd := mustID(t).PeerID()
	for _, c := range []struct {
		name string
		id   *identity.Identity
		seq  uint64
		want pubsub.ValidationResult
	}{
		{"pinned", pinned, 1, pubsub.ValidationAccept},
		{"cached", cachedID, 2, pubsub.ValidationAccept},
		{"stranger", stranger, 1, pubsub.ValidationIgnore},
	} {
		m := strangerMessage(c.id.PeerID(), fwd, payload(t, signedDoc(t, c.id, c.id, c.seq, "ping")))
		if got := g.validate(m); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if g.throttled.Load() != 1 {
		t.Errorf("throttled %d, want the stranger's only", g.throttled.Load())
	}
}

func mustID(t *testing.T) *identity.Identity {
	t.Helper()
	id, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func openTestStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "ifaced.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
