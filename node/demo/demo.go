// Package demo runs three ifaced daemons in one process on loopback —
// Alice, Bob and Carol, each with a fresh data directory — and narrates
// what they do: they greet, each learns what the other offers it and why,
// Alice changes her capabilities and Bob, in conversation, is told, and
// the conversation is listed as Alice's audit log has it. It is the
// quickest way to see the daemon work (`ifaced demo`).
//
// The output is for a newcomer reading a terminal, so it is short by
// design: the story in under 100 lines (TestDemoTellsTheStory holds it
// there), then one line per audited message in the shape of `ifaced audit
// --conversation`, never the IFP-3 rendering with its signatures (that is
// in the audit files, which a reader keeps with --keep). The data
// directory is named only when it is kept: a temporary one is removed
// before the reader could open anything in it. Words a newcomer meets
// here for the first time (a message's sequence, a document's seq, a
// price in USDC) are explained where they first appear. The last line
// points to the README's five-minute walkthrough, the next step.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ifaced/ifaced/examples/agent"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Options adjust a demo run.
type Options struct {
	// Dir is where the three data directories go, kept afterwards and
	// named in the output (`ifaced demo --keep DIR`). When empty they go
	// in a temporary directory, removed at the end and never named.
	Dir string
}

// nextStep is the demo's last line: where a reader goes from here.
const nextStep = `next: two daemons and an agent of your own, in five minutes: README.md, "Five minutes on loopback"`

type daemon struct {
	name string
	home config.Home
	id   *identity.Identity
	n    *node.Node
}

