package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/wire"
)

// agentReply is what the test agents answer a text message.
func agentReply(text string) string { return "Alice's agent here; you said: " + text }

// eventAgent is a local agent on d's event stream, subscribed as a real
// one is (GET /v1/events): it answers weather.forecast invocations and
// messages that ask for a reply, each with POST /v1/invocations/{id}
// (Node.AnswerInvocation). hold, when not nil, is received from before
// each text reply, so a test decides when the agent answers.
func eventAgent(t *testing.T, d *daemon, hold <-chan struct{}) {
	t.Helper()
	evs, stop := d.n.Subscribe()
	t.Cleanup(stop)
	go func() {
		for e := range evs {
			if e.Invocation == nil {
				continue
			}
			inv := *e.Invocation
			go func() {
				var ans events.InvocationAnswer
				switch {
				case e.Type == events.EventMessage && e.Message != nil && inv.Capability == "":
					if hold != nil {
						<-hold
					}
					ans.Result = agentReply(e.Message.Body.Text)
				case e.Type == events.EventInvocation && inv.Capability == "weather.forecast":
					city, _ := inv.Params.(map[string]any)["city"].(string)
					ans.Result = map[string]any{"summary": "rain in " + city}
				default:
					ans.Error = &events.AgentError{Message: "no such thing here: " + inv.Capability}
				}
				d.n.AnswerInvocation(inv.ID, ans)
			}()
		}
	}()
}

// rpcCall posts body to d's /a2a with headers and returns the HTTP status
// and the decoded JSON-RPC response.
func rpcCall(t *testing.T, d *daemon, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	r := do(t, "POST", d.url+"/a2a", "application/json", []byte(body), headers...)
	var out map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("%s: %d, not JSON: %s", body, r.status, r.body)
	}
	return r.status, out
}

