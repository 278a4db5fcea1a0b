package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/p2phost"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// loopbackConfig is the default config listening on loopback, on ports the
// system picks.
func loopbackConfig() *config.Config {
	c := config.DefaultConfig()
	c.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	c.API.Listen = "127.0.0.1:0"
	quietDiscovery(c)
	return c
}

// quietDiscovery turns off what a test has not asked for: mDNS multicasts
// on every interface, which tests must not do outside a namespace of
// their own, and the DHT and GossipSub cost goroutines most tests do not
// need. Tests of those switch them on again.
func quietDiscovery(c *config.Config) {
	c.Discovery.MDNS = false
	c.Discovery.DHT = config.DHTOff
	c.Discovery.Gossip = false
}

type testDaemon struct {
	*Node
	home config.Home
	cfg  *config.Config
	id   *identity.Identity
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("IFACED_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startDaemon starts a daemon in a fresh home with cfg (loopback defaults
// when nil).
func startDaemon(t *testing.T, cfg *config.Config) *testDaemon { return startDaemonB(t, cfg) }

func startDaemonB(t testing.TB, cfg *config.Config) *testDaemon {
	t.Helper()
	if cfg == nil {
		cfg = loopbackConfig()
	}
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return restartDaemon(t, &testDaemon{home: h, cfg: cfg, id: id})
}

// restartDaemon starts (again) a daemon in d's home.
func restartDaemon(t testing.TB, d *testDaemon) *testDaemon {
	t.Helper()
	n, err := New(d.cfg, d.id, d.home, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &testDaemon{Node: n, home: d.home, cfg: d.cfg, id: d.id}
}

func connect(t *testing.T, a, b *testDaemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.Connect(ctx, b.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
}

// aliceConfig offers a public capability, one for professionals, and a
// hidden one for close friends; it grants bob (once known) professional.
func aliceConfig(bob peer.ID) *config.Config {
	c := loopbackConfig()
	c.Identity.Display = "Alice's agent"
	one := 1
	c.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "calendar.availability", "description": "Share calendar availability windows",
			"conditions": map[string]any{"min_disclosure": "professional", "min_auth_level": one}},
		{"name": "diary.read", "description": "Read the diary", "advertise": "when-eligible",
			"conditions": map[string]any{"min_disclosure": "close"}},
	}
	if bob != "" {
		c.Disclosure.Personas = map[string]map[string]string{"default": {bob.String(): "professional"}}
	}
	return c
}

func TestNodeStartsOnLoopback(t *testing.T) {
	d := startDaemon(t, nil)
	var tcp, quic bool
	for _, a := range d.Addrs() {
		s := a.String()
		tcp = tcp || strings.Contains(s, "/tcp/")
		quic = quic || strings.Contains(s, "/quic-v1/")
		if !strings.HasSuffix(s, "/p2p/"+d.id.PeerID().String()) {
			t.Errorf("address %s does not end in the peer ID", s)
		}
	}
	if !tcp || !quic {
		t.Errorf("listening on %v, want TCP and QUIC", d.Addrs())
	}
	if d.Host().ID() != d.id.PeerID() {
		t.Errorf("host peer ID %s, key's %s", d.Host().ID(), d.id.PeerID())
	}
	if err := d.Document().Verify(d.id.PublicKey()); err != nil {
		t.Errorf("the node's own document: %v", err)
	}
}

func TestGreetingViewsDifferPerPeer(t *testing.T) {
	bobID, _ := identity.Generate(nil)
	alice := startDaemon(t, aliceConfig(bobID.PeerID()))
	bobHome := config.Home{Dir: filepath.Join(t.TempDir(), "bob")}
	if err := os.MkdirAll(bobHome.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	identity.SaveKey(bobHome.KeyPath(), bobID)
	bob := restartDaemon(t, &testDaemon{home: bobHome, cfg: loopbackConfig(), id: bobID})
	carol := startDaemon(t, nil)
	connect(t, bob, alice)
	connect(t, carol, alice)
	ctx := context.Background()

	rb, err := bob.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{Disclosure: "personal", Temperature: "warm"})
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.CapNames(rb.View); got != "+ping +calendar.availability" {
		t.Errorf("bob sees %q", got)
	}
	if rb.GrantedToUs.Disclosure != "professional" || rb.GrantedToUs.DisclosureOutcome != negotiate.OutcomeLowered || rb.GrantedToUs.Temperature != "cool" {
		t.Errorf("alice granted bob %+v", rb.GrantedToUs)
	}
	rc, err := carol.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.CapNames(rc.View); got != "+ping -calendar.availability" {
		t.Errorf("carol sees %q", got)
	}
	cal, _ := rc.View.Capability("calendar.availability")
	if len(cal.Unmet) != 1 || cal.Unmet[0].Required != "professional" || cal.Unmet[0].Have != "public" {
		t.Errorf("carol is not told how to reach calendar.availability: %+v", cal.Unmet)
	}

	// Each side cached the other's verified view.
	for _, tc := range []struct {
		who  *testDaemon
		peer *testDaemon
	}{{bob, alice}, {alice, bob}, {carol, alice}, {alice, carol}} {
		rec, err := tc.who.Store().Peer(tc.peer.id.PeerID().String())
		if err != nil {
			t.Errorf("%s has no cache entry for %s: %v", tc.who.id.PeerID(), tc.peer.id.PeerID(), err)
			continue
		}
		if rec.Seq != tc.peer.Document().Seq {
			t.Errorf("cached seq %d, peer's %d", rec.Seq, tc.peer.Document().Seq)
		}
	}
	// Nothing of the hidden capability reached carol: not the view, not the cache, not the audit.
	raw, _ := os.ReadFile(filepath.Join(carol.home.Dir, "ifaced.db"))
	if strings.Contains(string(raw), "diary") {
		t.Error("carol's store holds the hidden capability's name")
	}
	entries, err := carol.Audit().Entries(rc.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Direction != gossip.Sent || entries[1].Direction != gossip.Received {
		t.Fatalf("carol's audit has %d entries", len(entries))
	}
	for _, e := range entries {
		j, _ := gossip.EncodeJSON(e.Message)
		if strings.Contains(string(j), "diary") {
			t.Error("carol's audit holds the hidden capability's name")
		}
	}
	// Alice's side audited the same two messages.
	aliceEntries, err := alice.Audit().Entries(rc.ConversationID)
	if err != nil || len(aliceEntries) != 2 {
		t.Fatalf("alice's audit of carol's conversation: %d entries, %v", len(aliceEntries), err)
	}
	if err := alice.Audit().Flush(); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(alice.home.Dir, "audit", aliceEntries[0].At.Format("2006-01-02"), carol.id.PeerID().String()+".md"))
	if err != nil || !strings.Contains(string(md), "phase: greeting") || !strings.Contains(string(md), "conversation "+rc.ConversationID) {
		t.Errorf("alice's human-readable audit: %v\n%s", err, md)
	}
}

func TestConversationPhasesAndUpdatePush(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	evs, stop := bob.Subscribe()
	defer stop()
	aliceEvents, stopAlice := alice.Subscribe()
	defer stopAlice()

	r, err := bob.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	seq := r.View.Seq
	waitEvent(t, aliceEvents, func(e events.Event) bool { return e.Type == events.EventConversation && e.Detail == "open" })

	// A context message reaches alice's local agent.
	if _, err := bob.Say(r.ConversationID, gossip.PhaseContext, "Here's what's current."); err != nil {
		t.Fatal(err)
	}
	e := waitEvent(t, aliceEvents, func(e events.Event) bool {
		return e.Type == events.EventMessage && e.Message.Headers.Phase == gossip.PhaseContext
	})
	if e.Message.Body.Text != "Here's what's current." || e.Message.Headers.Sequence != 3 {
		t.Errorf("alice got %q at sequence %d", e.Message.Body.Text, e.Message.Headers.Sequence)
	}

	// Alice adds a capability: bob, in conversation, gets the new view.
	_, err = alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "doc.summarize", Description: "Summarize a document"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, evs, func(e events.Event) bool {
		return e.Type == events.EventPeerView && e.Peer == alice.id.PeerID().String() && strings.HasPrefix(e.Detail, fmt.Sprintf("seq %d,", seq+1))
	})
	rec, err := bob.Store().Peer(alice.id.PeerID().String())
	if err != nil || rec.Seq != seq+1 || !strings.Contains(string(rec.View), "doc.summarize") {
		t.Fatalf("bob's cache after the push: seq %d (want %d), %v", rec.Seq, seq+1, err)
	}

	// Bob closes; both sides forget the conversation.
	if _, err := bob.Say(r.ConversationID, gossip.PhaseClose, "Closing this exchange."); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, aliceEvents, func(e events.Event) bool { return e.Type == events.EventConversation && e.Detail == "closed" })
	if _, err := bob.Say(r.ConversationID, gossip.PhaseContext, "more"); err == nil {
		t.Error("said something after close")
	}
}

