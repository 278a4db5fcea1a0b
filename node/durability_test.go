package node

import (
	"context"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// crash stops the daemon as a kill -9 would leave its files: what it wrote
// stays, what it held in memory (the seen-set's unflushed IDs) is gone.
// The audit log's Close only fsyncs what is already written.
func (d *testDaemon) crash(t *testing.T) {
	t.Helper()
	d.seen = nil // Close would flush it
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// reconnect connects r to target again (after target restarted on new ports).
func (r *rawPeer) reconnect(t *testing.T, target *testDaemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.Peerstore().ClearAddrs(target.id.PeerID())
	if err := r.Connect(ctx, peer.AddrInfo{ID: target.id.PeerID(), Addrs: target.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
}

// With durability.sync = "interval", a message's ID is only in memory until
// the next flush; a crash before it must still not let the message be
// replayed: the restarted daemon finds it in the audit log.
func TestReplayIsRefusedAfterACrashBeforeTheFlush(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Durability = config.DurabilityConfig{Sync: config.SyncInterval, Interval: config.Duration{Duration: time.Minute}}
	alice := startDaemon(t, cfg)
	raw := newRawPeer(t, alice)
	first := raw.greeting(alice, raw.id)
	if m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, first)); err != nil || m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("first greeting: %v, %+v", err, m)
	}
	if n := alice.seen.Pending(); n != 1 {
		t.Fatalf("%d IDs waiting for the flush, want 1 (the greeting)", n)
	}
	alice.crash(t)

	alice = restartDaemon(t, alice)
	raw.reconnect(t, alice)
	m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, first))
	if err != nil {
		t.Fatalf("replay after restart: no answer: %v", err)
	}
	if code := errorCode(t, m); code != wire.CodeReplay {
		t.Fatalf("replay after a crash: %s, want %s", code, wire.CodeReplay)
	}
	// A new message is accepted as ever.
	if m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, raw.greeting(alice, raw.id))); err != nil || m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("new greeting after restart: %v, %+v", err, m)
	}
}

// The same, with every ID committed on the spot: nothing waits in memory.
func TestReplayIsRefusedAfterACrashWithSyncAlways(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Durability = config.DurabilityConfig{Sync: config.SyncAlways}
	alice := startDaemon(t, cfg)
	if alice.seen != nil {
		t.Fatal("sync = always buffers the seen-set")
	}
	raw := newRawPeer(t, alice)
	first := raw.greeting(alice, raw.id)
	if m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, first)); err != nil || m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("first greeting: %v, %+v", err, m)
	}
	alice.crash(t)
	alice = restartDaemon(t, alice)
	raw.reconnect(t, alice)
	m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, first))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeReplay {
		t.Fatalf("replay after a crash: %s, want %s", code, wire.CodeReplay)
	}
}

// A message taken through the inbox is committed before the sender is told
// so (it will not send it again); with sync = "interval" that means a flush.
func TestInboxDeliveryIsCommittedBeforeItIsAcknowledged(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Durability = config.DurabilityConfig{Sync: config.SyncInterval, Interval: config.Duration{Duration: time.Minute}}
	alice := startDaemon(t, cfg)
	raw := newRawPeer(t, alice)
	if _, err := alice.Inbox().Deliver(raw.greeting(alice, raw.id), "https"); err != nil {
		t.Fatal(err)
	}
	if n := alice.seen.Pending(); n != 0 {
		t.Fatalf("%d seen IDs still waiting for a flush after the inbox took the message", n)
	}
	// A libp2p greeting, answered in the conversation, waits for the next flush.
	if m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, raw.greeting(alice, raw.id))); err != nil || m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("greeting: %v", err)
	}
	if n := alice.seen.Pending(); n != 1 {
		t.Fatalf("%d seen IDs waiting after a libp2p greeting, want 1", n)
	}
}

// Moving from "interval" to "always": the first start recovers what the
// buffered run left, and clears the mark, so no later start reads the
// audit log again.
func TestSwitchingToSyncAlwaysClearsTheRecoveryMark(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Durability = config.DurabilityConfig{Sync: config.SyncInterval, Interval: config.Duration{Duration: time.Minute}}
	alice := startDaemon(t, cfg)
	raw := newRawPeer(t, alice)
	first := raw.greeting(alice, raw.id)
	if _, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, first)); err != nil {
		t.Fatal(err)
	}
	alice.crash(t)
	always := *cfg
	always.Durability = config.DurabilityConfig{Sync: config.SyncAlways}
	alice.cfg = &always
	alice = restartDaemon(t, alice)
	if at, err := alice.store.SeenFlushedAt(); err != nil || !at.IsZero() {
		t.Fatalf("the recovery mark after a start with sync = always: %v, %v", at, err)
	}
	raw.reconnect(t, alice)
	m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, first))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeReplay {
		t.Fatalf("replay after switching to sync = always: %s, want %s", code, wire.CodeReplay)
	}
}
