package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The tests that keep openapi.json true to the server:
//
//   - TestOpenAPIRoutes: the routes the server registers (read from this
//     package's source, every mux.HandleFunc/Handle pattern, plus the hello
//     challenge that the guard answers) and the operations the document
//     describes are the same set, and each documented operation is routed
//     by the server's mux to the pattern it documents.
//   - TestOpenAPIAgainstRealResponses: two daemons on loopback are driven
//     through every documented operation by the package's own client, and
//     every request body (of a call that succeeded), response body and
//     event is validated against the document's schemas, with the
//     maintained validator the project already uses
//     (santhosh-tekuri/jsonschema, draft 2020-12, OpenAPI 3.1's dialect).
//
// For the second, every object schema that does not say otherwise is
// closed (additionalProperties false) in the copy the test validates
// with: a member the server sends that the document does not describe
// fails the test. The document itself leaves them open, so clients may
// expect members to be added.

// openAPIDoc is the parsed document and a validator for its schemas.
type openAPIDoc struct {
	raw   map[string]any
	c     *jsonschema.Compiler
	mu    sync.Mutex
	cache map[string]*jsonschema.Schema
}

const openAPIURL = "file:///openapi.json"

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(OpenAPIDocument, &raw); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if v, _ := raw["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi.json declares openapi %q, want 3.1.x", v)
	}
	strict, err := jsonschema.UnmarshalJSON(bytes.NewReader(OpenAPIDocument))
	if err != nil {
		t.Fatal(err)
	}
	closeObjects(strict)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(openAPIURL, strict); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return &openAPIDoc{raw: raw, c: c, cache: map[string]*jsonschema.Schema{}}
}

// closeObjects sets additionalProperties false on every schema with
// properties that does not set it.
func closeObjects(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["properties"].(map[string]any); ok {
			if _, set := v["additionalProperties"]; !set {
				v["additionalProperties"] = false
			}
		}
		for _, x := range v {
			closeObjects(x)
		}
	case []any:
		for _, x := range v {
			closeObjects(x)
		}
	}
}

// pointer escapes JSON pointer tokens.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return b.String()
}

// schemaAt compiles the schema at a JSON pointer into the document.
func (d *openAPIDoc) schemaAt(ptr string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.cache[ptr]; ok {
		return s, nil
	}
	// The fragment is a URI fragment: characters such as { } are escaped.
	s, err := d.c.Compile(openAPIURL + "#" + (&url.URL{Fragment: ptr}).EscapedFragment())
	if err != nil {
		return nil, fmt.Errorf("compiling the schema at %s: %w", ptr, err)
	}
	d.cache[ptr] = s
	return s, nil
}