func TestCacheAndSeqSurviveRestart(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	if _, err := bob.Greet(context.Background(), alice.id.PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	before, err := bob.Store().Peer(alice.id.PeerID().String())
	if err != nil {
		t.Fatal(err)
	}
	bob.Close()
	bob = restartDaemon(t, bob)
	after, err := bob.Store().Peer(alice.id.PeerID().String())
	if err != nil || after.Seq != before.Seq || after.DocHash != before.DocHash {
		t.Fatalf("cache after restart: %+v, %v", after, err)
	}

	// Alice's seq is kept when her document is unchanged and raised when it changes.
	seq := alice.Document().Seq
	alice.Close()
	alice = restartDaemon(t, alice)
	if alice.Document().Seq != seq {
		t.Fatalf("unchanged document: seq %d after restart, was %d", alice.Document().Seq, seq)
	}
	alice.Close()
	alice.cfg.Capabilities = alice.cfg.Capabilities[:1]
	alice = restartDaemon(t, alice)
	if alice.Document().Seq != seq+1 {
		t.Fatalf("changed document: seq %d after restart, want %d", alice.Document().Seq, seq+1)
	}
}

func waitEvent(t *testing.T, ch <-chan events.Event, match func(events.Event) bool) events.Event {
	t.Helper()
	return waitEventFor(t, 10*time.Second, ch, match)
}

// waitEventFor waits up to d for an event matching match.
func waitEventFor(t *testing.T, d time.Duration, ch <-chan events.Event, match func(events.Event) bool) events.Event {
	t.Helper()
	return testkit.WaitFirst(t, d, ch, match)
}

// rawPeer is a bare libp2p host that speaks ifaced's protocols by hand, to
// send what a well-behaved daemon never would.
type rawPeer struct {
	host.Host
	id *identity.Identity
}

func newRawPeer(t *testing.T, target *testDaemon) *rawPeer {
	t.Helper()
	id, _ := identity.Generate(nil)
	h, err := libp2p.New(libp2p.Identity(id.LibP2PKey()), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: target.id.PeerID(), Addrs: target.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	return &rawPeer{Host: h, id: id}
}

// greeting returns a signed greeting from r to target.
func (r *rawPeer) greeting(target *testDaemon, signer *identity.Identity) *gossip.Message {
	now := time.Now()
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: r.id.DID()}, To: []gossip.Agent{{Agent: target.id.DID()}},
		ConversationID: gossip.NewID("conv", now), Sequence: 1, Phase: gossip.PhaseGreeting,
		ContentType: gossip.DefaultContentType,
	}, Body: gossip.Body{Text: "hello"}}
	if signer != nil {
		if err := m.Sign(signer, now); err != nil {
			panic(err)
		}
	}
	return m
}

