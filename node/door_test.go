package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
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
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// These tests hold the door (node/admit) on every inbound path: a refused
// message reaches neither the local agent nor any store, is recorded once
// as a refusal and never in the conversation it claims.

// agentWatch records what the local agent is told.
type agentWatch struct {
	ch   <-chan events.Event
	stop func()
}

func watchAgent(t *testing.T, d *testDaemon) *agentWatch {
	t.Helper()
	ch, stop := d.Subscribe()
	t.Cleanup(stop)
	return &agentWatch{ch: ch, stop: stop}
}

// refusedThenNothing waits for the refusal of an established sender's
// message and checks that no event before it, nor any queued with it,
// carries the message.
func (w *agentWatch) refusedThenNothing(t *testing.T, code wire.Code, messageID string) events.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var refused events.Event
	for refused.Type == "" {
		select {
		case e, ok := <-w.ch:
			if !ok {
				t.Fatal("the agent's event stream ended")
			}
			if e.Message != nil && e.Message.Headers.MessageID == messageID {
				t.Fatalf("the agent was told of the refused message: %s event %+v", e.Type, e)
			}
			if e.Type == events.EventRefused && strings.HasPrefix(e.Detail, string(code)+":") {
				refused = e
			}
		case <-deadline:
			t.Fatalf("no %s refusal reached the agent", code)
		}
	}
	if refused.Message != nil {
		t.Errorf("the refusal event carries the refused message")
	}
	w.nothingAbout(t, messageID)
	return refused
}

// nothingAbout checks that no event queued for the agent carries the
// message or names a refusal of it: a refusal whose sender is not
// established is recorded, never told to the agent. Callers call it after
// the refusal was recorded (the transport has returned).
func (w *agentWatch) nothingAbout(t *testing.T, messageID string) {
	t.Helper()
	for {
		select {
		case e, ok := <-w.ch:
			if !ok {
				t.Fatal("the agent's event stream ended")
			}
			if e.Message != nil && e.Message.Headers.MessageID == messageID {
				t.Fatalf("the agent was told of the refused message: %s event", e.Type)
			}
		default:
			return
		}
	}
}

