// Command a2ago talks to an ifaced daemon's A2A endpoint with the real
// a2a-go clients, used as their documentation shows and with no
// ifaced-specific metadata:
//
//   - a2a-go v2 (A2A 1.0): agentcard.DefaultResolver.Resolve, then
//     a2aclient.NewFromCard, which must pick the card's JSONRPC 1.0
//     interface. It sends a text message (the local agent's reply comes
//     back as a message), a message with a data part {"skill", "input"}
//     (the skill's result comes back), the same text with
//     returnImmediately (a task, polled with GetTask until it ends), the
//     text streamed with SendStreamingMessage (the agent's reply as the
//     stream's message event; the client streams because the card says
//     streaming), the text streamed with returnImmediately (the task, then
//     its status update carrying the reply), and a message naming a skill
//     the agent does not have (an A2A error).
//   - a2a-go v0.3 (A2A 0.3): its agentcard resolver and
//     a2aclient.NewFromCard (which read the card's url and
//     preferredTransport), then a text message and a skill message.
//
// It prints a one-line JSON summary, or says what failed and exits 1.
// It is a module of its own so that ifaced's dependency graph does not
// carry a2a-go and gRPC; node/httpapi's TestRealClientsAcceptTheEndpoints
// runs it with `go run . BASE_URL` against a daemon whose agent answers
// weather.forecast and text messages.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	a2a03 "github.com/a2aproject/a2a-go/a2a"
	client03 "github.com/a2aproject/a2a-go/a2aclient"
	card03 "github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run . BASE_URL   (the daemon's public HTTP binding, e.g. http://127.0.0.1:8787)")
		os.Exit(2)
	}
	if err := check(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "a2a-go:", err)
		os.Exit(1)
	}
}

// summary is what the check prints on success.
type summary struct {
	Client             string   `json:"client"`
	Name               string   `json:"name"`
	URL                string   `json:"url"`
	ProtocolVersion    string   `json:"protocolVersion"`
	PreferredTransport string   `json:"preferredTransport"`
	Skills             []string `json:"skills"`
	Signatures         int      `json:"signatures"`
	V1                 v1Result `json:"v1"`
	V03                exchange `json:"v03"`
}

// exchange is what a text message and a skill message got back.
type exchange struct {
	Interface string `json:"interface"` // binding, version and URL the client chose
	Text      string `json:"text"`      // the agent's reply to the text message
	Skill     any    `json:"skill"`     // the skill message's result data
}

type v1Result struct {
	exchange
	Task         taskResult   `json:"task"`
	Stream       streamResult `json:"stream"`
	TaskStream   streamResult `json:"taskStream"`
	UnknownSkill struct {
		Code    string `json:"code"`    // the A2A error it maps to
		Message string `json:"message"` // what the server said
	} `json:"unknownSkill"`
}

// streamResult is what a streamed message got: the events' kinds in
// order, and the reply (the message's text, or the last status update's).
type streamResult struct {
	Events []string `json:"events"`
	Reply  string   `json:"reply"`
	First  string   `json:"first,omitempty"` // the task's state in the first event
	Final  string   `json:"final,omitempty"` // the state of the last status update
}

type taskResult struct {
	First string `json:"first"` // the state SendMessage returned
	Final string `json:"final"` // the state GetTask ended on
	Reply string `json:"reply"` // the reply in the final status
	Polls int    `json:"polls"`
}

const (
	textMessage = "Hello, who are you?"
	skillName   = "weather.forecast"
)

func skillInput() map[string]any {
	return map[string]any{"skill": skillName, "input": map[string]any{"city": "Porto"}}
}

