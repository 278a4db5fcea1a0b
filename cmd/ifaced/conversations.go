package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/converse"
)

// conversationSubs are the subcommands of `conversations`.
var conversationSubs = []string{"list", "show", "close"}

// runConversations is
//
//	ifaced conversations [list] [--peer P]   the open conversations
//	ifaced conversations show ID             one: who, what was granted, its messages
//	ifaced conversations close ID | --peer P send the close phase (all of P's open ones with --peer)
func runConversations(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "conversations", "[list | show ID | close ID]", true)
	peerRef := f.String("peer", "", "only the conversations with this PEER (list, close); show: the newest with PEER")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	sub := "list"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	switch {
	case !slices.Contains(conversationSubs, sub):
		msg := fmt.Sprintf("conversations %q: want list, show ID or close ID", sub)
		if s := suggest(sub, conversationSubs); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return usageError("%s", msg)
	case sub == "list" && len(pos) > 0:
		return usageError("conversations list takes no arguments (use --peer P), got %q", pos)
	case sub == "show" && (len(pos) == 1) == (*peerRef != "") || sub == "show" && len(pos) > 1:
		return usageError("conversations show takes one conversation ID (`ifaced conversations` lists them), or --peer P for the newest open one with P")
	case sub == "close" && (len(pos) == 1) == (*peerRef != "") || len(pos) > 1:
		return usageError("conversations close takes one conversation ID, or --peer P to close every open one with P")
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	if *peerRef != "" {
		if *peerRef, err = f.peerRef(ctx, c, *peerRef, false); err != nil {
			return err
		}
	}
	open, err := c.Conversations(ctx)
	if err != nil {
		return err
	}
	if *peerRef != "" {
		open = slices.DeleteFunc(open, func(cv converse.ConversationInfo) bool { return cv.Peer != *peerRef })
	}
	switch sub {
	case "show":
		if len(pos) == 0 {
			// --peer P: its newest open conversation (IDs are ULIDs: the
			// greatest is the newest), else the one recorded last.
			if len(open) > 0 {
				newest := slices.MaxFunc(open, func(a, b converse.ConversationInfo) int { return strings.Compare(a.ID, b.ID) })
				pos = []string{newest.ID}
			} else {
				past, err := c.AuditConversations(ctx, *peerRef)
				if err != nil {
					return err
				}
				if len(past.Conversations) == 0 {
					return fmt.Errorf("no conversation with %s open or recorded (%s)", *peerRef, e.hint("`ifaced greet PEER` opens one"))
				}
				pos = []string{past.Conversations[0].ID} // newest activity first
			}
		}
		return showConversation(ctx, e, f, c, open, pos[0])
	case "close":
		return closeConversations(ctx, e, f, c, open, pos, *peerRef)
	}
	if f.json {
		return writeJSON(e.stdout, api.ConversationList{Conversations: open})
	}
	if len(open) == 0 {
		fmt.Fprintln(e.stdout, e.hint("no open conversations (`ifaced greet PEER` opens one; `ifaced audit` lists past ones)"))
		return nil
	}
	names := f.peerLabels(ctx, c)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONVERSATION\tPEER\tDISCLOSURE\tAUTH\tTEMPERATURE\tPERSONA")
	for _, cv := range open {
		g := cv.Granted
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cv.ID, names.label(cv.Peer), orDash(g.Disclosure), g.AuthLevel,
			orDash(g.Temperature), orDash(g.Persona))
	}
	return tw.Flush()
}

// conversationShow is what `conversations show --json` prints.
type conversationShow struct {
	ConversationID string                     `json:"conversation_id"`
	Open           bool                       `json:"open"`
	Info           *converse.ConversationInfo `json:"info,omitempty"`
	Audit          *api.AuditConversation     `json:"audit,omitempty"`
}

func showConversation(ctx context.Context, e *env, f *flags, c *api.Client, open []converse.ConversationInfo, id string) error {
	out := conversationShow{ConversationID: id}
	if i := slices.IndexFunc(open, func(cv converse.ConversationInfo) bool { return cv.ID == id }); i >= 0 {
		out.Open, out.Info = true, &open[i]
	}
	audit, err := c.AuditEntries(ctx, id)
	var ae *api.Error
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound && out.Open:
		// Open, and nothing recorded yet.
	case err != nil && !out.Open:
		return fmt.Errorf("no conversation %q open or recorded (`ifaced conversations` lists the open ones, `ifaced audit` the recorded ones): %w", id, err)
	case err != nil:
		return err
	default:
		out.Audit = audit
	}
	if f.json {
		return writeJSON(e.stdout, out)
	}
	w := e.stdout
	fmt.Fprintf(w, "conversation  %s\n", id)
	if out.Info != nil {
		fmt.Fprintf(w, "state         open\npeer          %s\nyou granted   %s\n", f.peerLabels(ctx, c).label(out.Info.Peer), describeGrant(out.Info.Granted))
	} else {
		fmt.Fprintln(w, "state         closed")
	}
	if out.Audit != nil {
		fmt.Fprintln(w)
		printEntries(w, out.Audit)
		if out.Audit.Warning != "" {
			fmt.Fprintln(e.stderr, "warning:", out.Audit.Warning)
		}
	}
	return nil
}

func closeConversations(ctx context.Context, e *env, f *flags, c *api.Client, open []converse.ConversationInfo, pos []string, peer string) error {
	var ids []string
	if len(pos) == 1 {
		ids = pos
	} else {
		for _, cv := range open {
			ids = append(ids, cv.ID)
		}
		if len(ids) == 0 {
			return fmt.Errorf("no open conversation with %s", peer)
		}
	}
	type closed struct {
		ConversationID string `json:"conversation_id"`
		MessageID      string `json:"message_id"`
	}
	var done []closed
	for _, id := range ids {
		m, err := c.CloseConversation(ctx, id)
		if err != nil {
			return fmt.Errorf("closing %s: %w", id, err)
		}
		done = append(done, closed{id, m.Headers.MessageID})
		if !f.json {
			fmt.Fprintf(e.stdout, "closed %s (sent close #%d); the peer closes its side in turn\n", id, m.Headers.Sequence)
		}
	}
	if f.json {
		return writeJSON(e.stdout, map[string]any{"closed": done})
	}
	return nil
}

// peerLabeler names peers in output: "bob (12D3…)" for an alias,
// "Bob's agent (12D3…)" for a display name, else the peer ID.
type peerLabeler struct {
	aliases, displays map[string]string
}

func (f *flags) peerLabels(ctx context.Context, c *api.Client) peerLabeler {
	l := peerLabeler{aliases: map[string]string{}, displays: map[string]string{}}
	if book, err := f.aliases(); err == nil {
		l.aliases = peerNames(book)
	}
	if peers, err := c.Peers(ctx); err == nil {
		for _, p := range peers {
			if p.Display != "" {
				l.displays[p.PeerID] = p.Display
			}
		}
	}
	return l
}

func (l peerLabeler) label(pid string) string {
	if a := l.aliases[pid]; a != "" {
		return a + " (" + pid + ")"
	}
	if d := l.displays[pid]; d != "" {
		return fmt.Sprintf("%q (%s)", d, pid)
	}
	return pid
}