// refusalsOf is the record of refusals of d for today and yesterday (UTC),
// so that a test running across midnight still finds its refusals.
func refusalsOf(t *testing.T, d *testDaemon) []gossip.Refusal {
	t.Helper()
	var out []gossip.Refusal
	now := time.Now().UTC()
	for _, day := range []time.Time{now.AddDate(0, 0, -1), now} {
		rs, err := d.Audit().Refusals(day.Format("2006-01-02"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rs...)
	}
	return out
}

// refusedOnce checks that messageID is recorded as refused exactly once,
// with code, and in no conversation's entries.
func refusedOnce(t *testing.T, d *testDaemon, m *gossip.Message, code wire.Code) gossip.Refusal {
	t.Helper()
	var found []gossip.Refusal
	for _, r := range refusalsOf(t, d) {
		if r.MessageID == m.Headers.MessageID {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("message %s recorded as refused %d times, want once", m.Headers.MessageID, len(found))
	}
	if found[0].Code != string(code) {
		t.Errorf("refusal code %s, want %s", found[0].Code, code)
	}
	if len(found[0].Excerpt) > gossip.RefusalExcerpt+len("…") {
		t.Errorf("refusal excerpt of %d bytes, want at most %d", len(found[0].Excerpt), gossip.RefusalExcerpt)
	}
	entries, err := d.Audit().Entries(m.Headers.ConversationID)
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // none at all: as it should be for a stranger's claim
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Message.Headers.MessageID == m.Headers.MessageID {
			t.Errorf("the refused message is in conversation %s's entries (%s, note %q)", m.Headers.ConversationID, e.Direction, e.Note)
		}
	}
	return found[0]
}

// noPeerRecord checks that d's peer cache and trust records hold nothing
// of pid.
func noPeerRecord(t *testing.T, d *testDaemon, pid peer.ID) {
	t.Helper()
	if _, err := d.Store().Peer(pid.String()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the peer cache holds %s after a refusal (%v)", pid, err)
	}
	for _, tr := range d.TrustBook().List() {
		if tr.Peer == pid.String() {
			t.Errorf("a trust record of %s exists after a refusal: %+v", pid, tr)
		}
	}
}

// viewSignedBy is a capability view of agent signed by signer.
func viewSignedBy(t *testing.T, agent, signer *identity.Identity, seq uint64) any {
	t.Helper()
	d := &negotiate.Document{IFP: 7, AgentID: agent.DID(), Seq: seq,
		Capabilities: []negotiate.Capability{{Name: "ping", Description: "Respond to connectivity tests"}}}
	if _, err := d.Sign(signer, time.Now()); err != nil {
		t.Fatal(err)
	}
	return negotiate.MustJSONValue(d)
}

// Libp2p: a greeting reusing another peer's open conversation ID.
func TestDoorGreetingInAnotherPeersConversation(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	open := greet(t, bob, alice)
	raw := newRawPeer(t, alice)
	agent := watchAgent(t, alice)

	g := raw.greeting(alice, nil)
	g.Headers.ConversationID = open.ConversationID
	g.Sign(raw.id, time.Now())
	m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, g))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeOutOfSequence {
		t.Fatalf("code %s, want %s", code, wire.CodeOutOfSequence)
	}
	agent.refusedThenNothing(t, wire.CodeOutOfSequence, g.Headers.MessageID)
	r := refusedOnce(t, alice, g, wire.CodeOutOfSequence)
	if r.Peer != raw.ID().String() || !r.Verified || r.Claimed != open.ConversationID {
		t.Errorf("refusal summary %+v: want peer %s, verified, claiming %s", r, raw.ID(), open.ConversationID)
	}
	noPeerRecord(t, alice, raw.ID())
	// Nothing of the stranger's, not even the error that answered it,
	// is in bob's conversation.
	entries, err := alice.Audit().Entries(open.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Peer != bob.pid().String() {
			t.Errorf("bob's conversation holds a %s %s of %s", e.Direction, e.Message.Headers.Phase, e.Peer)
		}
	}
	if p, ok := alice.convs.Holds(open.ConversationID); !ok || p != bob.pid() {
		t.Errorf("bob's conversation was taken or closed")
	}
}

// Libp2p: a greeting whose view is signed by someone else.
func TestDoorGreetingWithAForeignView(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	raw := newRawPeer(t, alice)
	agent := watchAgent(t, alice)
	other, _ := identity.Generate(nil)

	g := raw.greeting(alice, nil)
	g.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: negotiate.PartCapabilities, Content: viewSignedBy(t, raw.id, other, 1)}}
	g.Sign(raw.id, time.Now())
	m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, g))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeInvalidSignature {
		t.Fatalf("code %s, want %s", code, wire.CodeInvalidSignature)
	}
	agent.refusedThenNothing(t, wire.CodeOf(identity.ErrBadSignature), g.Headers.MessageID)
	refusedOnce(t, alice, g, wire.CodeInvalidSignature)
	noPeerRecord(t, alice, raw.ID())
	if len(alice.Conversations().Open()) != 0 {
		t.Errorf("a conversation opened: %+v", alice.Conversations().Open())
	}
	// The same greeting with its own view is admitted afterwards: the
	// refusal did not use up anything of the peer's.
	g2 := raw.greeting(alice, nil)
	g2.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: negotiate.PartCapabilities, Content: viewSignedBy(t, raw.id, raw.id, 1)}}
	g2.Sign(raw.id, time.Now())
	if m, err := raw.exchange(t, alice, string(wire.Capabilities), frame(t, g2)); err != nil || m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("a good greeting after the refusal: %v %v", m, err)
	}
	if _, err := alice.Store().Peer(raw.ID().String()); err != nil {
		t.Errorf("the good greeting's view is not cached: %v", err)
	}
}

