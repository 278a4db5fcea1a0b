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
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/wire"
)

// The A2A endpoint the agent card names: JSON-RPC 2.0 over POST /a2a,
// speaking A2A 1.0 and A2A 0.3 at the same URL, each in its own shapes.
// The method name says which: 0.3 methods are "message/send",
// "tasks/get", …, with "kind" on messages, parts and tasks, roles "user"
// and "agent", states "completed"; 1.0 methods are "SendMessage",
// "GetTask", …, with parts told apart by their member (text, data, url,
// raw), roles "ROLE_USER", states "TASK_STATE_COMPLETED", SendMessage's
// result wrapped as {"message": …} or {"task": …}, and error data an
// array of typed details (a google.rpc.ErrorInfo with the A2A reason,
// then a google.protobuf.Struct holding the daemon's error body: code,
// message, what was expected, what would work, the unmet conditions). A
// 0.3 error carries that body as its data object. The A2A-Version header
// is checked only for a version this endpoint does not speak (-32009);
// the two it speaks never share a method name, so a request is answered
// in its method's version whatever the header says (clients disagree on
// whether to send it, and a 0.3 client never does).
//
// What a message does:
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
// see a2aTasks for how tasks are kept. Tasks do not take further
// messages, cannot be canceled (the agent cannot be interrupted), and
// there is no streaming, push notification, task list or extended card:
// each of those methods is answered with its A2A error, and the card says
// streaming and pushNotifications are false.
//
// The caller is anonymous, exactly as on POST /invoke: limited per client
// and in total (limiter), bodies bounded (readBody), refused while the
// audit log has no room for strangers, and holding one of the binding's
// invocation slots while the agent has it (slots.go: a task holds its
// slot until it ends; a standard skill such as ping takes none).
//
// Errors a client can act on are precise: a body that is not JSON
// (-32700, with where it broke), a request that is not JSON-RPC (-32600),
// an unknown method (-32601, naming the methods there are), params that
// do not fit (-32602, naming the member), an unknown skill (-32602, with
// the daemon's explanation), a file part (-32005: send text or data), an
// unknown task (-32001). The endpoint answers them with HTTP 200, as
// JSON-RPC over HTTP does; a body refused before it is read (wrong
// Content-Type, too large, too deep, over budget) gets its HTTP status.

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
	a2aNoExtendedCard    = -32007
	a2aVersionNotSupport = -32009
)

// a2aReasons are the A2A 1.0 ErrorInfo reasons of the codes.
var a2aReasons = map[int]string{
	rpcParseError: "PARSE_ERROR", rpcInvalidRequest: "INVALID_REQUEST", rpcMethodNotFound: "METHOD_NOT_FOUND",
	rpcInvalidParams: "INVALID_PARAMS", rpcInternal: "INTERNAL_ERROR", a2aTaskNotFound: "TASK_NOT_FOUND",
	a2aTaskNotCancelable: "TASK_NOT_CANCELABLE", a2aPushNotSupported: "PUSH_NOTIFICATION_NOT_SUPPORTED",
	a2aUnsupported: "UNSUPPORTED_OPERATION", a2aContentType: "CONTENT_TYPE_NOT_SUPPORTED",
	a2aNoExtendedCard: "EXTENDED_AGENT_CARD_NOT_CONFIGURED", a2aVersionNotSupport: "VERSION_NOT_SUPPORTED",
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
	opGetTask
	opCancelTask
	opStream
	opPush
	opListTasks
	opExtendedCard
)

type a2aMethod struct {
	version a2aVersion
	op      a2aOp
}

