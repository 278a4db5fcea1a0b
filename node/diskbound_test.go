package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/wire"
)

// diskUsage is the bytes the files under dir take on disk (their sizes).
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// summaryMax bounds the bytes one refusal summary adds to the audit log
// (its .jsonl line and its .md entry): an excerpt of at most
// gossip.RefusalExcerpt, a reason of at most 1 KiB and short fields, twice.
const summaryMax = 8 << 10

// The flood: 40 messages of 900 KiB signed by a key other than
// the stream's peer's, from four fresh keys on one address. Each is
// refused; the audit log gains at most the refusal budget of one address
// in summaries (refusalSourceBurst × summaryMax), not what the strangers
// sent (36 MiB). Measured: before the door (issue 13) +70.6 MiB; with the
// door's summaries but no budget, 226 KiB (5.8 KiB a refusal, without
// end); now, 20 summaries.
func TestDiskWrongKeyFloodIsBounded(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	var raws []*rawPeer
	for range 4 {
		raws = append(raws, newRawPeer(t, alice))
	}
	carol, _ := identity.Generate(nil)
	dir := filepath.Join(alice.home.Dir, "audit")
	before := diskUsage(t, dir)
	const flood = 40
	for i := range flood {
		raw := raws[i%len(raws)]
		g := raw.greeting(alice, nil)
		g.Body.Text = strings.Repeat("x", 900<<10)
		if err := g.Sign(carol, time.Now()); err != nil {
			t.Fatal(err)
		}
		m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, g))
		if err != nil {
			t.Fatal(err)
		}
		if code := errorCode(t, m); code != wire.CodeWrongKey && code != wire.CodeInvalidSignature {
			t.Fatalf("code %s, want %s or %s", code, wire.CodeWrongKey, wire.CodeInvalidSignature)
		}
	}
	if err := alice.Audit().Flush(); err != nil { // the .md entries count too
		t.Fatal(err)
	}
	grown := diskUsage(t, dir) - before
	t.Logf("%d wrong-key messages of 900 KiB from %d keys on one address: the audit log grew by %d bytes (%.1f KiB)", flood, len(raws), grown, float64(grown)/1024)
	if grown > admit.RefusalSourceBurst*summaryMax {
		t.Errorf("the audit log grew by %d bytes, want at most %d (%d summaries of at most %d bytes)", grown, admit.RefusalSourceBurst*summaryMax, admit.RefusalSourceBurst, summaryMax)
	}
	if n := len(refusalsOf(t, alice)); n != admit.RefusalSourceBurst {
		t.Errorf("%d refusals written, want the address's budget of %d", n, admit.RefusalSourceBurst)
	}
	// The hourly count of those left out reaches the record.
	alice.door.ReportLeftOut()
	rs := refusalsOf(t, alice)
	if last := rs[len(rs)-1]; last.Transport != admit.LeftOutTransport || last.LeftOut != flood-admit.RefusalSourceBurst {
		t.Errorf("the last record is %+v, want the count of the %d left out", last, flood-admit.RefusalSourceBurst)
	}
}