// Libp2p: a greeting whose view is older than the one held.
func TestDoorGreetingWithAStaleView(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	raw := newRawPeer(t, alice)
	send := func(seq uint64) (*gossip.Message, *gossip.Message) {
		g := raw.greeting(alice, nil)
		g.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: negotiate.PartCapabilities, Content: viewSignedBy(t, raw.id, raw.id, seq)}}
		g.Sign(raw.id, time.Now())
		m, err := raw.exchange(t, alice, string(wire.Capabilities), frame(t, g))
		if err != nil {
			t.Fatal(err)
		}
		return g, m
	}
	if _, m := send(5); m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("seq 5: %s", m.Headers.Phase)
	}
	agent := watchAgent(t, alice)
	g, m := send(3)
	if code := errorCode(t, m); code != wire.CodeStaleSeq {
		t.Fatalf("seq 3 after 5: %s", code)
	}
	agent.refusedThenNothing(t, wire.CodeStaleSeq, g.Headers.MessageID)
	refusedOnce(t, alice, g, wire.CodeStaleSeq)
	if rec, err := alice.Store().Peer(raw.ID().String()); err != nil || rec.Seq != 5 {
		t.Errorf("alice holds seq %d (%v), want 5", rec.Seq, err)
	}
}

// Update push: an update outside any conversation is refused at the door.
func TestDoorRefusedUpdate(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	raw := newRawPeer(t, alice)
	agent := watchAgent(t, alice)
	now := time.Now()
	u := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: raw.id.DID()}, To: []gossip.Agent{{Agent: alice.id.DID()}},
		ConversationID: "conv:none", Sequence: 2, Phase: gossip.PhaseContext, ContentType: gossip.DefaultContentType,
	}, Body: gossip.Body{Parts: []gossip.Part{{ContentType: "application/json", Name: negotiate.PartCapabilities, Content: viewSignedBy(t, raw.id, raw.id, 2)}}}}
	u.Sign(raw.id, now)
	m, err := raw.exchange(t, alice, string(wire.Update), frame(t, u))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeOutOfSequence {
		t.Fatalf("code %s", code)
	}
	agent.refusedThenNothing(t, wire.CodeOutOfSequence, u.Headers.MessageID)
	refusedOnce(t, alice, u, wire.CodeOutOfSequence)
	noPeerRecord(t, alice, raw.ID())
}

// forgedFrom is a greeting from holder's did:key, signed by signer.
func forgedFrom(to *testDaemon, holder, signer *identity.Identity) *gossip.Message {
	now := time.Now()
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: holder.DID()}, To: []gossip.Agent{{Agent: to.id.DID()}},
		ConversationID: gossip.NewID("conv", now), Sequence: 1, Phase: gossip.PhaseGreeting, ContentType: gossip.DefaultContentType,
	}, Body: gossip.Body{Text: "hello"}}
	if err := m.Sign(signer, now); err != nil {
		panic(err)
	}
	return m
}

// HTTPS inbox: headers.from must be the signer.
func TestDoorInboxFromMustBeTheSigner(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	agent := watchAgent(t, alice)
	holder, _ := identity.Generate(nil)
	signer, _ := identity.Generate(nil)
	m := forgedFrom(alice, holder, signer)
	if _, err := alice.Inbox().Deliver(m, "https"); !errors.Is(err, gossip.ErrWrongKey) {
		t.Fatalf("Deliver: %v, want %v", err, gossip.ErrWrongKey)
	}
	agent.nothingAbout(t, m.Headers.MessageID)
	r := refusedOnce(t, alice, m, wire.CodeWrongKey)
	if r.Verified || r.Peer != "" {
		t.Errorf("an unverified refusal names an established sender: %+v", r)
	}
	noPeerRecord(t, alice, holder.PeerID())
	noPeerRecord(t, alice, signer.PeerID())
	// The same message from its real signer is taken.
	ok := forgedFrom(alice, signer, signer)
	if d, err := alice.Inbox().Deliver(ok, "https"); err != nil || d.Refused != nil {
		t.Fatalf("a well-signed message: %v %+v", err, d)
	}
}

