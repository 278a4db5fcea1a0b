package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
)

// The verbs in this file talk to the running daemon through its control
// API (package api); they parse flags, call, and print.

// dial finds the daemon of the command's data directory.
func (f *flags) dial(e *env) (*api.Client, error) {
	h, err := f.homeDir(e)
	if err != nil {
		return nil, err
	}
	return api.Dial(h)
}

func runStatus(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "status", "", true)
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("status takes no arguments, got %q", pos)
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, st)
	}
	w := e.stdout
	fmt.Fprintf(w, "peer ID        %s\ndid            %s\nfingerprint    %s\nhome           %s\napi            %s\n",
		st.PeerID, st.DID, st.Fingerprint, st.Home, st.API)
	for i, a := range st.Addrs {
		label := ""
		if i == 0 {
			label = "addresses"
		}
		fmt.Fprintf(w, "%-14s %s\n", label, a)
	}
	fmt.Fprintf(w, "document       seq %d, %d capabilities\nconversations  %d open\npeers          %d connected\nuptime         %s\n",
		st.Seq, st.Capabilities, st.Conversations, st.ConnectedPeers, time.Duration(st.UptimeSeconds)*time.Second)
	if st.RelayService {
		fmt.Fprintf(w, "relay          serving circuit relay v2\n")
	}
	for i, r := range st.RelaySlots {
		label := ""
		if i == 0 {
			label = "relay slots"
		}
		fmt.Fprintf(w, "%-14s %s\n", label, r)
	}
	if st.Outbox > 0 {
		fmt.Fprint(w, e.hint(fmt.Sprintf("outbox         %d waiting for a peer's mailbox (`ifaced outbox`)\n", st.Outbox)))
	}
	for i, c := range st.Connections {
		label := ""
		if i == 0 {
			label = "connections"
		}
		fmt.Fprintf(w, "%-14s %s %s, %s (%s)\n", label, c.Peer, c.Via, c.Addr, c.Direction)
	}
	if len(st.Connections) == api.MaxStatusConnections {
		fmt.Fprint(w, e.hint(fmt.Sprintf("%-14s … (the first %d; `ifaced peers` lists every peer)\n", "", api.MaxStatusConnections)))
	}
	return nil
}

func runPeers(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "peers", "", true)
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("peers takes no arguments, got %q", pos)
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	peers, err := c.Peers(ctx)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, api.PeerList{Peers: peers}) // the API's shape: {"peers": […]}
	}
	if len(peers) == 0 {
		fmt.Fprintln(e.stdout, e.hint("no peers known (connect to one with `ifaced connect MULTIADDR`)"))
		return nil
	}
	// A peer's display is its own claim, and many daemons leave it unset:
	// the owner's alias for it is shown beside it, or instead of nothing.
	names := map[string]string{}
	if book, err := f.aliases(); err == nil {
		names = peerNames(book)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tDISPLAY\tSEQ\tAGE\tCONNECTED\tADDRESS")
	for _, p := range peers {
		seq, age := "-", "not greeted"
		if p.Cached {
			seq, age = fmt.Sprint(p.Seq), (time.Duration(p.AgeSeconds) * time.Second).String()
			if p.Stale {
				age += " (stale)"
			}
		}
		// A connected peer shows where it is connected now; any other
		// where it was last reached.
		connected, addrs := "no", p.Addrs
		if p.Connected {
			connected, addrs = "yes", p.LiveAddrs
			if p.Via == "relay" {
				connected = "via relay"
			}
		}
		addr := "-"
		if len(addrs) > 0 {
			addr = addrs[0]
			if len(addrs) > 1 {
				addr += fmt.Sprintf(" (+%d)", len(addrs)-1)
			}
		}
		display := p.Display
		if a, ok := names[p.PeerID]; ok {
			if display == "" {
				display = "alias " + a
			} else {
				display += " (alias " + a + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.PeerID, orDash(display), seq, age, connected, addr)
	}
	return tw.Flush()
}

func runConnect(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "connect", "MULTIADDR", true)
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("connect takes one MULTIADDR ending in /p2p/<peer ID>")
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	pid, err := c.Connect(ctx, pos[0])
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, api.ConnectResult{Peer: pid})
	}
	fmt.Fprintln(e.stdout, "connected to", pid)
	return nil
}