// a2aMethods are the methods of both versions.
var a2aMethods = map[string]a2aMethod{
	"message/send": {a2a03, opSend}, "SendMessage": {a2a10, opSend},
	"tasks/get": {a2a03, opGetTask}, "GetTask": {a2a10, opGetTask},
	"tasks/cancel": {a2a03, opCancelTask}, "CancelTask": {a2a10, opCancelTask},
	"message/stream": {a2a03, opStream}, "tasks/resubscribe": {a2a03, opStream},
	"SendStreamingMessage": {a2a10, opStream}, "SubscribeToTask": {a2a10, opStream},
	"tasks/pushNotificationConfig/set": {a2a03, opPush}, "tasks/pushNotificationConfig/get": {a2a03, opPush},
	"tasks/pushNotificationConfig/list": {a2a03, opPush}, "tasks/pushNotificationConfig/delete": {a2a03, opPush},
	"CreateTaskPushNotificationConfig": {a2a10, opPush}, "GetTaskPushNotificationConfig": {a2a10, opPush},
	"ListTaskPushNotificationConfigs": {a2a10, opPush}, "DeleteTaskPushNotificationConfig": {a2a10, opPush},
	"ListTasks":                          {a2a10, opListTasks},
	"GetExtendedAgentCard":               {a2a10, opExtendedCard},
	"agent/getAuthenticatedExtendedCard": {a2a03, opExtendedCard},
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
		resp.Result = nil
		resp.Error = &rpcError{Code: e.code, Message: e.msg}
		switch {
		case v == a2a10:
			resp.Error.Data = typedDetails(e)
		case e.detail != nil:
			resp.Error.Data = e.detail
		}
	}
	writeJSON(w, status, resp)
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

// headerVersion is the version the A2A-Version header names: a2a03 when
// absent (A2A 1.0 §3.6.2), and ok false for a version not spoken here.
func headerVersion(r *http.Request) (v a2aVersion, name string, ok bool) {
	name = strings.TrimSpace(r.Header.Get(a2aVersionHeader))
	major, rest, _ := strings.Cut(name, ".")
	minor, _, _ := strings.Cut(rest, ".")
	switch {
	case name == "":
		return a2a03, name, true
	case major == "0" && minor == "3":
		return a2a03, name, true
	case major == "1" && (minor == "0" || minor == ""):
		return a2a10, name, true
	}
	return a2a03, name, false
}

func (s *Binding) a2a(w http.ResponseWriter, r *http.Request) {
	hv, hname, hok := headerVersion(r)
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
	req, m, e := readRPC(body)
	v := hv
	if e == nil {
		v = m.version
	}
	if e == nil && !hok {
		e = rpcErr(a2aVersionNotSupport, "%s %q is not spoken here: this agent speaks A2A %s and %s", a2aVersionHeader, hname,
			negotiate.A2AVersion1, negotiate.A2AInterfaceVersion)
	}
	if e != nil {
		rpcAnswer(w, http.StatusOK, v, req.ID, nil, e)
		return
	}
	var result any
	switch m.op {
	case opSend:
		result, e = s.a2aSend(r, m.version, req.Params, decoded)
	case opGetTask:
		result, e = s.a2aGetTask(m.version, req.Params)
	case opCancelTask:
		result, e = s.a2aCancelTask(m.version, req.Params)
	case opStream:
		e = rpcErr(a2aUnsupported, "%s is not supported: this agent does not stream (the card says capabilities.streaming false); send the message without streaming", method(req))
	case opPush:
		e = rpcErr(a2aPushNotSupported, "%s is not supported: this agent sends no push notifications; poll the task with %s", method(req), getTaskMethod(m.version))
	case opListTasks:
		e = rpcErr(a2aUnsupported, "ListTasks is not supported: tasks are read one at a time, by the ID their message returned, with GetTask")
	case opExtendedCard:
		e = rpcErr(a2aNoExtendedCard, "this agent has no extended card: everything it offers an anonymous caller is on /.well-known/agent-card.json")
	}
	rpcAnswer(w, http.StatusOK, m.version, req.ID, result, e)
}