// Signed POST /invoke: a request re-signed by another key is refused
// before its introduction proof is looked at, so the holder's token is
// not bound to the re-signer.
func TestDoorSignedInvokeFromMustBeTheSigner(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	holder := startDaemon(t, nil)
	tok := introduce(t, alice, "professional", holder)
	agent := watchAgent(t, alice)
	resigner, _ := identity.Generate(nil)

	now := time.Now()
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: holder.id.DID()}, To: []gossip.Agent{{Agent: alice.id.DID()}},
		ConversationID: "conv:chosen-by-caller", Sequence: 1, Phase: gossip.PhaseProbe, ContentType: gossip.DefaultContentType,
		Capabilities: &gossip.CapabilityHeaders{Request: []string{"ping"}},
	}}
	heldTok, err := identity.ParseIntroduction(tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddIntroProof(heldTok, now); err != nil {
		t.Fatal(err)
	}
	if err := m.Sign(resigner, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := alice.Inbox().ExecuteSigned(m); !errors.Is(err, gossip.ErrWrongKey) {
		t.Fatalf("ExecuteSigned: %v, want %v", err, gossip.ErrWrongKey)
	}
	agent.nothingAbout(t, m.Headers.MessageID)
	refusedOnce(t, alice, m, wire.CodeWrongKey)
	intros, err := alice.TrustBook().IssuedIntros()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range intros {
		if in.ID == tok.ID && in.State != trust.IntroUnused {
			t.Errorf("the holder's token is %s (bound to %s) after a re-signed request", in.State, in.BoundPeer)
		}
	}
	noPeerRecord(t, alice, resigner.PeerID())
}

// Fetched mail: from must be the signer, and the mail must be addressed
// here; refused mail reaches nobody.
func TestDoorMailFromMustBeTheSigner(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	agent := watchAgent(t, alice)
	holder, _ := identity.Generate(nil)
	signer, _ := identity.Generate(nil)
	relay, _ := identity.Generate(nil)
	for name, tc := range map[string]struct {
		m    *gossip.Message
		code wire.Code
	}{
		"from is not the signer": {forgedFrom(alice, holder, signer), wire.CodeWrongKey},
		"addressed elsewhere": {func() *gossip.Message {
			m := forgedFrom(alice, signer, signer)
			m.Headers.To = []gossip.Agent{{Agent: holder.DID()}}
			m.Security = nil
			m.Sign(signer, time.Now())
			return m
		}(), wire.CodeInvalidFormat},
	} {
		raw, err := gossip.EncodeCBOR(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		if err := alice.mail.Accept(relay.PeerID(), wire.Mail{ID: "mail:1", Message: raw}); wire.CodeOf(err) != tc.code {
			t.Fatalf("%s: %v, want code %s", name, err, tc.code)
		}
		agent.nothingAbout(t, tc.m.Headers.MessageID)
		refusedOnce(t, alice, tc.m, tc.code)
	}
	noPeerRecord(t, alice, holder.PeerID())
}

// An idle conversation closes quietly: no error message either way, no
// refusal on either side.
func TestDoorIdleConversationClosesQuietly(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Limits.StreamTimeout.Duration = 400 * time.Millisecond
	alice := startDaemon(t, cfg)
	bobCfg := loopbackConfig()
	bobCfg.Limits.StreamTimeout.Duration = time.Minute
	bob := startDaemon(t, bobCfg)
	connect(t, bob, alice)
	evs := watchAgent(t, alice)
	res := greet(t, bob, alice)
	waitEvent(t, evs.ch, func(e events.Event) bool {
		return e.Type == events.EventConversation && e.ConversationID == res.ConversationID && e.Detail == "closed"
	})
	for _, d := range []*testDaemon{alice, bob} {
		if rs := refusalsOf(t, d); len(rs) != 0 {
			t.Errorf("refusals recorded for an idle conversation: %+v", rs)
		}
	}
	// bob's side ends when alice closes; it must have received no error.
	eventually(t, "bob's conversation to end", func() bool { _, held := bob.convs.Holds(res.ConversationID); return !held })
	entries, err := bob.Audit().Entries(res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Message.Headers.Phase == gossip.PhaseError {
			t.Errorf("an error message in an idle conversation: %s %q", e.Direction, e.Message.Body.Text)
		}
	}
}

// A frame that does not decode is recorded as a bounded refusal with the
// stream's peer, and answered.
func TestDoorUndecodableFrameIsSummarised(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	raw := newRawPeer(t, alice)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := raw.NewStream(ctx, alice.id.PeerID(), wire.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	s.Write([]byte{0x03, 0xff, 0x00, 0x13})
	m, err := gossip.ReadMessage(bufio.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeInvalidFormat {
		t.Fatalf("code %s", code)
	}
	var found bool
	for _, r := range refusalsOf(t, alice) {
		if r.Peer == raw.ID().String() && r.Code == string(wire.CodeInvalidFormat) && !r.Verified && r.MessageID == "" {
			found = true
		}
	}
	if !found {
		t.Errorf("no refusal of the undecodable frame: %+v", refusalsOf(t, alice))
	}
}

// A proposed persona is granted only when the owner established it: a
// stranger proposing "family" is under the default persona, neither sees
// nor can invoke a when-eligible capability conditioned on it, and is
// told so in words that are the same whether the persona exists or not.
func TestDoorPersonaIsEstablishedNotClaimed(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Capabilities = append(cfg.Capabilities, map[string]any{"name": "family.album", "description": "The family album",
		"advertise": "when-eligible", "conditions": map[string]any{"persona": []string{"family"}}})
	cfg.Disclosure.OpenPersonas = []string{"guest"}
	alice := startDaemon(t, cfg)
	stranger := startDaemon(t, nil)
	named := startDaemon(t, nil)
	if err := alice.Policy().SetDisclosure("family", named.pid().String(), "public"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, d := range []*testDaemon{stranger, named} {
		connect(t, d, alice)
	}
	sees := func(d *testDaemon, persona string) (negotiate.Granted, bool) {
		t.Helper()
		res, err := d.QueryCapabilities(ctx, alice.pid(), negotiate.Proposal{Persona: persona})
		if err != nil {
			t.Fatal(err)
		}
		_, ok := res.View.Capability("family.album")
		return res.GrantedToUs, ok
	}
	g, ok := sees(stranger, "family")
	if ok || g.Persona != "" {
		t.Errorf("a stranger proposing family: persona %q, sees family.album %v", g.Persona, ok)
	}
	gNone, _ := sees(stranger, "no-such-persona")
	if strings.Join(g.Notes, "|") != strings.Join(gNone.Notes, "|") || len(g.Notes) == 0 {
		t.Errorf("the notes differ between an existing and a missing persona: %q vs %q", g.Notes, gNone.Notes)
	}
	if _, err := stranger.Invoke(ctx, alice.pid(), "family.album", nil); wire.CodeOf(err) != wire.CodeUnknownCapability {
		t.Errorf("a stranger invoking family.album: %v, want %s", err, wire.CodeUnknownCapability)
	}
	if g, ok := sees(named, "family"); !ok || g.Persona != "family" {
		t.Errorf("a peer the map names under family: persona %q, sees family.album %v", g.Persona, ok)
	}
	if g, _ := sees(stranger, "guest"); g.Persona != "guest" {
		t.Errorf("an open persona was not granted: %q", g.Persona)
	}
}

// A greeting whose proposal part does not read is refused as invalid,
// naming the member, rather than taken as proposing nothing.
func TestDoorUnreadableProposalIsRefused(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	raw := newRawPeer(t, alice)
	g := raw.greeting(alice, nil)
	g.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: negotiate.PartGreeting, Content: map[string]any{"temperature": int64(5)}}}
	g.Sign(raw.id, time.Now())
	m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, g))
	if err != nil {
		t.Fatal(err)
	}
	if code := errorCode(t, m); code != wire.CodeInvalidFormat {
		t.Fatalf("code %s, want %s", code, wire.CodeInvalidFormat)
	}
	if !strings.Contains(m.Body.Text, "temperature") {
		t.Errorf("the refusal does not name the member: %q", m.Body.Text)
	}
	refusedOnce(t, alice, g, wire.CodeInvalidFormat)
	noPeerRecord(t, alice, raw.ID())
}

// A view signed by its sender over members this daemon does not model (an
// extension on the document and on a capability) and with persona written
// as a string (the IFP-12 form) is admitted, and kept as received: the
// peer cache holds the unknown members.
func TestDoorViewWithUnknownMembersIsKeptAsReceived(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	raw := newRawPeer(t, alice)
	view := map[string]any{"ifp": int64(7), "agent_id": raw.id.DID(), "seq": int64(3),
		"x-extension": map[string]any{"colour": "teal"},
		"capabilities": []any{map[string]any{"name": "ping", "description": "Respond to connectivity tests",
			"x-cost-hint": "free", "conditions": map[string]any{"persona": "researcher"}}}}
	canon, err := identity.Canonicalize(view)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := raw.id.SignDocument(canon, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sigValue, err := negotiate.JSONValue(sig)
	if err != nil {
		t.Fatal(err)
	}
	view["signature"] = sigValue
	g := raw.greeting(alice, nil)
	g.Body.Parts = []gossip.Part{{ContentType: "application/json", Name: negotiate.PartCapabilities, Content: view}}
	g.Sign(raw.id, time.Now())
	m, err := raw.exchange(t, alice, string(wire.Capabilities), frame(t, g))
	if err != nil {
		t.Fatal(err)
	}
	if m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("answer %s: %s", m.Headers.Phase, m.Body.Text)
	}
	rec, err := alice.Store().Peer(raw.ID().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{`"x-extension":{"colour":"teal"}`, `"x-cost-hint":"free"`, `"persona":"researcher"`} {
		if !strings.Contains(string(rec.View), member) {
			t.Errorf("the cached view lost %s: %s", member, rec.View)
		}
	}
	if rec.Seq != 3 {
		t.Errorf("cached seq %d, want 3", rec.Seq)
	}
}

// A signed POST /invoke is not part of any conversation of this daemon:
// the conversation ID its caller chose never reaches the agent as the
// daemon's own.
func TestDoorSignedInvokeKeepsTheCallersConversationOut(t *testing.T) {
	cfg := aliceConfig("")
	// A capability the agent answers (ping is the daemon's own).
	cfg.Capabilities = append(cfg.Capabilities, map[string]any{"name": "echo", "description": "The parameters back"})
	alice := startDaemon(t, cfg)
	evs := watchAgent(t, alice)
	caller, _ := identity.Generate(nil)
	now := time.Now()
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: caller.DID()}, To: []gossip.Agent{{Agent: alice.id.DID()}},
		ConversationID: "conv:chosen-by-caller", Sequence: 1, Phase: gossip.PhaseProbe, ContentType: gossip.DefaultContentType,
		Capabilities: &gossip.CapabilityHeaders{Request: []string{"echo"}},
	}}
	if err := m.Sign(caller, now); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := alice.Inbox().ExecuteSigned(m)
		done <- err
	}()
	e := waitEvent(t, evs.ch, func(e events.Event) bool { return e.Type == events.EventInvocation })
	if e.Invocation.ConversationID != "" || e.ConversationID != "" {
		t.Errorf("the agent was given conversation %q (event %q)", e.Invocation.ConversationID, e.ConversationID)
	}
	if e.Invocation.Peer != caller.PeerID().String() {
		t.Errorf("the agent was told the request came from %q, want the signer %s", e.Invocation.Peer, caller.PeerID())
	}
	if err := alice.AnswerInvocation(e.Invocation.ID, events.InvocationAnswer{Result: "pong"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("ExecuteSigned: %v", err)
	}
}

