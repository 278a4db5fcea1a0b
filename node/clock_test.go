package node

import (
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/wire"
)

// set moves the clock (offsetClock, rotation_test.go) to the system's
// plus d, while the daemon runs: a laptop waking, an NTP step.
func (c *offsetClock) set(d time.Duration) { c.off.Store(int64(d)) }

// greetingAt is r's greeting to target, signed and dated at.
func (r *rawPeer) greetingAt(target *testDaemon, at time.Time) *gossip.Message {
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", at), Date: gossip.FormatDate(at),
		From: gossip.Agent{Agent: r.id.DID()}, To: []gossip.Agent{{Agent: target.id.DID()}},
		ConversationID: gossip.NewID("conv", at), Sequence: 1, Phase: gossip.PhaseGreeting,
		ContentType: gossip.DefaultContentType,
	}, Body: gossip.Body{Text: "hello"}}
	if err := m.Sign(r.id, at); err != nil {
		panic(err)
	}
	return m
}

// A daemon whose clock is off the system's, or steps while it runs, keeps
// refusing a replay across a crash before the seen-set's flush: the
// recovery reads the audit entries from the flush mark on, and the mark
// is on the daemon's clock, as the entries are (before: the system's, so
// a clock 1 h behind dated its entries an hour before the mark, and the
// restarted daemon took the replay as new), and goes back with the clock
// before a message is taken (before: a step back after the last flush left
// the mark an hour after the next entries).
func TestReplayIsRefusedAfterACrashWhateverTheClock(t *testing.T) {
	for _, c := range []struct {
		name        string
		start, step time.Duration // the offset at start, and after the start's flush
	}{
		{"1 h behind", -time.Hour, -time.Hour},
		{"1 h ahead", time.Hour, time.Hour},
		{"stepped back 1 h", 0, -time.Hour},
		{"stepped ahead 1 h", 0, time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := aliceConfig("")
			cfg.Durability = config.DurabilityConfig{Sync: config.SyncInterval, Interval: config.Duration{Duration: time.Minute}}
			clock := &offsetClock{}
			clock.set(c.start)
			alice := startDaemonWith(t, cfg, WithClock(clock.now))
			clock.set(c.step)
			raw := newRawPeer(t, alice)
			first := raw.greetingAt(alice, clock.now()) // a peer whose clock agrees
			if m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, first)); err != nil || m.Headers.Phase != gossip.PhaseGreeting {
				t.Fatalf("first greeting: %v, %+v", err, m)
			}
			if n := alice.seen.Pending(); n != 1 {
				t.Fatalf("%d IDs waiting for the flush, want 1 (the greeting)", n)
			}
			alice.crash(t)

			alice = restartWith(t, alice, WithClock(clock.now))
			raw.reconnect(t, alice)
			m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, first))
			if err != nil {
				t.Fatalf("replay after restart: no answer: %v", err)
			}
			if code := errorCode(t, m); code != wire.CodeReplay {
				t.Fatalf("replay after a crash: %s, want %s", code, wire.CodeReplay)
			}
			if m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, raw.greetingAt(alice, clock.now()))); err != nil || m.Headers.Phase != gossip.PhaseGreeting {
				t.Fatalf("new greeting after restart: %v, %+v", err, m)
			}
		})
	}
}
