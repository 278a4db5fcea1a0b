package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ifaced/ifaced/node/api"
)

func runSend(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "send", "PEER --text TEXT", true)
	text := f.String("text", "", "the message text")
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
	res, err := c.Send(ctx, api.SendRequest{Peer: pos[0], Text: *text})
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, res)
	}
	switch res.Delivered {
	case "queued":
		fmt.Fprintf(e.stdout, "queued %s for %s's mailbox relays (`ifaced outbox` shows its progress)\n%s\n", res.MessageID, pos[0], res.Detail)
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