// Below the free-disk watermark a new conversation is refused with
// unavailable and a message saying the disk is low, while a conversation
// admitted before goes on.
func TestDiskLowRefusesNewConversations(t *testing.T) {
	var free atomic.Uint64
	free.Store(1 << 40)
	alice := startDaemonWith(t, aliceConfig(""), WithAuditOptions(gossip.WithFreeSpace(func() (uint64, error) { return free.Load(), nil })))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	open := greet(t, bob, alice)
	aliceEvents := watchAgent(t, alice)

	free.Store(uint64(alice.cfg.Audit.MinFreeMB-1) << 20)
	raw := newRawPeer(t, alice)
	m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, raw.greeting(alice, raw.id)))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeUnavailable {
		t.Fatalf("a greeting below the watermark: code %s, want %s", code, wire.CodeUnavailable)
	}
	body, _ := converse.ErrorBody(m)
	if !strings.Contains(body.Message, "free") || !strings.Contains(body.Message, "audit.min_free_mb") {
		t.Errorf("the refusal says %q; want it to say the disk is low", body.Message)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bob.Greet(ctx, alice.pid(), negotiate.Proposal{}); !errors.Is(err, wire.ErrUnavailable) {
		t.Errorf("bob's new greeting below the watermark: %v, want unavailable", err)
	}

	// The conversation admitted before goes on, and is audited.
	if _, err := bob.Say(open.ConversationID, gossip.PhaseContext, "Still here."); err != nil {
		t.Fatal(err)
	}
	e := waitEvent(t, aliceEvents.ch, func(e events.Event) bool {
		return e.Type == events.EventMessage && e.ConversationID == open.ConversationID
	})
	if e.Message.Body.Text != "Still here." {
		t.Errorf("alice got %q", e.Message.Body.Text)
	}
	// Alice's acknowledgement of it may follow it in the log.
	said := e.Message.Headers.MessageID
	entries, err := alice.Audit().Entries(open.ConversationID)
	if err != nil || !slices.ContainsFunc(entries, func(entry gossip.AuditEntry) bool {
		return entry.Direction == gossip.Received && entry.Message.Headers.MessageID == said && entry.Message.Body.Text == "Still here."
	}) {
		t.Errorf("the message is not in the conversation's audit entries (%v)", err)
	}

	// With room again, new conversations are taken.
	free.Store(1 << 40)
	greet(t, bob, alice)
}

