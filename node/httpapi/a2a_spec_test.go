package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/wire"
)

// The JSON-RPC surface against the A2A specification, one requirement per
// test or table row, each naming its section: A2A 1.0 (docs/specification.md
// of a2aproject/A2A v1.0.1), the A2A 0.3 types, JSON-RPC 2.0.

// from is an HTTP client whose connections come from the loopback address
// ip (127.0.0.2, say): another client of the binding, as the limiter, the
// task table and ListTasks count clients.
func from(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// rpcFrom posts body to d's /a2a from client c with headers, and returns
// the status and the decoded response.
func rpcFrom(t *testing.T, c *http.Client, d *daemon, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", d.url+"/a2a", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %d, not JSON: %s", body, res.StatusCode, b)
	}
	return res.StatusCode, out
}

// countingAgent is a webhook agent that counts what reaches it and answers
// text messages with agentReply.
func countingAgent(t *testing.T, cfg *config.Config) *atomic.Int32 {
	var n atomic.Int32
	cfg.Agent.Webhook = agent(t, func(inv events.Invocation) events.InvocationAnswer {
		n.Add(1)
		if inv.Message != nil {
			return events.InvocationAnswer{Result: agentReply(inv.Message.Body.Text)}
		}
		return events.InvocationAnswer{Result: map[string]any{"summary": "sun"}}
	})
	return &n
}

// TestA2AVersionFromHeader: the A2A-Version header decides the version a
// request is answered in (1.0 §3.6.2: "Agents MUST process requests using
// the semantics of the requested A2A-Version"; empty is 0.3); a method of
// the other version is not found, naming the one to call; without the
// header a 1.0 method name is answered as 1.0 (the documented fallback);
// the query parameter may stand for the header (§3.6.1); patch numbers do
// not count (§3.6).
func TestA2AVersionFromHeader(t *testing.T) {
	cfg := testConfig()
	countingAgent(t, cfg)
	d := start(t, cfg)
	send10 := `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "hi"}]}}}`
	send03 := `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message", "role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "hi"}]}}}`
	list10 := `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"contextId": "c"}}`
	for _, tc := range []struct {
		name, body, path string
		headers          []string
		code             int    // the error code, or 0 for a result
		says             string // in the error message
		version          string // of a result: "1.0" (wrapped, ROLE_AGENT) or "0.3" (kind, agent)
	}{
		{"§3.6.2 header 1.0, 1.0 method", send10, "/a2a", []string{"A2A-Version", "1.0"}, 0, "", "1.0"},
		{"§3.6.2 header 0.3, 0.3 method", send03, "/a2a", []string{"A2A-Version", "0.3"}, 0, "", "0.3"},
		{"§3.6.2 empty header is 0.3", send03, "/a2a", nil, 0, "", "0.3"},
		{"fallback: no header, a 1.0 method", send10, "/a2a", nil, 0, "", "1.0"},
		{"§3.6 patch numbers do not count", send10, "/a2a", []string{"A2A-Version", "1.0.7"}, 0, "", "1.0"},
		{"§3.6.2 header 1.0, 0.3 method", send03, "/a2a", []string{"A2A-Version", "1.0"}, rpcMethodNotFound, "in A2A 1.0 call SendMessage", ""},
		{"§3.6.2 header 0.3, 1.0 method", send10, "/a2a", []string{"A2A-Version", "0.3"}, rpcMethodNotFound, "in A2A 0.3 call message/send", ""},
		{"§3.6.2 0.3 has no JSON-RPC ListTasks", list10, "/a2a", []string{"A2A-Version", "0.3"}, rpcMethodNotFound, "A2A 0.3 has no JSON-RPC method for it", ""},
		{"§3.6.1 the query parameter names the version", send03, "/a2a?A2A-Version=1.0", nil, rpcMethodNotFound, "in A2A 1.0 call SendMessage", ""},
		{"§3.6.2 an unknown version", send10, "/a2a", []string{"A2A-Version", "2.0"}, a2aVersionNotSupport, "speaks A2A 1.0 and 0.3", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, "POST", d.url+tc.path, "application/json", []byte(tc.body), tc.headers...)
			var out map[string]any
			if err := json.Unmarshal(r.body, &out); err != nil || r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if tc.code != 0 {
				msg, _ := dig(out, "error", "message").(string)
				if dig(out, "error", "code") != float64(tc.code) || !strings.Contains(msg, tc.says) {
					t.Fatalf("%v; want code %d saying %q", out, tc.code, tc.says)
				}
				return
			}
			switch tc.version {
			case "1.0":
				if dig(out, "result", "message", "role") != "ROLE_AGENT" {
					t.Fatalf("not a 1.0 answer: %v", out)
				}
			case "0.3":
				if dig(out, "result", "kind") != "message" || dig(out, "result", "role") != "agent" {
					t.Fatalf("not a 0.3 answer: %v", out)
				}
			}
		})
	}
}