// The HTTPS inbox: a message must be addressed to this daemon.
func TestDoorInboxMustBeAddressedHere(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	agent := watchAgent(t, alice)
	sender, _ := identity.Generate(nil)
	elsewhere, _ := identity.Generate(nil)
	m := forgedFrom(alice, sender, sender)
	m.Headers.To = []gossip.Agent{{Agent: elsewhere.DID()}}
	m.Security = nil
	if err := m.Sign(sender, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Inbox().Deliver(m, "https"); wire.CodeOf(err) != wire.CodeInvalidFormat {
		t.Fatalf("Deliver: %v, want code %s", err, wire.CodeInvalidFormat)
	}
	agent.nothingAbout(t, m.Headers.MessageID)
	refusedOnce(t, alice, m, wire.CodeInvalidFormat)
	noPeerRecord(t, alice, sender.PeerID())
}

// A message refused after the replay step (too fast, here) is forgotten
// by the seen-set: the same message, sent again once the rate allows, is
// admitted, not refused as a replay.
func TestDoorRefusedAfterReplayIsNotUsedUp(t *testing.T) {
	cfg := aliceConfig("")
	cfg.Rates.Cool = 1 // one message a minute, one at once
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	h := config.Home{Dir: t.TempDir()}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg, id, h, testLogger(t), WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	alice := &testDaemon{Node: n, home: h, cfg: cfg, id: id}
	sender, _ := identity.Generate(nil)
	greeting := forgedFrom(alice, sender, sender)
	if d, err := alice.Inbox().Deliver(greeting, "https"); err != nil || d.Refused != nil {
		t.Fatalf("the greeting: %v %+v", err, d)
	}
	next := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", clock), Date: gossip.FormatDate(clock),
		From: gossip.Agent{Agent: sender.DID()}, To: []gossip.Agent{{Agent: alice.id.DID()}},
		ConversationID: greeting.Headers.ConversationID, Sequence: 2, Phase: gossip.PhaseContext, ContentType: gossip.DefaultContentType,
	}, Body: gossip.Body{Text: "and another thing"}}
	if err := next.Sign(sender, clock); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Inbox().Deliver(next, "https"); !errors.Is(err, wire.ErrRateLimited) {
		t.Fatalf("a second message within the minute: %v, want %v", err, wire.ErrRateLimited)
	}
	refusedOnce(t, alice, next, wire.CodeRateLimited)
	mu.Lock()
	clock = clock.Add(2 * time.Minute)
	mu.Unlock()
	if d, err := alice.Inbox().Deliver(next, "https"); err != nil || d.Refused != nil {
		t.Fatalf("the same message once the rate allows: %v %+v", err, d)
	}
	entries, err := alice.Audit().Entries(greeting.Headers.ConversationID)
	if err != nil || len(entries) != 2 {
		t.Fatalf("the conversation holds %d entries (%v), want the greeting and the message", len(entries), err)
	}
}