func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// TestA2ATextMessageReachesTheAgent: a plain text message, as generic A2A
// clients send, reaches the local agent as a "message" event carrying the
// text, and the agent's reply is the A2A answer, in each version's shapes.
func TestA2ATextMessageReachesTheAgent(t *testing.T) {
	d := start(t, testConfig())
	eventAgent(t, d, nil)

	status, out := rpcCall(t, d, `{"jsonrpc": "2.0", "id": "a", "method": "message/send", "params": {"message": {"kind": "message", "role": "user",
		"messageId": "m1", "contextId": "c1", "parts": [{"kind": "text", "text": "Bonjour"}]}}}`)
	want := agentReply("Bonjour")
	if status != 200 || dig(out, "id") != "a" || dig(out, "result", "kind") != "message" || dig(out, "result", "role") != "agent" ||
		dig(out, "result", "contextId") != "c1" || dig(out, "result", "parts", 0, "kind") != "text" || dig(out, "result", "parts", 0, "text") != want {
		t.Fatalf("0.3 message/send: %d %v", status, out)
	}

	status, out = rpcCall(t, d, `{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER",
		"messageId": "m2", "parts": [{"text": "Hola"}]}}}`, "A2A-Version", "1.0")
	msg := dig(out, "result", "message")
	if status != 200 || dig(out, "id") != 7.0 || dig(msg, "role") != "ROLE_AGENT" || dig(msg, "kind") != nil ||
		dig(msg, "parts", 0, "text") != agentReply("Hola") || dig(msg, "parts", 0, "kind") != nil || dig(msg, "contextId") == nil {
		t.Fatalf("1.0 SendMessage: %d %v", status, out)
	}

	// A webhook agent gets the message as an Invocation with no capability.
	cfg := testConfig()
	var got events.Invocation
	var mu sync.Mutex
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		mu.Lock()
		got = inv
		mu.Unlock()
		return events.InvocationAnswer{Result: map[string]any{"echo": inv.Message.Body.Text, "data": inv.Message.Body.Parts[0].Content}}
	})
	w := start(t, cfg)
	_, out = rpcCall(t, w, `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER",
		"messageId": "m3", "contextId": "ctx-9", "parts": [{"text": "see attached"}, {"data": {"n": 1}}]}}}`)
	if dig(out, "result", "message", "parts", 0, "data", "echo") != "see attached" || dig(out, "result", "message", "parts", 0, "data", "data", "n") != 1.0 {
		t.Fatalf("webhook agent: %v", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if got.Capability != "" || got.Message == nil || got.Message.Headers.From.Agent != "anonymous" || !strings.HasPrefix(got.ConversationID, "a2a-") ||
		got.Message.Headers.ConversationID != got.ConversationID {
		t.Fatalf("the webhook's invocation: %+v", got)
	}
	// The same client in the same context is one conversation; another
	// context is another.
	if conversationOf("127.0.0.1:1", "ctx-9") != got.ConversationID || conversationOf("127.0.0.1:2", "ctx-10") == got.ConversationID ||
		conversationOf("127.0.0.2:1", "ctx-9") == got.ConversationID {
		t.Errorf("conversation %s is not the client's and context's", got.ConversationID)
	}
}

// TestA2ATaskPolledUntilTheAgentAnswers: with returnImmediately (1.0) or
// blocking false (0.3) the answer is a working task at once; GetTask and
// tasks/get show it working until the agent answers, then completed with
// the reply.
func TestA2ATaskPolledUntilTheAgentAnswers(t *testing.T) {
	d := start(t, testConfig())
	hold := make(chan struct{})
	eventAgent(t, d, hold)

	for _, tc := range []struct {
		name, send, get, working, completed string
		result                              func(map[string]any) any
	}{
		{"1.0", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m1",
			"parts": [{"text": "take your time"}]}, "configuration": {"returnImmediately": true}}}`,
			`{"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": %q}}`, "TASK_STATE_WORKING", "TASK_STATE_COMPLETED",
			func(out map[string]any) any { return dig(out, "result", "task") }},
		{"0.3", `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message", "role": "user", "messageId": "m1",
			"parts": [{"kind": "text", "text": "take your time"}]}, "configuration": {"blocking": false}}}`,
			`{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": %q}}`, "working", "completed",
			func(out map[string]any) any { return dig(out, "result") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, out := rpcCall(t, d, tc.send)
			task := tc.result(out)
			id, _ := dig(task, "id").(string)
			if id == "" || dig(task, "status", "state") != tc.working {
				t.Fatalf("send: %v", out)
			}
			_, out = rpcCall(t, d, fmt.Sprintf(tc.get, id))
			if dig(out, "result", "status", "state") != tc.working {
				t.Fatalf("get before the agent answered: %v", out)
			}
			hold <- struct{}{} // the agent answers now
			deadline := time.Now().Add(10 * time.Second)
			for dig(out, "result", "status", "state") == tc.working && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // polling, as a client does
				_, out = rpcCall(t, d, fmt.Sprintf(tc.get, id))
			}
			if dig(out, "result", "status", "state") != tc.completed || dig(out, "result", "status", "message", "parts", 0, "text") != agentReply("take your time") ||
				dig(out, "result", "status", "message", "taskId") != id {
				t.Fatalf("get after the agent answered: %v", out)
			}
			// A task takes no further message.
			send := strings.Replace(tc.send, `"messageId": "m1"`, fmt.Sprintf(`"messageId": "m2", "taskId": %q`, id), 1)
			if _, out := rpcCall(t, d, send); dig(out, "error", "code") != float64(a2aUnsupported) {
				t.Errorf("a message to an ended task: %v", out)
			}
		})
	}
}