// at walks the raw document along a pointer's tokens.
func (d *openAPIDoc) at(tokens ...string) map[string]any {
	var cur any = d.raw
	for _, tok := range tokens {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	m, _ := cur.(map[string]any)
	return m
}

// resolve follows a $ref to components, returning the object and its
// pointer tokens.
func (d *openAPIDoc) resolve(obj map[string]any, tokens []string) (map[string]any, []string) {
	ref, ok := obj["$ref"].(string)
	if !ok {
		return obj, tokens
	}
	tokens = strings.Split(strings.TrimPrefix(ref, "#/"), "/")
	return d.at(tokens...), tokens
}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// operations lists the documented operations as "METHOD path".
// mounted reports whether op's path is one the daemon mounts (x-mounted:
// the MCP endpoint), which this package's tests cannot serve.
func (d *openAPIDoc) mounted(op string) bool {
	item, _ := d.at("paths")[routePath(op)].(map[string]any)
	_, ok := item["x-mounted"]
	return ok
}

func (d *openAPIDoc) operations() []string {
	var ops []string
	for p, item := range d.at("paths") {
		for _, m := range httpMethods {
			if _, ok := item.(map[string]any)[m]; ok {
				ops = append(ops, strings.ToUpper(m)+" "+p)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

var wildcard = regexp.MustCompile(`\{[^}]*\}`)

// shape is a route with its wildcards' names dropped: OpenAPI allows only
// one path per shape, whatever its parameters are called.
func shape(route string) string { return wildcard.ReplaceAllString(route, "{}") }

// routePath is a route pattern without its method.
func routePath(route string) string {
	if _, path, ok := strings.Cut(route, " "); ok {
		return path
	}
	return route
}

// registeredRoutes reads the route patterns this package registers on a
// mux, from its source: the first argument of every .HandleFunc and
// .Handle call, a string constant expression. The hello challenge, which
// the guard answers before the mux, is added.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	consts := map[string]ast.Expr{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
		for _, decl := range af.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							consts[name.Name] = vs.Values[i]
						}
					}
				}
			}
		}
	}
	var eval func(ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			}
		case *ast.Ident:
			if v, ok := consts[e.Name]; ok {
				return eval(v)
			}
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				a, ok1 := eval(e.X)
				b, ok2 := eval(e.Y)
				return a + b, ok1 && ok2
			}
		}
		return "", false
	}
	routes := []string{"GET " + helloPath}
	for _, af := range parsed {
		ast.Inspect(af, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle") {
				return true
			}
			pattern, ok := eval(call.Args[0])
			if !ok {
				t.Errorf("%s: a route whose pattern is not a string constant; this test reads patterns from the source", fset.Position(call.Pos()))
				return true
			}
			if pattern != "/" { // the catch-all that answers unknown paths with JSON
				routes = append(routes, pattern)
			}
			return true
		})
	}
	slices.Sort(routes)
	return routes
}

// TestOpenAPIRoutes fails when a route and the document disagree: a route
// the server registers that the document lacks, a documented operation the
// server does not route, a path parameter not declared, or a route given
// without its method.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	registered, documented := registeredRoutes(t), doc.operations()
	if len(registered) < 30 {
		t.Fatalf("found only %d routes in the source: %v (has the way routes are registered changed?)", len(registered), registered)
	}
	docByShape, docPaths := map[string]bool{}, map[string]bool{}
	for _, op := range documented {
		docByShape[shape(op)] = true
		docPaths[shape(routePath(op))] = true
	}
	regByShape := map[string]bool{}
	for _, r := range registered {
		regByShape[shape(r)] = true
		switch {
		case !strings.Contains(r, " "):
			// A handler for every method (an MCP endpoint, say): the
			// document describes the methods it answers.
			if !docPaths[shape(r)] {
				t.Errorf("route %q (every method) is served but not in openapi.json: add the path with the methods it answers", r)
			}
		case !docByShape[shape(r)]:
			t.Errorf("route %q is served but not in openapi.json: add the operation (paths → %s)", r, r)
		}
	}
	for _, op := range documented {
		if !regByShape[shape(op)] && !regByShape[shape(routePath(op))] {
			t.Errorf("openapi.json documents %q, which the server does not register", op)
		}
	}

	// Each documented operation, as a request, reaches the pattern it
	// documents on the server's own mux; and its path parameters are
	// declared.
	mux := (&Server{}).routes().(*http.ServeMux)
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		item := doc.at("paths", path)
		var params []any
		if ps, ok := item["parameters"].([]any); ok {
			params = append(params, ps...)
		}
		if ps, ok := doc.at("paths", path, strings.ToLower(method))["parameters"].([]any); ok {
			params = append(params, ps...)
		}
		declared := map[string]bool{}
		for _, p := range params {
			pm, _ := doc.resolve(p.(map[string]any), nil)
			if pm["in"] == "path" {
				declared[pm["name"].(string)] = true
			}
		}
		for _, w := range wildcard.FindAllString(path, -1) {
			if name := strings.Trim(w, "{}"); !declared[name] {
				t.Errorf("%s: path parameter %q is not declared in its parameters", op, name)
			}
		}
		if path == helloPath {
			continue // answered by the guard, before the mux
		}
		if doc.mounted(op) {
			if !slices.Contains(registered, path) {
				t.Errorf("%s: documented as mounted, but nothing in this package mounts %s", op, path)
			}
			continue // this test's server has nothing mounted there
		}
		req := httptest.NewRequest(method, wildcard.ReplaceAllString(path, "x"), nil)
		if _, pattern := mux.Handler(req); shape(pattern) != shape(op) && shape(pattern) != shape(routePath(op)) {
			t.Errorf("%s: the server routes it to %q", op, pattern)
		}
	}
}

