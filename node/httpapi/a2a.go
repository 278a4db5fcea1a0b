package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/wire"
)

// The A2A endpoint the agent card names: JSON-RPC 2.0 over POST /a2a (and
// /a2a/, as some clients join the card's URL and a path "/"), speaking A2A
// 1.0 and A2A 0.3 at the same URL, each in its own shapes.
//
// # Which version a request speaks
//
// The A2A-Version header (A2A 1.0 §3.6.2; or the A2A-Version query
// parameter, §3.6.1) names the version, and the request is answered in
// that version's semantics: under "1.0" the methods are SendMessage,
// GetTask, …; under "0.3" they are message/send, tasks/get, …; a method of
// the other version is not found (-32601, naming the one to call), and a
// version this endpoint does not speak is refused (-32009). Without the
// header a request is A2A 0.3, as §3.6.2 says, with one fallback: a 1.0
// method name, which 0.3 does not have, is answered as 1.0, for 1.0
// clients that leave the header out. (0.3 clients never send it.)
//
// The shapes: 0.3 has "kind" on messages, parts and tasks, roles "user"
// and "agent", states "completed"; 1.0 tells parts apart by their member
// (text, data, url, raw), has roles "ROLE_USER", states
// "TASK_STATE_COMPLETED", SendMessage's result wrapped as {"message": …}
// or {"task": …}, streaming results as StreamResponse ({"message"},
// {"task"}, {"statusUpdate"}), and error data an array of typed details (a
// google.rpc.ErrorInfo with the A2A reason, then a google.protobuf.Struct
// holding the daemon's error body: code, message, what was expected, what
// would work, the unmet conditions). A 0.3 error carries that body as its
// data object. Timestamps are UTC with milliseconds (§5.6.1).
//
// # What a message does
//
//   - A message naming a skill — in message.metadata.skill, in the
//     request's metadata.skill, or in a data part {"skill", "input"} — runs
//     that capability for an anonymous caller (Inbox.ExecuteAnonymous:
//     the same conditions, schema checks and audit as POST /invoke), and
//     the answer is an agent message with a data part {"skill", "output"}.
//   - Any other message — plain text, as generic A2A clients send — goes to
//     the local agent as an inbound message (Inbox.AskAnonymous: the event
//     stream's "message" event, or the webhook), and the agent's reply is
//     the answer: a text part for a string, a data part otherwise.
//
// By default (0.3 configuration.blocking absent or true; 1.0
// returnImmediately false) the answer is that agent message, once the
// agent has answered or agent.timeout has passed (then an error). With
// blocking false or returnImmediately true the answer is a task, at once,
// which the client polls with tasks/get or GetTask until it is completed
// (the reply in status.message) or failed (the reason in status.message);
// see a2aTasks for how tasks are kept. SendStreamingMessage and
// message/stream answer the same way over server-sent events (a2astream.go):
// one event carrying the agent's message, or, with returnImmediately or
// blocking false, the task and then its status update carrying the reply;
// SubscribeToTask and tasks/resubscribe follow a task that is still
// working. ListTasks (1.0; A2A 0.3 has no JSON-RPC method for it) lists the
// caller's own tasks (a2alist.go). Tasks do not take further messages and
// cannot be canceled (the agent cannot be interrupted), and there is no
// push notification or extended card: each of those methods is answered
// with its A2A error, and the card says pushNotifications false and
// declares no extended card.
//
// # Requests
//
// Every required member of a request is checked before anything runs
// (1.0 §5.7, the 0.3 types): a message needs messageId, role (the user's)
// and at least one part, and in 0.3 kind "message"; a part needs its
// content (1.0: exactly one of text, data, url, raw; 0.3: kind and the
// member it names); task methods need id. A missing or wrong member is
// -32602, naming the member, what was expected and what would work.
//
// A request without an id member is a JSON-RPC notification, which
// JSON-RPC 2.0 forbids answering: it gets HTTP 204 and no body, and is not
// acted on, since every A2A method is a request whose answer is the point
// (a message sent so would reach the agent with nobody to read the reply).
//
// The caller is anonymous, exactly as on POST /invoke: limited per client
// and in total (limiter), bodies bounded (readBody), refused while the
// audit log has no room for strangers, and holding one of the binding's
// invocation slots while the agent has it (slots.go: a task holds its
// slot until it ends, and so does a streamed message; a standard skill
// such as ping takes none). Streams are bounded as a2astream.go says.
//
// Errors a client can act on are precise: a body that is not JSON
// (-32700, with where it broke), a request that is not JSON-RPC (-32600),
// an unknown method (-32601, naming the methods there are), params that
// do not fit (-32602, naming the member), an unknown skill (-32602, with
// the daemon's explanation), a file part (-32005: send text or data), an
// unknown task (-32001), an operation this agent does not offer (-32004:
// a further message to a task, the extended card, subscribing to a task
// that has ended), push notifications (-32003). The endpoint answers them
// with HTTP 200, as JSON-RPC over HTTP does; a body refused before it is
// read (wrong Content-Type, too large, too deep, over budget) gets its
// HTTP status.

