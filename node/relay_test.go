package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/peerid"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/mail"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/multiformats/go-multiaddr"
)

// startWith starts a daemon in a fresh home with options.
func startWith(t *testing.T, cfg *config.Config, opts ...Option) *testDaemon {
	t.Helper()
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return restartWith(t, &testDaemon{home: h, cfg: cfg, id: id}, opts...)
}

func restartWith(t *testing.T, d *testDaemon, opts ...Option) *testDaemon {
	t.Helper()
	n, err := New(d.cfg, d.id, d.home, testLogger(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &testDaemon{Node: n, home: d.home, cfg: d.cfg, id: d.id}
}

// relayConfig serves circuit relay v2 and mailboxes on loopback.
func relayConfig() *config.Config {
	c := loopbackConfig()
	c.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"}
	c.Relay.Service = true
	return c
}

// natConfig listens on nothing: the daemon can only be reached through
// the relays it reserves slots on.
func natConfig(relays ...*testDaemon) *config.Config {
	c := loopbackConfig()
	c.Listen.Addresses = nil
	for _, r := range relays {
		c.Relay.Use = append(c.Relay.Use, r.Addrs()[0].String())
	}
	return c
}

// tcpOnly drops QUIC: dialling a closed QUIC port waits out the
// handshake timeout (nothing answers UDP), which tests of peers that went
// away would otherwise spend seconds on.
func tcpOnly(c *config.Config) *config.Config {
	c.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"}
	return c
}

// waitGone waits until d has noticed that gone closed.
func waitGone(t *testing.T, d, gone *testDaemon) {
	t.Helper()
	// NotConnected, not merely not Connected: a relayed connection is
	// Limited while it lasts.
	testkit.WaitFor(t, "the peer's connections to close", func() bool {
		return d.Host().Network().Connectedness(gone.id.PeerID()) == network.NotConnected
	})

}

func holdsSlots(d *testDaemon, relays ...*testDaemon) func() bool {
	return func() bool {
		got := d.Mail().RelayReservations()
		for _, r := range relays {
			if !slices.Contains(got, r.id.PeerID()) {
				return false
			}
		}
		return true
	}
}

func circuitAddr(relay, target *testDaemon) string {
	return fmt.Sprintf("%s/p2p-circuit/p2p/%s", relay.Addrs()[0], target.id.PeerID())
}

// limitedVia reports whether every connection from d to pid is relayed
// by relay.
func limitedVia(d *testDaemon, pid peer.ID, relay *testDaemon) bool {
	conns := d.Host().Network().ConnsToPeer(pid)
	if len(conns) == 0 {
		return false
	}
	for _, c := range conns {
		if !c.Stat().Limited || !strings.Contains(c.RemoteMultiaddr().String(), relay.id.PeerID().String()) {
			return false
		}
	}
	return true
}

func TestConversationThroughRelayAndRecoveryThroughSecondRelay(t *testing.T) {
	r1, r2 := startDaemon(t, relayConfig()), startDaemon(t, relayConfig())
	bob := startDaemon(t, natConfig(r1, r2))
	alice := startDaemon(t, aliceConfig(bob.id.PeerID()))
	testkit.WaitFor(t, "bob's slots on both relays", holdsSlots(bob, r1, r2))

	// Bob listens on nothing: his addresses are his circuits, and his
	// document names both relays.
	for _, a := range bob.Host().Addrs() {
		if !strings.Contains(a.String(), "/p2p-circuit") {
			t.Fatalf("bob advertises a direct address %s", a)
		}
	}
	if prefs := bob.Document().Relay; prefs == nil || len(prefs.URLs) != 2 {
		t.Fatalf("bob's document relay preferences = %+v, want both relays", prefs)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := alice.Connect(ctx, circuitAddr(r1, bob)); err != nil {
		t.Fatal(err)
	}
	bobEvents, stop := bob.Subscribe()
	defer stop()
	res, err := alice.Greet(ctx, bob.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatalf("greeting through the relay: %v", err)
	}
	if !limitedVia(alice, bob.id.PeerID(), r1) {
		t.Fatal("alice's connection to bob is not relayed by r1")
	}
	if testkit.CapNames(res.View) == "" {
		t.Fatal("bob's view through the relay is empty")
	}
	// A whole conversation: context, probe, a capability request, close.
	for _, phase := range []gossip.Phase{gossip.PhaseContext, gossip.PhaseProbe} {
		m, err := alice.Say(res.ConversationID, phase, "through the relay: "+string(phase))
		if err != nil {
			t.Fatalf("saying %s: %v", phase, err)
		}
		waitEvent(t, bobEvents, func(e events.Event) bool {
			return e.Type == events.EventMessage && e.Message != nil && e.Message.Headers.MessageID == m.Headers.MessageID
		})
	}
	if _, err := bob.Invoke(ctx, alice.id.PeerID(), "calendar.availability", nil); err == nil || !strings.Contains(err.Error(), "agent") {
		// Alice has no local agent: the request crosses the relay and
		// comes back as agent_unavailable, which proves the round trip.
		t.Fatalf("bob invoking alice's calendar through the relay: %v, want agent_unavailable", err)
	}
	// ping alice's daemon answers itself (standardAnswers), agent or not.
	if res, err := bob.Invoke(ctx, alice.id.PeerID(), "ping", nil); err != nil || res.Result != "pong" {
		t.Fatalf("bob invoking alice's ping through the relay: %+v, %v, want pong", res, err)
	}
	if _, err := alice.Say(res.ConversationID, gossip.PhaseClose, "bye"); err != nil {
		t.Fatal(err)
	}

	// A second conversation, then r1 goes away.
	res2, err := alice.Greet(ctx, bob.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	r1.Close()
	testkit.WaitFor(t, "the conversation over r1 to end", func() bool { _, held := alice.convs.Holds(res2.ConversationID); return !held })
	testkit.WaitFor(t, "bob to notice r1 is gone", func() bool { return !slices.Contains(bob.Mail().RelayReservations(), r1.id.PeerID()) })

	// Alice's next message finds bob through r2 with no new address.
	sent, err := alice.Send(ctx, bob.id.PeerID(), "still there?")
	if err != nil {
		t.Fatalf("sending after r1 died: %v", err)
	}
	if sent.Delivered != "conversation" {
		t.Fatalf("sent = %+v, want delivered in a conversation", sent)
	}
	waitEvent(t, bobEvents, func(e events.Event) bool {
		return e.Type == events.EventMessage && e.Message != nil && e.Message.Headers.MessageID == sent.MessageID
	})
	if !limitedVia(alice, bob.id.PeerID(), r2) {
		t.Fatal("alice's new connection to bob is not relayed by r2")
	}
}

// mailSetup: a relay with mailboxes, bob holding a slot on it (and
// listening directly, so alice can greet him once), alice who has bob's
// view cached.
func mailSetup(t *testing.T, opts ...Option) (relay, alice, bob *testDaemon) {
	t.Helper()
	relay = startDaemon(t, relayConfig())
	bc := tcpOnly(loopbackConfig())
	bc.Relay.Use = []string{relay.Addrs()[0].String()}
	bob = startDaemon(t, bc)
	alice = startWith(t, aliceConfig(bob.id.PeerID()), opts...)
	testkit.WaitFor(t, "bob's slot on the relay", holdsSlots(bob, relay))
	testkit.WaitFor(t, "bob's mailbox at the relay", mailboxOpen(relay, bob.id.PeerID()))
	connect(t, alice, bob)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := alice.QueryCapabilities(ctx, bob.id.PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	return relay, alice, bob
}

// mailboxOpen reports whether relay holds a mailbox for pid (registered
// by its fetch once it held a slot).
func mailboxOpen(relay *testDaemon, pid peer.ID) func() bool {
	return func() bool {
		ok, _ := relay.Store().Mailboxes().MailboxOpen(pid.String(), relay.now().Add(-relay.cfg.Mailbox.Idle.Duration))
		return ok
	}
}

func TestMailboxDeliversToPeerThatWasAway(t *testing.T) {
	relay, alice, bob := mailSetup(t)
	bob.Close()
	waitGone(t, alice, bob)

	aliceEvents, stop := alice.Subscribe()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sent, err := alice.Send(ctx, bob.id.PeerID(), "Call me when you are back.")
	if err != nil {
		t.Fatal(err)
	}
	if sent.Delivered != "queued" {
		t.Fatalf("sent = %+v, want queued", sent)
	}
	waitEvent(t, aliceEvents, func(e events.Event) bool {
		return e.Type == events.EventMail && strings.Contains(e.Detail, "left at relay")
	})
	if items, _ := alice.Mail().Outbox(); len(items) != 0 {
		t.Fatalf("outbox after delivery to the relay: %+v", items)
	}
	held, _, err := relay.Store().Mailboxes().Mail(bob.id.PeerID().String(), time.Now(), 10, 1<<20)
	if err != nil || len(held) != 1 {
		t.Fatalf("relay holds %d messages for bob (%v), want 1", len(held), err)
	}

	// Bob comes back: he reserves his slot again and fetches his mail.
	bob = restartDaemon(t, bob)
	bobEvents, stopBob := bob.Subscribe()
	defer stopBob()
	var got *gossip.Message
	for got == nil {
		e := waitEvent(t, bobEvents, func(e events.Event) bool { return e.Type == events.EventMessage || e.Type == events.EventRefused })
		if e.Type == events.EventRefused {
			t.Fatalf("bob refused his mail: %s", e.Detail)
		}
		got = e.Message
	}
	if got.Headers.MessageID != sent.MessageID || got.Body.Text != "Call me when you are back." {
		t.Fatalf("bob got %s %q", got.Headers.MessageID, got.Body.Text)
	}
	tr := got.Trace
	if tr == nil || len(tr.Received) != 1 || tr.Received[0].By != "relay:/p2p/"+relay.id.PeerID().String() ||
		tr.Received[0].From != alice.id.PeerID().String() {
		t.Fatalf("trace = %+v, want one entry by the relay from alice", tr)
	}
	pub, _ := identity.PublicKeyFromPeerID(alice.id.PeerID())
	if err := got.Verify(pub); err != nil {
		t.Fatalf("the delivered message does not verify: %v", err)
	}
	// Audited with its trace, and acknowledged at the relay.
	convs, err := bob.Audit().Conversations()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(convs, func(c gossip.AuditConversation) bool { return c.ID == got.Headers.ConversationID }) {
		t.Fatalf("bob's audit log has no conversation %s", got.Headers.ConversationID)
	}
	testkit.WaitFor(t, "the relay to drop acknowledged mail", func() bool {
		held, _, _ := relay.Store().Mailboxes().Mail(bob.id.PeerID().String(), time.Now(), 10, 1<<20)
		return len(held) == 0
	})

}

func TestOutboxRetriesAcrossRestartUntilTheRecipientRegisters(t *testing.T) {
	relay := startDaemon(t, relayConfig())
	bc := tcpOnly(loopbackConfig())
	bc.Relay.Use = []string{relay.Addrs()[0].String()}
	bc.Mailbox.Poll = config.Duration{Duration: 100 * time.Millisecond}
	bob := startDaemon(t, bc)
	alice := startWith(t, aliceConfig(bob.id.PeerID()), WithMailRetries(50*time.Millisecond))
	testkit.WaitFor(t, "bob's slot", holdsSlots(bob, relay))
	connect(t, alice, bob)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := alice.QueryCapabilities(ctx, bob.id.PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	bob.Close()
	waitGone(t, alice, bob)
	// The relay forgets bob's registration (as it does after
	// mailbox.retention without a visit): it must now refuse his mail.
	if _, err := relay.Store().Mailboxes().PruneMail(time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	sent, err := alice.Send(ctx, bob.id.PeerID(), "hello from the outbox")
	if err != nil {
		t.Fatal(err)
	}
	if sent.Delivered != "queued" {
		t.Fatalf("sent = %+v, want queued", sent)
	}
	testkit.WaitFor(t, "two refused attempts", func() bool {
		items, _ := alice.Mail().Outbox()
		return len(items) == 1 && items[0].Attempts >= 2 && strings.Contains(items[0].LastError, string(wire.CodeMailboxRefused))
	})

	// The queue survives a restart of the sender.
	alice.Close()
	alice = restartWith(t, alice, WithMailRetries(50*time.Millisecond))
	if items, err := alice.Mail().Outbox(); err != nil || len(items) != 1 {
		t.Fatalf("outbox after restart: %d items (%v), want 1", len(items), err)
	}

	// Bob comes back and registers; alice's next retry lands; bob fetches it.
	bob = restartDaemon(t, bob)
	bobEvents, stop := bob.Subscribe()
	defer stop()
	e := waitEvent(t, bobEvents, func(e events.Event) bool {
		return e.Type == events.EventMessage && e.Message != nil && e.Message.Headers.MessageID == sent.MessageID
	})
	if e.Message.Body.Text != "hello from the outbox" {
		t.Fatalf("bob got %q", e.Message.Body.Text)
	}
	testkit.WaitFor(t, "alice's outbox to empty", func() bool { items, _ := alice.Mail().Outbox(); return len(items) == 0 })
}

func TestOutboxGivesUp(t *testing.T) {
	relay, alice, bob := mailSetup(t, WithMailRetries(20*time.Millisecond))
	alice.cfg.Mailbox.GiveUp = config.Duration{Duration: 300 * time.Millisecond}
	bob.Close()
	waitGone(t, alice, bob)
	if _, err := relay.Store().Mailboxes().PruneMail(time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	evs, stop := alice.Subscribe()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sent, err := alice.Send(ctx, bob.id.PeerID(), "anyone?")
	if err != nil {
		t.Fatal(err)
	}
	e := waitEvent(t, evs, func(e events.Event) bool { return e.Type == events.EventMail && strings.Contains(e.Detail, "gave up") })
	if !strings.Contains(e.Detail, sent.MessageID) || !strings.Contains(e.Detail, string(wire.CodeMailboxRefused)) {
		t.Fatalf("give-up event %q does not name the message and the reason", e.Detail)
	}
	if items, _ := alice.Mail().Outbox(); len(items) != 0 {
		t.Fatalf("outbox after giving up: %+v", items)
	}
}

func TestSendWithoutRelayIsAClearError(t *testing.T) {
	bob := startDaemon(t, tcpOnly(loopbackConfig()))
	alice := startDaemon(t, aliceConfig(""))
	connect(t, alice, bob)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := alice.QueryCapabilities(ctx, bob.id.PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	bob.Close()
	waitGone(t, alice, bob)
	_, err := alice.Send(ctx, bob.id.PeerID(), "hi")
	if !errors.Is(err, mail.ErrUnreachable) || !strings.Contains(err.Error(), "names no mailbox relay") {
		t.Fatalf("send to an unreachable peer without relays: %v", err)
	}
	if items, _ := alice.Mail().Outbox(); len(items) != 0 {
		t.Fatalf("something was queued: %+v", items)
	}
	if _, err := alice.Send(ctx, bob.id.PeerID(), "  "); err == nil {
		t.Fatal("empty text accepted")
	}
}

// signedMail is a message from from to to, as Send builds it.
func signedMail(t *testing.T, from *identity.Identity, to peer.ID, text string) *gossip.Message {
	t.Helper()
	local := gossip.Agent{Agent: from.DID()}
	remote, err := peerid.Agent(to)
	if err != nil {
		t.Fatal(err)
	}
	c := gossip.NewConversation(gossip.NewID("conv", time.Now()), local, remote)
	m, err := c.Next(gossip.PhaseGreeting, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m.Body.Text = text
	if err := m.Sign(from, time.Now()); err != nil {
		t.Fatal(err)
	}
	return m
}

func encodeMail(t *testing.T, m *gossip.Message) []byte {
	t.Helper()
	b, err := gossip.EncodeCBOR(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMailboxRefusals(t *testing.T) {
	rc := relayConfig()
	rc.Mailbox.MaxMessages = 2
	rc.Mailbox.MaxPerSender = 3
	relay := startDaemon(t, rc)
	alice := startDaemon(t, nil)
	mallory := startDaemon(t, nil)
	bob := startDaemon(t, nil)
	carol := startDaemon(t, nil)
	for _, d := range []*testDaemon{alice, mallory, bob, carol} {
		connect(t, d, relay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rid := relay.id.PeerID()
	ask := func(d *testDaemon, req *wire.MailboxRequest) (*wire.MailboxResponse, wire.Code) {
		t.Helper()
		// A mailbox request as any client sends it: one stream on the
		// daemon's host, the request, the answer.
		st, err := d.Host().NewStream(ctx, rid, wire.Mailbox)
		if err != nil {
			t.Fatalf("%s: %v", req.Op, err)
		}
		defer st.Close()
		ws := wire.NewStream(st, 10*time.Second)
		if err := ws.WriteMailbox(req); err != nil {
			t.Fatalf("%s: %v", req.Op, err)
		}
		st.CloseWrite()
		raw, err := ws.ReadMailbox()
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", req.Op, err)
		}
		res, err := wire.DecodeMailboxResponse(raw)
		if err != nil {
			t.Fatalf("%s: %v", req.Op, err)
		}
		if !res.OK {
			return nil, res.Error.Code
		}
		return res, ""
	}
	bobID := bob.id.PeerID().String()
	publish := func(d *testDaemon, to peer.ID, m *gossip.Message) (*wire.MailboxResponse, wire.Code) {
		return ask(d, &wire.MailboxRequest{Op: wire.OpPublish, To: to.String(), Message: encodeMail(t, m)})
	}

	// Not registered yet: refused.
	if _, code := publish(alice, bob.id.PeerID(), signedMail(t, alice.id, bob.id.PeerID(), "1")); code != wire.CodeMailboxRefused {
		t.Fatalf("mail for an unregistered peer: code %q, want mailbox_refused", code)
	}
	// A fetch without a slot on the relay registers nothing.
	if res, code := ask(bob, &wire.MailboxRequest{Op: wire.OpRetrieve}); code != "" || len(res.Messages) != 0 {
		t.Fatalf("fetch without a slot: %+v %q", res, code)
	}
	if _, code := publish(alice, bob.id.PeerID(), signedMail(t, alice.id, bob.id.PeerID(), "1")); code != wire.CodeMailboxRefused {
		t.Fatalf("mail for a peer that fetched without a slot: code %q, want mailbox_refused", code)
	}
	// Bob registers by fetching with a slot (nothing waits yet).
	if _, err := client.Reserve(ctx, bob.Host(), peer.AddrInfo{ID: rid, Addrs: relay.Addrs()}); err != nil {
		t.Fatal(err)
	}
	if res, code := ask(bob, &wire.MailboxRequest{Op: wire.OpRetrieve}); code != "" || len(res.Messages) != 0 {
		t.Fatalf("first fetch: %+v %q", res, code)
	}
	first := signedMail(t, alice.id, bob.id.PeerID(), "1")
	res, code := publish(alice, bob.id.PeerID(), first)
	if code != "" {
		t.Fatalf("publish: %q", code)
	}
	// A retry of the same message is not stored twice.
	if again, code := publish(alice, bob.id.PeerID(), first); code != "" || again.ID != res.ID {
		t.Fatalf("retried publish: %+v %q, want the same ID %s", again, code, res.ID)
	}
	// Mallory cannot leave a message signed by alice, nor an altered one.
	if _, code := publish(mallory, bob.id.PeerID(), signedMail(t, alice.id, bob.id.PeerID(), "forged")); code != wire.CodeWrongKey {
		t.Fatalf("someone else's message: code %q, want wrong_key", code)
	}
	tampered := signedMail(t, mallory.id, bob.id.PeerID(), "original")
	tampered.Body.Text = "altered"
	if _, code := publish(mallory, bob.id.PeerID(), tampered); code != wire.CodeInvalidSignature {
		t.Fatalf("altered message: code %q, want invalid_signature", code)
	}
	// A message whose ttl ran out is refused.
	old := signedMail(t, alice.id, bob.id.PeerID(), "late")
	old.Headers.TTLSeconds = 1
	old.Headers.Date = gossip.FormatDate(time.Now().Add(-time.Minute))
	old.Security = nil
	if err := old.Sign(alice.id, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, code := publish(alice, bob.id.PeerID(), old); code != wire.CodeInvalidFormat {
		t.Fatalf("expired ttl: code %q, want invalid_format", code)
	}
	// Recipient quota: two messages at most.
	if _, code := publish(carol, bob.id.PeerID(), signedMail(t, carol.id, bob.id.PeerID(), "2")); code != "" {
		t.Fatalf("second message: %q", code)
	}
	if _, code := publish(carol, bob.id.PeerID(), signedMail(t, carol.id, bob.id.PeerID(), "3")); code != wire.CodeMailboxFull {
		t.Fatalf("third message for bob: code %q, want mailbox_full", code)
	}
	// Bad requests.
	if _, code := ask(alice, &wire.MailboxRequest{Op: "steal"}); code != wire.CodeInvalidFormat {
		t.Fatalf("unknown op: %q", code)
	}
	if _, code := ask(alice, &wire.MailboxRequest{Op: wire.OpPublish, To: "not-a-peer", Message: encodeMail(t, first)}); code != wire.CodeInvalidFormat {
		t.Fatalf("bad recipient: %q", code)
	}
	if _, code := ask(alice, &wire.MailboxRequest{Op: wire.OpPublish, To: bobID, Message: []byte{0xff, 0x00}}); code != wire.CodeInvalidFormat {
		t.Fatalf("garbage message: %q", code)
	}

	// Only bob sees bob's mail, and only bob can delete it.
	if res, _ := ask(alice, &wire.MailboxRequest{Op: wire.OpRetrieve}); len(res.Messages) != 0 {
		t.Fatalf("alice fetched %d of bob's messages", len(res.Messages))
	}
	got, _ := ask(bob, &wire.MailboxRequest{Op: wire.OpRetrieve})
	if len(got.Messages) != 2 {
		t.Fatalf("bob fetched %d messages, want 2", len(got.Messages))
	}
	ids := []string{got.Messages[0].ID, got.Messages[1].ID}
	if res, _ := ask(alice, &wire.MailboxRequest{Op: wire.OpAck, IDs: ids}); res.Acked != 0 {
		t.Fatalf("alice deleted %d of bob's messages", res.Acked)
	}
	if res, _ := ask(bob, &wire.MailboxRequest{Op: wire.OpAck, IDs: ids}); res.Acked != 2 {
		t.Fatalf("bob acknowledged %d, want 2", res.Acked)
	}
	held, _, _ := relay.Store().Mailboxes().Mail(bobID, time.Now(), 10, 1<<20)
	if len(held) != 0 {
		t.Fatalf("relay still holds %d messages after the ack", len(held))
	}
}

func TestFetchedMailIsVerifiedBeforeItIsAccepted(t *testing.T) {
	relay, alice, bob := mailSetup(t)
	bobEvents, stop := bob.Subscribe()
	defer stop()
	// A relay (or whoever wrote to its store) alters a held message, and
	// plants one addressed to someone else.
	altered := signedMail(t, alice.id, bob.id.PeerID(), "pay 10")
	altered.Body.Text = "pay 1000"
	misaddressed := signedMail(t, alice.id, relay.id.PeerID(), "for the relay")
	good := signedMail(t, alice.id, bob.id.PeerID(), "genuine")
	q := store.MailQuota{MaxMessages: 10, MaxBytes: 1 << 20, MaxPerSender: 10}
	for _, m := range []*gossip.Message{altered, misaddressed, good} {
		if _, err := relay.Store().Mailboxes().PutMail(store.MailItem{ID: gossip.NewID("mail", time.Now()), To: bob.id.PeerID().String(),
			From: alice.id.PeerID().String(), MessageID: m.Headers.MessageID, Received: time.Now(),
			Expires: time.Now().Add(time.Hour), Message: encodeMail(t, m)}, q); err != nil {
			t.Fatal(err)
		}
	}
	bob.mail.Fetch(relay.id.PeerID())
	var refused, accepted []string
	for len(refused)+len(accepted) < 3 {
		e := waitEvent(t, bobEvents, func(e events.Event) bool { return e.Type == events.EventMessage || e.Type == events.EventRefused })
		if e.Type == events.EventRefused {
			refused = append(refused, e.Detail)
		} else {
			accepted = append(accepted, e.Message.Body.Text)
		}
	}
	if len(accepted) != 1 || accepted[0] != "genuine" {
		t.Fatalf("accepted %q, want only the genuine message", accepted)
	}
	if !slices.ContainsFunc(refused, func(s string) bool { return strings.Contains(s, "signature") }) ||
		!slices.ContainsFunc(refused, func(s string) bool { return strings.Contains(s, "addressed to someone else") }) {
		t.Fatalf("refusals %q do not name the bad signature and the wrong address", refused)
	}
	// All three are acknowledged: a refused message would never get better.
	held, _, _ := relay.Store().Mailboxes().Mail(bob.id.PeerID().String(), time.Now(), 10, 1<<20)
	if len(held) != 0 {
		t.Fatalf("relay still holds %d messages", len(held))
	}
	// Delivered again (a crash before the ack), the genuine one is a replay.
	if _, err := relay.Store().Mailboxes().PutMail(store.MailItem{ID: gossip.NewID("mail", time.Now()), To: bob.id.PeerID().String(),
		From: alice.id.PeerID().String(), MessageID: good.Headers.MessageID, Received: time.Now(),
		Expires: time.Now().Add(time.Hour), Message: encodeMail(t, good)}, q); err != nil {
		t.Fatal(err)
	}
	bob.mail.Fetch(relay.id.PeerID())
	e := waitEvent(t, bobEvents, func(e events.Event) bool { return e.Type == events.EventMessage || e.Type == events.EventRefused })
	if e.Type != events.EventRefused || !strings.Contains(e.Detail, "replay") && !strings.Contains(e.Detail, "seen") {
		t.Fatalf("second delivery: %s %q, want refused as a replay", e.Type, e.Detail)
	}
}

func TestMailWaitsLongerThanTheReplayWindow(t *testing.T) {
	relay, alice, bob := mailSetup(t)
	evs, stop := bob.Subscribe()
	defer stop()
	q := store.MailQuota{MaxMessages: 10, MaxBytes: 1 << 20, MaxPerSender: 10}
	leave := func(age time.Duration, text string) *gossip.Message {
		remote, _ := peerid.Agent(bob.id.PeerID())
		c := gossip.NewConversation(gossip.NewID("conv", time.Now()), gossip.Agent{Agent: alice.id.DID()}, remote)
		m, err := c.Next(gossip.PhaseGreeting, time.Now().Add(-age))
		if err != nil {
			t.Fatal(err)
		}
		m.Body.Text = text
		if err := m.Sign(alice.id, time.Now().Add(-age)); err != nil {
			t.Fatal(err)
		}
		if _, err := relay.Store().Mailboxes().PutMail(store.MailItem{ID: gossip.NewID("mail", time.Now()), To: bob.id.PeerID().String(),
			From: alice.id.PeerID().String(), MessageID: m.Headers.MessageID, Received: time.Now(),
			Expires: time.Now().Add(time.Hour), Message: encodeMail(t, m)}, q); err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Three days at the relay: past the 24 h replay window, within the
	// 7-day retention. Eight days: past both.
	fresh := leave(72*time.Hour, "three days old")
	leave(8*24*time.Hour, "eight days old")
	bob.mail.Fetch(relay.id.PeerID())
	var accepted, refused []string
	for len(accepted)+len(refused) < 2 {
		e := waitEvent(t, evs, func(e events.Event) bool { return e.Type == events.EventMessage || e.Type == events.EventRefused })
		if e.Type == events.EventMessage {
			accepted = append(accepted, e.Message.Headers.MessageID)
		} else {
			refused = append(refused, e.Detail)
		}
	}
	if len(accepted) != 1 || accepted[0] != fresh.Headers.MessageID {
		t.Fatalf("accepted %v, want only the three-day-old message", accepted)
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "older than") {
		t.Fatalf("refused %q, want the eight-day-old one as stale", refused)
	}
}

func TestSendGreetsAgainWhenTheOpenConversationCannotCarryIt(t *testing.T) {
	bob := startDaemon(t, nil)
	alice := startDaemon(t, aliceConfig(""))
	connect(t, alice, bob)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := alice.Send(ctx, bob.id.PeerID(), "one")
	if err != nil {
		t.Fatal(err)
	}
	// The conversation is still listed, but its stream can no longer
	// carry anything (as when a relay under it died unnoticed).
	if _, held := alice.convs.Holds(first.ConversationID); !held {
		t.Fatal("no open conversation after the first send")
	}
	var streams []network.Stream
	for _, c := range alice.Host().Network().ConnsToPeer(bob.id.PeerID()) {
		for _, st := range c.GetStreams() {
			if st.Protocol() == wire.Conversation {
				streams = append(streams, st)
			}
		}
	}
	if len(streams) != 1 {
		t.Fatalf("%d conversation streams to bob, want the first send's one", len(streams))
	}
	if err := streams[0].CloseWrite(); err != nil {
		t.Fatal(err)
	}
	evs, stop := bob.Subscribe()
	defer stop()
	second, err := alice.Send(ctx, bob.id.PeerID(), "two")
	if err != nil {
		t.Fatalf("sending over a dead conversation: %v", err)
	}
	if second.ConversationID == first.ConversationID || second.Delivered != "conversation" {
		t.Fatalf("second send %+v, want a new conversation", second)
	}
	waitEvent(t, evs, func(e events.Event) bool {
		return e.Type == events.EventMessage && e.Message != nil && e.Message.Headers.MessageID == second.MessageID
	})
	if _, held := alice.convs.Holds(first.ConversationID); held {
		t.Fatal("the dead conversation is still open")
	}
}

// stranger is a fresh key on a bare libp2p host: what an attacker gets for
// free, as many times as it likes.
type stranger struct {
	id *identity.Identity
	h  host.Host
}

func newStranger(t *testing.T) *stranger {
	t.Helper()
	id, err := identity.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return strangerWith(t, id)
}

// strangerWith is a bare host with id's key (a stranger coming back).
func strangerWith(t *testing.T, id *identity.Identity) *stranger {
	t.Helper()
	h, err := libp2p.New(
		libp2p.Identity(id.LibP2PKey()),
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ResourceManager(&network.NullResourceManager{}),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return &stranger{id: id, h: h}
}

// ask sends one mailbox request to relay and returns its answer, or the
// code it was refused with.
func (s *stranger) ask(t *testing.T, relay *testDaemon, req *wire.MailboxRequest) (*wire.MailboxResponse, wire.Code) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.h.Connect(ctx, peer.AddrInfo{ID: relay.id.PeerID(), Addrs: relay.Addrs()}); err != nil {
		t.Fatal(err)
	}
	st, err := s.h.NewStream(ctx, relay.id.PeerID(), wire.Mailbox)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ws := wire.NewStream(st, 10*time.Second)
	if err := ws.WriteMailbox(req); err != nil {
		t.Fatal(err)
	}
	st.CloseWrite()
	raw, err := ws.ReadMailbox()
	if err != nil {
		t.Fatal(err)
	}
	res, err := wire.DecodeMailboxResponse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK {
		return nil, res.Error.Code
	}
	return res, ""
}

// reserve takes a circuit relay v2 slot on relay.
func (s *stranger) reserve(t *testing.T, relay *testDaemon) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.Reserve(ctx, s.h, peer.AddrInfo{ID: relay.id.PeerID(), Addrs: relay.Addrs()})
	return err
}

// leave closes the stranger's host and waits until the relay has noticed
// (its reservation, if any, is gone with the connection).
func (s *stranger) leave(t *testing.T, relay *testDaemon) {
	t.Helper()
	s.h.Close()
	testkit.WaitFor(t, "the relay to see a stranger leave", func() bool {
		return relay.Host().Network().Connectedness(s.h.ID()) == network.NotConnected
	})

}

// publish leaves text for to at relay, from s, and returns the refusal
// code ("" when held).
func (s *stranger) publish(t *testing.T, relay *testDaemon, to peer.ID, text string) wire.Code {
	t.Helper()
	_, code := s.ask(t, relay, &wire.MailboxRequest{Op: wire.OpPublish, To: to.String(), Message: encodeMail(t, signedMail(t, s.id, to, text))})
	return code
}

// TestMailboxesSurviveRegistrationByManyKeys: fresh keys register
// mailboxes (some holding a reservation, most not) several times over the
// relay's table; genuine peers that reserve a slot and fetch afterwards
// still get their mail. Before: every genuine peer was refused.
func TestMailboxesSurviveRegistrationByManyKeys(t *testing.T) {
	rc := relayConfig()
	rc.Relay.MaxReservations = 4 // a table of 16 mailboxes
	relay := startDaemon(t, rc)
	table := 4 * rc.Relay.MaxReservations
	alice := newStranger(t)

	reserved := 0
	var unreserved []peer.ID
	for i := range 3 * table {
		s := newStranger(t)
		if i%2 == 0 && s.reserve(t, relay) == nil {
			reserved++
		} else {
			unreserved = append(unreserved, s.h.ID())
		}
		if _, code := s.ask(t, relay, &wire.MailboxRequest{Op: wire.OpRetrieve}); code != "" {
			t.Fatalf("stranger %d fetching: %q", i, code)
		}
		s.leave(t, relay)
	}
	if reserved <= table {
		t.Fatalf("only %d strangers could reserve a slot, want more than the table's %d", reserved, table)
	}
	// The table is full, at its cap; no stranger without a slot is in it.
	if n, _ := relay.Store().Mailboxes().Registrations(); n != table {
		t.Fatalf("%d mailboxes registered, want the table's %d", n, table)
	}
	for _, pid := range unreserved {
		if mailboxOpen(relay, pid)() {
			t.Fatalf("a stranger that held no slot has a mailbox")
		}
	}

	const genuine = 3
	refused := 0
	var bobs []*identity.Identity
	for i := range genuine {
		bob := newStranger(t)
		if err := bob.reserve(t, relay); err != nil {
			t.Fatalf("genuine peer %d reserving: %v", i, err)
		}
		if _, code := bob.ask(t, relay, &wire.MailboxRequest{Op: wire.OpRetrieve}); code != "" {
			t.Fatalf("genuine peer %d fetching: %q", i, code)
		}
		bob.leave(t, relay)
		if code := alice.publish(t, relay, bob.h.ID(), "for you"); code != "" {
			t.Logf("mail for genuine peer %d refused: %s", i, code)
			refused++
		}
		bobs = append(bobs, bob.id)
	}
	t.Logf("%d fresh keys (%d with a reservation) tried to register; genuine peers refused: %d of %d", 3*table, reserved, refused, genuine)
	if refused > 0 {
		t.Fatalf("%d of %d genuine peers refused after the flood", refused, genuine)
	}
	// Each comes back and gets its mail.
	for i, id := range bobs {
		res, code := strangerWith(t, id).ask(t, relay, &wire.MailboxRequest{Op: wire.OpRetrieve})
		if code != "" || len(res.Messages) != 1 {
			t.Fatalf("genuine peer %d fetching its mail: %+v %q, want one message", i, res, code)
		}
	}
}

// TestReservationBookFollowsTheRelay: a mailbox may be registered by a
// peer exactly while it holds a slot, as go-libp2p's relay grants and
// drops them (this pins the reading of its connection manager tag).
func TestReservationBookFollowsTheRelay(t *testing.T) {
	rc := relayConfig()
	rc.Relay.MaxReservations = 1
	relay := startDaemon(t, rc)
	a, b := newStranger(t), newStranger(t)
	if _, code := a.ask(t, relay, &wire.MailboxRequest{Op: wire.OpRetrieve}); code != "" {
		t.Fatal(code)
	}
	if relay.mail.HoldsSlot(a.h.ID()) {
		t.Fatal("a connected peer without a slot counts as holding one")
	}
	if err := a.reserve(t, relay); err != nil {
		t.Fatal(err)
	}
	if !relay.mail.HoldsSlot(a.h.ID()) {
		t.Fatal("a peer holding a slot does not count as holding one")
	}
	// The relay is full: b is refused its slot, and so its mailbox (the
	// ACL is asked before that limit, so it cannot tell).
	if err := b.reserve(t, relay); err == nil {
		t.Fatal("a second slot on a relay with room for one")
	}
	if _, code := b.ask(t, relay, &wire.MailboxRequest{Op: wire.OpRetrieve}); code != "" {
		t.Fatal(code)
	}
	if relay.mail.HoldsSlot(b.h.ID()) || mailboxOpen(relay, b.h.ID())() {
		t.Fatal("a peer refused its slot counts as holding one")
	}
	// A peer that leaves loses its slot, and comes back without one.
	a.leave(t, relay)
	if relay.mail.HoldsSlot(a.h.ID()) {
		t.Fatal("a peer that left still holds its slot")
	}
	back := strangerWith(t, a.id)
	if _, code := back.ask(t, relay, &wire.MailboxRequest{Op: wire.OpRetrieve}); code != "" {
		t.Fatal(code)
	}
	if relay.mail.HoldsSlot(back.h.ID()) {
		t.Fatal("a peer back without reserving counts as holding a slot")
	}
}

// TestEmptyMailboxesLapseAndQuotasHoldPerAddress: with an injected clock,
// a mailbox holding no mail closes mailbox.idle after its last fetch,
// while one holding mail stays open; and many sender keys from one
// address share that address's quota.
func TestEmptyMailboxesLapseAndQuotasHoldPerAddress(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	rc := relayConfig()
	rc.Mailbox.MaxPerAddress = 5
	relay := startWith(t, rc, WithClock(clock))
	idle := rc.Mailbox.Idle.Duration

	register := func() *stranger {
		s := newStranger(t)
		if err := s.reserve(t, relay); err != nil {
			t.Fatal(err)
		}
		if _, code := s.ask(t, relay, &wire.MailboxRequest{Op: wire.OpRetrieve}); code != "" {
			t.Fatal(code)
		}
		s.leave(t, relay)
		return s
	}
	kept, lapsed := register(), register()
	alice := newStranger(t)
	advance(idle - time.Second)
	if code := alice.publish(t, relay, kept.h.ID(), "just in time"); code != "" {
		t.Fatalf("mail within the idle period: %q", code)
	}
	advance(2 * time.Second)
	if code := alice.publish(t, relay, lapsed.h.ID(), "too late"); code != wire.CodeMailboxRefused {
		t.Fatalf("mail after the idle period for an empty mailbox: %q, want mailbox_refused", code)
	}
	if code := alice.publish(t, relay, kept.h.ID(), "still open"); code != "" {
		t.Fatalf("mail for a mailbox holding mail after the idle period: %q", code)
	}
	relay.mail.Prune()
	if n, _ := relay.Store().Mailboxes().Registrations(); n != 1 {
		t.Fatalf("%d registrations after pruning, want the one holding mail", n)
	}

	// Fresh keys from one address (all here are 127.0.0.1): alice's two
	// messages and three more keys fill its quota of five; the next key
	// from it is refused, naming the quota.
	for i := range 3 {
		if code := newStranger(t).publish(t, relay, kept.h.ID(), fmt.Sprint("key ", i)); code != "" {
			t.Fatalf("fresh key %d: %q", i, code)
		}
	}
	if code := newStranger(t).publish(t, relay, kept.h.ID(), "one key too many"); code != wire.CodeMailboxFull {
		t.Fatalf("a sixth message from one address: %q, want mailbox_full", code)
	}
}

// TestSendToAnAwayPeerQueuesAtOnce: bob is away; his relay answers at once
// that he holds no slot there, while a direct address alice knows for him
// accepts TCP and then never speaks (as a LAN address behind another NAT
// never answers). The message is queued for his mailbox at once, not
// after that dial gives up.
func TestSendToAnAwayPeerQueuesAtOnce(t *testing.T) {
	_, alice, bob := mailSetup(t)
	bob.Close()
	waitGone(t, alice, bob)
	hole, err := net.Listen("tcp", "127.0.0.1:0") // accepts into its backlog, never reads
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	alice.Host().Peerstore().AddAddr(bob.id.PeerID(), multiaddr.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", hole.Addr().(*net.TCPAddr).Port)), time.Hour)
	// Far less than the dial of the silent address takes (the swarm's 5 s
	// for a local address), far more than the relay's answer.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	sent, err := alice.Send(ctx, bob.id.PeerID(), "queued at once")
	if err != nil || sent.Delivered != "queued" || !strings.Contains(sent.Detail, "holds no slot on its relays") {
		t.Fatalf("send to an away peer: %+v, %v; want queued because its relay holds no slot for it", sent, err)
	}
}

// TestFetchedMailIsDatedByArrival: mail fetched hours after it was
// written is audited, listed and announced when it arrived, and its
// fetch is logged at info.
func TestFetchedMailIsDatedByArrival(t *testing.T) {
	_, alice, bob := mailSetup(t)
	bob.Close()
	waitGone(t, alice, bob)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sent, err := alice.Send(ctx, bob.id.PeerID(), "written now, read later")
	if err != nil || sent.Delivered != "queued" {
		t.Fatalf("send: %+v, %v", sent, err)
	}
	testkit.WaitFor(t, "the mail to leave alice's outbox", func() bool { items, _ := alice.Mail().Outbox(); return len(items) == 0 })

	later := 3 * time.Hour
	logs := &syncBuffer{}
	bob.cfg.Limits.StreamTimeout.Duration = 5 * time.Second
	n, err := New(bob.cfg, bob.id, bob.home, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		WithClock(func() time.Time { return time.Now().Add(later) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	bob = &testDaemon{Node: n, home: bob.home, cfg: bob.cfg, id: bob.id}
	var conv gossip.AuditConversation
	testkit.WaitFor(t, "bob to audit the mail", func() bool {
		convs, _ := bob.Audit().Conversations()
		i := slices.IndexFunc(convs, func(c gossip.AuditConversation) bool { return c.ID == sent.ConversationID })
		if i >= 0 {
			conv = convs[i]
		}
		return i >= 0
	})

	written := time.Now()
	if conv.First.Before(written.Add(later - time.Hour)) {
		t.Errorf("the fetched mail is listed at %s, when it was written; want when it arrived (about %s)", conv.First, written.Add(later))
	}
	entries, err := bob.Audit().Entries(sent.ConversationID)
	if err != nil || len(entries) != 1 || entries[0].At.Before(written.Add(later-time.Hour)) {
		t.Fatalf("entries %+v, %v; want one, dated by arrival", entries, err)
	}
	testkit.WaitFor(t, "an info line saying mail was fetched", func() bool {
		return strings.Contains(logs.String(), "level=INFO msg=\"fetched mail\"")
	})

}

// syncBuffer is a log sink the daemon's goroutines write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