// TestOpenAPIDocument checks what the route and response tests do not
// reach: every reference resolves, every schema in components compiles,
// operation IDs are unique, and every response has its description.
func TestOpenAPIDocument(t *testing.T) {
	doc := loadOpenAPI(t)
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if !strings.HasPrefix(ref, "#/") || doc.at(strings.Split(strings.TrimPrefix(ref, "#/"), "/")...) == nil {
					t.Errorf("%s: $ref %q does not resolve", at, ref)
				}
			}
			for k, x := range v {
				walk(x, at+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc.raw, "")
	for name := range doc.at("components", "schemas") {
		if _, err := doc.schemaAt(pointer("components", "schemas", name)); err != nil {
			t.Error(err)
		}
	}
	ids := map[string]string{}
	for _, op := range doc.operations() {
		method, path, _ := strings.Cut(op, " ")
		o := doc.at("paths", path, strings.ToLower(method))
		id, _ := o["operationId"].(string)
		if prev, dup := ids[id]; id == "" || dup {
			t.Errorf("%s: operationId %q is missing or also %s's", op, id, prev)
		}
		ids[id] = op
		for status, r := range o["responses"].(map[string]any) {
			if rm, _ := doc.resolve(r.(map[string]any), nil); rm["description"] == nil {
				t.Errorf("%s: response %s has no description", op, status)
			}
		}
	}
}

// TestOpenAPIBehindTheToken: the description is served only with the
// token, like everything but the hello (see openapi.go for why).
func TestOpenAPIBehindTheToken(t *testing.T) {
	d := startDaemon(t, nil)
	resp, err := http.Get("http://" + d.srv.Addr() + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/openapi.json without the token: %d, want 401", resp.StatusCode)
	}
}

// recorder is an http.RoundTripper that validates every exchange with the
// control API against the document and notes which operations answered
// with which statuses.
type recorder struct {
	t   *testing.T
	doc *openAPIDoc
	mux *http.ServeMux

	mu   sync.Mutex
	seen map[string][]int // operation → statuses validated
}

func newRecorder(t *testing.T, doc *openAPIDoc) *recorder {
	return &recorder{t: t, doc: doc, mux: (&Server{}).routes().(*http.ServeMux), seen: map[string][]int{}}
}

