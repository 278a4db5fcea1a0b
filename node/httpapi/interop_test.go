package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/interop/jsdeps"
)

// interopTimeout bounds each outside command: a cold npm ci, or the first
// build of a2a-go and gRPC on a small machine, takes minutes.
const interopTimeout = 10 * time.Minute

// TestRealClientsAcceptTheEndpoints serves the binding of a real daemon,
// whose local agent (on the event stream) answers weather.forecast and
// text messages, and has the real client libraries use it: @ag-ui/core's
// AgentCapabilitiesSchema and @a2a-js/sdk's card resolver, client factory
// and signature verifier (interop/js/check.mjs); @a2a-js/sdk's client
// sending a text message, a skill message and a task it polls, and
// streaming a message (the agent's reply as the stream's message event)
// and a task (the task, then its status update carrying the reply)
// (interop/js/a2a.mjs); and a2a-go v2 (A2A 1.0) and v0.3 doing the same,
// v2 streaming as well (interop/a2ago, a module of its own so that
// ifaced's go.mod does not carry gRPC). The JavaScript dependencies are installed with npm ci from
// the committed lock file when missing or older than it.
func TestRealClientsAcceptTheEndpoints(t *testing.T) {
	d := start(t, testConfig())
	eventAgent(t, d, nil)
	reply := agentReply("Hello, who are you?")
	skill := map[string]any{"skill": "weather.forecast", "output": map[string]any{"summary": "rain in Porto"}}
	root, err := filepath.Abs(filepath.Join("..", "..", "interop"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("js", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(root, "js")
		jsdeps.NeedNode(t)
		jsdeps.Install(t, dir)
		out := run(t, dir, "node", "check.mjs", d.url)
		var got struct {
			AGUI struct {
				Identity    string            `json:"identity"`
				Tools       []string          `json:"tools"`
				UnknownKeys map[string]string `json:"unknownKeys"`
				Actions     []string          `json:"actions"`
			} `json:"agui"`
			A2A struct {
				Name              string   `json:"name"`
				Skills            []string `json:"skills"`
				SignatureVerified bool     `json:"signatureVerified"`
			} `json:"a2a"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("check.mjs printed no JSON summary (%v): %s", err, out)
		}
		want := []string{"ping", "weather.forecast"}
		if got.AGUI.Identity != "Alice's agent" || !slices.Equal(got.AGUI.Tools, want) || !slices.Equal(got.AGUI.Actions, want) {
			t.Errorf("AG-UI: identity %q, tools %q, actions %q; want %q and %q", got.AGUI.Identity, got.AGUI.Tools, got.AGUI.Actions, "Alice's agent", want)
		}
		if got.A2A.Name != "Alice's agent" || !slices.Equal(got.A2A.Skills, want) || !got.A2A.SignatureVerified {
			t.Errorf("A2A (@a2a-js/sdk): %+v", got.A2A)
		}

		out = run(t, dir, "node", "a2a.mjs", d.url)
		var msgs struct {
			ProtocolVersion string         `json:"protocolVersion"`
			Text            string         `json:"text"`
			Role            string         `json:"role"`
			Skill           map[string]any `json:"skill"`
			Task            struct {
				First, Final, Reply string
			} `json:"task"`
			Stream struct {
				Events     []string `json:"events"`
				Text, Role string
			} `json:"stream"`
			TaskStream struct {
				Events              []string `json:"events"`
				First, Final, Reply string
			} `json:"taskStream"`
			UnknownSkill struct {
				Name    string   `json:"name"`
				Code    int      `json:"code"`
				Message string   `json:"message"`
				Details []string `json:"details"`
			} `json:"unknownSkill"`
		}
		if err := json.Unmarshal(out, &msgs); err != nil {
			t.Fatalf("a2a.mjs printed no JSON summary (%v): %s", err, out)
		}
		if msgs.ProtocolVersion != "1.0" || msgs.Text != reply || msgs.Role != "ROLE_AGENT" || !reflect.DeepEqual(msgs.Skill, skill) {
			t.Errorf("@a2a-js/sdk text and skill messages: %+v", msgs)
		}
		if msgs.Task.First != "TASK_STATE_WORKING" || msgs.Task.Final != "TASK_STATE_COMPLETED" || msgs.Task.Reply != reply {
			t.Errorf("@a2a-js/sdk task: %+v", msgs.Task)
		}
		if s := msgs.Stream; !slices.Equal(s.Events, []string{"message"}) || s.Text != reply || s.Role != "ROLE_AGENT" {
			t.Errorf("@a2a-js/sdk sendMessageStream: %+v", s)
		}
		if s := msgs.TaskStream; !slices.Equal(s.Events, []string{"task", "statusUpdate"}) || s.First != "TASK_STATE_WORKING" || s.Final != "TASK_STATE_COMPLETED" || s.Reply != reply {
			t.Errorf("@a2a-js/sdk sendMessageStream (returnImmediately): %+v", s)
		}
		if u := msgs.UnknownSkill; u.Code != rpcInvalidParams || !strings.Contains(u.Message, `"weather.tomorrow"`) ||
			!slices.Equal(u.Details, []string{"type.googleapis.com/google.rpc.ErrorInfo", "type.googleapis.com/google.protobuf.Struct"}) {
			t.Errorf("@a2a-js/sdk unknown skill: %+v", u)
		}
	})

	t.Run("a2a-go", func(t *testing.T) {
		t.Parallel()
		out := run(t, filepath.Join(root, "a2ago"), "go", "run", ".", d.url)
		type exchange struct {
			Interface string `json:"interface"`
			Text      string `json:"text"`
			Skill     any    `json:"skill"`
		}
		var got struct {
			Name   string   `json:"name"`
			URL    string   `json:"url"`
			Skills []string `json:"skills"`
			V1     struct {
				exchange
				Task struct {
					First, Final, Reply string
				} `json:"task"`
				Stream, TaskStream struct {
					Events              []string
					First, Final, Reply string
				}
				UnknownSkill struct {
					Code, Message string
				} `json:"unknownSkill"`
			} `json:"v1"`
			V03 exchange `json:"v03"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("a2ago printed no JSON summary (%v): %s", err, out)
		}
		if got.Name != "Alice's agent" || got.URL != d.url+"/a2a" || !slices.Equal(got.Skills, []string{"ping", "weather.forecast"}) {
			t.Errorf("A2A (a2a-go): %+v", got)
		}
		if v := got.V1; v.Interface != "JSONRPC 1.0 "+d.url+"/a2a" || v.Text != reply || !reflect.DeepEqual(v.Skill, any(skill)) {
			t.Errorf("a2a-go v2 (A2A 1.0) text and skill messages: %+v", v.exchange)
		}
		if v := got.V1.Task; v.First != "TASK_STATE_WORKING" || v.Final != "TASK_STATE_COMPLETED" || v.Reply != reply {
			t.Errorf("a2a-go v2 task: %+v", v)
		}
		if s := got.V1.Stream; !slices.Equal(s.Events, []string{"message"}) || s.Reply != reply {
			t.Errorf("a2a-go v2 SendStreamingMessage: %+v", s)
		}
		if s := got.V1.TaskStream; !slices.Equal(s.Events, []string{"task", "statusUpdate"}) || s.First != "TASK_STATE_WORKING" || s.Final != "TASK_STATE_COMPLETED" || s.Reply != reply {
			t.Errorf("a2a-go v2 SendStreamingMessage (returnImmediately): %+v", s)
		}
		if u := got.V1.UnknownSkill; u.Code != "INVALID_PARAMS" || !strings.Contains(u.Message, `"weather.tomorrow"`) {
			t.Errorf("a2a-go v2 unknown skill: %+v", u)
		}
		if v := got.V03; v.Interface != "JSONRPC 0.3.0 "+d.url+"/a2a" || v.Text != reply || !reflect.DeepEqual(v.Skill, any(skill)) {
			t.Errorf("a2a-go v0.3 text and skill messages: %+v", v)
		}
	})
}

// run runs name with args in dir and returns its standard output, failing
// the test with the command's standard error when it fails.
func run(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	timeout := interopTimeout
	if dl, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-10*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off") // interop/a2ago is built as its own module
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	begin := time.Now()
	err := cmd.Run()
	line := strings.Join(append([]string{name}, args...), " ")
	if err != nil {
		for l := range strings.Lines(stderr.String()) {
			t.Log(strings.TrimRight(l, "\n"))
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("%s (in %s) did not finish in %v", line, dir, timeout)
		}
		t.Fatalf("%s (in %s): %v; stdout: %s", line, dir, err, stdout.Bytes())
	}
	t.Logf("%s (%v): %s", line, time.Since(begin).Round(time.Millisecond), bytes.TrimSpace(stdout.Bytes()))
	return stdout.Bytes()
}