// readRPC reads a JSON-RPC 2.0 request and finds its method.
func readRPC(body []byte) (rpcRequest, a2aMethod, *a2aError) {
	var req rpcRequest
	var probe any
	if err := json.Unmarshal(body, &probe); err != nil {
		return req, a2aMethod{}, rpcErr(rpcParseError, "the body is not JSON (%v); send a JSON-RPC 2.0 request: "+rpcShape, err)
	}
	if _, ok := probe.(map[string]any); !ok {
		what := "a JSON array (a batch, which this endpoint does not take)"
		if _, isArray := probe.([]any); !isArray {
			what = fmt.Sprintf("a JSON %T", probe)
		}
		return req, a2aMethod{}, rpcErr(rpcInvalidRequest, "the body is %s; send one JSON-RPC 2.0 request: "+rpcShape, what)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, a2aMethod{}, rpcErr(rpcInvalidRequest, "reading the request: %v; want "+rpcShape, err)
	}
	if !validID(req.ID) {
		id := req.ID
		req.ID = nil
		return req, a2aMethod{}, rpcErr(rpcInvalidRequest, "id is %s; a JSON-RPC id is a string, a number or null", gossip.Clip(string(id), 100))
	}
	if req.JSONRPC != "2.0" {
		return req, a2aMethod{}, rpcErr(rpcInvalidRequest, `jsonrpc is %q; want "2.0": `+rpcShape, req.JSONRPC)
	}
	name := method(req)
	if name == "" {
		return req, a2aMethod{}, rpcErr(rpcInvalidRequest, "method is missing or not a string; want "+rpcShape)
	}
	m, ok := a2aMethods[name]
	if !ok {
		return req, a2aMethod{}, rpcErr(rpcMethodNotFound, "no method %q: this agent serves SendMessage and GetTask (A2A 1.0), message/send and tasks/get (A2A 0.3)", gossip.Clip(name, 100))
	}
	return req, m, nil
}

const rpcShape = `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"role": "ROLE_USER", "messageId": "…", "parts": [{"text": "…"}]}}}`