// TestA2ARequiredMembers: every member A2A requires of a request is
// checked before anything runs, and its absence is -32602 naming it (1.0
// §5.7 "Implementations SHOULD validate these requirements and reject
// messages with missing required fields", §3.3.2 "Servers MUST validate
// all input parameters before processing"; the 0.3 types, where kind is
// required); the agent sees none of them.
func TestA2ARequiredMembers(t *testing.T) {
	cfg := testConfig()
	reached := countingAgent(t, cfg)
	d := start(t, cfg)
	send := func(method, message string) string {
		return fmt.Sprintf(`{"jsonrpc": "2.0", "id": 1, "method": %q, "params": {"message": %s}}`, method, message)
	}
	for _, tc := range []struct {
		name, body, says string
	}{
		{"1.0 §5.7 Message.messageId", send("SendMessage", `{"role": "ROLE_USER", "parts": [{"text": "x"}]}`), "params.message.messageId is missing"},
		{"1.0 §5.7 Message.messageId empty", send("SendMessage", `{"messageId": "", "role": "ROLE_USER", "parts": [{"text": "x"}]}`), "params.message.messageId is missing"},
		{"1.0 §5.7 Message.role", send("SendMessage", `{"messageId": "m", "parts": [{"text": "x"}]}`), "params.message.role is missing"},
		{"1.0 §5.7 Message.role unknown", send("SendMessage", `{"messageId": "m", "role": "ROLE_BOSS", "parts": [{"text": "x"}]}`), `params.message.role is "ROLE_BOSS"`},
		{"1.0 §5.7 Message.role of 0.3", send("SendMessage", `{"messageId": "m", "role": "user", "parts": [{"text": "x"}]}`), `want "ROLE_USER"`},
		{"1.0 §5.7 Message.parts (at least one)", send("SendMessage", `{"messageId": "m", "role": "ROLE_USER"}`), "params.message.parts is missing or empty"},
		{"1.0 §4.1.6 Part holds one of text, raw, url, data", send("SendMessage", `{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x", "data": {}}]}`), "more than one of text, data, url and raw"},
		{"1.0 §3.2.1 SendMessageRequest.message", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"metadata": {}}}`, "params.message is missing"},
		{"1.0 §3.2.1 SendMessageRequest.message of the wrong type", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": "hi"}}`, "params.message is a JSON string; want an object"},
		{"0.3 Message.kind", send("message/send", `{"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}]}`), `params.message.kind is missing; want "message"`},
		{"0.3 Message.messageId", send("message/send", `{"kind": "message", "role": "user", "parts": [{"kind": "text", "text": "x"}]}`), "params.message.messageId is missing"},
		{"0.3 Message.role", send("message/send", `{"kind": "message", "messageId": "m", "parts": [{"kind": "text", "text": "x"}]}`), "params.message.role is missing"},
		{"0.3 Message.role unknown", send("message/send", `{"kind": "message", "messageId": "m", "role": "ROLE_USER", "parts": [{"kind": "text", "text": "x"}]}`), `want "user"`},
		{"0.3 Part.kind", send("message/send", `{"kind": "message", "messageId": "m", "role": "user", "parts": [{"text": "x"}]}`), "params.message.parts[0].kind is missing"},
		{"0.3 TextPart.text", send("message/send", `{"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text"}]}`), "is a text part without text"},
		{"0.3 DataPart.data is an object", send("message/send", `{"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "data", "data": [1]}]}`), "holds an object"},
		{"1.0 §3.1.3 GetTaskRequest.id", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}}`, "params.id is missing"},
		{"1.0 §3.1.3 GetTaskRequest.id of the wrong type", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": 7}}`, "params.id is a JSON number; want a string"},
		{"1.0 §3.2.4 historyLength not negative", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t", "historyLength": -1}}`, "params.historyLength is -1"},
		{"1.0 §3.1.5 CancelTaskRequest.id", `{"jsonrpc": "2.0", "id": 1, "method": "CancelTask"}`, "params is missing"},
		{"1.0 §3.1.6 SubscribeToTaskRequest.id", `{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {}}`, "params.id is missing"},
		{"0.3 TaskQueryParams.id", `{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"historyLength": 2}}`, "params.id is missing"},
		{"0.3 TaskIdParams.id", `{"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {}}`, "params.id is missing"},
		{"JSON-RPC 2.0 §4.2 params by position", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": [1, 2]}`, "params is an array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := rpcCall(t, d, tc.body)
			msg, _ := dig(out, "error", "message").(string)
			if status != 200 || dig(out, "error", "code") != float64(rpcInvalidParams) || !strings.Contains(msg, tc.says) {
				t.Fatalf("%d %v; want -32602 saying %q", status, out, tc.says)
			}
		})
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("requests missing a required member reached the agent %d times", n)
	}
	// The members ProtoJSON names by their proto field names are read as
	// well (A2A ADR-001: 1.0 JSON is ProtoJSON, whose parsers accept both),
	// and a member given under both names is refused.
	_, out := rpcCall(t, d, `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"message_id": "m", "role": "ROLE_USER", "context_id": "ctx-snake", "parts": [{"text": "x", "media_type": "text/plain"}]}}}`)
	if dig(out, "result", "message", "contextId") != "ctx-snake" {
		t.Errorf("proto field names: %v", out)
	}
	_, out = rpcCall(t, d, `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"message_id": "m", "messageId": "n", "role": "ROLE_USER", "parts": [{"text": "x"}]}}}`)
	if dig(out, "error", "code") != float64(rpcInvalidParams) || !strings.Contains(fmt.Sprint(dig(out, "error", "message")), "both message_id and messageId") {
		t.Errorf("a member under both names: %v", out)
	}
	// Keys inside a data part are the caller's, never renamed.
	_, out = rpcCall(t, d, `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"skill": "weather.forecast", "input": {"city": "Porto", "snake_key": 1}}}]}}}`)
	if dig(out, "result", "message", "parts", 0, "data", "output", "summary") != "sun" {
		t.Errorf("a data part with a snake_case key: %v", out)
	}
}