// testClock is a settable clock for a daemon (WithClock).
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// startDaemonWith starts a daemon in a fresh home with cfg and options.
func startDaemonWith(t *testing.T, cfg *config.Config, opts ...Option) *testDaemon {
	t.Helper()
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg, id, h, testLogger(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &testDaemon{Node: n, home: h, cfg: cfg, id: id}
}

// An anonymous request is audited before it is decided: its parameters
// are kept up to anonymousParamsKept, beyond that as a summary; below the
// watermark it is refused as a new conversation would be.
func TestDiskAnonymousRequestIsBounded(t *testing.T) {
	var free atomic.Uint64
	free.Store(1 << 40)
	alice := startDaemonWith(t, aliceConfig(""), WithAuditOptions(gossip.WithFreeSpace(func() (uint64, error) { return free.Load(), nil })))
	big := map[string]any{"blob": strings.Repeat("x", 900<<10)}
	if _, err := alice.Inbox().ExecuteAnonymous("https", "192.0.2.1:4444", "", "no.such.capability", big); err == nil {
		t.Fatal("an unknown capability ran")
	}
	path := filepath.Join(alice.home.Dir, "audit", time.Now().UTC().Format("2006-01-02"), converse.AnonymousPeer+".jsonl")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 16<<10 || !strings.Contains(string(raw), `"sha256"`) || !strings.Contains(string(raw), "no.such.capability") {
		t.Errorf("the anonymous request's audit entry is %d bytes (want a summary of its parameters): %.300s", len(raw), raw)
	}
	free.Store(1 << 20)
	if _, err := alice.Inbox().ExecuteAnonymous("https", "192.0.2.1:4444", "", "no.such.capability", nil); !errors.Is(err, wire.ErrUnavailable) {
		t.Errorf("an anonymous request below the watermark: %v, want unavailable", err)
	}
}

// Strangers' files take at most a quarter of the audit quota across the
// log: once it is used, each new stranger is still greeted and the oldest
// strangers' files make room (written down in the day's _pruned.jsonl),
// never a file of a peer the owner pinned; the disk stays within the
// share and a last greeting's entries, also after a restart (the
// strangers' files are found again), and the pinned peer is still
// greeted.
func TestStrangersShareOfTheAuditLog(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Audit.MaxMB = config.MinAuditMB // a share of 4 MiB
	alice := startDaemon(t, cfg)
	bob := startDaemon(t, nil)
	if _, err := alice.TrustBook().PinKey(bob.pid(), bob.id.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	connect(t, bob, alice)
	bobs := greet(t, bob, alice).ConversationID

	share := int64(cfg.Audit.MaxMB) << 20 / gossip.StrangerShare
	strangers := map[string]bool{}
	flood := func(n int) {
		t.Helper()
		for i := range n {
			raw := newRawPeer(t, alice)
			strangers[raw.ID().String()] = true
			g := raw.greeting(alice, nil)
			g.Body.Text = strings.Repeat("s", 900<<10)
			if err := g.Sign(raw.id, time.Now()); err != nil {
				t.Fatal(err)
			}
			m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, g))
			if err != nil {
				t.Fatal(err)
			}
			if m.Headers.Phase != gossip.PhaseGreeting {
				t.Fatalf("stranger %d was answered %s (%s), want a greeting", i, m.Headers.Phase, m.Body.Text)
			}
			if used := alice.Audit().Usage(); used > share+4<<20 {
				t.Fatalf("after stranger %d the audit log takes %d MiB, over the strangers' share (%d MiB) and a last greeting's entries", i, used>>20, share>>20)
			}
		}
	}
	n := int(4 * share / (900 << 10)) // four shares' worth of greetings
	flood(n)
	pruned, err := alice.Audit().PrunedOn(time.Now().UTC().Format("2006-01-02"))
	if err != nil || len(pruned) == 0 {
		t.Fatalf("no record of pruned strangers' files after %d strangers (%v)", n, err)
	}
	for _, p := range pruned {
		for _, f := range p.Files {
			if !strangers[f.Peer] {
				t.Errorf("pruned %s, the file of %s, who is no stranger", f.File, f.Peer)
			}
		}
	}
	if _, err := alice.Audit().Entries(bobs); err != nil {
		t.Fatalf("the pinned peer's conversation is gone from the audit log: %v", err)
	}

	// Restarted, the daemon finds the strangers' files again: new strangers
	// still take no more than the share.
	alice = restartDaemon(t, stop(t, alice))
	connect(t, bob, alice)
	flood(n / 2)
	if _, err := alice.Audit().Entries(bobs); err != nil {
		t.Fatalf("after a restart, the pinned peer's conversation is gone from the audit log: %v", err)
	}
	// The owner's pinned peer is still taken.
	greet(t, bob, alice)
}

// The count of refusals left out of the record survives a restart: left
// out while the record had no room, it is kept at close, and the next run's
// record says it.
func TestRefusalsLeftOutSurviveARestart(t *testing.T) {
	var free atomic.Uint64
	free.Store(1 << 40)
	alice := startDaemonWith(t, aliceConfig(""), WithAuditOptions(gossip.WithFreeSpace(func() (uint64, error) { return free.Load(), nil })))
	// One source writes refusalSourceBurst summaries at once; the rest are
	// left out.
	const extra = 7
	for range admit.RefusalSourceBurst + extra {
		alice.Inbox().RecordUndecoded("https", []byte("not json"), fmt.Errorf("%w: test", gossip.ErrMalformed))
	}
	free.Store(1 << 20) // below the watermark: no record of the count can be written at close
	if err := alice.Close(); err != nil {
		t.Fatal(err)
	}
	free.Store(1 << 40)
	again, err := New(alice.cfg, alice.id, alice.home, testLogger(t), WithAuditOptions(gossip.WithFreeSpace(func() (uint64, error) { return free.Load(), nil })))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	again.door.ReportLeftOut()
	var said int64
	for _, r := range refusalsOf(t, &testDaemon{Node: again, home: alice.home}) {
		said += r.LeftOut
	}
	if said != extra {
		t.Fatalf("the record of refusals says %d were left out, want %d", said, extra)
	}
}