// A flood of refusals from senders nobody established neither drops the
// agent's event stream nor fills it: the agent hears of a few, then of how
// many more there were; the record of refusals accounts for every one
// (written within the refusal budget, the others counted in the next
// record written).
func TestDoorStrangersCannotCrowdTheAgent(t *testing.T) {
	clock := &testClock{t: time.Now()}
	alice := startDaemonWith(t, aliceConfig(""), WithClock(clock.now))
	agent := watchAgent(t, alice)
	const flood = 3 * events.SubscriberBuffer
	for i := range flood {
		alice.Inbox().RecordUndecoded("https", []byte(fmt.Sprintf("junk %d", i)), fmt.Errorf("%w: junk", gossip.ErrInvalidMessage))
	}
	// The hub delivers in order: every event of the flood comes before
	// this one.
	const sentinel = "test_flood_done"
	alice.events.Publish(events.Event{Type: sentinel, At: clock.now()})
	refusals := 0
	for done := false; !done; {
		e, ok := <-agent.ch
		switch {
		case !ok:
			t.Fatal("the agent's event stream was dropped")
		case e.Type == events.EventEventsLost:
			t.Fatal("the agent fell behind")
		case e.Type == events.EventRefused:
			refusals++
		case e.Type == sentinel:
			done = true
		}
	}
	if refusals == 0 || refusals > admit.StrangerEventBurst+1 {
		t.Errorf("%d refusal events for %d refusals, want 1 to %d", refusals, flood, admit.StrangerEventBurst+1)
	}
	written := refusalsOf(t, alice)
	if len(written) == 0 || len(written) > admit.RefusalSourceBurst {
		t.Errorf("the record of refusals holds %d of %d, want 1 to %d (the budget of one source)", len(written), flood, admit.RefusalSourceBurst)
	}
	// Once the budget has a token again, the next record says how many
	// were left out.
	clock.advance(admit.RefusalSourceEvery)
	alice.Inbox().RecordUndecoded("https", []byte("junk, later"), fmt.Errorf("%w: junk", gossip.ErrInvalidMessage))
	all := refusalsOf(t, alice)
	accounted := int64(len(all))
	for _, r := range all {
		accounted += r.LeftOut
	}
	if len(all) != len(written)+1 || accounted != flood+1 {
		t.Errorf("the record of refusals accounts for %d refusals in %d records, want %d in %d", accounted, len(all), flood+1, len(written)+1)
	}
}