func method(req rpcRequest) string {
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

func getTaskMethod(v a2aVersion) string {
	if v == a2a10 {
		return "GetTask"
	}
	return "tasks/get"
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
	Kind string          `json:"kind"`
	Text *string         `json:"text"`
	Data json.RawMessage `json:"data"`
	File json.RawMessage `json:"file"`
	URL  json.RawMessage `json:"url"`
	Raw  json.RawMessage `json:"raw"`
}

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

// readSend reads and checks the params of a send.
func readSend(raw json.RawMessage) (*sendParams, *a2aRequest, *a2aError) {
	var p sendParams
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, rpcErr(rpcInvalidParams, `params is missing; want {"message": {"role", "messageId", "parts": [...]}}`)
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, nil, rpcErr(rpcInvalidParams, "%s", paramsError(err))
	}
	m := p.Message
	switch {
	case m == nil:
		return nil, nil, rpcErr(rpcInvalidParams, `params.message is missing; want {"message": {"role", "messageId", "parts": [...]}}`)
	case m.Role == "agent" || m.Role == "ROLE_AGENT":
		return nil, nil, rpcErr(rpcInvalidParams, "params.message.role is %q: a message to this agent is the user's (user in A2A 0.3, ROLE_USER in 1.0)", m.Role)
	case len(m.Parts) == 0:
		return nil, nil, rpcErr(rpcInvalidParams, `params.message.parts is empty: send a text part, or a data part {"skill": ID, "input": {...}} to run a skill`)
	}
	if c := p.Configuration; c != nil && (len(c.Push03) > 0 && string(c.Push03) != "null" || len(c.Push10) > 0 && string(c.Push10) != "null") {
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
		switch {
		case part.Text != nil && (part.Kind == "" || part.Kind == "text"):
			texts = append(texts, *part.Text)
		case len(part.Data) > 0 && (part.Kind == "" || part.Kind == "data"):
			var d any
			if err := json.Unmarshal(part.Data, &d); err != nil {
				return nil, nil, rpcErr(rpcInvalidParams, "params.message.parts[%d].data: %v", i, err)
			}
			req.data = append(req.data, d)
		case len(part.File) > 0 || len(part.URL) > 0 || len(part.Raw) > 0 || part.Kind == "file":
			return nil, nil, rpcErr(a2aContentType, "params.message.parts[%d] is a file: this agent takes text and data parts only (defaultInputModes text/plain, application/json)", i)
		default:
			return nil, nil, rpcErr(rpcInvalidParams, `params.message.parts[%d] has no content: want {"text": "…"} or {"data": {...}} (in A2A 0.3 with "kind": "text" or "data")`, i)
		}
	}
	req.text = strings.Join(texts, "\n")
	req.skill, req.input = skillOf(m, p.Metadata, req.data)
	if req.skill != "" {
		req.text, req.data = "", nil
	}
	return &p, req, nil
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
	p, req, e := readSend(raw)
	if e != nil {
		return nil, e
	}
	if id := p.Message.TaskID; id != "" {
		t, ok := s.tasks.get(id)
		if !ok {
			return nil, taskNotFound(id)
		}
		return nil, rpcErr(a2aUnsupported, "task %s is %s and takes no further messages: send a new message without taskId", id, t.state.name(v))
	}
	blocking := true
	if c := p.Configuration; c != nil {
		blocking = !c.ReturnImmediately && (c.Blocking == nil || *c.Blocking)
	}
	decoded() // the run is bounded by the invocation slots, not the decoding budget
	who := s.callerOf(r)
	release := func() {}
	if req.skill == "" || needsSlot(req.skill) {
		var err error
		if release, err = s.slots.take([]slotKey{addrKey(who)}); err != nil {
			body := wire.NewErrorBody(err)
			return nil, &a2aError{code: rpcInternal, msg: body.Message, detail: &body}
		}
	}
	if blocking {
		defer release()
		out, err := s.a2aRun(who, req)
		if err != nil {
			return nil, s.a2aFailure(err)
		}
		reply := replyMessage(req, out)
		if v == a2a10 {
			return map[string]any{"message": reply.render(v)}, nil
		}
		return reply.render(v), nil
	}
	t, err := s.tasks.add(clientOf(who.remote), req.contextID)
	if err != nil {
		release()
		return nil, err
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
	if v == a2a10 {
		return map[string]any{"task": t.render(v)}, nil
	}
	return t.render(v), nil
}

// a2aRun runs what a message asks, for the caller who.
func (s *Binding) a2aRun(who caller, req *a2aRequest) (any, error) {
	if req.skill != "" {
		out, err := s.n.Inbox().ExecuteAnonymous("a2a", who.audit, req.messageID, req.skill, req.input)
		if err != nil {
			return nil, err
		}
		return map[string]any{"skill": req.skill, "output": out}, nil
	}
	return s.n.Inbox().AskAnonymous("a2a", who.audit, req.messageID, conversationOf(who.remote, req.contextID), req.text, req.data)
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
	return rpcErr(a2aTaskNotFound, "no task %q: a task is the one a message sent with returnImmediately (blocking false in 0.3) returned, and is kept for %s after it ends", gossip.Clip(id, 100), a2aTaskKeep)
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
	return nil, rpcErr(a2aTaskNotCancelable, "task %s cannot be canceled: the local agent has it and cannot be interrupted; it ends when the agent answers or in at most %s", id, s.n.Inbox().AgentTimeout())
}

// taskID reads the id of tasks/get, GetTask and their cancel methods.
func taskID(raw json.RawMessage) (string, *a2aError) {
	var p struct {
		ID *string `json:"id"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || p.ID == nil || *p.ID == "" {
		why := "is missing"
		if err != nil {
			why = "does not read: " + err.Error()
		}
		return "", rpcErr(rpcInvalidParams, `params %s; want {"id": TASK_ID}, the id of the task a message returned`, why)
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