// TestA2ANotificationsGetNoReply: a request without an id is a
// notification, which the server MUST NOT reply to (JSON-RPC 2.0 §4.1):
// HTTP 204 and no body, and it is not acted on. A request with "id": null
// is not a notification and is answered; a request too broken to be one
// is answered with a null id (§5).
func TestA2ANotificationsGetNoReply(t *testing.T) {
	cfg := testConfig()
	reached := countingAgent(t, cfg)
	d := start(t, cfg)
	for _, tc := range []struct{ name, body string }{
		{"SendMessage", `{"jsonrpc": "2.0", "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "hi"}]}}}`},
		{"message/send", `{"jsonrpc": "2.0", "method": "message/send", "params": {"message": {"kind": "message", "role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "hi"}]}}}`},
		{"an unknown method", `{"jsonrpc": "2.0", "method": "Nope"}`},
		{"bad params", `{"jsonrpc": "2.0", "method": "GetTask", "params": {}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, "POST", d.url+"/a2a", "application/json", []byte(tc.body))
			if r.status != http.StatusNoContent || len(r.body) != 0 {
				t.Fatalf("a notification got %d %q", r.status, r.body)
			}
		})
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("notifications reached the agent %d times", n)
	}
	_, out := rpcCall(t, d, `{"jsonrpc": "2.0", "id": null, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "hi"}]}}}`)
	if id, ok := out["id"]; !ok || id != nil || dig(out, "result", "message", "parts", 0, "text") != agentReply("hi") {
		t.Errorf(`"id": null: %v`, out)
	}
	_, out = rpcCall(t, d, `{"method": "SendMessage"}`)
	if id, ok := out["id"]; !ok || id != nil || dig(out, "error", "code") != float64(rpcInvalidRequest) {
		t.Errorf("an invalid request without id: %v", out)
	}
}

// TestA2ASpecErrorCodes: the codes the specification gives (1.0 §5.4, the
// 0.3 error table), for what this agent does not offer.
func TestA2ASpecErrorCodes(t *testing.T) {
	d := start(t, testConfig())
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"1.0 §3.3.4 extended card not declared: UnsupportedOperationError", `{"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard"}`, a2aUnsupported},
		{"0.3 §7.10 extended card not declared: UnsupportedOperationError", `{"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}`, a2aUnsupported},
		{"1.0 §3.3.4 push notifications: PushNotificationNotSupportedError", `{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", "params": {}}`, a2aPushNotSupported},
		{"0.3 push notifications", `{"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/set", "params": {}}`, a2aPushNotSupported},
		{"1.0 §3.1.3 unknown task: TaskNotFoundError", `{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "task-nope"}}`, a2aTaskNotFound},
		{"1.0 §3.1.6 subscribe to an unknown task", `{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": "task-nope"}}`, a2aTaskNotFound},
		{"1.0 §3.4.2 a message naming an unknown task", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "taskId": "task-nope", "parts": [{"text": "x"}]}}}`, a2aTaskNotFound},
		{"1.0 §3.1.1 a file part: ContentTypeNotSupportedError", `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"raw": "dGNr", "mediaType": "application/pdf"}]}}}`, a2aContentType},
		{"0.3 a file part", `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message", "role": "user", "messageId": "m", "parts": [{"kind": "file", "file": {"uri": "https://x.example/a"}}]}}}`, a2aContentType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, out := rpcCall(t, d, tc.body)
			if dig(out, "error", "code") != float64(tc.code) {
				t.Fatalf("%v; want code %d", out, tc.code)
			}
		})
	}
}