// TestA2ABadInput: each mistake gets a precise JSON-RPC error in its
// version's shape, and the endpoint goes on working.
func TestA2ABadInput(t *testing.T) {
	cfg := testConfig()
	var ran int
	var mu sync.Mutex
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		mu.Lock()
		ran++
		mu.Unlock()
		return events.InvocationAnswer{Result: map[string]any{"summary": "sun"}}
	})
	d := start(t, cfg)
	cases := []struct {
		name, body string
		headers    []string
		code       int
		says       string
	}{
		{"not JSON", `hello, agent`, nil, rpcParseError, "not JSON"},
		{"truncated JSON", `{"jsonrpc": "2.0", "method": "SendMess`, nil, rpcParseError, "not JSON"},
		{"a batch", `[{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}]`, nil, rpcInvalidRequest, "batch"},
		{"not JSON-RPC 2.0", `{"id": 1, "method": "SendMessage"}`, nil, rpcInvalidRequest, `want "2.0"`},
		{"object id", `{"jsonrpc": "2.0", "id": {"a": 1}, "method": "SendMessage"}`, nil, rpcInvalidRequest, "id is"},
		{"unknown method", `{"jsonrpc": "2.0", "id": 1, "method": "SendMesage"}`, nil, rpcMethodNotFound, "SendMessage, SendStreamingMessage, GetTask"},
		{"no params", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}`, nil, rpcInvalidParams, "params is missing"},
		{"params of the wrong type", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"parts": "hi"}}}`, nil, rpcInvalidParams, "params.message.parts is a JSON string; want an array"},
		{"no parts", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": []}}}`, nil, rpcInvalidParams, "parts is missing or empty"},
		{"empty part", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{}]}}}`, nil, rpcInvalidParams, "parts[0] has no content"},
		{"agent role", `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message", "role": "agent", "messageId": "m", "parts": [{"kind": "text", "text": "x"}]}}}`, nil, rpcInvalidParams, "role"},
		{"file part", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"url": "https://x.example/a.pdf"}]}}}`, nil, a2aContentType, "text and data parts only"},
		{"unknown skill (1.0)", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"data": {"skill": "weather.tomorrow"}}]}}}`, nil, rpcInvalidParams, `"weather.tomorrow"`},
		{"unknown skill (0.3)", `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message", "role": "user", "messageId": "m", "metadata": {"skill": "weather.tomorrow"}, "parts": [{"kind": "text", "text": "?"}]}}}`, nil, rpcInvalidParams, `"weather.tomorrow"`},
		{"hidden skill", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"data": {"skill": "diary.read"}}]}}}`, nil, rpcInvalidParams, "no capability by that name"},
		{"skill input against its schema", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"data": {"skill": "weather.forecast", "input": {"town": "Porto"}}}]}}}`, nil, rpcInvalidParams, "city"},
		{"push notifications", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]}, "configuration": {"taskPushNotificationConfig": {"url": "https://x.example"}}}}`, nil, a2aPushNotSupported, "push"},
		{"unknown task", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "task-nope"}}`, nil, a2aTaskNotFound, "task-nope"},
		{"cancel an unknown task", `{"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "task-nope"}}`, nil, a2aTaskNotFound, "task-nope"},
		{"streaming without a message", `{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {}}`, nil, rpcInvalidParams, "params.message is missing"},
		{"list tasks without a context", `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}`, nil, rpcInvalidParams, "params.contextId is missing"},
		{"extended card", `{"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}`, nil, a2aUnsupported, "agent-card.json"},
		{"unknown version", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}`, []string{"A2A-Version", "2.0"}, a2aVersionNotSupport, "1.0 and 0.3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, out := rpcCall(t, d, tc.body, tc.headers...)
			msg, _ := dig(out, "error", "message").(string)
			if status != 200 || dig(out, "jsonrpc") != "2.0" || dig(out, "error", "code") != float64(tc.code) || !strings.Contains(msg, tc.says) {
				t.Fatalf("%d %v; want code %d saying %q", status, out, tc.code, tc.says)
			}
			if _, ok := out["id"]; !ok {
				t.Errorf("no id member: %v", out)
			}
			t.Logf("%v: %s", dig(out, "error", "code"), msg)
		})
	}

	// 1.0 errors carry typed details: the A2A reason, then the daemon's
	// explanation; 0.3 errors carry the explanation as their data object.
	_, out := rpcCall(t, d, cases[12].body)
	if dig(out, "error", "data", 0, "@type") != "type.googleapis.com/google.rpc.ErrorInfo" || dig(out, "error", "data", 0, "reason") != "INVALID_PARAMS" ||
		dig(out, "error", "data", 0, "domain") != "a2a-protocol.org" || dig(out, "error", "data", 0, "metadata", "ifaced_code") != "unknown_capability" ||
		dig(out, "error", "data", 1, "@type") != "type.googleapis.com/google.protobuf.Struct" || dig(out, "error", "data", 1, "code") != "unknown_capability" {
		t.Errorf("1.0 error data: %v", dig(out, "error", "data"))
	}
	_, out = rpcCall(t, d, cases[13].body)
	if dig(out, "error", "data", "code") != "unknown_capability" {
		t.Errorf("0.3 error data: %v", dig(out, "error", "data"))
	}
	_, out = rpcCall(t, d, cases[0].body)
	if id, ok := out["id"]; !ok || id != nil {
		t.Errorf("a parse error's id is %v, want null", id)
	}

	// A body a browser could send across origins without asking is refused
	// before it is read, with a JSON-RPC body all the same.
	r := do(t, "POST", d.url+"/a2a", "text/plain", []byte(`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}`))
	if r.status != http.StatusUnsupportedMediaType || !strings.Contains(string(r.body), `"code": -32600`) || !strings.Contains(string(r.body), "application/json") {
		t.Errorf("text/plain: %d %s", r.status, r.body)
	}

	mu.Lock()
	if ran != 0 {
		t.Errorf("bad input reached the agent %d times", ran)
	}
	mu.Unlock()
	// Nothing broke: a good skill message still runs.
	_, out = rpcCall(t, d, `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"data": {"skill": "weather.forecast", "input": {"city": "Porto"}}}]}}}`)
	if dig(out, "result", "message", "parts", 0, "data", "output", "summary") != "sun" {
		t.Fatalf("after the bad input: %v", out)
	}
}

// TestA2AMessagesAudited: a text message is audited like an anonymous
// request: the caller's address, then the outcome, never the reply; and
// while the audit log has no room for strangers it is refused before the
// agent sees it.
func TestA2AMessagesAudited(t *testing.T) {
	d := start(t, testConfig())
	eventAgent(t, d, nil)
	rpcCall(t, d, `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "hello"}]}}}`)
	convs, err := d.n.Audit().Conversations()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, c := range convs {
		entries, err := d.n.Audit().Entries(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2 || entries[0].Message.Headers.Phase != gossip.PhaseContext {
			continue
		}
		found = true
		req, ans := entries[0], entries[1]
		if req.Peer != "anonymous" || req.Transport != "a2a" || req.Message.Body.Text != "hello" || !strings.Contains(req.Note, "anonymous message through a2a from 127.0.0.1:") ||
			!strings.Contains(req.Note, "the agent's conversation a2a-") {
			t.Errorf("the message's entry: %+v", req)
		}
		if !strings.HasSuffix(ans.Note, ": answered") || strings.Contains(ans.Message.Body.Text, "you said") {
			t.Errorf("the outcome's entry: %q %q", ans.Note, ans.Message.Body.Text)
		}
	}
	if !found {
		t.Fatalf("no audited text message among %d conversations", len(convs))
	}
}

// TestA2ATaskTableBounds: the table a stranger can fill is bounded per
// client and in total, ended tasks make room (a client's own first), and
// ended tasks are forgotten a2aTaskKeep after they end.
func TestA2ATaskTableBounds(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ts := newA2ATasks(func() time.Time { return now })
	a, b := netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("2001:db8::/64")
	reply := func(s string) *outMessage { return &outMessage{text: &s} }

	// A client has at most maxA2AWorkingPerClient tasks working.
	var ids []string
	for i := 0; i < maxA2AWorkingPerClient; i++ {
		tk, err := ts.add(a, "c")
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		ids = append(ids, tk.id)
	}
	if _, err := ts.add(a, "c"); err == nil || err.detail.Code != wire.CodeBusy || !strings.Contains(err.msg, "tasks working") {
		t.Fatalf("a client with its most tasks working: %v", err)
	}
	if _, err := ts.add(b, "c"); err != nil {
		t.Fatalf("another client: %v", err)
	}
	// It holds at most maxA2ATasksPerClient: its own oldest ended task
	// makes room for the next.
	for len(ids) < maxA2ATasksPerClient+1 {
		ts.complete(ids[len(ids)-maxA2AWorkingPerClient], reply("done"))
		tk, err := ts.add(a, "c")
		if err != nil {
			t.Fatalf("task %d: %v", len(ids), err)
		}
		ids = append(ids, tk.id)
	}
	if _, ok := ts.get(ids[0]); ok {
		t.Fatal("the client's oldest ended task was not the one evicted")
	}
	if _, ok := ts.get(ids[1]); !ok {
		t.Fatal("an ended task is not kept while there is room")
	}
	// Ended tasks go a2aTaskKeep after they end; working ones stay.
	tk, _ := ts.add(b, "c")
	ts.complete(tk.id, reply("done"))
	now = now.Add(a2aTaskKeep + time.Second)
	if _, ok := ts.get(tk.id); ok {
		t.Fatal("an ended task outlived a2aTaskKeep")
	}
	if n := ts.len(); n != maxA2AWorkingPerClient+1 {
		t.Fatalf("%d tasks kept, want the %d working ones", n, maxA2AWorkingPerClient+1)
	}
	// A reply too large to keep fails the task instead.
	big, _ := ts.add(b, "c")
	ts.complete(big.id, reply(strings.Repeat("x", maxA2ATaskReply)))
	if got, _ := ts.get(big.id); got.state != taskFailed || !strings.Contains(*got.status.text, "send the message blocking") {
		t.Fatalf("an oversized reply: %+v", got)
	}
	// The total: clients beyond the cap evict the oldest ended tasks.
	for i := 0; i < 3*maxA2ATasks; i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		tk, err := ts.add(p, "c")
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		ts.complete(tk.id, reply(strings.Repeat("y", 64<<10)))
	}
	ts.mu.Lock()
	n, bytes := len(ts.order), ts.bytes
	ts.mu.Unlock()
	if n > maxA2ATasks || bytes > maxA2ATaskBytes {
		t.Fatalf("%d tasks and %d bytes kept, bounds %d and %d", n, bytes, maxA2ATasks, maxA2ATaskBytes)
	}
	t.Logf("after %d tasks of 64 KiB from as many clients: %d kept, %d KiB", 3*maxA2ATasks, n, bytes>>10)
}

// TestA2AMessagesWithinStrangersShare: text messages count against the
// strangers' share of the audit log like any anonymous request; once it
// is used up, the oldest strangers' files make room (written down in the
// day's record of pruned files) and messages are still taken: the agent
// sees every one, and the audit log stays within the share and a last
// few messages' entries.
func TestA2AMessagesWithinStrangersShare(t *testing.T) {
	cfg := testConfig()
	cfg.Audit.MaxMB = 16 // the least: a 4 MiB share for strangers
	var seen int
	var mu sync.Mutex
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		mu.Lock()
		seen++
		mu.Unlock()
		return events.InvocationAnswer{Result: "ok"}
	})
	d := start(t, cfg)
	text := strings.Repeat("a", 60<<10)
	const sent = 200 // 12 MiB of messages, three shares
	share := int64(cfg.Audit.MaxMB) << 20 / gossip.StrangerShare
	for i := range sent {
		if _, err := d.n.Inbox().AskAnonymous("a2a", "192.0.2.7:1", "", "", text, nil); err != nil {
			t.Fatalf("message %d of 60 KiB: %v", i, err)
		}
		if used := d.n.Audit().Usage(); used > share+2<<20 {
			t.Fatalf("after message %d the audit log takes %d KiB, over the strangers' share (%d KiB) and a few messages", i, used>>10, share>>10)
		}
	}
	_, out := rpcCall(t, d, `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "one more"}]}}}`)
	if dig(out, "error") != nil {
		t.Fatalf("a message past the strangers' share: %v", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != sent+1 {
		t.Fatalf("the agent saw %d of %d messages", seen, sent+1)
	}
	pruned, err := d.n.Audit().PrunedOn(time.Now().UTC().Format("2006-01-02"))
	if err != nil || len(pruned) == 0 {
		t.Fatalf("no record of the strangers' files pruned (%v)", err)
	}
}