// Run plays the demo, writing the story to w.
func Run(ctx context.Context, w io.Writer, opts Options) error {
	dir := opts.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "ifaced-demo-")
		if err != nil {
			return fmt.Errorf("creating demo directory: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ds := map[string]*daemon{}
	for _, name := range []string{"alice", "bob", "carol"} {
		h := config.Home{Dir: filepath.Join(dir, name)}
		id, err := h.Init(time.Now())
		if err != nil {
			return err
		}
		ds[name] = &daemon{name: name, home: h, id: id}
	}
	alice, bob, carol := ds["alice"], ds["bob"], ds["carol"]
	// Alice's local agent: the example webhook agent, on loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("starting the example agent: %w", err)
	}
	hook := &http.Server{Handler: agent.Handler(nil), ReadHeaderTimeout: 5 * time.Second}
	go hook.Serve(ln)
	defer hook.Close()
	webhook := "http://" + ln.Addr().String() + "/"
	for _, d := range []*daemon{alice, bob, carol} {
		cfg, err := daemonConfig(d.name, bob.id.PeerID(), webhook)
		if err != nil {
			return err
		}
		n, err := node.New(cfg, d.id, d.home, log)
		if err != nil {
			return fmt.Errorf("starting %s: %w", d.name, err)
		}
		defer n.Close()
		d.n = n
	}

	if opts.Dir != "" {
		fmt.Fprintf(w, "ifaced demo: three daemons on loopback, data kept in %s\n\n", dir)
	} else {
		fmt.Fprintf(w, "ifaced demo: three daemons on loopback, in temporary data directories (keep them with --keep DIR)\n\n")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, d := range []*daemon{alice, bob, carol} {
		fmt.Fprintf(tw, "  %s\t%s\t%d capabilities\t%s\n", d.name, d.id.PeerID(), len(d.n.Document().Capabilities), d.n.Addrs()[0])
	}
	tw.Flush()
	fmt.Fprintln(w, "\nAlice's disclosure map grants Bob \"professional\"; Carol is a stranger (\"public\").")
	fmt.Fprintln(w, "Alice's diary.read is advertise = \"when-eligible\": only close friends may even see it.")

	for _, d := range []*daemon{bob, carol} {
		if _, err := d.n.Connect(ctx, alice.n.Addrs()[0].String()); err != nil {
			return err
		}
	}
	aliceEvents, stopAlice := alice.n.Subscribe()
	defer stopAlice()
	bobEvents, stopBob := bob.n.Subscribe()
	defer stopBob()

	fmt.Fprintln(w, "\n== Bob greets Alice, proposing disclosure \"personal\" and temperature \"warm\"")
	rb, err := bob.n.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{Disclosure: "personal", Temperature: "warm"})
	if err != nil {
		return err
	}
	printGrant(w, "Alice grants Bob", rb.GrantedToUs)
	fmt.Fprintln(w, "  (seq: the version of a capability document; it rises with every change)")
	printView(w, "Bob's view of Alice", rb.View)
	printView(w, "Alice's view of Bob (from Bob's greeting)", mustCached(alice, bob.id.PeerID()))

	fmt.Fprintln(w, "\n== Carol greets Alice, proposing nothing")
	rc, err := carol.n.Greet(ctx, alice.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		return err
	}
	printGrant(w, "Alice grants Carol", rc.GrantedToUs)
	printView(w, "Carol's view of Alice", rc.View)

	fmt.Fprintln(w, "\n== Bob shares context; Alice's agent receives it")
	// Sent, not only said: send waits for Alice's acknowledgement (her
	// daemon admitted and recorded it), so it takes its place in the
	// conversation before Bob's next message does.
	if _, err := bob.n.Send(ctx, alice.id.PeerID(), "Bob is planning a trip to Lisbon in May and would like to meet."); err != nil {
		return err
	}
	e, err := wait(ctx, aliceEvents, func(e events.Event) bool {
		return e.Type == events.EventMessage && e.Message.Headers.Phase == gossip.PhaseContext
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  Alice's agent got (sequence %d, the message's place in the conversation): %q\n", e.Message.Headers.Sequence, e.Message.Body.Text)

	fmt.Fprintln(w, "\n== Bob asks Alice's agent to summarize a text (doc.summarize, priced at 0.05 USDC)")
	fmt.Fprintln(w, "  (USDC: a US-dollar stablecoin; the price is what Alice's document states per call, ifaced does not collect it)")
	res, err := bob.n.Invoke(ctx, alice.id.PeerID(), "doc.summarize", map[string]any{
		"text": "Inter-Face agents greet, learn what each offers the other, and ask for it under conditions their owners set.", "max_words": 8})
	if err != nil {
		return err
	}
	printResult(w, res.Result)

	fmt.Fprintln(w, "\n== Bob asks for calendar.availability, which needs authentication level 2 (verified)")
	_, err = bob.n.Invoke(ctx, alice.id.PeerID(), "calendar.availability", map[string]any{"days": 7})
	var refusal *wire.RemoteError
	if !errors.As(err, &refusal) {
		return fmt.Errorf("expected Alice to refuse, got %v", err)
	}
	fmt.Fprintf(w, "  refused (%s):\n", refusal.Body.Code)
	for _, u := range refusal.Body.Unmet {
		fmt.Fprintf(w, "    %s: requires %s, Bob has %s\n      %s\n", u.Condition, u.Required, u.Have, u.HowToMeet)
	}

	fmt.Fprintln(w, "\n== Alice's human reads Bob's key fingerprint to Bob's human over the phone; they match, and Alice pins it")
	fmt.Fprintf(w, "  ifaced trust %s --verify %s\n", bob.id.PeerID(), bob.id.Fingerprint())
	if _, err := alice.n.TrustBook().PinKey(bob.id.PeerID(), bob.id.Fingerprint()); err != nil {
		return err
	}
	fmt.Fprintln(w, "\n== Bob asks again, in the same conversation")
	res, err = bob.n.Invoke(ctx, alice.id.PeerID(), "calendar.availability", map[string]any{"days": 7})
	if err != nil {
		return err
	}
	printResult(w, res.Result)

	fmt.Fprintln(w, "\n== Alice adds travel.plans (hot conversations only); Bob, in conversation, is told")
	doc, err := alice.n.UpdateDocument(func(d *negotiate.Document) error {
		d.Capabilities = append(d.Capabilities, negotiate.Capability{Name: "travel.plans", Description: "Share upcoming travel plans",
			Conditions: mustConditions(`{"min_disclosure":"professional","temperature":"hot"}`)})
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := wait(ctx, bobEvents, func(e events.Event) bool {
		return e.Type == events.EventPeerView && strings.HasPrefix(e.Detail, fmt.Sprintf("seq %d,", doc.Seq))
	}); err != nil {
		return err
	}
	printView(w, "Bob's cached view of Alice, now", mustCached(bob, alice.id.PeerID()))
	// Bob acknowledges the update on the update's own stream, after he
	// kept the view; Alice records the acknowledgement in the conversation.
	// It is waited for, so that the listing below holds every message of
	// the conversation (it could otherwise reach Alice after Bob's close).
	if err := waitAudited(ctx, alice, rb.ConversationID, func(entries []gossip.AuditEntry) bool {
		update := ""
		for _, en := range entries {
			h := en.Message.Headers
			switch {
			case en.Direction == gossip.Sent && h.Subject == "capability update":
				update = h.MessageID
			case update != "" && en.Direction == gossip.Received && h.Thread != nil && h.Thread.InReplyTo == update:
				return true
			}
		}
		return false
	}); err != nil {
		return err
	}

	if _, err := bob.n.Say(rb.ConversationID, gossip.PhaseClose, "Closing this exchange. Summary: shared travel context; Alice offers calendar availability."); err != nil {
		return err
	}
	if _, err := wait(ctx, aliceEvents, func(e events.Event) bool {
		return e.Type == events.EventConversation && e.ConversationID == rb.ConversationID && e.Detail == "closed"
	}); err != nil {
		return err
	}

	if err := printAudit(w, alice, rb.ConversationID, names(alice, bob, carol)); err != nil {
		return err
	}
	if opts.Dir != "" {
		fmt.Fprintf(w, "\nIn full, in IFP-3 form with signatures: %s\n", filepath.Join(alice.home.Dir, "audit"))
	}
	fmt.Fprintln(w, "\n"+nextStep)
	return nil
}

// printAudit lists one conversation as Alice's audit log has it, one line
// per message, in the shape of `ifaced audit --conversation ID` (time,
// direction, peer, phase, sequence, what it said), with peers by name.
func printAudit(w io.Writer, d *daemon, convID string, name map[string]string) error {
	entries, err := d.n.Audit().Entries(convID)
	if err != nil {
		return fmt.Errorf("reading Alice's audit log: %w", err)
	}
	fmt.Fprintf(w, "\n== The conversation as Alice's audit log has it (ifaced audit --conversation %s)\n", convID)
	for _, en := range entries {
		h := en.Message.Headers
		fmt.Fprintf(w, "  %s %-8s %s %s %d: %s\n", en.At.Format(time.TimeOnly), en.Direction, name[en.Peer], h.Phase, h.Sequence, summary(en))
	}
	return nil
}

// summary is what one audited message said, on one line: its text's
// first line, else the capabilities it requests, else the error it
// carries, with the daemon's note.
func summary(en gossip.AuditEntry) string {
	m := en.Message
	text, _, _ := strings.Cut(m.Body.Text, "\n")
	if text == "" && m.Headers.Capabilities != nil && len(m.Headers.Capabilities.Request) > 0 {
		text = "request " + strings.Join(m.Headers.Capabilities.Request, ", ")
	}
	if _, ok := m.Body.Part(converse.PartDelivered); ok && text == "" {
		text = "(acknowledges the message above: admitted and recorded)"
	}
	if text == "" {
		for _, p := range m.Body.Parts {
			text += "[" + p.ContentType + "]"
		}
	}
	if en.Note != "" {
		text += " [" + en.Note + "]"
	}
	return text
}

// names maps each daemon's peer ID to its name, for the audit lines.
func names(ds ...*daemon) map[string]string {
	m := make(map[string]string, len(ds))
	for _, d := range ds {
		m[d.id.PeerID().String()] = d.name
	}
	return m
}

// daemonConfig gives each daemon its capabilities and Alice her disclosure map
// and her local agent.
func daemonConfig(name string, bob peer.ID, webhook string) (*config.Config, error) {
	c := config.DefaultConfig()
	if name == "alice" {
		var err error
		if c, err = config.ParseConfig([]byte("version = 1\n" + agent.Capabilities)); err != nil {
			return nil, fmt.Errorf("reading the example agent's capabilities: %w", err)
		}
		c.Agent.Webhook = webhook
		c.Disclosure.Personas = map[string]map[string]string{"default": {bob.String(): "professional"}}
		c.Temperature.Peers = map[string]string{bob.String(): "warm"}
		c.Capabilities = append(c.Capabilities,
			map[string]any{"name": "diary.read", "description": "Read Alice's diary", "advertise": "when-eligible",
				"conditions": map[string]any{"min_disclosure": "close", "min_auth_level": 2}})
	}
	if name == "bob" {
		c.Capabilities = append(config.StandardCapabilities()[:1],
			map[string]any{"name": "recipes.suggest", "description": "Suggest a recipe from what is in the fridge"})
	}
	c.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"}
	c.API.Listen = "127.0.0.1:0"
	// The demo's daemons find each other by address; none of them should
	// multicast on the machine's networks or wait on a DHT.
	c.Discovery.MDNS, c.Discovery.DHT, c.Discovery.Gossip = false, config.DHTOff, false
	c.Identity.Display = strings.ToUpper(name[:1]) + name[1:] + "'s agent"
	return c, nil
}

func printResult(w io.Writer, v any) {
	out, _ := json.MarshalIndent(v, "    ", "  ")
	fmt.Fprintf(w, "  answered by Alice's agent:\n    %s\n", out)
}

func printGrant(w io.Writer, title string, g negotiate.Granted) {
	fmt.Fprintf(w, "  %s: disclosure %q (%s), authentication level %s, temperature %q\n", title, g.Disclosure, g.DisclosureOutcome, g.AuthLevel, g.Temperature)
	for _, note := range g.Notes {
		fmt.Fprintf(w, "    note: %s\n", note)
	}
}

func printView(w io.Writer, title string, v *negotiate.Document) {
	if v == nil {
		fmt.Fprintf(w, "  %s: none cached\n", title)
		return
	}
	fmt.Fprintf(w, "  %s (seq %d):\n", title, v.Seq)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range v.Capabilities {
		mark := "yes"
		if c.Eligible != nil && !*c.Eligible {
			mark = "no"
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\n", mark, c.Name, c.Description)
		for _, u := range c.Unmet {
			fmt.Fprintf(tw, "    \t\tneeds %s %s, has %s: %s\n", u.Condition, u.Required, u.Have, u.HowToMeet)
		}
	}
	tw.Flush()
}

func mustCached(d *daemon, pid peer.ID) *negotiate.Document {
	rec, err := d.n.CachedPeer(pid)
	if err != nil {
		return nil
	}
	var content any
	if err := jsonUnmarshal(rec.View, &content); err != nil {
		return nil
	}
	v, err := negotiate.DecodeView(content)
	if err != nil {
		return nil
	}
	return v
}

// waitAudited waits until the entries d's audit log holds of conversation
// convID are ones match accepts: a message that raises no event (an
// update's acknowledgement, taken on the update's stream) is seen there.
func waitAudited(ctx context.Context, d *daemon, convID string, match func([]gossip.AuditEntry) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		entries, err := d.n.Audit().Entries(convID)
		if err != nil {
			return fmt.Errorf("reading the audit log: %w", err)
		}
		if match(entries) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the audit log: %w", ctx.Err())
		}
	}
}

func wait(ctx context.Context, ch <-chan events.Event, match func(events.Event) bool) (events.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return events.Event{}, fmt.Errorf("event stream ended")
			}
			if match(e) {
				return e, nil
			}
		case <-ctx.Done():
			return events.Event{}, fmt.Errorf("waiting for the daemons: %w", ctx.Err())
		}
	}
}