// wrap puts the recorder in front of c's transport.
func (r *recorder) wrap(c *Client) {
	next := c.http.Transport
	c.http.Transport = roundTripper(func(req *http.Request) (*http.Response, error) { return r.roundTrip(next, req) })
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// operation finds the documented operation a request is routed to: its
// method and the document's path; "" when the server routes it nowhere.
func (r *recorder) operation(req *http.Request) (method, path string) {
	pattern := "GET " + helloPath
	if req.URL.Path != helloPath {
		_, pattern = r.mux.Handler(req)
	}
	for _, op := range r.doc.operations() {
		m, p, _ := strings.Cut(op, " ")
		// A pattern without a method serves every method of its path.
		if shape(op) == shape(pattern) || (m == req.Method && shape(p) == shape(pattern)) {
			return strings.ToLower(m), p
		}
	}
	return "", ""
}

func (r *recorder) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	method, path := r.operation(req)
	if method == "" {
		return resp, nil // no such endpoint: the catch-all's answers are tested elsewhere
	}
	op := strings.ToUpper(method) + " " + path
	name := fmt.Sprintf("%s (%s %s → %d)", op, req.Method, req.URL.RequestURI(), resp.StatusCode)
	if resp.StatusCode/100 == 2 && len(reqBody) > 0 {
		r.validate(name+" request", reqBody, "paths", path, method, "requestBody", "content", "application/json", "schema")
	}
	respObj, tokens := r.doc.resolve(r.doc.at("paths", path, method, "responses", strconv.Itoa(resp.StatusCode)),
		[]string{"paths", path, method, "responses", strconv.Itoa(resp.StatusCode)})
	if respObj == nil {
		r.t.Errorf("%s: status %d is not documented", name, resp.StatusCode)
		return resp, nil
	}
	content, _ := respObj["content"].(map[string]any)
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	switch {
	case ct == "text/event-stream":
		media, _ := content[ct].(map[string]any)
		switch {
		case media == nil:
			r.t.Errorf("%s: an event stream, which the document does not describe", name)
		case media["x-event-data"] != nil: // the schema of each event's data
			resp.Body = &eventChecker{r: r, name: name, body: resp.Body, schema: append(tokens, "content", ct, "x-event-data")}
		}
	case ct == "text/plain":
		// Text (the Prometheus exposition): its content type must be
		// documented; its format is the scraper's to read (node/api's
		// TestMetrics parses it).
		if content[ct] == nil {
			r.t.Errorf("%s: content type %q is not documented", name, ct)
		}
	case len(content) == 0:
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) > 0 {
			r.t.Errorf("%s: a body (%s) where the document describes none", name, body)
		}
	default:
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if content[ct] == nil {
			r.t.Errorf("%s: content type %q is not documented", name, ct)
			break
		}
		r.validate(name, body, append(tokens, "content", ct, "schema")...)
	}
	r.mu.Lock()
	r.seen[op] = append(r.seen[op], resp.StatusCode)
	r.mu.Unlock()
	return resp, nil
}

// validate checks a JSON body against the schema at tokens.
func (r *recorder) validate(name string, body []byte, tokens ...string) {
	if r.doc.at(tokens[:len(tokens)-1]...) == nil {
		r.t.Errorf("%s: the document has no schema at %s for %s", name, pointer(tokens...), body)
		return
	}
	s, err := r.doc.schemaAt(pointer(tokens...))
	if err != nil {
		r.t.Errorf("%s: %v", name, err)
		return
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		r.t.Errorf("%s: not JSON: %v: %s", name, err, body)
		return
	}
	if err := s.Validate(v); err != nil {
		r.t.Errorf("%s: the body does not match the document:\n%v\nbody: %s", name, err, body)
	}
}

// eventChecker validates each event's data as it is read, against the
// schema the document gives in the media type's x-event-data (OpenAPI 3.1
// has no member for the schema of one server-sent event).
type eventChecker struct {
	r      *recorder
	name   string
	body   io.ReadCloser
	schema []string // the pointer tokens of the data's schema
	line   []byte
}

func (e *eventChecker) Read(p []byte) (int, error) {
	n, err := e.body.Read(p)
	e.line = append(e.line, p[:n]...)
	for {
		i := bytes.IndexByte(e.line, '\n')
		if i < 0 {
			break
		}
		if data, ok := bytes.CutPrefix(e.line[:i], []byte("data: ")); ok {
			e.r.validate(e.name+" event", data, e.schema...)
			var ev struct{ Type string }
			json.Unmarshal(data, &ev)
			e.r.mu.Lock()
			e.r.seen["event "+ev.Type] = append(e.r.seen["event "+ev.Type], 0)
			e.r.mu.Unlock()
		}
		e.line = e.line[i+1:]
	}
	return n, err
}

func (e *eventChecker) Close() error { return e.body.Close() }