// JSON-RPC and A2A error codes.
const (
	rpcParseError        = -32700
	rpcInvalidRequest    = -32600
	rpcMethodNotFound    = -32601
	rpcInvalidParams     = -32602
	rpcInternal          = -32603
	a2aTaskNotFound      = -32001
	a2aTaskNotCancelable = -32002
	a2aPushNotSupported  = -32003
	a2aUnsupported       = -32004
	a2aContentType       = -32005
	a2aVersionNotSupport = -32009
)

// a2aReasons are the A2A 1.0 ErrorInfo reasons of the codes.
var a2aReasons = map[int]string{
	rpcParseError: "PARSE_ERROR", rpcInvalidRequest: "INVALID_REQUEST", rpcMethodNotFound: "METHOD_NOT_FOUND",
	rpcInvalidParams: "INVALID_PARAMS", rpcInternal: "INTERNAL_ERROR", a2aTaskNotFound: "TASK_NOT_FOUND",
	a2aTaskNotCancelable: "TASK_NOT_CANCELABLE", a2aPushNotSupported: "PUSH_NOTIFICATION_NOT_SUPPORTED",
	a2aUnsupported: "UNSUPPORTED_OPERATION", a2aContentType: "CONTENT_TYPE_NOT_SUPPORTED",
	a2aVersionNotSupport: "VERSION_NOT_SUPPORTED",
}

// a2aDomain is the ErrorInfo domain of A2A's reasons.
const a2aDomain = "a2a-protocol.org"

// a2aVersionHeader is the A2A 1.0 service parameter naming the version.
const a2aVersionHeader = "A2A-Version"

// a2aVersion is the protocol version a request speaks.
type a2aVersion int

const (
	a2a03 a2aVersion = iota
	a2a10
)

// a2aOp is what a method asks for.
type a2aOp int

const (
	opSend a2aOp = iota
	opStream
	opGetTask
	opListTasks
	opCancelTask
	opSubscribe
	opPushSet
	opPushGet
	opPushList
	opPushDelete
	opExtendedCard
)

type a2aMethod struct {
	version a2aVersion
	op      a2aOp
}

// a2aMethodNames are the method names of each operation in each version
// ("" where the version has none: A2A 0.3 lists tasks over gRPC and REST
// only).
var a2aMethodNames = map[a2aOp][2]string{
	opSend:         {a2a03: "message/send", a2a10: "SendMessage"},
	opStream:       {a2a03: "message/stream", a2a10: "SendStreamingMessage"},
	opGetTask:      {a2a03: "tasks/get", a2a10: "GetTask"},
	opListTasks:    {a2a03: "", a2a10: "ListTasks"},
	opCancelTask:   {a2a03: "tasks/cancel", a2a10: "CancelTask"},
	opSubscribe:    {a2a03: "tasks/resubscribe", a2a10: "SubscribeToTask"},
	opPushSet:      {a2a03: "tasks/pushNotificationConfig/set", a2a10: "CreateTaskPushNotificationConfig"},
	opPushGet:      {a2a03: "tasks/pushNotificationConfig/get", a2a10: "GetTaskPushNotificationConfig"},
	opPushList:     {a2a03: "tasks/pushNotificationConfig/list", a2a10: "ListTaskPushNotificationConfigs"},
	opPushDelete:   {a2a03: "tasks/pushNotificationConfig/delete", a2a10: "DeleteTaskPushNotificationConfig"},
	opExtendedCard: {a2a03: "agent/getAuthenticatedExtendedCard", a2a10: "GetExtendedAgentCard"},
}

// a2aMethods are the methods of both versions, by name.
var a2aMethods = func() map[string]a2aMethod {
	m := map[string]a2aMethod{}
	for op, names := range a2aMethodNames {
		for v, name := range names {
			if name != "" {
				m[name] = a2aMethod{a2aVersion(v), op}
			}
		}
	}
	return m
}()

// methodName is op's method in version v ("" when v has none).
func methodName(op a2aOp, v a2aVersion) string { return a2aMethodNames[op][v] }

func (v a2aVersion) String() string {
	if v == a2a10 {
		return negotiate.A2AVersion1
	}
	return negotiate.A2AInterfaceVersion
}

// a2aError is a JSON-RPC error on its way out; detail, when set, is the
// daemon's error body (which condition failed, what would work).
type a2aError struct {
	code   int
	msg    string
	detail *wire.ErrorBody
}

func (e *a2aError) Error() string { return e.msg }

func rpcErr(code int, format string, args ...any) *a2aError {
	return &a2aError{code: code, msg: fmt.Sprintf(format, args...)}
}

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcAnswer writes one JSON-RPC response in version v's shapes.
func rpcAnswer(w http.ResponseWriter, status int, v a2aVersion, id json.RawMessage, result any, e *a2aError) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := rpcResponse{JSONRPC: "2.0", ID: id, Result: result}
	if e != nil {
		resp.Result, resp.Error = nil, rpcErrorOf(v, e)
	}
	writeJSON(w, status, resp)
}