func check(base string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := summary{Client: "a2a-go v2.4.0 (A2A 1.0) and v0.3.15 (A2A 0.3)", Skills: []string{}}
	if err := check03(ctx, base, &s); err != nil {
		return fmt.Errorf("v0.3 client: %w", err)
	}
	if err := check1(ctx, base, &s.V1); err != nil {
		return fmt.Errorf("v2 client (A2A 1.0): %w", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

// check1 uses a2a-go v2 as its README shows.
func check1(ctx context.Context, base string, out *v1Result) error {
	card, err := agentcard.DefaultResolver.Resolve(ctx, base)
	if err != nil {
		return fmt.Errorf("resolving the agent card from %s: %w", base, err)
	}
	client, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		return fmt.Errorf("building a client from the agent card: %w", err)
	}
	defer client.Destroy()
	for _, in := range card.SupportedInterfaces {
		if in.ProtocolVersion == a2a.Version {
			out.Interface = fmt.Sprintf("%s %s %s", in.ProtocolBinding, in.ProtocolVersion, in.URL)
		}
	}

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(textMessage))
	resp, err := client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return fmt.Errorf("SendMessage (text): %w", err)
	}
	reply, ok := resp.(*a2a.Message)
	if !ok {
		return fmt.Errorf("SendMessage (text) returned a %T, want the agent's message", resp)
	}
	if reply.Role != a2a.MessageRoleAgent || len(reply.Parts) == 0 {
		return fmt.Errorf("SendMessage (text): the reply is not an agent message with parts: %+v", reply)
	}
	out.Text = reply.Parts[0].Text()

	msg = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(skillInput()))
	resp, err = client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return fmt.Errorf("SendMessage (skill): %w", err)
	}
	if reply, ok = resp.(*a2a.Message); !ok || len(reply.Parts) == 0 {
		return fmt.Errorf("SendMessage (skill) returned %T %+v, want the agent's message", resp, resp)
	}
	out.Skill = reply.Parts[0].Data()

	msg = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(textMessage))
	resp, err = client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		return fmt.Errorf("SendMessage (returnImmediately): %w", err)
	}
	task, ok := resp.(*a2a.Task)
	if !ok {
		return fmt.Errorf("SendMessage (returnImmediately) returned a %T, want a task", resp)
	}
	out.Task.First = task.Status.State.String()
	for !task.Status.State.Terminal() {
		out.Task.Polls++
		if out.Task.Polls > 200 {
			return fmt.Errorf("task %s still %s after %d polls", task.ID, task.Status.State, out.Task.Polls-1)
		}
		time.Sleep(50 * time.Millisecond) // the client's polling interval
		if task, err = client.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil {
			return fmt.Errorf("GetTask: %w", err)
		}
	}
	out.Task.Final = task.Status.State.String()
	if m := task.Status.Message; m != nil && len(m.Parts) > 0 {
		out.Task.Reply = m.Parts[0].Text()
	}

	if err := stream(ctx, client, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(textMessage))}, &out.Stream); err != nil {
		return fmt.Errorf("SendStreamingMessage: %w", err)
	}
	req := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(textMessage)), Config: &a2a.SendMessageConfig{ReturnImmediately: true}}
	if err := stream(ctx, client, req, &out.TaskStream); err != nil {
		return fmt.Errorf("SendStreamingMessage (returnImmediately): %w", err)
	}

	msg = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"skill": "weather.tomorrow", "input": map[string]any{}}))
	_, err = client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	var ae *a2a.Error
	switch {
	case err == nil:
		return errors.New("SendMessage (unknown skill) succeeded")
	case !errors.As(err, &ae):
		return fmt.Errorf("SendMessage (unknown skill): not an A2A error: %w", err)
	}
	out.UnknownSkill.Code = a2a.ErrorReason(ae.Err)
	out.UnknownSkill.Message = ae.Message
	return nil
}