// TestA2ATrailingSlash: the endpoint answers at /a2a/ too (a client that
// joins the card's URL and a path "/" sends that), and nowhere below it.
func TestA2ATrailingSlash(t *testing.T) {
	cfg := testConfig()
	countingAgent(t, cfg)
	d := start(t, cfg)
	body := []byte(`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "hi"}]}}}`)
	r := do(t, "POST", d.url+"/a2a/", "application/json", body, "A2A-Version", "1.0")
	if r.status != 200 || !strings.Contains(string(r.body), agentReply("hi")) {
		t.Fatalf("POST /a2a/: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", d.url+"/a2a/more", "application/json", body); r.status != http.StatusNotFound {
		t.Fatalf("POST /a2a/more: %d %s", r.status, r.body)
	}
}

// millis is A2A's timestamp form (1.0 §5.6.1: YYYY-MM-DDTHH:mm:ss.sssZ).
var millis = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// TestA2ATimestampsInMilliseconds: a task's status timestamp is UTC with
// milliseconds (1.0 §5.6.1), in both versions.
func TestA2ATimestampsInMilliseconds(t *testing.T) {
	cfg := testConfig()
	countingAgent(t, cfg)
	d := start(t, cfg)
	_, out := rpcCall(t, d, `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]}, "configuration": {"returnImmediately": true}}}`)
	ts, _ := dig(out, "result", "task", "status", "timestamp").(string)
	if !millis.MatchString(ts) {
		t.Errorf("1.0 status timestamp %q", ts)
	}
	_, out = rpcCall(t, d, `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {"kind": "message", "role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "x"}]}, "configuration": {"blocking": false}}}`)
	ts, _ = dig(out, "result", "status", "timestamp").(string)
	if !millis.MatchString(ts) {
		t.Errorf("0.3 status timestamp %q", ts)
	}
	if got := a2aTimestamp(time.Date(2026, 1, 2, 3, 4, 5, 987654321, time.FixedZone("x", 3600))); got != "2026-01-02T02:04:05.987Z" {
		t.Errorf("a2aTimestamp: %s", got)
	}
}

// sendTask sends text from client c with returnImmediately in context ctx
// and returns the task's ID.
func sendTask(t *testing.T, c *http.Client, d *daemon, ctx, text string) string {
	t.Helper()
	_, out := rpcFrom(t, c, d, fmt.Sprintf(`{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "contextId": %q,
		"parts": [{"text": %q}]}, "configuration": {"returnImmediately": true}}}`, ctx, text))
	id, _ := dig(out, "result", "task", "id").(string)
	if id == "" {
		t.Fatalf("no task: %v", out)
	}
	return id
}

// waitEnded waits until task id has ended (the table's own signal).
func waitEnded(t *testing.T, d *daemon, id string) {
	t.Helper()
	tk, ok := d.b.tasks.get(id)
	if !ok {
		t.Fatalf("no task %s", id)
	}
	select {
	case <-tk.ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("task %s did not end", id)
	}
}

// TestA2AListTasks: ListTasks (1.0 §3.1.4) lists only the caller's own
// tasks (§13.1: "MUST only return tasks visible to the authenticated
// client"): those its client made in the context it names; newest first
// (§3.1.4 "sorted by their status timestamp time in descending order"),
// with cursor pagination, nextPageToken always present and "" on the last
// page, totalSize, no artifacts member; and another client's task IDs
// appear in no answer.
func TestA2AListTasks(t *testing.T) {
	cfg := testConfig()
	countingAgent(t, cfg)
	d := start(t, cfg)
	a, b := from(t, "127.0.0.1"), from(t, "127.0.0.2")
	var mine []string
	for i := range 3 {
		id := sendTask(t, a, d, "ctx-a", fmt.Sprint("task ", i))
		waitEnded(t, d, id)
		mine = append(mine, id)
	}
	other := sendTask(t, a, d, "ctx-other", "elsewhere")
	theirs := sendTask(t, b, d, "ctx-a", "same context, another client")
	waitEnded(t, d, other)
	waitEnded(t, d, theirs)

	list := func(c *http.Client, params string) map[string]any {
		t.Helper()
		_, out := rpcFrom(t, c, d, `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": `+params+`}`, "A2A-Version", "1.0")
		return out
	}
	ids := func(out map[string]any) []string {
		var got []string
		for _, tk := range dig(out, "result", "tasks").([]any) {
			got = append(got, dig(tk, "id").(string))
			if _, ok := tk.(map[string]any)["artifacts"]; ok {
				t.Errorf("§3.1.4: a task carries artifacts without includeArtifacts: %v", tk)
			}
		}
		return got
	}
	// All of A's tasks in ctx-a, newest first (they ended in order).
	out := list(a, `{"contextId": "ctx-a"}`)
	want := []string{mine[2], mine[1], mine[0]}
	if got := ids(out); !slices.Equal(got, want) || dig(out, "result", "nextPageToken") != "" || dig(out, "result", "totalSize") != 3.0 || dig(out, "result", "pageSize") != 50.0 {
		t.Fatalf("A's list: %v; want %v, last page, total 3, page size 50", out, want)
	}
	var prev time.Time
	for i, tk := range dig(out, "result", "tasks").([]any) {
		ts, _ := time.Parse(time.RFC3339, dig(tk, "status", "timestamp").(string))
		if i > 0 && ts.After(prev) {
			t.Errorf("§3.1.4: task %d is newer than the one before it", i)
		}
		prev = ts
	}
	// B sees only its own, though it names the same context; neither list
	// holds the other's IDs anywhere in its answer.
	out = list(b, `{"contextId": "ctx-a"}`)
	if got := ids(out); !slices.Equal(got, []string{theirs}) || dig(out, "result", "totalSize") != 1.0 {
		t.Fatalf("B's list: %v", out)
	}
	raw, _ := json.Marshal(out)
	for _, id := range append(mine, other) {
		if bytes.Contains(raw, []byte(id)) {
			t.Fatalf("§13.1: B's answer holds A's task %s: %s", id, raw)
		}
	}
	// Pages of 2: a cursor, then the last page; the pages together are the list.
	out = list(a, `{"contextId": "ctx-a", "pageSize": 2}`)
	token, _ := dig(out, "result", "nextPageToken").(string)
	first := ids(out)
	if len(first) != 2 || token == "" || dig(out, "result", "pageSize") != 2.0 {
		t.Fatalf("first page: %v", out)
	}
	// B cannot page through A's list with A's cursor: the cursor only
	// says where to start in B's own.
	if got := ids(list(b, fmt.Sprintf(`{"contextId": "ctx-a", "pageToken": %q}`, token))); slices.ContainsFunc(got, func(id string) bool { return slices.Contains(mine, id) }) {
		t.Fatalf("B paged into A's tasks: %v", got)
	}
	out = list(a, fmt.Sprintf(`{"contextId": "ctx-a", "pageSize": 2, "pageToken": %q}`, token))
	if got := append(first, ids(out)...); !slices.Equal(got, want) || dig(out, "result", "nextPageToken") != "" {
		t.Fatalf("second page: %v; together %v, want %v", out, got, want)
	}
	// Filters; proto field names (ProtoJSON); bounds.
	if got := ids(list(a, `{"context_id": "ctx-a", "status": "TASK_STATE_COMPLETED", "page_size": 1}`)); !slices.Equal(got, want[:1]) {
		t.Errorf("status filter with proto names: %v", got)
	}
	if got := ids(list(a, `{"contextId": "ctx-a", "status": "TASK_STATE_WORKING"}`)); len(got) != 0 {
		t.Errorf("no task is working: %v", got)
	}
	if got := ids(list(a, `{"contextId": "ctx-a", "status": "TASK_STATE_CANCELED"}`)); len(got) != 0 {
		t.Errorf("no task is canceled: %v", got)
	}
	if out := list(a, `{"contextId": "ctx-a", "pageSize": 1000}`); dig(out, "result", "pageSize") != float64(listPageMax) {
		t.Errorf("a page size over the most: %v", out)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if got := ids(list(a, fmt.Sprintf(`{"contextId": "ctx-a", "statusTimestampAfter": %q}`, future))); len(got) != 0 {
		t.Errorf("statusTimestampAfter in the future: %v", got)
	}
	for _, tc := range []struct{ params, says string }{
		{`{}`, "params.contextId is missing"},
		{`{"contextId": "ctx-a", "pageSize": -1}`, "params.pageSize is -1"},
		{`{"contextId": "ctx-a", "pageToken": "not-a-token"}`, "params.pageToken"},
		{`{"contextId": "ctx-a", "status": "TASK_STATE_NAPPING"}`, "params.status"},
		{`{"contextId": "ctx-a", "statusTimestampAfter": "yesterday"}`, "params.statusTimestampAfter"},
	} {
		out := list(a, tc.params)
		if dig(out, "error", "code") != float64(rpcInvalidParams) || !strings.Contains(fmt.Sprint(dig(out, "error", "message")), tc.says) {
			t.Errorf("%s: %v; want -32602 saying %q", tc.params, out, tc.says)
		}
	}
}

// sseEvent is one event of a stream: the JSON-RPC response it carries.
type sseEvent = map[string]any

// stream posts body to d's /a2a and returns the response's Content-Type
// and a channel of its events, closed when the stream ends.
func stream(t *testing.T, c *http.Client, d *daemon, body string, headers ...string) (string, <-chan sseEvent) {
	t.Helper()
	req, err := http.NewRequest("POST", d.url+"/a2a", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	evs := make(chan sseEvent, 16)
	ct := res.Header.Get("Content-Type")
	go func() {
		defer close(evs)
		defer res.Body.Close()
		if !strings.HasPrefix(ct, "text/event-stream") {
			var e sseEvent
			json.NewDecoder(res.Body).Decode(&e)
			evs <- e
			return
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			line := sc.Text()
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var e sseEvent
				if err := json.Unmarshal([]byte(data), &e); err != nil {
					e = sseEvent{"unreadable": data}
				}
				evs <- e
			}
		}
	}()
	return ct, evs
}

// all collects a stream's events until it ends.
func all(t *testing.T, evs <-chan sseEvent) []sseEvent {
	t.Helper()
	var out []sseEvent
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e, ok := <-evs:
			if !ok {
				return out
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("the stream did not end; events so far: %v", out)
		}
	}
}

// TestA2AStreamingMessage: SendStreamingMessage and message/stream answer
// over server-sent events (1.0 §9.4.2: HTTP 200, text/event-stream, each
// event a JSON-RPC response with the request's id): by default exactly one
// event, the agent's message, then the stream closes (§3.1.2 "Message-only
// stream"); with returnImmediately or blocking false, the task first and
// its status update carrying the reply last (§3.1.2 "Task lifecycle
// stream", final in 0.3). A request refused before the stream opens is a
// plain JSON-RPC error.
func TestA2AStreamingMessage(t *testing.T) {
	cfg := testConfig()
	countingAgent(t, cfg)
	d := start(t, cfg)
	c := http.DefaultClient
	for _, tc := range []struct {
		name, body string
		check      func(t *testing.T, evs []sseEvent)
	}{
		{"1.0 message-only stream", `{"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "contextId": "c1", "parts": [{"text": "stream me"}]}}}`,
			func(t *testing.T, ev []sseEvent) {
				if len(ev) != 1 || dig(ev[0], "id") != 7.0 || dig(ev[0], "result", "message", "role") != "ROLE_AGENT" ||
					dig(ev[0], "result", "message", "parts", 0, "text") != agentReply("stream me") || dig(ev[0], "result", "message", "contextId") != "c1" {
					t.Fatalf("%v", ev)
				}
			}},
		{"0.3 message-only stream", `{"jsonrpc": "2.0", "id": "s", "method": "message/stream", "params": {"message": {"kind": "message", "role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "stream me"}]}}}`,
			func(t *testing.T, ev []sseEvent) {
				if len(ev) != 1 || dig(ev[0], "id") != "s" || dig(ev[0], "result", "kind") != "message" || dig(ev[0], "result", "parts", 0, "text") != agentReply("stream me") {
					t.Fatalf("%v", ev)
				}
			}},
		{"1.0 task lifecycle stream", `{"jsonrpc": "2.0", "id": 8, "method": "SendStreamingMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "stream me"}]}, "configuration": {"returnImmediately": true}}}`,
			func(t *testing.T, ev []sseEvent) {
				if len(ev) != 2 || dig(ev[0], "result", "task", "status", "state") != "TASK_STATE_WORKING" {
					t.Fatalf("%v", ev)
				}
				id := dig(ev[0], "result", "task", "id")
				up := dig(ev[1], "result", "statusUpdate")
				if dig(up, "taskId") != id || dig(up, "status", "state") != "TASK_STATE_COMPLETED" || dig(up, "status", "message", "parts", 0, "text") != agentReply("stream me") ||
					dig(up, "final") != nil || !millis.MatchString(fmt.Sprint(dig(up, "status", "timestamp"))) {
					t.Fatalf("the status update: %v", ev[1])
				}
			}},
		{"0.3 task lifecycle stream", `{"jsonrpc": "2.0", "id": 9, "method": "message/stream", "params": {"message": {"kind": "message", "role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "stream me"}]}, "configuration": {"blocking": false}}}`,
			func(t *testing.T, ev []sseEvent) {
				if len(ev) != 2 || dig(ev[0], "result", "kind") != "task" || dig(ev[0], "result", "status", "state") != "working" {
					t.Fatalf("%v", ev)
				}
				up := dig(ev[1], "result")
				if dig(up, "kind") != "status-update" || dig(up, "final") != true || dig(up, "status", "state") != "completed" ||
					dig(up, "status", "message", "parts", 0, "text") != agentReply("stream me") {
					t.Fatalf("the status update: %v", ev[1])
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, evs := stream(t, c, d, tc.body)
			if ct != "text/event-stream" {
				t.Fatalf("§9.4.2: Content-Type %q", ct)
			}
			tc.check(t, all(t, evs))
		})
	}
	ct, evs := stream(t, c, d, `{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}}}`)
	if ev := all(t, evs); !strings.HasPrefix(ct, "application/json") || len(ev) != 1 || dig(ev[0], "error", "code") != float64(rpcInvalidParams) {
		t.Fatalf("a bad request: %s %v", ct, ev)
	}
}

// TestA2AStreamingFailure: when the agent fails, a message-only stream's
// one event is the error (the daemon's code in its details).
func TestA2AStreamingFailure(t *testing.T) {
	cfg := testConfig()
	cfg.Agent.Webhook = agent(t, func(events.Invocation) events.InvocationAnswer {
		return events.InvocationAnswer{Error: &events.AgentError{Message: "no, thank you"}}
	})
	d := start(t, cfg)
	_, evs := stream(t, http.DefaultClient, d, `{"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}]}}}`)
	ev := all(t, evs)
	if len(ev) != 1 || dig(ev[0], "error", "code") == nil || !strings.Contains(fmt.Sprint(ev[0]), "no, thank you") {
		t.Fatalf("%v", ev)
	}
}

// TestA2ASubscribeToTask: SubscribeToTask and tasks/resubscribe follow a
// working task (1.0 §3.1.6: the task as it is first, then its updates,
// closing when it ends), every stream gets the same events (§3.5.2
// "Events MUST be broadcast to all active streams"), and a task that has
// ended is refused with UnsupportedOperationError (§3.1.6, §9.4.6).
func TestA2ASubscribeToTask(t *testing.T) {
	d := start(t, testConfig())
	hold := make(chan struct{})
	eventAgent(t, d, hold)
	id := sendTask(t, http.DefaultClient, d, "ctx-s", "wait for it")
	sub10 := fmt.Sprintf(`{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": %q}}`, id)
	sub03 := fmt.Sprintf(`{"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": %q}}`, id)
	_, s1 := stream(t, http.DefaultClient, d, sub10)
	_, s2 := stream(t, http.DefaultClient, d, sub10)
	_, s3 := stream(t, http.DefaultClient, d, sub03)
	// Each stream's first event is the working task.
	for i, s := range []<-chan sseEvent{s1, s2, s3} {
		e := <-s
		state := dig(e, "result", "task", "status", "state")
		if i == 2 {
			state = dig(e, "result", "status", "state")
		}
		if state != "TASK_STATE_WORKING" && state != "working" {
			t.Fatalf("stream %d's first event: %v", i, e)
		}
	}
	close(hold) // the agent answers now
	for i, s := range []<-chan sseEvent{s1, s2} {
		ev := all(t, s)
		if len(ev) != 1 || dig(ev[0], "result", "statusUpdate", "status", "state") != "TASK_STATE_COMPLETED" ||
			dig(ev[0], "result", "statusUpdate", "status", "message", "parts", 0, "text") != agentReply("wait for it") {
			t.Fatalf("stream %d's updates: %v", i, ev)
		}
	}
	if ev := all(t, s3); len(ev) != 1 || dig(ev[0], "result", "kind") != "status-update" || dig(ev[0], "result", "final") != true {
		t.Fatalf("the 0.3 stream's updates: %v", ev)
	}
	_, out := rpcCall(t, d, sub10)
	if dig(out, "error", "code") != float64(a2aUnsupported) || !strings.Contains(fmt.Sprint(dig(out, "error", "message")), "GetTask") {
		t.Fatalf("subscribing to an ended task: %v", out)
	}
	// A 0.3 client reads tasks/resubscribe as a stream even when refused.
	for _, body := range []string{sub03, `{"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": "task-nope"}}`} {
		ct, s := stream(t, http.DefaultClient, d, body)
		ev := all(t, s)
		if ct != "text/event-stream" || len(ev) != 1 || dig(ev[0], "id") != 2.0 || dig(ev[0], "error", "code") == nil {
			t.Fatalf("a refused 0.3 resubscribe: %s %v", ct, ev)
		}
	}
}

// TestA2AStreamBounds: streams are bounded like every other thing a
// stranger holds open: per client and in all (refused with the busy error
// before anything runs), in lifetime (agent.timeout and a grace; then an
// error event) and in bytes.
func TestA2AStreamBounds(t *testing.T) {
	cfg := testConfig()
	cfg.Agent.Timeout = config.Duration{Duration: 2 * time.Second}
	d := start(t, cfg)
	d.b.streamGrace = 0
	// A task that no agent runs: it stays working, so a stream on it
	// lives until its lifetime ends.
	tk, e := d.b.tasks.add(clientOf("127.0.0.1:1"), "ctx")
	if e != nil {
		t.Fatal(e)
	}
	sub := fmt.Sprintf(`{"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": %q}}`, tk.id)
	a, b := from(t, "127.0.0.1"), from(t, "127.0.0.3")
	var open []<-chan sseEvent
	for range maxA2AStreamsPerClient {
		_, s := stream(t, a, d, sub)
		if e := <-s; dig(e, "result", "task", "id") != tk.id {
			t.Fatalf("a stream within the bound: %v", e)
		}
		open = append(open, s)
	}
	ct, s := stream(t, a, d, sub)
	if e := <-s; !strings.HasPrefix(ct, "application/json") || dig(e, "error", "code") != float64(rpcInternal) || dig(e, "error", "data", 1, "code") != string(wire.CodeBusy) ||
		!strings.Contains(fmt.Sprint(dig(e, "error", "message")), "streams open, its most") {
		t.Fatalf("a stream past the client's bound: %s %v", ct, e)
	}
	_, s = stream(t, b, d, sub) // another client still has room
	if e := <-s; dig(e, "result", "task", "id") != tk.id {
		t.Fatalf("another client's stream: %v", e)
	}
	open = append(open, s)
	// Lifetime: agent.timeout (2 s) and no grace; each stream ends with an
	// error event saying the task is still working, and frees its place.
	begin := time.Now()
	for _, s := range open {
		ev := all(t, s)
		if len(ev) != 1 || dig(ev[0], "error", "code") != float64(rpcInternal) || !strings.Contains(fmt.Sprint(dig(ev[0], "error", "message")), "still working") {
			t.Fatalf("a stream at the end of its lifetime: %v", ev)
		}
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("streams outlived their lifetime: %v", took)
	}
	// A stream is uncounted before its response ends (the handler's
	// deferred release runs before net/http ends the response).
	if all, _ := d.b.streams.count(clientOf("127.0.0.1:1")); all != 0 {
		t.Fatalf("%d streams still counted after they ended", all)
	}

	// In all: the table refuses the stream past maxA2AStreams, whoever asks.
	ss := newA2AStreams()
	var releases []func()
	for i := range maxA2AStreams {
		r, e := ss.take(clientOf(fmt.Sprintf("10.0.%d.%d:1", i/250, i%250)))
		if e != nil {
			t.Fatalf("stream %d: %v", i, e)
		}
		releases = append(releases, r)
	}
	if _, e := ss.take(clientOf("10.9.9.9:1")); e == nil || !strings.Contains(e.msg, "streams are open") {
		t.Fatalf("a stream past the total: %v", e)
	}
	releases[0]()
	releases[0]() // twice is once
	if _, e := ss.take(clientOf("10.9.9.9:1")); e != nil {
		t.Fatalf("after one closed: %v", e)
	}
	if all, _ := ss.count(clientOf("10.9.9.9:1")); all != maxA2AStreams {
		t.Fatalf("%d counted, want %d", all, maxA2AStreams)
	}

	// Bytes: an event past the stream's budget is not written; a short
	// error event saying so is, instead.
	rec := httptest.NewRecorder()
	st := openSSE(rec, a2a10, json.RawMessage("1"), time.Now().Add(time.Minute))
	st.left = 200
	big := strings.Repeat("x", 500)
	if err := st.event(map[string]any{"message": map[string]any{"parts": []any{map[string]any{"text": big}}}}, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rec.Body.String(), big) || !strings.Contains(rec.Body.String(), "over the") {
		t.Fatalf("an event past the budget: %s", rec.Body.String())
	}
}