func runGreet(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "greet", "PEER", true)
	var req api.GreetRequest
	f.StringVar(&req.Disclosure, "disclosure", "", "the disclosure tier to propose (e.g. public, professional)")
	f.StringVar(&req.Persona, "persona", "", "the persona to propose")
	f.StringVar(&req.Temperature, "temperature", "", "the temperature to propose: cool, warm or hot")
	categories := f.String("tool-categories", "", "comma-separated ACP tool categories to request")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("greet takes one PEER (an alias, a peer ID, an agent ID, or a known peer's display name)")
	}
	req.ToolCategories = splitList(*categories)
	// Resolved first: a word that is no peer is a usage error even when no
	// daemon runs.
	if req.Peer, err = f.peerRef(ctx, nil, pos[0], false); err != nil {
		return err
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.Greet(ctx, req)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, res)
	}
	w := e.stdout
	fmt.Fprintf(w, "conversation  %s\npeer          %s\n", res.ConversationID, res.Peer)
	fmt.Fprintf(w, "you grant     %s\n", describeGrant(res.Granted))
	fmt.Fprintf(w, "granted you   %s\n", describeGrant(res.GrantedToUs))
	if cats := res.GrantedToUs.ToolCategories; len(cats) > 0 {
		fmt.Fprintf(w, "categories    %s supported, and listed first\n", strings.Join(cats, ", "))
	}
	for _, n := range res.GrantedToUs.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if res.View != nil {
		eligible := 0
		for _, cp := range res.View.Capabilities {
			if isEligible(cp) {
				eligible++
			}
		}
		fmt.Fprintf(w, "their view    seq %d, %d capabilities, %d eligible for you\n", res.View.Seq, len(res.View.Capabilities), eligible)
		for _, cp := range res.View.Capabilities {
			if isEligible(cp) {
				fmt.Fprintf(w, "  + %s\n", cp.Name)
				continue
			}
			var why []string
			for _, u := range cp.Unmet {
				why = append(why, fmt.Sprintf("%s: required %s, have %s", u.Condition, u.Required, u.Have))
			}
			fmt.Fprintf(w, "  - %s (%s)\n", cp.Name, strings.Join(why, "; "))
		}
		if eligible < len(res.View.Capabilities) {
			fmt.Fprint(w, e.hint(fmt.Sprintf("(`ifaced caps %s` shows how to meet each condition)\n", res.Peer)))
		}
	}
	return nil
}

func runSay(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "say", "CONVERSATION|PEER --phase P --text TEXT", true)
	phase := f.String("phase", "", "the phase: context, probe, recommend or close")
	text := f.String("text", "", "the message text")
	convID := f.String("conversation", "", "the conversation to say it in (default: the peer's newest open one)")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	req := api.SayRequest{ConversationID: *convID, Phase: gossip.Phase(*phase), Text: *text}
	switch {
	case len(pos) == 1 && req.ConversationID == "" && strings.HasPrefix(pos[0], "conv:"):
		req.ConversationID = pos[0]
	case len(pos) == 1:
		req.Peer = pos[0] // its newest open conversation, unless --conversation names one
	}
	switch {
	case len(pos) > 1 || len(pos) == 0 && req.ConversationID == "":
		return usageError("say takes one CONVERSATION (the ID greet printed; `ifaced audit` lists them) or a PEER (its newest open conversation)")
	case *phase == "":
		return usageError("say needs --phase (context, probe, recommend or close)")
	case *text == "" && *phase != string(gossip.PhaseClose):
		return usageError("say needs --text")
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	if req.Peer != "" {
		// An alias or a display name, as every other verb takes.
		if req.Peer, err = f.peerRef(ctx, c, req.Peer, false); err != nil {
			return err
		}
	}
	m, err := c.Say(ctx, req)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, m)
	}
	fmt.Fprintf(e.stdout, "sent %s #%d in %s (%s)\n", m.Headers.Phase, m.Headers.Sequence, m.Headers.ConversationID, m.Headers.MessageID)
	return nil
}

