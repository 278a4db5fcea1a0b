package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// faultClockFileEnv is the variable a binary built with -tags faultclock
// reads its clock's offset file from (fakeclock_faults.go).
const faultClockFileEnv = "IFACED_FAULT_CLOCK_FILE"

// buildIfacedFaultClock builds this command with -tags faultclock, once:
// a daemon whose clock a test steps while it runs.
func buildIfacedFaultClock(t *testing.T) string { return builtFaultClock.get(t) }

// TestFaultClockJumps: daemon A (a process built with -tags faultclock)
// has its clock stepped while it runs, 1 h ahead, then 1 h behind (before
// its first messages), then back; B (in this process) keeps the system's
// clock. Per the wire doc (node/wire "Admission", replay step: a date at
// most 24 h old and at most 5 min ahead):
//
//   - 1 h ahead, A takes B's greeting (1 h old to it) and answers it dated
//     by its own clock; B refuses that answer (1 h ahead to B), code
//     replay;
//   - 1 h behind, A refuses B's greeting dated by B's clock (1 h ahead to
//     it), code replay, naming its clock; a greeting dated by A's clock is
//     taken;
//   - at every step, a message A took before is refused again, code
//     replay, however fresh its date looks to A's clock then: in
//     particular the greeting taken while A was behind, sent again once
//     A's clock is right (inside the window, its ID in the seen-set);
//   - A's audit entries and refusals are dated by A's clock at the time,
//     so they say when A thought it was; A neither panics nor exits, logs
//     every step of its clock, its audit log verifies afterwards, and once
//     its clock is right B greets and invokes as before (nothing reset or
//     stuck); A warns of each step in its log, as the system's clock
//     would be watched: against the time measured on the monotonic clock.
func TestFaultClockJumps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a daemon")
	}
	bin := buildIfacedFaultClock(t)
	clockFile := filepath.Join(t.TempDir(), "clock-offset")
	step := func(d time.Duration) {
		t.Helper()
		tmp := clockFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, clockFile); err != nil {
			t.Fatal(err)
		}
	}
	step(0)
	aHome := config.Home{Dir: filepath.Join(t.TempDir(), "a")}
	if _, err := aHome.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	ac := quietConfig()
	ac.Capabilities = nodetest.AliceConfig().Capabilities
	writeConfig(t, aHome, ac)
	a := startProcEnv(t, bin, aHome, faultClockFileEnv+"="+clockFile)
	st := a.waitAPI(t)
	aID, err := peer.Decode(st.PeerID)
	if err != nil {
		t.Fatal(err)
	}
	ac2, err := api.Dial(aHome)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ac2.Close() }()
	b := inProcess(t, quietConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := b.Connect(ctx, st.Addrs[0]); err != nil {
		t.Fatal(err)
	}

	// raw sends m to A on a stream of its own and returns A's answer.
	raw := func(m *gossip.Message) *gossip.Message {
		t.Helper()
		s, err := b.Host().NewStream(ctx, aID, wire.Conversation)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Reset()
		s.SetDeadline(time.Now().Add(30 * time.Second))
		if err := gossip.WriteMessage(s, m); err != nil {
			t.Fatal(err)
		}
		ans, err := gossip.ReadMessage(bufio.NewReader(s))
		if err != nil {
			t.Fatalf("A's answer to %s: %v\n%s", m.Headers.MessageID, err, a.logTail())
		}
		return ans
	}
	// greeting is B's greeting to A, signed and dated at.
	greeting := func(at time.Time) *gossip.Message {
		m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
			MessageID: gossip.NewID("msg", at), Date: gossip.FormatDate(at),
			From: gossip.Agent{Agent: b.ID().DID()}, To: []gossip.Agent{{Agent: ownDID(t, aHome)}},
			ConversationID: gossip.NewID("conv", at), Sequence: 1, Phase: gossip.PhaseGreeting,
			ContentType: gossip.DefaultContentType,
		}, Body: gossip.Body{Text: "hello"}}
		if err := m.Sign(b.ID(), at); err != nil {
			t.Fatal(err)
		}
		return m
	}
	taken := func(what string, m *gossip.Message) *gossip.Message {
		t.Helper()
		ans := raw(m)
		if ans.Headers.Phase != gossip.PhaseGreeting {
			body, _ := converse.ErrorBody(ans)
			t.Fatalf("%s: answered %s %+v, want a greeting", what, ans.Headers.Phase, body)
		}
		return ans
	}
	refused := func(what string, m *gossip.Message, want string) {
		t.Helper()
		ans := raw(m)
		body, ok := converse.ErrorBody(ans)
		if ans.Headers.Phase != gossip.PhaseError || !ok || body.Code != wire.CodeReplay || !strings.Contains(body.Message, want) {
			t.Errorf("%s: answered %s %+v, want code replay saying %q", what, ans.Headers.Phase, body, want)
			return
		}
		t.Logf("%s: %s: %s", what, body.Code, body.Message)
	}
	// datedNear checks that A dated the entries of conversation conv by
	// its clock at offset off.
	datedNear := func(what, conv string, off time.Duration) {
		t.Helper()
		got, err := ac2.AuditEntries(ctx, conv)
		if err != nil {
			t.Fatalf("%s: A's audit of %s: %v", what, conv, err)
		}
		if len(got.Entries) < 2 {
			t.Fatalf("%s: A's audit of %s has %d entries, want B's greeting and A's answer", what, conv, len(got.Entries))
		}
		for _, e := range got.Entries {
			if d := e.At.Sub(time.Now().Add(off)); d < -time.Minute || d > time.Minute {
				t.Errorf("%s: A's audit entry (%s, %s) is dated %s, %s off A's clock (system's %+v)", what, e.Direction, e.Message.Headers.MessageID, e.At, d, off)
			}
		}
	}

	// The clock right: B greets and invokes.
	g0, err := b.QueryCapabilities(ctx, aID, negotiate.Proposal{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Invoke(ctx, aID, "ping", nil); err != nil {
		t.Fatal(err)
	}
	first := sentGreeting(t, b, g0.ConversationID)
	refused("B's first greeting again, the clock right", first, "already seen")
	// A greeting 23 h 30 min old, inside the window: an hour ahead, a
	// prune forgets its ID.
	old := greeting(time.Now().Add(-23*time.Hour - 30*time.Minute))
	taken("B's greeting dated 23 h 30 min ago", old)

	// 1 h ahead.
	step(time.Hour)
	_, err = b.QueryCapabilities(ctx, aID, negotiate.Proposal{})
	if !errors.Is(err, identity.ErrFuture) {
		t.Errorf("B's greeting with A 1 h ahead: %v; want B to refuse A's answer, dated 1 h ahead of B, code replay", err)
	} else {
		t.Logf("B's greeting with A 1 h ahead: %v", err)
	}
	ahead := greeting(time.Now())
	ans := taken("B's greeting, A 1 h ahead", ahead)
	if at, err := time.Parse(time.RFC3339, ans.Headers.Date); err != nil || at.Sub(time.Now().Add(time.Hour)).Abs() > time.Minute {
		t.Errorf("A's answer, A 1 h ahead, is dated %s; want A's clock, 1 h ahead of the system's", ans.Headers.Date)
	}
	datedNear("1 h ahead", ahead.Headers.ConversationID, time.Hour)
	refused("B's first greeting again, A 1 h ahead", first, "already seen")
	refused("B's greeting of A's hour ahead again", ahead, "already seen")
	a.waitLog(t, "the clock moved ahead of the time measured", `by=1h0m0s`)
	// A restarts, still 1 h ahead, and prunes its seen-set at start: the
	// ID of the greeting dated 23 h 30 min ago goes (the date check
	// refuses it 1 h ahead anyway).
	refused("B's greeting dated 23 h 30 min ago again, A 1 h ahead", old, "older than")
	ac2.Close()
	a.stop(t)
	a = startProcEnv(t, bin, aHome, faultClockFileEnv+"="+clockFile)
	st = a.waitAPI(t)
	if ac2, err = api.Dial(aHome); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Connect(ctx, st.Addrs[0]); err != nil {
		t.Fatal(err)
	}

	// 1 h behind: before the first messages.
	step(-time.Hour)
	_, err = b.QueryCapabilities(ctx, aID, negotiate.Proposal{})
	if re := (*wire.RemoteError)(nil); !errors.As(err, &re) || re.Body.Code != wire.CodeReplay || !strings.Contains(re.Body.Message, "ahead of this daemon's clock") {
		t.Errorf("B's greeting with A 1 h behind: %v; want A to refuse it, dated 1 h ahead of A, code replay", err)
	} else {
		t.Logf("B's greeting with A 1 h behind: %v", err)
	}
	refused("B's greeting dated by B's clock, A 1 h behind", greeting(time.Now()), "ahead of this daemon's clock")
	refused("B's first greeting again, A 1 h behind", first, "ahead of this daemon's clock")
	behind := greeting(time.Now().Add(-time.Hour)) // dated by A's clock
	taken("B's greeting dated by A's clock, A 1 h behind", behind)
	datedNear("1 h behind", behind.Headers.ConversationID, -time.Hour)
	refused("B's greeting of A's hour behind again", behind, "already seen")
	refused("B's greeting dated 23 h 30 min ago again, A 1 h behind (its ID pruned)", old, "older than this daemon's replay record reaches")

	a.waitLog(t, "the clock went back", `by=2h0m0s`)
	// Back to the system's clock: the greeting of the hour behind is an
	// hour old, inside the window, and still refused.
	step(0)
	refused("B's greeting of A's hour behind again, the clock right", behind, "already seen")
	refused("B's greeting of A's hour ahead again, the clock right", ahead, "already seen")
	refused("B's first greeting again, the clock right", first, "already seen")
	refused("B's greeting dated 23 h 30 min ago again, the clock right (its ID pruned)", old, "older than this daemon's replay record reaches")
	if _, err := b.QueryCapabilities(ctx, aID, negotiate.Proposal{}); err != nil {
		t.Errorf("B's greeting once A's clock is right: %v", err)
	}
	if _, err := b.Invoke(ctx, aID, "ping", nil); err != nil {
		t.Errorf("B's invocation once A's clock is right: %v", err)
	}

	a.waitLog(t, "the clock moved ahead of the time measured", `by=1h0m0s`)
	// A's record of refusals dates each by A's clock at the time.
	rl, err := ac2.Refusals(ctx, api.RefusalQuery{Code: string(wire.CodeReplay), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var behindDated int
	for _, r := range rl.Refusals {
		if r.MessageID == first.Headers.MessageID && strings.Contains(r.Reason, "ahead of this daemon's clock") {
			behindDated++
			if d := r.At.Sub(time.Now().Add(-time.Hour)); d < -5*time.Minute || d > time.Minute {
				t.Errorf("A's refusal of B's first greeting while 1 h behind is dated %s, want about an hour before now", r.At)
			}
		}
	}
	if behindDated != 1 {
		t.Errorf("A's record of refusals holds %d refusals of B's first greeting as ahead of its clock, want 1: %+v", behindDated, rl.Refusals)
	}

	select {
	case <-a.exited:
		t.Fatalf("A exited: %v\n%s", a.err, a.logTail())
	default:
	}
	logBytes, err := os.ReadFile(a.log)
	if err != nil {
		t.Fatal(err)
	}
	log := string(logBytes)
	if strings.Contains(log, "panic") || strings.Count(log, "fault clock: the offset changed") != 3 {
		t.Errorf("A's log has a panic, or does not show the steps of its clock since the restart (to 1 h ahead at start, 1 h behind, back):\n%s", a.logTail())
	}
	ac2.Close()
	a.stop(t)
	out := mustRunBin(t, bin, "audit", "verify", "--home", aHome.Dir)
	t.Logf("ifaced audit verify:\n%s", out)
}

// stop ends the process as an owner does (SIGINT) and waits for it to
// exit cleanly.
func (p *daemonProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("interrupting %d: %v", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("process %d exited with %v\n%s", p.cmd.Process.Pid, p.err, p.logTail())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("process %d still running 60 s after SIGINT\n%s", p.cmd.Process.Pid, p.logTail())
	}
}

// waitLog polls the process's log for up to 60 s for a line holding
// every piece of want (the daemon looks at its clock every few seconds).
func (p *daemonProc) waitLog(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(p.log)
		for _, line := range strings.Split(string(b), "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				t.Logf("A's log: %s", line)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q in the log after 60 s\n%s", want, p.logTail())
		}
		time.Sleep(100 * time.Millisecond) // polling the log file
	}
}

// sentGreeting is the greeting b sent in conversation conv, as b's audit
// log recorded it.
func sentGreeting(t *testing.T, b *node.Node, conv string) *gossip.Message {
	t.Helper()
	entries, err := b.Audit().Entries(conv)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Direction == gossip.Sent && e.Message.Headers.Phase == gossip.PhaseGreeting {
			return e.Message
		}
	}
	t.Fatalf("B's audit of %s has no greeting sent", conv)
	return nil
}

// ownDID is the did:key of the key in home.
func ownDID(t *testing.T, h config.Home) string {
	t.Helper()
	id, err := identity.LoadKey(h.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	return id.DID()
}