// exchange opens a stream, writes raw bytes, and reads the one answer.
func (r *rawPeer) exchange(t *testing.T, target *testDaemon, proto string, payload []byte) (*gossip.Message, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := r.NewStream(ctx, target.id.PeerID(), protocol.ID(proto))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	s.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.Write(payload); err != nil {
		return nil, err
	}
	return gossip.ReadMessage(bufio.NewReader(s))
}

func frame(t *testing.T, m *gossip.Message) []byte {
	t.Helper()
	var b strings.Builder
	if err := gossip.WriteMessage(&b, m); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

func errorCode(t *testing.T, m *gossip.Message) wire.Code {
	t.Helper()
	if m.Headers.Phase != gossip.PhaseError {
		t.Fatalf("answer is %s, want error", m.Headers.Phase)
	}
	body, ok := converse.ErrorBody(m)
	if !ok {
		t.Fatalf("error message without an error part: %+v", m.Body)
	}
	if body.Hint == "" || body.Message == "" {
		t.Errorf("error %s does not say what would work: %+v", body.Code, body)
	}
	return body.Code
}

func TestBadInputGetsAnErrorPhase(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	raw := newRawPeer(t, alice)
	other, _ := identity.Generate(nil)

	good := raw.greeting(alice, raw.id)
	oversized := []byte{0x81, 0x80, 0x80, 0x01} // announces 2 MiB + 1
	v5 := raw.greeting(alice, nil)
	v5.IFP = 5
	v5bytes, _ := cborEncodeUnchecked(v5)
	cases := []struct {
		name    string
		payload []byte
		want    wire.Code
	}{
		{"unsigned", frame(t, raw.greeting(alice, nil)), wire.CodeInvalidSignature},
		{"signed by another key", frame(t, raw.greeting(alice, other)), wire.CodeWrongKey},
		{"not a greeting first", frame(t, func() *gossip.Message {
			m := raw.greeting(alice, nil)
			m.Headers.Phase = gossip.PhaseProbe
			m.Sign(raw.id, time.Now())
			return m
		}()), wire.CodeOutOfSequence},
		{"stale date", frame(t, func() *gossip.Message {
			m := raw.greeting(alice, nil)
			m.Headers.Date = gossip.FormatDate(time.Now().Add(-48 * time.Hour))
			m.Sign(raw.id, time.Now())
			return m
		}()), wire.CodeReplay},
		{"garbage CBOR", []byte{0x03, 0xff, 0x00, 0x13}, wire.CodeInvalidFormat},
		{"oversized frame", oversized, wire.CodePayloadTooLarge},
		{"unknown version", withFrame(v5bytes), wire.CodeUnsupportedVersion},
		{"first use of a greeting", frame(t, good), ""},
		{"replayed greeting", frame(t, good), wire.CodeReplay},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := raw.exchange(t, alice, string(wire.Conversation), tc.payload)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if err := m.Verify(alice.id.PublicKey()); err != nil {
				t.Errorf("answer not signed by alice: %v", err)
			}
			if tc.want == "" {
				if m.Headers.Phase != gossip.PhaseGreeting {
					t.Fatalf("answer %s, want greeting", m.Headers.Phase)
				}
				return
			}
			if got := errorCode(t, m); got != tc.want {
				t.Errorf("code %s, want %s", got, tc.want)
			}
		})
	}
}

