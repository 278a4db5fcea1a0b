// Package agent is a small example of a local agent behind ifaced: an
// HTTP webhook that answers the invocations ifaced forwards to it
// (docs/agents.md). It offers three capabilities, described
// for the daemon's config in capabilities.toml beside this file:
//
//	doc.summarize          the first words of a text (priced)
//	calendar.availability  free windows in the coming days (conditioned)
//	echo                   the parameters back
//
// It also answers a plain-text message, as a generic A2A client sends
// (POST /a2a with a text part): such an invocation names no capability
// and carries the message, and the agent's reply is a short text saying
// what it heard and what it offers (Reply).
//
// ifaced has already checked the conditions and the parameters' schema
// when a call arrives here, so the agent only does the work. The demo and
// the tests run it in process; cmd/example-agent runs it on its own.
package agent

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Capabilities is the [[capabilities]] TOML for a daemon fronting this
// agent.
//
//go:embed capabilities.toml
var Capabilities string

// invocation and answer mirror events.Invocation and events.InvocationAnswer:
// an agent needs only the JSON contract, not ifaced's packages.
type invocation struct {
	ID         string          `json:"invocation_id"`
	Capability string          `json:"capability"`
	Params     json.RawMessage `json:"params"`
	Peer       string          `json:"peer"`
	Message    *message        `json:"message"` // set, and Capability empty, for a message asking for a reply
}

// message is the part of an IFP-4 message the agent reads: its text.
type message struct {
	Body struct {
		Text string `json:"text"`
	} `json:"body"`
}

// maxQuoted bounds how much of a caller's text the reply repeats.
const maxQuoted = 200

// Reply is the agent's answer to a plain-text message: what it heard
// (the first maxQuoted bytes, quoted as the caller's) and what it offers.
// It is text for the caller, never an instruction the agent follows.
func Reply(text string) string {
	quoted := strings.ToValidUTF8(text, "\uFFFD")
	if len(quoted) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !utf8.RuneStart(quoted[cut]) {
			cut--
		}
		quoted = quoted[:cut] + "…"
	}
	return fmt.Sprintf("Hello from the example agent. You said: %q. I can summarize a text (doc.summarize), "+
		"find free windows in a calendar (calendar.availability) and echo parameters (echo).", quoted)
}

type answer struct {
	Result any            `json:"result,omitempty"`
	Error  *answerProblem `json:"error,omitempty"`
}

type answerProblem struct {
	Message string `json:"message"`
}

// Handler returns the webhook. now dates the calendar (time.Now when nil).
func Handler(now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST an invocation", http.StatusMethodNotAllowed)
			return
		}
		var inv invocation
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&inv); err != nil {
			http.Error(w, "not an invocation: "+err.Error(), http.StatusBadRequest)
			return
		}
		result, err := run(inv, now())
		ans := answer{Result: result}
		if err != nil {
			ans = answer{Error: &answerProblem{Message: err.Error()}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ans)
	})
}

func run(inv invocation, now time.Time) (any, error) {
	if inv.Capability == "" && inv.Message != nil {
		return Reply(inv.Message.Body.Text), nil
	}
	switch inv.Capability {
	case "doc.summarize":
		var p struct {
			Text     string `json:"text"`
			MaxWords int    `json:"max_words"`
		}
		if err := json.Unmarshal(inv.Params, &p); err != nil {
			return nil, fmt.Errorf("reading parameters: %w", err)
		}
		if p.MaxWords == 0 {
			p.MaxWords = 20
		}
		words := strings.Fields(p.Text)
		if len(words) > p.MaxWords {
			words = words[:p.MaxWords]
		}
		return map[string]any{"summary": strings.Join(words, " "), "word_count": len(words)}, nil
	case "calendar.availability":
		var p struct {
			Days int `json:"days"`
		}
		if err := json.Unmarshal(inv.Params, &p); err != nil {
			return nil, fmt.Errorf("reading parameters: %w", err)
		}
		var windows []string
		day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		for i := 1; i <= p.Days; i++ {
			d := day.AddDate(0, 0, i)
			if d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
				continue
			}
			windows = append(windows, d.Add(10*time.Hour).Format(time.RFC3339)+"/PT2H")
		}
		return map[string]any{"windows": windows}, nil
	case "echo":
		var v any
		if len(inv.Params) > 0 {
			if err := json.Unmarshal(inv.Params, &v); err != nil {
				return nil, err
			}
		}
		return v, nil
	}
	return nil, fmt.Errorf("this agent does not implement %q", inv.Capability)
}
