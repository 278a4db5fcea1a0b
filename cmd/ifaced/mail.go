package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/store"
)

func runSend(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "send", "PEER --text TEXT", true)
	text := f.String("text", "", "the message text")
	convID := f.String("conversation", "", "the open conversation to say it in (default: the newest open one with the peer)")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usageError("send takes one PEER (a peer ID, did:key or verified agent ID)")
	case strings.TrimSpace(*text) == "":
		return usageError("send needs --text")
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	peer, err := f.peerRef(ctx, c, pos[0], false)
	if err != nil {
		return err
	}
	res, err := c.Send(ctx, api.SendRequest{Peer: peer, Text: *text, ConversationID: *convID})
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, res)
	}
	switch res.Delivered {
	case "queued":
		fmt.Fprint(e.stdout, e.hint(fmt.Sprintf("queued %s for %s's mailbox relays (`ifaced outbox` shows its progress)\n%s\n", res.MessageID, pos[0], res.Detail)))
	default:
		fmt.Fprintf(e.stdout, "sent %s in %s\n", res.MessageID, res.ConversationID)
	}
	return nil
}

func runOutbox(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "outbox", "", true)
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("outbox takes no arguments, got %q", pos)
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	out, err := c.Outbox(ctx)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, out)
	}
	if len(out.Messages) == 0 {
		fmt.Fprintln(e.stdout, "the outbox is empty")
		return nil
	}
	for _, m := range out.Messages {
		fmt.Fprintf(e.stdout, "%s to %s: queued %s, %d attempts, next %s\n", m.MessageID, m.To,
			m.Queued.Local().Format(time.DateTime), m.Attempts, m.NextAttempt.Local().Format(time.DateTime))
		if m.LastError != "" {
			fmt.Fprintf(e.stdout, "    last error: %s\n", m.LastError)
		}
	}
	return nil
}

func runImport(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "import", "URL | --list | --remove URL", true)
	list := f.Bool("list", false, "list imported agents")
	remove := f.Bool("remove", false, "forget the imported agent at URL")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	switch {
	case *list && (len(pos) > 0 || *remove):
		return usageError("import --list takes no URL")
	case !*list && len(pos) != 1:
		return usageError("import takes one URL: an AG-UI /capabilities, an A2A agent card, or an orchestrator /capabilities")
	case !*list && !*remove && !isURL(pos[0]):
		return usageError("import %q: not an http(s) URL; give an AG-UI /capabilities, an A2A agent card, or an orchestrator /capabilities", pos[0])
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	switch {
	case *list:
		out, err := c.Imports(ctx)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(e.stdout, out)
		}
		if len(out.Imports) == 0 {
			fmt.Fprintln(e.stdout, e.hint("nothing imported (`ifaced import URL` adds an outside agent)"))
		}
		// One column for the capability names of every import.
		width := 0
		for _, r := range out.Imports {
			width = max(width, capNameWidth(&r))
		}
		for _, r := range out.Imports {
			printImport(e, &r, width)
		}
		return nil
	case *remove:
		if err := c.RemoveImport(ctx, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "forgot %s\n", pos[0])
		return nil
	}
	rec, err := c.Import(ctx, pos[0])
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, rec)
	}
	printImport(e, rec, capNameWidth(rec))
	return nil
}

// capNameWidth is the longest capability name of an import.
func capNameWidth(r *store.ImportRecord) int {
	var doc negotiate.Document
	json.Unmarshal(r.View, &doc)
	width := 0
	for _, c := range doc.Capabilities {
		width = max(width, len(c.Name))
	}
	return width
}

// printImport writes an import and its capabilities, the descriptions in
// a column width characters after the names' start.
func printImport(e *env, r *store.ImportRecord, width int) {
	var doc negotiate.Document
	json.Unmarshal(r.View, &doc)
	signed := "unsigned"
	if r.Signed {
		signed = "JWS verified, self-signed"
	}
	fmt.Fprintf(e.stdout, "%s: %s (%s, %s), %d capabilities, fetched %s\n", r.URL, orDash(termText(r.Name, 128)), r.Format, signed,
		len(doc.Capabilities), r.FetchedAt.Local().Format(time.DateTime))
	if r.Note != "" {
		fmt.Fprintf(e.stdout, "    note: %s\n", r.Note)
	}
	if r.LastError != "" {
		fmt.Fprintf(e.stdout, "    last refresh failed: %s\n", r.LastError)
	}
	for _, c := range doc.Capabilities {
		fmt.Fprintf(e.stdout, "    %-*s  %s\n", width, termText(c.Name, 128), termText(c.Description, maxTermDesc))
	}
}