func runAudit(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && slices.Contains(auditSubs, args[0]) {
		return runAuditSub(ctx, e, args[0], args[1:]) // auditverify.go
	}
	f := newFlags(e, "audit", "", true)
	convID := f.String("conversation", "", "show this conversation's entries")
	peerRef := f.String("peer", "", "list only conversations with this peer")
	why := f.String("why", "", "print why the capability request MESSAGE_ID (or the answer with that ID) was answered or refused")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 && slices.Contains(auditSubs, pos[0]) {
		return usageError("audit %s: put the subcommand first (`ifaced audit %s --home DIR …`)", pos[0], pos[0])
	}
	if len(pos) > 0 {
		return usageError("audit takes no arguments (use --conversation ID or --why MESSAGE_ID), got %q", pos)
	}
	whySet := false
	f.Visit(func(fl *flag.Flag) { whySet = whySet || fl.Name == "why" })
	switch {
	case whySet && *why == "":
		return usageError("--why takes the message ID of a capability request or of its answer (`ifaced audit --conversation ID` lists them)")
	case whySet && (*convID != "" || *peerRef != ""):
		return usageError("--why takes no --conversation or --peer: the message ID alone names the decision")
	}
	var r auditReader
	c, err := f.dial(e)
	switch {
	case errors.Is(err, api.ErrNoDaemon):
		// A stopped daemon's log is read from its files (auditoffline.go).
		if r, err = f.offlineAudit(e); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		defer c.Close()
		r = apiAudit{c}
	}
	if whySet {
		ans, err := r.AuditWhy(ctx, *why)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, ans)
		}
		return printWhy(e.stdout, ans)
	}
	if *convID != "" {
		conv, err := r.AuditEntries(ctx, *convID)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, conv)
		}
		printEntries(e.stdout, conv)
		if conv.Warning != "" {
			fmt.Fprintln(e.stderr, "warning:", conv.Warning)
		}
		return nil
	}
	if *peerRef != "" {
		if *peerRef, err = r.peerRef(ctx, f, *peerRef); err != nil {
			return err
		}
	}
	list, err := r.AuditConversations(ctx, *peerRef)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, list)
	}
	if list.Warning != "" {
		fmt.Fprintln(e.stderr, "warning:", list.Warning)
	}
	if len(list.Conversations) == 0 {
		fmt.Fprintln(e.stdout, "no conversations recorded")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONVERSATION\tPEER\tMESSAGES\tLAST\tFILE")
	for _, cv := range list.Conversations {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", cv.ID, orDash(strings.Join(cv.Peers, ",")), cv.Messages,
			cv.Last.Format(time.RFC3339), cv.File)
	}
	return tw.Flush()
}

// printEntries writes one line per entry: when, which way, the peer, the
// phase and sequence, and the first line of the text.
func printEntries(w io.Writer, conv *api.AuditConversation) {
	for _, en := range conv.Entries {
		h := en.Message.Headers
		text, _, _ := strings.Cut(en.Message.Body.Text, "\n")
		// The message ID is what `ifaced audit --why` takes.
		line := fmt.Sprintf("%s %s %s %s %s %d: %s", en.At.Format(time.RFC3339), orDash(termText(h.MessageID, 128)), en.Direction, en.Peer, h.Phase, h.Sequence,
			termText(text, maxTermLine))
		if en.Note != "" {
			line += " [" + en.Note + "]"
		}
		fmt.Fprintln(w, line)
	}
	if conv.File != "" {
		fmt.Fprintf(w, "\nas a person reads it (with the rest of that day's messages with the peer): %s\n", conv.File)
	}
}

// printWhy writes a decision for a person: the request and how it
// ended, the facts the daemon established, then one row per condition
// evaluated.
func printWhy(w io.Writer, ans *api.AuditWhy) error {
	d, en := ans.Decision, ans.Entry
	if d == nil || en.Message == nil {
		return fmt.Errorf("the daemon answered for %s without a decision", ans.MessageID)
	}
	h := en.Message.Headers
	request := "-"
	if h.Thread != nil {
		request = h.Thread.InReplyTo
	}
	outcome := d.Outcome
	if d.Code != "" {
		outcome += " (" + d.Code + ")"
	}
	level := "none"
	if d.Facts.Level >= 0 {
		level = strconv.Itoa(d.Facts.Level)
	}
	if d.Facts.LevelHow != "" {
		level += " (" + d.Facts.LevelHow + ")"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range [][2]string{
		{"capability", orDash(d.Capability)}, {"outcome", outcome},
		{"requester", orDash(en.Peer) + " via " + orDash(en.Transport)},
		{"request", request}, {"answer", h.MessageID + " at " + en.At.Format(time.RFC3339)},
		{"conversation", h.ConversationID},
		{"level", level}, {"tier", orDash(d.Facts.Tier)}, {"temperature", orDash(d.Facts.Temperature)}, {"persona", orDash(d.Facts.Persona)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if d.Note != "" {
		fmt.Fprintf(tw, "note\t%s\n", d.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Conditions) == 0 {
		_, err := fmt.Fprintln(w, "\nno condition evaluated")
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONDITION\tMET\tDETAIL")
	for _, c := range d.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Condition, yesNo(c.Met), c.Detail)
	}
	return tw.Flush()
}

func describeGrant(g negotiate.Granted) string {
	s := fmt.Sprintf("disclosure %s", orDash(g.Disclosure))
	if g.DisclosureOutcome != "" {
		s += " (" + g.DisclosureOutcome + ")"
	}
	s += fmt.Sprintf(", auth %s, temperature %s", g.AuthLevel, orDash(g.Temperature))
	if g.Persona != "" {
		s += ", persona " + g.Persona
	}
	return s
}

func isEligible(c negotiate.Capability) bool { return c.Eligible != nil && *c.Eligible }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