// rpcErrorOf is e as a JSON-RPC error object in version v's shapes.
func rpcErrorOf(v a2aVersion, e *a2aError) *rpcError {
	out := &rpcError{Code: e.code, Message: e.msg}
	switch {
	case v == a2a10:
		out.Data = typedDetails(e)
	case e.detail != nil:
		out.Data = e.detail
	}
	return out
}

// typedDetails is A2A 1.0's error data: an ErrorInfo with the code's
// reason, then the daemon's error body as a Struct.
func typedDetails(e *a2aError) []map[string]any {
	reason, ok := a2aReasons[e.code]
	if !ok {
		reason = "INTERNAL_ERROR"
	}
	info := map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": a2aDomain}
	out := []map[string]any{info}
	if e.detail == nil {
		return out
	}
	info["metadata"] = map[string]string{"ifaced_code": string(e.detail.Code)}
	var st map[string]any
	if b, err := json.Marshal(e.detail); err == nil && json.Unmarshal(b, &st) == nil {
		st["@type"] = "type.googleapis.com/google.protobuf.Struct"
		out = append(out, st)
	}
	return out
}

// requestVersion is the version a request names in its A2A-Version
// header, or else its A2A-Version query parameter (A2A 1.0 §3.6.1): set
// false when it names none (A2A 0.3, §3.6.2), and ok false for a version
// not spoken here. Patch numbers are ignored (§3.6).
func requestVersion(r *http.Request) (v a2aVersion, name string, set, ok bool) {
	name = strings.TrimSpace(r.Header.Get(a2aVersionHeader))
	if name == "" {
		name = strings.TrimSpace(r.URL.Query().Get(a2aVersionHeader))
	}
	major, rest, _ := strings.Cut(name, ".")
	minor, _, _ := strings.Cut(rest, ".")
	switch {
	case name == "":
		return a2a03, name, false, true
	case major == "0" && minor == "3":
		return a2a03, name, true, true
	case major == "1" && (minor == "0" || minor == ""):
		return a2a10, name, true, true
	}
	return a2a03, name, true, false
}

func (s *Binding) a2a(w http.ResponseWriter, r *http.Request) {
	hv, hname, hset, hok := requestVersion(r)
	// JSON only: a web page can send text/plain across origins without
	// asking, and must not be able to run skills that way.
	if !isJSON(r) {
		rpcAnswer(w, http.StatusUnsupportedMediaType, hv, nil, nil, rpcErr(rpcInvalidRequest,
			"Content-Type is %q; send a JSON-RPC 2.0 request as application/json", r.Header.Get("Content-Type")))
		return
	}
	body, decoded, ok := s.readBody(w, r)
	if !ok {
		return
	}
	defer decoded()
	req, e := readRPC(body)
	if req.notification && (e == nil || e.code == rpcInvalidParams) {
		// JSON-RPC 2.0 §4.1: a notification is not answered (see the
		// file comment on why it is not acted on either).
		w.WriteHeader(http.StatusNoContent)
		return
	}
	m, v := a2aMethod{}, hv
	switch {
	case e != nil:
	case !hok:
		e = rpcErr(a2aVersionNotSupport, "%s %q is not spoken here: this agent speaks A2A %s and %s", a2aVersionHeader, gossip.Clip(hname, 40),
			negotiate.A2AVersion1, negotiate.A2AInterfaceVersion)
	default:
		if m, e = findMethod(method(req), hv, hset); e == nil {
			v = m.version
		}
		if e == nil && v == a2a10 {
			req.Params, e = protoNames(req.Params)
		}
	}
	if e != nil {
		rpcAnswer(w, http.StatusOK, v, req.ID, nil, e)
		return
	}
	var result any
	switch m.op {
	case opSend:
		result, e = s.a2aSend(r, v, req.Params, decoded)
	case opStream:
		s.a2aStream(w, r, v, req, decoded) // the stream, or an error, is the answer
		return
	case opSubscribe:
		s.a2aSubscribe(w, r, v, req)
		return
	case opGetTask:
		result, e = s.a2aGetTask(v, req.Params)
	case opListTasks:
		result, e = s.a2aListTasks(r, req.Params)
	case opCancelTask:
		result, e = s.a2aCancelTask(v, req.Params)
	case opPushSet, opPushGet, opPushList, opPushDelete:
		e = rpcErr(a2aPushNotSupported, "%s is not supported: this agent sends no push notifications (the card says capabilities.pushNotifications false); poll the task with %s or follow it with %s",
			method(req), methodName(opGetTask, v), methodName(opSubscribe, v))
	case opExtendedCard:
		// A2A 1.0 §3.3.4: the card declares no extended card, so the
		// operation is unsupported (-32007 is for a declared one that is
		// not configured).
		e = rpcErr(a2aUnsupported, "%s is not supported: this agent declares no extended card (capabilities.extendedAgentCard is absent); everything it offers an anonymous caller is on /.well-known/agent-card.json", method(req))
	}
	rpcAnswer(w, http.StatusOK, v, req.ID, result, e)
}

// jsonrpcRequest is a request read by readRPC; notification is true when
// it has no id member.
type jsonrpcRequest struct {
	rpcRequest
	notification bool
}

