package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/api"
)

// Invoking an imported agent. `ifaced import` brings in an outside agent's
// document and `ifaced find` lists it, by its URL; such an agent is not a
// peer (it has no key, no conversation, no conditions this daemon could
// check), so `ifaced invoke URL CAPABILITY` calls it the way its own
// contract says, from this command, as the owner would with curl:
//
//   - an orchestrator agent (its /capabilities lists actions), or an
//     AG-UI one (whose /capabilities may list actions too, as ifaced's
//     own does), is sent POST /invoke beside that /capabilities,
//     {"action", "input"}, and its "output" is printed; an AG-UI agent
//     without that endpoint answers 404, and the error says to use an
//     AG-UI client;
//   - an A2A agent is refused with what to use instead: its contract is
//     messages and tasks (an A2A client's), not one call.
//
// The call is the owner's, to a URL the owner imported: it is not a
// message on the network and is not in the audit log. Its answer is
// bounded as an import is (negotiate.MaxImportSize, importCallTimeout).

// importCallTimeout bounds the whole call to an imported agent.
const importCallTimeout = 30 * time.Second

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// invokeImported calls capability on the imported agent req.Peer names.
func invokeImported(ctx context.Context, e *env, f *flags, c *api.Client, req api.InvokeRequest) error {
	list, err := c.Imports(ctx)
	if err != nil {
		return err
	}
	var format string
	var known []string
	for _, rec := range list.Imports {
		known = append(known, rec.URL)
		if rec.URL == req.Peer {
			format = rec.Format
		}
	}
	if format == "" {
		msg := fmt.Sprintf("%s is not an imported agent (`ifaced import %s` imports it", req.Peer, req.Peer)
		if len(known) > 0 {
			msg += "; imported: " + strings.Join(known, ", ")
		}
		return errors.New(msg + ")")
	}
	if format == negotiate.FormatA2A {
		return fmt.Errorf("%s is an A2A agent: ifaced lists its skills but does not send A2A messages; call it with an A2A client (SendMessage to the url its card names)", req.Peer)
	}
	if req.ConversationID != "" {
		return usageError("--conversation: %s is an imported agent, not a peer: there is no conversation with it", req.Peer)
	}
	target, err := invokeURL(req.Peer)
	if err != nil {
		return err
	}
	input := req.Params
	if input == nil {
		input = json.RawMessage("{}")
	}
	body, err := json.Marshal(map[string]any{"action": req.Capability, "input": input})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, importCallTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("calling %s: %w", target, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(hreq)
	if err != nil {
		return fmt.Errorf("calling %s: %w", target, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, negotiate.MaxImportSize+1))
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %w", target, err)
	}
	if len(raw) > negotiate.MaxImportSize {
		return fmt.Errorf("the answer of %s is over %d bytes", target, negotiate.MaxImportSize)
	}
	if resp.StatusCode/100 != 2 {
		err := fmt.Errorf("%s answered %s: %s", target, resp.Status, excerpt(raw))
		if resp.StatusCode == http.StatusNotFound && format == negotiate.FormatAGUI && !json.Valid(raw) {
			err = fmt.Errorf("%w (an AG-UI agent without the orchestrator's POST /invoke: call it with an AG-UI client)", err)
		}
		return err
	}
	var ans struct {
		Action string          `json:"action"`
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil || ans.Output == nil {
		return fmt.Errorf("%s answered %s, not an orchestrator answer ({\"action\", \"output\"}): %s", target, resp.Status, excerpt(raw))
	}
	if f.json {
		return writeJSON(e.stdout, map[string]any{"agent": req.Peer, "action": req.Capability, "output": ans.Output})
	}
	var out bytes.Buffer
	if err := json.Indent(&out, ans.Output, "", "  "); err != nil {
		return fmt.Errorf("reading the answer of %s: %w", target, err)
	}
	fmt.Fprintf(e.stdout, "%s\n", out.Bytes())
	return nil
}

// invokeURL is the orchestrator's POST /invoke beside the /capabilities
// it was imported from.
func invokeURL(capabilities string) (string, error) {
	u, err := url.Parse(capabilities)
	if err != nil {
		return "", fmt.Errorf("the imported URL %s: %w", capabilities, err)
	}
	u.Path = path.Join(path.Dir(u.Path), "invoke")
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// excerpt is an outside agent's text as this command prints it.
func excerpt(b []byte) string { return termText(strings.TrimSpace(string(b)), maxTermLine) }