// stream sends req with SendStreamingMessage and records its events.
func stream(ctx context.Context, client *a2aclient.Client, req *a2a.SendMessageRequest, out *streamResult) error {
	out.Events = []string{}
	for ev, err := range client.SendStreamingMessage(ctx, req) {
		if err != nil {
			return err
		}
		switch ev := ev.(type) {
		case *a2a.Message:
			out.Events = append(out.Events, "message")
			if len(ev.Parts) > 0 {
				out.Reply = ev.Parts[0].Text()
			}
		case *a2a.Task:
			out.Events = append(out.Events, "task")
			out.First = ev.Status.State.String()
		case *a2a.TaskStatusUpdateEvent:
			out.Events = append(out.Events, "statusUpdate")
			out.Final = ev.Status.State.String()
			if m := ev.Status.Message; m != nil && len(m.Parts) > 0 {
				out.Reply = m.Parts[0].Text()
			}
		default:
			out.Events = append(out.Events, fmt.Sprintf("%T", ev))
		}
	}
	return nil
}

// check03 uses a2a-go v0.3 as its documentation shows, and fills the
// card fields of the summary.
func check03(ctx context.Context, base string, s *summary) error {
	card, err := card03.NewResolver(&http.Client{Timeout: 30 * time.Second}).Resolve(ctx, base)
	if err != nil {
		return fmt.Errorf("resolving the agent card from %s: %w", base, err)
	}
	if err := required(card); err != nil {
		return fmt.Errorf("the resolved agent card: %w", err)
	}
	client, err := client03.NewFromCard(ctx, card)
	if err != nil {
		return fmt.Errorf("building a client from the agent card (url %q, preferredTransport %q): %w", card.URL, card.PreferredTransport, err)
	}
	defer client.Destroy()
	s.Name, s.URL, s.ProtocolVersion = card.Name, card.URL, card.ProtocolVersion
	s.PreferredTransport, s.Signatures = string(card.PreferredTransport), len(card.Signatures)
	for _, sk := range card.Skills {
		s.Skills = append(s.Skills, sk.ID)
	}
	s.V03.Interface = fmt.Sprintf("%s %s %s", card.PreferredTransport, card.ProtocolVersion, card.URL)

	resp, err := client.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.TextPart{Text: textMessage})})
	if err != nil {
		return fmt.Errorf("message/send (text): %w", err)
	}
	reply, ok := resp.(*a2a03.Message)
	if !ok || len(reply.Parts) == 0 {
		return fmt.Errorf("message/send (text) returned %T %+v, want the agent's message", resp, resp)
	}
	if t, ok := reply.Parts[0].(a2a03.TextPart); ok {
		s.V03.Text = t.Text
	}
	resp, err = client.SendMessage(ctx, &a2a03.MessageSendParams{Message: a2a03.NewMessage(a2a03.MessageRoleUser, a2a03.DataPart{Data: skillInput()})})
	if err != nil {
		return fmt.Errorf("message/send (skill): %w", err)
	}
	if reply, ok = resp.(*a2a03.Message); !ok || len(reply.Parts) == 0 {
		return fmt.Errorf("message/send (skill) returned %T %+v, want the agent's message", resp, resp)
	}
	if d, ok := reply.Parts[0].(a2a03.DataPart); ok {
		s.V03.Skill = d.Data
	}
	return nil
}

// required checks the members the A2A 0.3 schema requires and a2a-go's
// lenient json.Unmarshal would leave empty without complaint.
func required(c *a2a03.AgentCard) error {
	for _, m := range []struct{ name, value string }{
		{"name", c.Name}, {"description", c.Description}, {"version", c.Version},
		{"url", c.URL}, {"protocolVersion", c.ProtocolVersion},
	} {
		if m.value == "" {
			return fmt.Errorf("%s is missing or empty", m.name)
		}
	}
	if c.Skills == nil {
		return fmt.Errorf("skills is missing")
	}
	if len(c.DefaultInputModes) == 0 || len(c.DefaultOutputModes) == 0 {
		return fmt.Errorf("defaultInputModes or defaultOutputModes is missing or empty")
	}
	for i, sk := range c.Skills {
		if sk.ID == "" || sk.Name == "" || sk.Description == "" || len(sk.Tags) == 0 {
			return fmt.Errorf("skills[%d] (%q) lacks id, name, description or tags", i, sk.ID)
		}
	}
	return nil
}