// An idle conversation, both sides with the same stream timeout (as two
// daemons of one configuration have), ends without a line above debug on
// either side: no "refused message", no "conversation ended" at info.
func TestIdleConversationLogsNothingAboveDebug(t *testing.T) {
	start := func(cfg *config.Config, logs *syncBuffer) *testDaemon {
		cfg.Limits.StreamTimeout.Duration = 300 * time.Millisecond
		h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
		id, err := h.Init(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(cfg, id, h, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return &testDaemon{Node: n, home: h, cfg: cfg, id: id}
	}
	var aliceLogs, bobLogs syncBuffer
	alice, bob := start(aliceConfig(""), &aliceLogs), start(loopbackConfig(), &bobLogs)
	connect(t, bob, alice)
	res := greet(t, bob, alice)
	for _, d := range []*testDaemon{alice, bob} {
		eventually(t, "the idle conversation to end", func() bool { _, held := d.convs.Holds(res.ConversationID); return !held })
	}
	for name, logs := range map[string]*syncBuffer{"alice": &aliceLogs, "bob": &bobLogs} {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "refused message") || strings.Contains(l, "conversation ended") || strings.Contains(l, "deadline") {
				t.Errorf("%s logged for an idle conversation: %s", name, l)
			}
		}
	}
}

// A log line about a peer names it by the display name from its view,
// after its peer ID.
func TestLogsNamePeersByDisplay(t *testing.T) {
	var logs syncBuffer
	cfg := aliceConfig("")
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg, id, h, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	alice := &testDaemon{Node: n, home: h, cfg: cfg, id: id}
	bobCfg := loopbackConfig()
	bobCfg.Identity.Display = "Bob's agent"
	bob := startDaemon(t, bobCfg)
	connect(t, bob, alice)
	greet(t, bob, alice)
	if _, err := bob.Invoke(context.Background(), alice.id.PeerID(), "calendar.availability", nil); err == nil {
		t.Fatal("bob, a stranger, was let use the calendar")
	}
	want := fmt.Sprintf("peer=\"%s \\\"Bob's agent\\\"\"", bob.id.PeerID())
	if line := lineContaining(logs.String(), "refused capability request"); !strings.Contains(line, want) {
		t.Fatalf("alice's log line: %q, want it to name bob as %s", line, want)
	}
}

