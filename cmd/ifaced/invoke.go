package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/wire"
)

func runInvoke(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "invoke", "PEER CAPABILITY", true)
	params := f.String("params", "", "the parameters, a JSON value (e.g. '{\"days\": 5}')")
	convID := f.String("conversation", "", "the open conversation to ask in (default: the newest open one with the peer)")
	pos, err := f.parseInterleaved(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError("invoke takes PEER (an alias, a peer ID, an agent ID, or a known peer's display name) and CAPABILITY")
	}
	req := api.InvokeRequest{Peer: pos[0], Capability: pos[1], ConversationID: *convID}
	if *params != "" {
		if !json.Valid([]byte(*params)) {
			return usageError("--params is not JSON: %s", *params)
		}
		req.Params = json.RawMessage(*params)
	}
	if err := negotiate.CheckName(req.Capability); err != nil {
		return usageError("%v", err)
	}
	c, err := f.dial(e)
	if err != nil {
		return err
	}
	defer c.Close()
	if isURL(req.Peer) {
		// An outside agent the owner imported (`ifaced find` lists it by
		// its URL): not a peer, so not a conversation.
		return invokeImported(ctx, e, f, c, req)
	}
	if req.Peer, err = f.peerRef(ctx, c, req.Peer, false); err != nil {
		return err
	}
	res, err := c.Invoke(ctx, req)
	var ae *api.Error
	if errors.As(err, &ae) && ae.PeerError != nil {
		// The refusal is the command's error: on standard error, and with
		// --json as the error object (code peer_error, the peer's answer
		// in peer_error); standard output stays empty.
		return &wrapped{fmt.Sprintf("%s refused %s:\n%s", req.Peer, req.Capability, describeRefusal(*ae.PeerError)), ae}
	}
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(e.stdout, res)
	}
	out, err := json.MarshalIndent(res.Result, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s\n", out)
	return nil
}

// describeRefusal says what the peer refused and what would work, one
// line each.
func describeRefusal(b wire.ErrorBody) string {
	var lines []string
	msg := b.Message
	for _, cut := range []error{conditions.ErrNotMet, conditions.ErrBusy} {
		// What follows lists the unmet conditions, which come below one a line.
		if i := strings.Index(msg, cut.Error()+": "); i >= 0 && len(b.Unmet) > 0 {
			msg = msg[:i+len(cut.Error())]
		}
	}
	lines = append(lines, fmt.Sprintf("  %s: %s", b.Code, msg))
	for _, u := range b.Unmet {
		lines = append(lines, fmt.Sprintf("  - %s: requires %s, you have %s; %s", u.Condition, u.Required, u.Have, u.HowToMeet))
	}
	if b.Hint != "" {
		lines = append(lines, "  what would work: "+b.Hint)
	}
	if b.RetryAfterSeconds > 0 {
		lines = append(lines, fmt.Sprintf("  retry after %d s", b.RetryAfterSeconds))
	}
	return strings.Join(lines, "\n")
}

// wrapped is an error with a message of its own that still unwraps to
// the error it explains (an *api.Error, for --json).
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