// readRPC reads a JSON-RPC 2.0 request.
func readRPC(body []byte) (jsonrpcRequest, *a2aError) {
	var req jsonrpcRequest
	var probe any
	if err := json.Unmarshal(body, &probe); err != nil {
		return req, rpcErr(rpcParseError, "the body is not JSON (%v); send a JSON-RPC 2.0 request: "+rpcShape, err)
	}
	obj, ok := probe.(map[string]any)
	if !ok {
		what := "a JSON array (a batch, which this endpoint does not take)"
		if _, isArray := probe.([]any); !isArray {
			what = fmt.Sprintf("a JSON %s", jsonKind(probe))
		}
		return req, rpcErr(rpcInvalidRequest, "the body is %s; send one JSON-RPC 2.0 request: "+rpcShape, what)
	}
	if err := json.Unmarshal(body, &req.rpcRequest); err != nil {
		return req, rpcErr(rpcInvalidRequest, "reading the request: %v; want "+rpcShape, err)
	}
	if !validID(req.ID) {
		id := req.ID
		req.ID = nil
		return req, rpcErr(rpcInvalidRequest, "id is %s; a JSON-RPC id is a string, a number or null", gossip.Clip(string(id), 100))
	}
	if req.JSONRPC != "2.0" {
		return req, rpcErr(rpcInvalidRequest, `jsonrpc is %q; want "2.0": `+rpcShape, gossip.Clip(req.JSONRPC, 40))
	}
	if method(req) == "" {
		return req, rpcErr(rpcInvalidRequest, "method is missing or not a string; want "+rpcShape)
	}
	_, hasID := obj["id"]
	req.notification = !hasID
	if p, ok := obj["params"]; ok && p != nil {
		switch p.(type) {
		case map[string]any:
		case []any:
			return req, rpcErr(rpcInvalidParams, "params is an array; A2A methods take their params by name, as an object")
		default:
			return req, rpcErr(rpcInvalidRequest, "params is a JSON %s; JSON-RPC params are an object or an array", jsonKind(p))
		}
	}
	return req, nil
}