// exercised is the operations (and event types) seen, with their statuses.
func (r *recorder) exercised() map[string][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]int{}
	for k, v := range r.seen {
		out[k] = slices.Clone(v)
	}
	return out
}

// minimalCard is an A2A agent card as an outside agent might publish it.
const minimalCard = `{"protocolVersion": "0.3.0", "name": "Translator", "description": "Translates text",
 "url": "http://127.0.0.1/a2a", "version": "1.0.0", "capabilities": {}, "defaultInputModes": ["text/plain"],
 "defaultOutputModes": ["text/plain"], "skills": [{"id": "translate", "name": "Translate", "description": "Translate a text", "tags": ["language"]}]}`

// TestOpenAPIAgainstRealResponses drives two daemons through every
// documented operation and validates what goes over the wire.
func TestOpenAPIAgainstRealResponses(t *testing.T) {
	doc := loadOpenAPI(t)
	rec := newRecorder(t, doc)
	ctx := testContext(t)

	// In the DHT, so that find has providers to show.
	alice := startDaemon(t, inDHT(aliceConfig("")))
	bob := startDaemon(t, inDHT(nodetest.LoopbackConfig(), alice.n.Addrs()[0].String()))
	rec.wrap(alice.c)
	rec.wrap(bob.c)
	var out json.RawMessage
	call := func(d *daemon, method, path string, body any) error {
		t.Helper()
		var b any
		if body != nil {
			raw, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			b = json.RawMessage(raw)
		}
		if strings.HasPrefix(path, "/v1/imports?") {
			return d.c.call(ctx, method, path, b, nil) // 204, no body
		}
		return d.c.call(ctx, method, path, b, &out)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// The hello challenge, over TCP and without a token.
	helloReq := func(nonce string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+alice.srv.Addr()+helloPath+"?nonce="+nonce, nil)
		resp, err := rec.roundTrip(http.DefaultTransport, req)
		must(err)
		resp.Body.Close()
	}
	helloReq(strings.Repeat("ab", nonceBytes))
	helloReq("short")

	// The metrics, with the token in the header.
	metricsReq, _ := http.NewRequest(http.MethodGet, "http://"+alice.srv.Addr()+"/metrics", nil)
	metricsReq.Header.Set("Authorization", "Bearer "+tokenOf(t, alice.home))
	resp, err := rec.roundTrip(http.DefaultTransport, metricsReq)
	must(err)
	resp.Body.Close()

	// The document itself, served as it is kept.
	must(call(alice, http.MethodGet, "/v1/openapi.json", nil))
	if !bytes.Equal(out, bytes.TrimSpace(OpenAPIDocument)) {
		t.Error("GET /v1/openapi.json is not openapi.json")
	}

	for _, d := range []*daemon{alice, bob} {
		must(call(d, http.MethodGet, "/v1/status", nil))
		must(call(d, http.MethodGet, "/v1/caps", nil))
		must(call(d, http.MethodGet, "/v1/policy", nil))
	}

	// Alice's local agent: it answers echo with the parameters and
	// anything else with an error.
	aliceEvents, err := alice.c.Events(ctx)
	must(err)
	agentDone := make(chan struct{})
	go func() {
		defer close(agentDone)
		for {
			ev, err := aliceEvents.Next()
			if err != nil {
				return
			}
			if ev.Type != events.EventInvocation {
				continue
			}
			ans := events.InvocationAnswer{Result: ev.Invocation.Params}
			if ev.Invocation.Capability != "echo" {
				ans = events.InvocationAnswer{Error: &events.AgentError{Message: "this agent does only echo"}}
			}
			if err := alice.c.AnswerInvocation(ctx, ev.Invocation.ID, ans); err != nil {
				t.Errorf("answering %s: %v", ev.Invocation.ID, err)
			}
		}
	}()
	defer func() { aliceEvents.Close(); <-agentDone }()
	bobEvents, err := bob.c.Events(ctx)
	must(err)
	defer bobEvents.Close()

	must(call(alice, http.MethodPost, "/v1/caps", map[string]any{"name": "echo", "description": "Send the parameters back",
		"parameters": map[string]any{"type": "object", "required": []any{"say"}}, "categories": []any{"web"}}))
	must(call(alice, http.MethodPost, "/v1/caps", map[string]any{"name": "scratch", "description": "Removed again"}))
	must(call(alice, http.MethodPost, "/v1/caps", []any{map[string]any{"name": "scratch.two", "description": "Removed again"}}))
	must(call(alice, http.MethodGet, "/v1/document", nil))
	must(call(alice, http.MethodDelete, "/v1/caps/scratch", nil))
	must(call(alice, http.MethodDelete, "/v1/caps/scratch.two", nil))
	must(call(alice, http.MethodDelete, "/v1/caps/ping", nil))
	must(call(alice, http.MethodGet, "/v1/document", nil))
	must(call(bob, http.MethodPost, "/v1/connect", map[string]any{"addr": alice.n.Addrs()[0].String()}))
	must(call(bob, http.MethodGet, "/v1/peers", nil))
	must(call(alice, http.MethodPut, "/v1/policy/disclosure", map[string]any{"peer": bob.peerID(), "tier": "professional"}))
	must(call(alice, http.MethodPut, "/v1/policy/temperature", map[string]any{"peer": bob.peerID(), "max": "warm"}))
	must(call(alice, http.MethodGet, "/v1/seen?peer="+bob.peerID(), nil))
	must(call(alice, http.MethodGet, "/v1/seen?tier=close&level=2&temperature=hot&persona=work", nil))
	apiError(t, call(alice, http.MethodGet, "/v1/seen?tier=royal", nil), http.StatusBadRequest)

	var greeted converse.GreetResult
	must(call(bob, http.MethodPost, "/v1/greet", map[string]any{"peer": alice.peerID(), "disclosure": "professional", "temperature": "warm"}))
	must(json.Unmarshal(out, &greeted))
	waitFor(t, bobEvents, "alice's view", func(e events.Event) bool { return e.Type == events.EventPeerView && e.Peer == alice.peerID() })
	must(call(bob, http.MethodGet, "/v1/caps/"+alice.peerID(), nil))
	must(call(bob, http.MethodGet, "/v1/caps/"+alice.peerID()+"?refresh=true", nil))
	must(call(bob, http.MethodGet, "/v1/peers", nil))
	must(call(bob, http.MethodGet, "/v1/peers/"+alice.peerID(), nil))
	apiError(t, call(bob, http.MethodGet, "/v1/peers/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA", nil), http.StatusNotFound)
	must(call(bob, http.MethodGet, "/v1/conversations", nil))
	must(call(bob, http.MethodPost, "/v1/say", map[string]any{"conversation_id": greeted.ConversationID, "phase": "context", "text": "Hello Alice."}))
	must(call(bob, http.MethodPost, "/v1/send", map[string]any{"peer": alice.peerID(), "text": "A note."}))
	must(call(bob, http.MethodGet, "/v1/outbox", nil))

	must(call(bob, http.MethodPost, "/v1/invoke", map[string]any{"peer": alice.peerID(), "capability": "echo", "params": map[string]any{"say": "hi"}}))
	var res converse.InvokeResult
	if must(json.Unmarshal(out, &res)); fmt.Sprint(res.Result) != "map[say:hi]" {
		t.Errorf("echo answered %v", res.Result)
	}
	// Refused by the peer's agent, with the peer's explanation.
	err = call(bob, http.MethodPost, "/v1/invoke", map[string]any{"peer": alice.peerID(), "capability": "calendar.availability", "params": map[string]any{}})
	if e := apiError(t, err, http.StatusBadGateway); e.PeerError == nil {
		t.Errorf("a refusal without the peer's explanation: %+v", e)
	}
	apiError(t, call(alice, http.MethodPost, "/v1/invocations/inv:gone", map[string]any{"result": 1}), http.StatusNotFound)
	apiError(t, call(bob, http.MethodPost, "/v1/greet", map[string]any{"peer": alice.peerID(), "temperature": "tepid"}), http.StatusBadRequest)
	apiError(t, call(bob, http.MethodPost, "/v1/connect", map[string]any{"address": "x"}), http.StatusBadRequest)

	// Closing: the close phase is sent; a conversation that is not open
	// is not found.
	must(call(bob, http.MethodDelete, "/v1/conversations/"+url.PathEscape(greeted.ConversationID), nil))
	apiError(t, call(bob, http.MethodDelete, "/v1/conversations/conv:nope", nil), http.StatusNotFound)

	// The audit log, whole and by conversation.
	must(call(alice, http.MethodGet, "/v1/audit", nil))
	must(call(alice, http.MethodGet, "/v1/audit?peer="+bob.peerID(), nil))
	must(call(alice, http.MethodGet, "/v1/audit?conversation="+url.QueryEscape(greeted.ConversationID), nil))
	apiError(t, call(alice, http.MethodGet, "/v1/audit?conversation=conv:nope", nil), http.StatusNotFound)
	// Why alice answered bob's echo, and nothing for an unknown or malformed ID.
	must(call(alice, http.MethodGet, "/v1/audit/why/"+url.PathEscape(res.RequestID), nil))
	apiError(t, call(alice, http.MethodGet, "/v1/audit/why/msg:nope", nil), http.StatusNotFound)
	apiError(t, call(alice, http.MethodGet, "/v1/audit/why/"+url.PathEscape("msg nope"), nil), http.StatusBadRequest)
	// The tamper-evident log's proofs: a conversation's state and bundle,
	// the why page's inclusion, a receipt of what bob sent.
	must(call(alice, http.MethodGet, "/v1/audit/proof?conversation="+url.QueryEscape(greeted.ConversationID), nil))
	must(call(alice, http.MethodGet, "/v1/audit/proof?message="+url.QueryEscape(res.RequestID), nil))
	must(call(alice, http.MethodGet, "/v1/audit/bundle?conversation="+url.QueryEscape(greeted.ConversationID), nil))
	must(call(alice, http.MethodGet, "/v1/audit/receipt/"+url.PathEscape(res.RequestID), nil))
	apiError(t, call(alice, http.MethodGet, "/v1/audit/bundle", nil), http.StatusBadRequest)
	apiError(t, call(alice, http.MethodGet, "/v1/audit/proof?conversation=conv:nope", nil), http.StatusNotFound)

	// An outside agent, imported from a card on loopback.
	card := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, minimalCard)
	}))
	defer card.Close()
	must(call(bob, http.MethodPost, "/v1/imports", map[string]any{"url": card.URL + "/card"}))
	must(call(bob, http.MethodGet, "/v1/imports", nil))
	must(call(bob, http.MethodDelete, "/v1/imports?url="+url.QueryEscape(card.URL+"/card"), nil))
	apiError(t, call(bob, http.MethodDelete, "/v1/imports?url="+url.QueryEscape(card.URL+"/card"), nil), http.StatusNotFound)

	// Find: bob knows no DHT peer until his bootstrap dial completes, and
	// alice's records go out once she has met one: poll, as TestFind does.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ans FindAnswer
		err := call(bob, http.MethodGet, "/v1/find/calendar.availability?limit=5", nil)
		if err == nil {
			must(json.Unmarshal(out, &ans))
		}
		if len(ans.Providers) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("find never listed alice: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling observable state
	}
	apiError(t, call(bob, http.MethodGet, "/v1/find/Bad.Name", nil), http.StatusBadRequest)

	// Trust and introductions.
	must(call(alice, http.MethodGet, "/v1/trust", nil))
	must(call(alice, http.MethodGet, "/v1/trust/"+bob.peerID(), nil))
	must(call(alice, http.MethodPost, "/v1/trust/"+bob.peerID(), map[string]any{"verify": bob.n.ID().Fingerprint()}))
	must(call(alice, http.MethodGet, "/v1/trust", nil))
	apiError(t, call(alice, http.MethodPost, "/v1/trust/"+bob.peerID(), map[string]any{"verify": "SHA256:nope", "check": true}), http.StatusBadRequest)
	must(call(alice, http.MethodPost, "/v1/intros", map[string]any{"label": "Bob", "expires_seconds": 3600, "disclosure": "professional"}))
	var minted struct{ Token, ID string }
	must(json.Unmarshal(out, &minted))
	must(call(bob, http.MethodPost, "/v1/intros/accept", map[string]any{"token": minted.Token}))
	must(call(bob, http.MethodGet, "/v1/intros", nil))
	must(call(alice, http.MethodGet, "/v1/intros", nil))
	must(call(alice, http.MethodDelete, "/v1/intros/"+url.PathEscape(minted.ID), nil))
	apiError(t, call(alice, http.MethodDelete, "/v1/intros/nope", nil), http.StatusNotFound)

	// What bob holds beside what he would get; then, his key revoked, his
	// greeting refused and found in the record of refusals.
	var sees Seen
	must(call(alice, http.MethodGet, "/v1/seen?peer="+bob.peerID(), nil))
	if must(json.Unmarshal(out, &sees)); sees.Holds == nil || sees.Holds.Tier != "professional" || sees.Refused != nil {
		t.Errorf("what bob holds at alice: %+v, refused %+v", sees.Holds, sees.Refused)
	}
	must(call(alice, http.MethodPost, "/v1/trust/"+bob.peerID(), map[string]any{"revoke": true}))
	apiError(t, call(bob, http.MethodPost, "/v1/greet", map[string]any{"peer": alice.peerID()}), http.StatusBadGateway)
	must(call(alice, http.MethodGet, "/v1/seen?peer="+bob.peerID(), nil))
	if must(json.Unmarshal(out, &sees)); sees.Refused == nil || sees.Refused.Code != "key_revoked" {
		t.Errorf("bob revoked, /v1/seen says refused %+v", sees.Refused)
	}
	var refused RefusalList
	must(call(alice, http.MethodGet, "/v1/audit/refusals?code=key_revoked&peer="+bob.peerID(), nil))
	if must(json.Unmarshal(out, &refused)); len(refused.Refusals) == 0 || refused.Refusals[0].Peer != bob.peerID() {
		t.Errorf("the record of refusals after bob's refused greeting: %+v", refused)
	}
	must(call(alice, http.MethodGet, "/v1/audit/refusals?at="+url.QueryEscape(refused.Refusals[0].At.Format(time.RFC3339Nano)), nil))
	apiError(t, call(alice, http.MethodGet, "/v1/audit/refusals?day=yesterday", nil), http.StatusBadRequest)

	// Every documented operation answered with success at least once, and
	// the event types an exchange like this one produces were seen.
	seen := rec.exercised()
	for _, op := range doc.operations() {
		if doc.mounted(op) {
			continue // served by what the daemon mounts (x-mounted says which test exercises it)
		}
		if !slices.ContainsFunc(seen[op], func(s int) bool { return s/100 == 2 }) {
			t.Errorf("%s was not exercised with success (statuses %v): add a call to this test", op, seen[op])
		}
	}
	for _, ev := range []string{events.EventInvocation, events.EventPeerView, events.EventMessage, events.EventConversation, events.EventDocument} {
		if len(seen["event "+ev]) == 0 {
			t.Errorf("no %s event was read and validated", ev)
		}
	}
	t.Logf("validated: %v", seen)
}