func withFrame(b []byte) []byte {
	var out strings.Builder
	gossip.WriteFrame(&out, b)
	return []byte(out.String())
}

func TestSilentPeerHitsDeadline(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Limits.StreamTimeout = config.Duration{Duration: 300 * time.Millisecond}
	alice := startDaemon(t, cfg)
	raw := newRawPeer(t, alice)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := raw.NewStream(ctx, alice.id.PeerID(), wire.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	_, err = s.Read(make([]byte, 1))
	if err == nil {
		t.Fatal("a silent stream was answered with data")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("alice never closed the silent stream (waited %s)", time.Since(start))
	}
	if !errors.Is(err, network.ErrReset) && !errors.Is(err, io.EOF) {
		t.Logf("stream ended with %v", err)
	}
}

func TestStaleUpdateRefused(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	raw := newRawPeer(t, alice)
	view := func(seq uint64) any {
		d := &negotiate.Document{IFP: 7, AgentID: raw.id.DID(), Seq: seq,
			Capabilities: []negotiate.Capability{{Name: "ping", Description: fmt.Sprintf("version %d", seq)}}}
		if _, err := d.Sign(raw.id, time.Now()); err != nil {
			t.Fatal(err)
		}
		return negotiate.MustJSONValue(d)
	}
	g := raw.greeting(alice, nil)
	g.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: negotiate.PartCapabilities, Content: view(5)}}
	g.Sign(raw.id, time.Now())
	// The conversation stays open while the updates arrive.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := raw.NewStream(ctx, alice.id.PeerID(), wire.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Reset()
	cs.Write(frame(t, g))
	if m, err := gossip.ReadMessage(bufio.NewReader(cs)); err != nil || m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("greeting with seq 5: %v %v", m, err)
	}
	update := func(seq uint64) *gossip.Message {
		now := time.Now()
		m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
			MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
			From: gossip.Agent{Agent: raw.id.DID()}, To: []gossip.Agent{{Agent: alice.id.DID()}},
			ConversationID: g.Headers.ConversationID, Sequence: int64(seq), Phase: gossip.PhaseContext,
			ContentType: gossip.DefaultContentType,
		}, Body: gossip.Body{Parts: []gossip.Part{{ContentType: "application/json", Name: negotiate.PartCapabilities, Content: view(seq)}}}}
		m.Sign(raw.id, now)
		return m
	}
	m, err := raw.exchange(t, alice, string(wire.Update), frame(t, update(3)))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeStaleSeq {
		t.Fatalf("update to seq 3 after 5: %s", code)
	}
	m, err = raw.exchange(t, alice, string(wire.Update), frame(t, update(6)))
	if err != nil || m.Headers.Phase != gossip.PhaseContext {
		t.Fatalf("update to seq 6: %v %v", m, err)
	}
	rec, err := alice.Store().Peer(raw.id.PeerID().String())
	if err != nil || rec.Seq != 6 {
		t.Fatalf("alice holds seq %d (%v), want 6", rec.Seq, err)
	}
	// An update in no open conversation is refused.
	stray := update(7)
	stray.Headers.ConversationID = "conv:none"
	stray.Security = nil
	stray.Sign(raw.id, time.Now())
	m, err = raw.exchange(t, alice, string(wire.Update), frame(t, stray))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeOutOfSequence {
		t.Fatalf("update outside a conversation: %s", code)
	}
}