// findMethod finds the method name in the version the request names (hv
// when set), or else in the version whose method it is.
func findMethod(name string, hv a2aVersion, set bool) (a2aMethod, *a2aError) {
	m, ok := a2aMethods[name]
	switch {
	case !ok:
		return m, rpcErr(rpcMethodNotFound, "no method %q: this agent serves SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask and SubscribeToTask (A2A 1.0), "+
			"message/send, message/stream, tasks/get, tasks/cancel and tasks/resubscribe (A2A 0.3)", gossip.Clip(name, 100))
	case set && m.version != hv:
		other := methodName(m.op, hv)
		if other == "" {
			return m, rpcErr(rpcMethodNotFound, "no method %q in A2A %s (the %s header says so): A2A %s has no JSON-RPC method for it", name, hv, a2aVersionHeader, hv)
		}
		return m, rpcErr(rpcMethodNotFound, "no method %q in A2A %s (the %s header says so): %s is A2A %s's; in A2A %s call %s", name, hv, a2aVersionHeader, name, m.version, hv, other)
	}
	return m, nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

const rpcShape = `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "…", "parts": [{"text": "…"}]}}}`

func method(req jsonrpcRequest) string {
	var name string
	if json.Unmarshal(req.Method, &name) != nil {
		return ""
	}
	return name
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return true
	}
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// sendParams are the params of message/send and SendMessage.
type sendParams struct {
	Message       *inMessage `json:"message"`
	Configuration *struct {
		Blocking          *bool           `json:"blocking"`          // 0.3
		ReturnImmediately bool            `json:"returnImmediately"` // 1.0
		Push03            json.RawMessage `json:"pushNotificationConfig"`
		Push10            json.RawMessage `json:"taskPushNotificationConfig"`
	} `json:"configuration"`
	Metadata map[string]any `json:"metadata"`
}

// inMessage is a message as either version writes it.
type inMessage struct {
	Kind      *string        `json:"kind"` // 0.3: "message"
	Role      string         `json:"role"`
	MessageID string         `json:"messageId"`
	ContextID string         `json:"contextId"`
	TaskID    string         `json:"taskId"`
	Parts     []inPart       `json:"parts"`
	Metadata  map[string]any `json:"metadata"`
}

// inPart is a part as either version writes it: 0.3 names its kind, 1.0
// has one of text, data, url, raw.
type inPart struct {
	Kind *string         `json:"kind"`
	Text *string         `json:"text"`
	Data json.RawMessage `json:"data"`
	File json.RawMessage `json:"file"`
	URL  json.RawMessage `json:"url"`
	Raw  json.RawMessage `json:"raw"`
}

// present reports whether a member was given a value other than null.
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// a2aRequest is what a message asks: a skill with its input, or a text
// (and data) for the agent.
type a2aRequest struct {
	skill     string
	input     any
	text      string
	data      []any
	messageID string
	contextID string
}

// Roles as each version writes them.
var (
	userRole  = [2]string{a2a03: "user", a2a10: "ROLE_USER"}
	agentRole = [2]string{a2a03: "agent", a2a10: "ROLE_AGENT"}
)

const messageShape = `{"messageId": "…", "role": "ROLE_USER", "parts": [{"text": "…"}]}` // 1.0
const messageShape03 = `{"kind": "message", "messageId": "…", "role": "user", "parts": [{"kind": "text", "text": "…"}]}`

// readSend reads and checks the params of a send in version v: every
// member the version requires of a SendMessageRequest (MessageSendParams
// in 0.3), its Message and its Parts (A2A 1.0 §5.7).
func readSend(raw json.RawMessage, v a2aVersion) (*sendParams, *a2aRequest, *a2aError) {
	shape := messageShape
	if v == a2a03 {
		shape = messageShape03
	}
	var p sendParams
	if !present(raw) {
		return nil, nil, rpcErr(rpcInvalidParams, `params is missing; want {"message": %s}`, shape)
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, nil, rpcErr(rpcInvalidParams, "%s", paramsError(err))
	}
	m := p.Message
	switch {
	case m == nil:
		return nil, nil, rpcErr(rpcInvalidParams, `params.message is missing; want {"message": %s}`, shape)
	case v == a2a03 && (m.Kind == nil || *m.Kind != "message"):
		return nil, nil, rpcErr(rpcInvalidParams, `params.message.kind is %s; want "message" (A2A 0.3 requires it): %s`, quoteOrMissing(m.Kind), shape)
	case m.Role == agentRole[v] || m.Role == agentRole[1-v]:
		return nil, nil, rpcErr(rpcInvalidParams, "params.message.role is %q: a message to this agent is the user's (%q in A2A %s)", m.Role, userRole[v], v)
	case m.Role == "":
		return nil, nil, rpcErr(rpcInvalidParams, "params.message.role is missing; want %q (A2A %s): %s", userRole[v], v, shape)
	case m.Role != userRole[v]:
		return nil, nil, rpcErr(rpcInvalidParams, "params.message.role is %q, not a role of A2A %s; want %q", gossip.Clip(m.Role, 40), v, userRole[v])
	case m.MessageID == "":
		return nil, nil, rpcErr(rpcInvalidParams, "params.message.messageId is missing or empty; give each message a unique ID (a UUID, say): %s", shape)
	case len(m.Parts) == 0:
		return nil, nil, rpcErr(rpcInvalidParams, `params.message.parts is missing or empty: send a text part, or a data part {"skill": ID, "input": {...}} to run a skill`)
	}
	if c := p.Configuration; c != nil && (present(c.Push03) || present(c.Push10)) {
		return nil, nil, rpcErr(a2aPushNotSupported, "configuration asks for push notifications, which this agent does not send; leave them out and poll the task")
	}
	req := &a2aRequest{messageID: m.MessageID, contextID: m.ContextID}
	if req.contextID == "" {
		// A2A: the server makes a context for a message that names none.
		var b [16]byte
		rand.Read(b[:])
		req.contextID = "ctx-" + hex.EncodeToString(b[:])
	}
	var texts []string
	for i, part := range m.Parts {
		text, data, e := readPart(i, part, v)
		if e != nil {
			return nil, nil, e
		}
		if text != nil {
			texts = append(texts, *text)
		} else {
			req.data = append(req.data, data)
		}
	}
	req.text = strings.Join(texts, "\n")
	req.skill, req.input = skillOf(m, p.Metadata, req.data)
	if req.skill != "" {
		req.text, req.data = "", nil
	}
	return &p, req, nil
}

// readPart checks part i of a message in version v and returns its text,
// or its data when it is a data part.
func readPart(i int, part inPart, v a2aVersion) (*string, any, *a2aError) {
	hasText, hasData := part.Text != nil, present(part.Data)
	isFile := present(part.File) || present(part.URL) || present(part.Raw)
	if v == a2a03 {
		kind := ""
		if part.Kind != nil {
			kind = *part.Kind
		}
		switch {
		case kind == "file":
			return nil, nil, rpcErr(a2aContentType, "params.message.parts[%d] is a file: this agent takes text and data parts only (defaultInputModes text/plain, application/json)", i)
		case kind == "text" && hasText:
			return part.Text, nil, nil
		case kind == "data" && hasData:
			var d any
			if err := json.Unmarshal(part.Data, &d); err != nil {
				return nil, nil, rpcErr(rpcInvalidParams, "params.message.parts[%d].data: %v", i, err)
			}
			if _, ok := d.(map[string]any); !ok {
				return nil, nil, rpcErr(rpcInvalidParams, "params.message.parts[%d].data is a JSON %s; an A2A 0.3 data part holds an object", i, jsonKind(d))
			}
			return nil, d, nil
		case kind == "text" || kind == "data":
			return nil, nil, rpcErr(rpcInvalidParams, "params.message.parts[%d] is a %s part without %s: want {\"kind\": %q, %q: …}", i, kind, kind, kind, kind)
		case part.Kind == nil && (hasText || hasData || isFile):
			return nil, nil, rpcErr(rpcInvalidParams, `params.message.parts[%d].kind is missing; A2A 0.3 requires it: {"kind": "text", "text": "…"} or {"kind": "data", "data": {...}}`, i)
		case part.Kind != nil:
			return nil, nil, rpcErr(rpcInvalidParams, `params.message.parts[%d].kind is %q; want "text" or "data" (or "file", which this agent does not take)`, i, gossip.Clip(kind, 40))
		}
		return nil, nil, rpcErr(rpcInvalidParams, `params.message.parts[%d] has no content: want {"kind": "text", "text": "…"} or {"kind": "data", "data": {...}}`, i)
	}
	n := 0
	for _, has := range []bool{hasText, hasData, present(part.URL), present(part.Raw)} {
		if has {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, nil, rpcErr(rpcInvalidParams, "params.message.parts[%d] has more than one of text, data, url and raw; a part holds exactly one", i)
	case isFile:
		return nil, nil, rpcErr(a2aContentType, "params.message.parts[%d] is a file: this agent takes text and data parts only (defaultInputModes text/plain, application/json)", i)
	case hasText:
		return part.Text, nil, nil
	case hasData:
		var d any
		if err := json.Unmarshal(part.Data, &d); err != nil {
			return nil, nil, rpcErr(rpcInvalidParams, "params.message.parts[%d].data: %v", i, err)
		}
		return nil, d, nil
	}
	return nil, nil, rpcErr(rpcInvalidParams, `params.message.parts[%d] has no content: want {"text": "…"} or {"data": {...}} (in A2A 0.3 with "kind": "text" or "data")`, i)
}

func quoteOrMissing(s *string) string {
	if s == nil {
		return "missing"
	}
	return strconv.Quote(gossip.Clip(*s, 40))
}

// paramsError says which member of params did not decode, in JSON's
// words rather than Go's.
func paramsError(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return "params: " + err.Error()
	}
	want := "a " + te.Type.Kind().String()
	switch te.Type.Kind() {
	case reflect.Slice, reflect.Array:
		want = "an array"
	case reflect.Struct, reflect.Map:
		want = "an object"
	case reflect.Bool:
		want = "true or false"
	case reflect.Int, reflect.Int64, reflect.Float64:
		want = "a number"
	}
	field := "params"
	if te.Field != "" {
		field += "." + te.Field
	}
	return fmt.Sprintf("%s is a JSON %s; want %s", field, te.Value, want)
}

// skillOf finds the skill a message asks for, and its input: metadata
// "skill" with the first data part as input (or its "input" member), or a
// data part {"skill", "input"}.
func skillOf(m *inMessage, meta map[string]any, data []any) (string, any) {
	for _, md := range []map[string]any{m.Metadata, meta} {
		if name, ok := md["skill"].(string); ok && name != "" {
			if len(data) == 0 {
				return name, nil
			}
			if obj, ok := data[0].(map[string]any); ok {
				if in, ok := obj["input"]; ok {
					return name, in
				}
			}
			return name, data[0]
		}
	}
	for _, d := range data {
		if obj, ok := d.(map[string]any); ok {
			if name, ok := obj["skill"].(string); ok && name != "" {
				return name, obj["input"]
			}
		}
	}
	return "", nil
}

// a2aSend answers message/send and SendMessage: the reply, or a task.
func (s *Binding) a2aSend(r *http.Request, v a2aVersion, raw json.RawMessage, decoded func()) (any, *a2aError) {
	p, req, e := s.readMessage(raw, v)
	if e != nil {
		return nil, e
	}
	decoded() // the run is bounded by the invocation slots, not the decoding budget
	who := s.callerOf(r)
	release, busy := s.takeSlot(who, req.skill)
	if busy != nil {
		return nil, busy
	}
	if p.blocking() {
		defer release()
		out, err := s.a2aRun(who, req)
		if err != nil {
			return nil, s.a2aFailure(err)
		}
		return sendResult(v, "message", replyMessage(req, out).render(v)), nil
	}
	t, e := s.startTask(who, req, release)
	if e != nil {
		return nil, e
	}
	return sendResult(v, "task", t.render(v)), nil
}

// sendResult is a send's result in version v: 1.0 wraps it as
// {"message": …} or {"task": …} (SendMessageResponse, StreamResponse),
// 0.3 gives it bare (its kind says which).
func sendResult(v a2aVersion, member string, x map[string]any) any {
	if v == a2a10 {
		return map[string]any{member: x}
	}
	return x
}

// blocking reports whether the send waits for the agent's reply (0.3
// configuration.blocking absent or true; 1.0 returnImmediately false).
func (p *sendParams) blocking() bool {
	c := p.Configuration
	return c == nil || !c.ReturnImmediately && (c.Blocking == nil || *c.Blocking)
}

// readMessage reads the params of a send (readSend), and refuses a
// message that names a task: an unknown one is not found (A2A 1.0
// §3.4.2), and no task takes further messages.
func (s *Binding) readMessage(raw json.RawMessage, v a2aVersion) (*sendParams, *a2aRequest, *a2aError) {
	p, req, e := readSend(raw, v)
	if e != nil {
		return nil, nil, e
	}
	if id := p.Message.TaskID; id != "" {
		t, ok := s.tasks.get(id)
		switch {
		case !ok:
			return nil, nil, taskNotFound(id)
		case p.Message.ContextID != "" && p.Message.ContextID != t.contextID:
			return nil, nil, rpcErr(rpcInvalidParams, "params.message.contextId %q is not the context of task %s (A2A 1.0 §3.4.3: they must match); leave contextId out or give the task's", gossip.Clip(p.Message.ContextID, 100), id)
		}
		return nil, nil, rpcErr(a2aUnsupported, "task %s is %s and takes no further messages: send a new message without taskId", id, t.state.name(v))
	}
	return p, req, nil
}

// takeSlot takes one of the binding's invocation slots for who (slots.go),
// or says the agent is busy; a standard skill (ping) takes none.
func (s *Binding) takeSlot(who caller, skill string) (func(), *a2aError) {
	if skill != "" && !needsSlot(skill) {
		return func() {}, nil
	}
	release, err := s.slots.take([]slotKey{addrKey(who)})
	if err != nil {
		body := wire.NewErrorBody(err)
		return nil, &a2aError{code: rpcInternal, msg: body.Message, detail: &body}
	}
	return release, nil
}

// startTask makes a working task for the caller who and runs req for it
// in the background, holding the invocation slot release gives back until
// the task ends.
func (s *Binding) startTask(who caller, req *a2aRequest, release func()) (*a2aTask, *a2aError) {
	t, e := s.tasks.add(clientOf(who.remote), req.contextID)
	if e != nil {
		release()
		return nil, e
	}
	go func() {
		defer release()
		out, err := s.a2aRun(who, req)
		if err != nil {
			e := s.a2aFailure(err)
			s.tasks.fail(t.id, e.msg, e.detail)
			return
		}
		s.tasks.complete(t.id, replyMessage(req, out))
	}()
	return t, nil
}

// a2aRun runs what a message asks, for the caller who.
func (s *Binding) a2aRun(who caller, req *a2aRequest) (any, error) {
	if req.skill != "" {
		out, err := s.agent.ExecuteAnonymous("a2a", who.audit, req.messageID, req.skill, req.input)
		if err != nil {
			return nil, err
		}
		return map[string]any{"skill": req.skill, "output": out}, nil
	}
	return s.agent.AskAnonymous("a2a", who.audit, req.messageID, conversationOf(who.remote, req.contextID), req.text, req.data)
}

// conversationOf is the conversation ID the local agent and the audit
// log see for an A2A context: derived from the client (its address or
// /64, as the limiter counts clients) and the contextId, so that one
// client's messages in one context are one conversation, and no client
// can write into another's by naming its contextId.
func conversationOf(remote, contextID string) string {
	sum := sha256.Sum256([]byte(clientOf(remote).String() + "\x00" + contextID))
	return "a2a-" + hex.EncodeToString(sum[:12])
}

// a2aFailure is the JSON-RPC error for a refused or failed run. The
// daemon's own failures are logged and answered without their detail.
func (s *Binding) a2aFailure(err error) *a2aError {
	body := wire.NewErrorBody(err)
	code := rpcInternal
	switch body.Code {
	case wire.CodeUnknownCapability:
		code = rpcInvalidParams
		body.Message += "; the skills it offers you are the skills of its agent card, " + s.url + "/.well-known/agent-card.json"
	case wire.CodeInvalidParams, wire.CodeConditionsNotMet:
		code = rpcInvalidParams
	case wire.CodeInternal:
		s.log.Error("answering an A2A message", "err", err)
		body.Message = "the request could not be processed"
	}
	return &a2aError{code: code, msg: body.Message, detail: &body}
}

func taskNotFound(id string) *a2aError {
	return rpcErr(a2aTaskNotFound, "task not found: no task %q; a task is the one a message sent with returnImmediately (blocking false in 0.3) returned, and is kept for %s after it ends", gossip.Clip(id, 100), a2aTaskKeep)
}

// a2aGetTask answers tasks/get and GetTask.
func (s *Binding) a2aGetTask(v a2aVersion, raw json.RawMessage) (any, *a2aError) {
	id, e := taskID(raw)
	if e != nil {
		return nil, e
	}
	t, ok := s.tasks.get(id)
	if !ok {
		return nil, taskNotFound(id)
	}
	return t.render(v), nil
}

// a2aCancelTask answers tasks/cancel and CancelTask: the agent cannot be
// interrupted, so no task is cancelable.
func (s *Binding) a2aCancelTask(v a2aVersion, raw json.RawMessage) (any, *a2aError) {
	id, e := taskID(raw)
	if e != nil {
		return nil, e
	}
	t, ok := s.tasks.get(id)
	if !ok {
		return nil, taskNotFound(id)
	}
	if t.state.terminal() {
		return nil, rpcErr(a2aTaskNotCancelable, "task %s is %s already", id, t.state.name(v))
	}
	return nil, rpcErr(a2aTaskNotCancelable, "task %s cannot be canceled: the local agent has it and cannot be interrupted; it ends when the agent answers or in at most %s", id, s.agent.AgentTimeout())
}

// taskID reads the params of the methods naming one task (GetTask,
// CancelTask, SubscribeToTask and their 0.3 names): id, required, and
// historyLength, which must not be negative when given (tasks keep no
// history, so it changes nothing else).
func taskID(raw json.RawMessage) (string, *a2aError) {
	const want = `want {"id": TASK_ID}, the id of the task a message returned`
	var p struct {
		ID            *string `json:"id"`
		HistoryLength *int    `json:"historyLength"`
	}
	if !present(raw) {
		return "", rpcErr(rpcInvalidParams, "params is missing; "+want)
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", rpcErr(rpcInvalidParams, "%s; %s", paramsError(err), want)
	}
	switch {
	case p.ID == nil || *p.ID == "":
		return "", rpcErr(rpcInvalidParams, "params.id is missing or empty; "+want)
	case p.HistoryLength != nil && *p.HistoryLength < 0:
		return "", rpcErr(rpcInvalidParams, "params.historyLength is %d; want 0 or more, or leave it out", *p.HistoryLength)
	}
	return *p.ID, nil
}

// outMessage is an agent message, rendered in either version's shapes.
type outMessage struct {
	id, contextID, taskID string
	text                  *string
	data                  any
	metadata              map[string]any
}

// replyMessage is the agent message answering req with out: a text part
// for a string, a data part for anything else.
func replyMessage(req *a2aRequest, out any) *outMessage {
	m := &outMessage{id: gossip.NewID("msg", time.Now()), contextID: req.contextID}
	if s, ok := out.(string); ok {
		m.text = &s
	} else {
		m.data = out
	}
	return m
}

func (m *outMessage) render(v a2aVersion) map[string]any {
	var part map[string]any
	switch {
	case m.text != nil && v == a2a10:
		part = map[string]any{"text": *m.text, "mediaType": "text/plain"}
	case m.text != nil:
		part = map[string]any{"kind": "text", "text": *m.text}
	case v == a2a10:
		part = map[string]any{"data": m.data, "mediaType": "application/json"}
	default:
		// A 0.3 data part holds an object.
		data := m.data
		if _, ok := data.(map[string]any); !ok {
			data = map[string]any{"result": data}
		}
		part = map[string]any{"kind": "data", "data": data}
	}
	out := map[string]any{"messageId": m.id, "parts": []any{part}}
	if v == a2a10 {
		out["role"] = "ROLE_AGENT"
	} else {
		out["kind"], out["role"] = "message", "agent"
	}
	if m.contextID != "" {
		out["contextId"] = m.contextID
	}
	if m.taskID != "" {
		out["taskId"] = m.taskID
	}
	if m.metadata != nil {
		out["metadata"] = m.metadata
	}
	return out
}

// protoNames rewrites the members of an A2A 1.0 request that use their
// proto field names (message_id) to their JSON names (messageId): A2A 1.0
// JSON is ProtoJSON (A2A ADR-001), whose parsers accept both, so a 1.0
// client may send either. Only the request's own messages are rewritten
// — the params, params.message, its parts and params.configuration — never
// a Struct or Value (metadata, a data part's data), whose keys are the
// caller's. A member given under both names is refused, as ProtoJSON
// refuses it.
func protoNames(raw json.RawMessage) (json.RawMessage, *a2aError) {
	if !present(raw) {
		return raw, nil
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(raw, &params) != nil {
		return raw, nil // not an object: the method's own reading says what is wrong
	}
	changed, e := camelMembers(params, "params")
	if e != nil {
		return nil, e
	}
	for _, name := range []string{"message", "configuration"} {
		var obj map[string]json.RawMessage
		if json.Unmarshal(params[name], &obj) != nil || obj == nil {
			continue
		}
		c, e := camelMembers(obj, "params."+name)
		if e != nil {
			return nil, e
		}
		if name == "message" {
			var parts []map[string]json.RawMessage
			if json.Unmarshal(obj["parts"], &parts) == nil {
				pc := false
				for i, part := range parts {
					if part == nil {
						continue
					}
					c, e := camelMembers(part, fmt.Sprintf("params.message.parts[%d]", i))
					if e != nil {
						return nil, e
					}
					pc = pc || c
				}
				if pc {
					obj["parts"], _ = json.Marshal(parts)
					c = true
				}
			}
		}
		if c {
			params[name], _ = json.Marshal(obj)
			changed = true
		}
	}
	if !changed {
		return raw, nil
	}
	out, err := json.Marshal(params)
	if err != nil {
		return nil, rpcErr(rpcInvalidParams, "params: %v", err)
	}
	return out, nil
}

// camelMembers renames obj's snake_case members to lowerCamelCase, and
// reports whether it renamed any.
func camelMembers(obj map[string]json.RawMessage, where string) (bool, *a2aError) {
	changed := false
	for name, v := range obj {
		if !strings.Contains(name, "_") {
			continue
		}
		camel := lowerCamel(name)
		if _, dup := obj[camel]; dup {
			return false, rpcErr(rpcInvalidParams, "%s has both %s and %s, one member under its two names; give it once", where, gossip.Clip(name, 60), gossip.Clip(camel, 60))
		}
		delete(obj, name)
		obj[camel] = v
		changed = true
	}
	return changed, nil
}

// lowerCamel is the ProtoJSON name of a proto field name: context_id is
// contextId.
func lowerCamel(name string) string {
	var b strings.Builder
	up := false
	for _, r := range name {
		switch {
		case r == '_':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