func lineContaining(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// TestDecodingBudgetHeldThroughTheAudit: a message keeps its share of the
// decoding budget after its signature is verified, until it is recorded:
// the audit step copies it twice (its JSON line, its rendering), which
// the budget must count. At the fit step, after verify and before the
// audit, the strangers' share is not whole.
func TestDecodingBudgetHeldThroughTheAudit(t *testing.T) {
	held := make(chan bool, 1)
	var budget atomic.Pointer[admit.Budget]
	alice := startDaemonWith(t, aliceConfig(""), WithBeforeFit(func(a *admit.Arrival) {
		_, strangers := budget.Load().Used()
		_, whole := budget.Load().Whole()
		select {
		case held <- strangers > 0 && !whole:
		default:
		}
	}))
	budget.Store(alice.door.Budget())
	raw := newRawPeer(t, alice)
	g := raw.greeting(alice, raw.id)
	m, err := raw.exchange(t, alice, string(wire.Conversation), frame(t, g))
	if err != nil || m.Headers.Phase != gossip.PhaseGreeting {
		t.Fatalf("greeting: %v %+v", err, m)
	}
	if !<-held {
		t.Fatal("at the fit step the message's share of the decoding budget was given back already")
	}
	if _, strangers := alice.door.Budget().Used(); strangers != 0 {
		t.Fatalf("once the message was admitted %d bytes of the strangers' share were still held", strangers)
	}
	if _, whole := alice.door.Budget().Whole(); !whole {
		t.Fatal("once the message was admitted the strangers' share of the decoding budget was not whole")
	}
}