// cborEncodeUnchecked encodes a message that would not validate, to test
// how the daemon answers it.
func cborEncodeUnchecked(m *gossip.Message) ([]byte, error) { return cborMarshal(m) }

// TestGreetAgainWithRaisedContext: a second greeting with the same peer
// under a higher grant is another view of the same document seq; the cache
// takes it.
func TestGreetAgainWithRaisedContext(t *testing.T) {
	bob := startDaemon(t, nil)
	alice := startDaemon(t, func() *config.Config {
		c := aliceConfig(bob.id.PeerID())
		c.Disclosure.Personas["default"][bob.id.PeerID().String()] = "close"
		return c
	}())
	connect(t, bob, alice)
	ctx := context.Background()
	first, err := bob.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{Disclosure: "public"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := bob.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{Disclosure: "close"})
	if err != nil {
		t.Fatal(err)
	}
	if testkit.CapNames(first.View) != "+ping -calendar.availability" || testkit.CapNames(second.View) != "+ping +calendar.availability +diary.read" {
		t.Fatalf("views %q then %q", testkit.CapNames(first.View), testkit.CapNames(second.View))
	}
	rec, err := bob.Store().Peer(alice.id.PeerID().String())
	if err != nil || !strings.Contains(string(rec.View), "diary.read") {
		t.Fatalf("the cache kept the first view: %v", err)
	}
}

// TestHiddenChangeIsNotPushed: a change to a capability the peer cannot
// see sends it nothing.
func TestHiddenChangeIsNotPushed(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	r, err := bob.Greet(context.Background(), alice.pid(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "vault.open", Description: "x", Advertise: negotiate.AdvertiseWhenEligible,
			Conditions: &conditions.Conditions{MinDisclosure: "close"}})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A visible change afterwards is pushed; the hidden one before it was not.
	evs, stop := bob.Subscribe()
	defer stop()
	if _, err := alice.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "weather.now", Description: "x"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, evs, func(e events.Event) bool {
		return e.Type == events.EventPeerView && strings.HasPrefix(e.Detail, "seq 3,")
	})
	entries, err := bob.Audit().Entries(r.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	updates := 0
	for _, e := range entries {
		if e.Direction == gossip.Received && e.Message.Headers.Subject == "capability update" {
			updates++
		}
	}
	if updates != 1 {
		t.Fatalf("bob received %d updates, want only the visible one", updates)
	}
}

// A listen address another daemon holds is refused at start, naming the
// address and the process; TCP (which go-libp2p would share through
// SO_REUSEPORT) and QUIC alike.
func TestListenAddressInUseRefused(t *testing.T) {
	first := startDaemon(t, nil)
	checked := 0
	for _, a := range first.Host().Network().ListenAddresses() {
		if _, _, ok := p2phost.BoundAddr(a.String()); !ok {
			continue // the circuit address
		}
		checked++
		cfg := loopbackConfig()
		cfg.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0", a.String()}
		h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
		id, err := h.Init(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(cfg, id, h, testLogger(t))
		if err == nil {
			n.Close()
			t.Fatalf("a second daemon started on %s, which the first holds", a)
		}
		if !errors.Is(err, p2phost.ErrAddressInUse) || !strings.Contains(err.Error(), a.String()) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
			t.Fatalf("on %s: %v, want ErrAddressInUse naming the address and this process", a, err)
		}
	}
	if checked != 2 {
		t.Fatalf("checked %d addresses, want TCP and QUIC", checked)
	}
}

// TestGreetingAPeerThatIsNoDaemon: greeting a libp2p peer that speaks no
// ifaced protocol (a relay, a DHT node) fails with an error that says so
// and what would work, and that errors.Is p2phost.ErrProtocolNotSupported
// (before: the bare "protocols not supported: [/ifp/4/conversation/1.0.0]").
func TestGreetingAPeerThatIsNoDaemon(t *testing.T) {
	alice := startDaemon(t, nil)
	raw := newRawPeer(t, alice)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := alice.Greet(ctx, raw.ID(), negotiate.Proposal{})
	if err == nil {
		t.Fatal("greeting a host without ifaced's protocols succeeded")
	}
	t.Logf("greeting a host without ifaced: %v", err)
	if !errors.Is(err, p2phost.ErrProtocolNotSupported) {
		t.Errorf("the error does not say the protocol is not supported (errors.Is): %v", err)
	}
	for _, want := range []string{"does not speak " + string(wire.Conversation), "not an ifaced daemon", "ifaced peers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}
