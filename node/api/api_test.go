package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/ifaced/ifaced/node/wire"
	"go.uber.org/goleak"
)

// daemon is a real daemon in a temporary home with its API and a client.
type daemon struct {
	n    *node.Node
	home config.Home
	srv  *Server
	c    *Client
}

func startDaemon(t *testing.T, cfg *config.Config) *daemon {
	t.Helper()
	return startDaemonWith(t, cfg, defaultTimeouts())
}

func startDaemonWith(t *testing.T, cfg *config.Config, to timeouts) *daemon {
	t.Helper()
	if cfg == nil {
		cfg = nodetest.LoopbackConfig()
	}
	h, id := nodetest.Home(t)
	n := nodetest.StartIn(t, cfg, h, id)
	srv, err := listen(n, h, cfg.API.Listen, nodetest.Logger(), to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := Dial(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &daemon{n: n, home: h, srv: srv, c: c}
}

func (d *daemon) peerID() string { return d.n.ID().PeerID().String() }

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// apiError asserts that err is a daemon error with the given status.
func apiError(t *testing.T, err error, status int) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != status {
		t.Fatalf("got %v (%#v), want an API error with status %d", err, e, status)
	}
	return e
}

// aliceConfig offers ping, a capability for professionals and a hidden
// one; bob, once known, may be granted professional.
func aliceConfig(bob string) *config.Config {
	c := nodetest.LoopbackConfig()
	c.Identity.Display = "Alice's agent"
	c.Capabilities = []map[string]any{
		{"name": "ping", "description": "Respond to connectivity tests"},
		{"name": "calendar.availability", "description": "Share calendar availability windows",
			"conditions": map[string]any{"min_disclosure": "professional", "min_auth_level": 1}},
		{"name": "diary.read", "description": "Read the diary", "advertise": "when-eligible",
			"conditions": map[string]any{"min_disclosure": "close"}},
	}
	c.Disclosure.Personas = map[string]map[string]string{"default": {bob: "professional"}}
	return c
}

// waitFor reads events until one matches, failing at the stream's end.
func waitFor(t *testing.T, s *EventStream, what string, match func(events.Event) bool) events.Event {
	t.Helper()
	for {
		ev, err := s.Next()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(ev) {
			return ev
		}
	}
}

func capability(t *testing.T, d *negotiate.Document, name string) *negotiate.Capability {
	t.Helper()
	c, ok := d.Capability(name)
	if !ok {
		t.Fatalf("document seq %d has no %s", d.Seq, name)
	}
	return c
}

func TestStatus(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := testContext(t)
	st, err := d.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := d.n.ID()
	if st.PeerID != id.PeerID().String() || st.DID != id.DID() || st.Fingerprint != id.Fingerprint() || st.Home != d.home.Dir {
		t.Errorf("status names %+v, want the daemon's identity", st)
	}
	if st.Seq != 1 || st.Capabilities != len(config.StandardCapabilities()) || st.Conversations != 0 || st.ConnectedPeers != 0 {
		t.Errorf("status counts %+v", st)
	}
	if len(st.Addrs) == 0 || !strings.HasSuffix(st.Addrs[0], "/p2p/"+st.PeerID) || st.API != d.srv.Addr() || st.UptimeSeconds < 0 {
		t.Errorf("status addresses %+v", st)
	}
	doc, err := d.c.Document(ctx)
	if err != nil || doc.Seq != 1 || doc.Signature == nil || len(doc.Capabilities) != st.Capabilities {
		t.Fatalf("own document: %+v %v", doc, err)
	}
	if err := doc.Verify(id.PublicKey()); err != nil {
		t.Errorf("own document does not verify: %v", err)
	}
}

// TestTwoDaemons drives a whole exchange through the API: connect, greet,
// the peer's view with what is missing, a capability change the peer is
// told about, a message, and the audit log.
func TestTwoDaemons(t *testing.T) {
	bob := startDaemon(t, nil)
	alice := startDaemon(t, aliceConfig(bob.peerID()))
	ctx := testContext(t)

	pid, err := bob.c.Connect(ctx, alice.n.Addrs()[0].String())
	if err != nil || pid != alice.peerID() {
		t.Fatalf("connect: %q %v", pid, err)
	}
	peers, err := bob.c.Peers(ctx)
	if err != nil || len(peers) != 1 || peers[0].PeerID != alice.peerID() || !peers[0].Connected || peers[0].Cached {
		t.Fatalf("peers after connect: %+v %v", peers, err)
	}

	aliceEvents, err := alice.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer aliceEvents.Close()
	bobEvents, err := bob.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bobEvents.Close()

	// Alice would grant bob professional; he asks for public only, so the
	// calendar is out of his reach and the view says why.
	res, err := bob.c.Greet(ctx, GreetRequest{Peer: alice.peerID(), Disclosure: "public"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ConversationID == "" || res.Peer != alice.peerID() || res.GrantedToUs.Disclosure != "public" || res.GrantedToUs.DisclosureOutcome != negotiate.OutcomeAccepted {
		t.Fatalf("greet: %+v", res)
	}
	caps, err := bob.c.PeerCapabilities(ctx, alice.peerID(), false)
	if err != nil {
		t.Fatal(err)
	}
	if caps.Source != SourceCache || caps.Seq != 1 || caps.Display != "Alice's agent" || caps.Stale || caps.GrantedToUs == nil || caps.GrantedToUs.Disclosure != "public" {
		t.Errorf("cached view: %+v", caps)
	}
	if _, hidden := caps.View.Capability("diary.read"); hidden {
		t.Error("bob sees the hidden diary.read")
	}
	if c := capability(t, caps.View, "ping"); c.Eligible == nil || !*c.Eligible {
		t.Errorf("ping: eligible %v, want true", c.Eligible)
	}
	cal := capability(t, caps.View, "calendar.availability")
	if cal.Eligible == nil || *cal.Eligible || len(cal.Unmet) != 1 {
		t.Fatalf("calendar.availability: eligible %v, unmet %+v", cal.Eligible, cal.Unmet)
	}
	if u := cal.Unmet[0]; u.Condition != "min_disclosure" || u.Required != "professional" || u.Have != "public" || u.HowToMeet == "" {
		t.Errorf("unmet: %+v", u)
	}
	// A refresh asks again under the context negotiated, so it finds the
	// same document rather than a conflicting view of seq 1.
	fresh, err := bob.c.PeerCapabilities(ctx, alice.peerID(), true)
	if err != nil || fresh.Source != SourceQuery || fresh.Seq != 1 {
		t.Fatalf("refresh: %+v %v", fresh, err)
	}
	// A display name is the peer's own claim: it names nobody.
	_, err = bob.c.PeerCapabilities(ctx, "Alice's agent", false)
	apiError(t, err, http.StatusNotFound)

	// A change reaches the peer in conversation.
	doc, err := alice.c.AddCapability(ctx, json.RawMessage(`{"name": "weather.forecast", "description": "Forecast the weather"}`))
	if err != nil || doc.Seq != 2 {
		t.Fatalf("caps add: %+v %v", doc, err)
	}
	waitFor(t, bobEvents, "alice's view at seq 2", func(e events.Event) bool {
		return e.Type == events.EventPeerView && e.Peer == alice.peerID() && strings.HasPrefix(e.Detail, "seq 2,")
	})
	caps, err = bob.c.PeerCapabilities(ctx, alice.peerID(), false)
	if err != nil || caps.Seq != 2 {
		t.Fatalf("view after the change: %+v %v", caps, err)
	}
	capability(t, caps.View, "weather.forecast")

	doc, err = alice.c.RemoveCapability(ctx, "weather.forecast")
	if err != nil || doc.Seq != 3 {
		t.Fatalf("caps remove: %+v %v", doc, err)
	}
	if _, ok := doc.Capability("weather.forecast"); ok {
		t.Error("weather.forecast is still in the document")
	}
	waitFor(t, bobEvents, "alice's view at seq 3", func(e events.Event) bool {
		return e.Type == events.EventPeerView && e.Peer == alice.peerID() && strings.HasPrefix(e.Detail, "seq 3,")
	})

	convs, err := bob.c.Conversations(ctx)
	if err != nil || !slices.ContainsFunc(convs, func(c converse.ConversationInfo) bool { return c.ID == res.ConversationID }) {
		t.Fatalf("conversations: %+v %v", convs, err)
	}
	m, err := bob.c.Say(ctx, SayRequest{ConversationID: res.ConversationID, Phase: gossip.PhaseContext, Text: "Hello Alice.\nSecond line."})
	if err != nil || m.Headers.Phase != gossip.PhaseContext || m.Body.Text != "Hello Alice.\nSecond line." {
		t.Fatalf("say: %+v %v", m, err)
	}
	// By peer: its newest open conversation, the only one here.
	if m2, err := bob.c.Say(ctx, SayRequest{Peer: alice.peerID(), Phase: gossip.PhaseContext, Text: "By peer."}); err != nil || m2.Headers.ConversationID != res.ConversationID {
		t.Fatalf("say by peer: %+v %v, want it in %s", m2, err, res.ConversationID)
	}
	_, err = alice.c.Say(ctx, SayRequest{Peer: alice.peerID(), Phase: gossip.PhaseContext, Text: "to myself"})
	apiError(t, err, http.StatusNotFound) // no open conversation with that peer
	got := waitFor(t, aliceEvents, "bob's message", func(e events.Event) bool {
		return e.Type == events.EventMessage && e.Message != nil && e.Message.Headers.MessageID == m.Headers.MessageID
	})
	if got.ConversationID != res.ConversationID || got.Peer != bob.peerID() {
		t.Errorf("message event: %+v", got)
	}

	list, err := alice.c.AuditConversations(ctx, "")
	if err != nil || !slices.ContainsFunc(list.Conversations, func(c gossip.AuditConversation) bool { return c.ID == res.ConversationID }) {
		t.Fatalf("audit list: %+v %v", list, err)
	}
	// The conversation, and the exchange of the refresh, which is recorded too.
	if l, err := alice.c.AuditConversations(ctx, bob.peerID()); err != nil || len(l.Conversations) != 2 {
		t.Errorf("audit list for bob: %+v %v", l, err)
	}
	if l, err := alice.c.AuditConversations(ctx, alice.peerID()); err != nil || len(l.Conversations) != 0 {
		t.Errorf("audit list for a peer alice never met: %+v %v", l, err)
	}
	entries, err := alice.c.AuditEntries(ctx, res.ConversationID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(entries.Entries, func(e gossip.AuditEntry) bool {
		return e.Direction == gossip.Received && e.Message.Headers.MessageID == m.Headers.MessageID
	}) {
		t.Errorf("alice's audit of %s lacks bob's message: %+v", res.ConversationID, entries.Entries)
	}
	if _, err := os.Stat(entries.File); err != nil || !strings.HasSuffix(entries.File, ".md") {
		t.Errorf("audit file %q: %v", entries.File, err)
	}
}

func TestErrors(t *testing.T) {
	d := startDaemon(t, nil)
	ctx := testContext(t)
	for _, tc := range []struct {
		name, body, field string
	}{
		{"misspelled member", `{"name": "x", "descripton": "typo"}`, "descripton"},
		{"bad name", `{"name": "Bad Name", "description": "d"}`, "name"},
		{"bad condition", `{"name": "y", "description": "d", "conditions": {"min_disclosure": "profesional"}}`, "conditions.min_disclosure"},
		{"no description", `{"name": "z"}`, "description"},
		{"cut short", `{"name": `, "name"},
		{"view member", `{"name": "w", "description": "d", "eligible": true}`, "eligible"},
		{"list, the second without a description", `[{"name": "a.b", "description": "d"}, {"name": "c.d"}]`, "[1].description"},
		{"list, misspelled member", `[{"name": "a.b", "descrption": "d"}]`, "[0].descrption"},
		{"list, a name in it twice", `[{"name": "a.b", "description": "d"}, {"name": "a.b", "description": "d"}]`, "[1].name"},
		{"empty list", `[]`, ""},
	} {
		_, err := d.c.AddCapability(ctx, json.RawMessage(tc.body))
		e := apiError(t, err, http.StatusBadRequest)
		if e.Field != tc.field || e.Code != CodeBadRequest || (tc.field != "" && !strings.Contains(e.Message, tc.field)) {
			t.Errorf("%s: %+v, want field %q named", tc.name, e, tc.field)
		}
	}
	_, err := d.c.AddCapability(ctx, json.RawMessage(`{"name": "ping", "description": "again"}`))
	if e := apiError(t, err, http.StatusConflict); e.Field != "name" || !strings.Contains(e.Message, `"ping"`) {
		t.Errorf("duplicate: %+v", e)
	}
	if doc, _ := d.c.Document(ctx); doc.Seq != 1 {
		t.Errorf("refused changes moved the seq to %d", doc.Seq)
	}
	_, err = d.c.RemoveCapability(ctx, "nonexistent")
	apiError(t, err, http.StatusNotFound)

	_, err = d.c.Say(ctx, SayRequest{ConversationID: "conv:nope", Phase: gossip.PhaseContext, Text: "hi"})
	apiError(t, err, http.StatusNotFound)
	_, err = d.c.Say(ctx, SayRequest{ConversationID: "conv:nope", Phase: "chatter", Text: "hi"})
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "phase" {
		t.Errorf("bad phase: %+v", e)
	}
	_, err = d.c.AuditEntries(ctx, "conv:nope")
	apiError(t, err, http.StatusNotFound)

	_, err = d.c.Greet(ctx, GreetRequest{})
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "peer" {
		t.Errorf("greet without a peer: %+v", e)
	}
	other := startDaemon(t, nil)
	_, err = d.c.Greet(ctx, GreetRequest{Peer: other.peerID(), Temperature: "tepid"})
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "temperature" {
		t.Errorf("greet with a bad temperature: %+v", e)
	}
	_, err = d.c.Greet(ctx, GreetRequest{Peer: other.peerID()}) // never connected: no address
	apiError(t, err, http.StatusNotFound)
	_, err = d.c.PeerCapabilities(ctx, "nobody-we-know", false)
	apiError(t, err, http.StatusNotFound)
	_, err = d.c.Connect(ctx, "/ip4/127.0.0.1/tcp/1")
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "addr" {
		t.Errorf("connect without /p2p: %+v", e)
	}

	var unknown struct{}
	err = d.c.call(ctx, http.MethodGet, "/v1/frobnicate", nil, &unknown)
	apiError(t, err, http.StatusNotFound)
	err = d.c.call(ctx, http.MethodPost, "/v1/status", json.RawMessage(`{}`), &unknown)
	apiError(t, err, http.StatusMethodNotAllowed)
	err = d.c.call(ctx, http.MethodPost, "/v1/connect", json.RawMessage(`{"address": "x"}`), &unknown)
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "address" {
		t.Errorf("unknown member: %+v", e)
	}
	big := json.RawMessage(`{"addr": "` + strings.Repeat("a", MaxBody) + `"}`)
	err = d.c.call(ctx, http.MethodPost, "/v1/connect", big, &unknown)
	apiError(t, err, http.StatusRequestEntityTooLarge)
}

func TestPeerFailures(t *testing.T) {
	body := wire.ErrorBody{Code: wire.CodeConditionsNotMet, Message: "not for you"}
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("greeting: %w", &wire.RemoteError{Peer: "p", Body: body}), http.StatusBadGateway, CodePeerError},
		{fmt.Errorf("greeting: %w", context.DeadlineExceeded), http.StatusGatewayTimeout, CodePeerTimeout},
		{fmt.Errorf("reading: %w", os.ErrDeadlineExceeded), http.StatusGatewayTimeout, CodePeerTimeout},
		{errors.New("stream reset"), http.StatusBadGateway, CodePeerFailed},
	} {
		e := peerFailure(tc.err)
		if e.Status != tc.status || e.Code != tc.code {
			t.Errorf("%v: %d %s, want %d %s", tc.err, e.Status, e.Code, tc.status, tc.code)
		}
		if tc.code == CodePeerError && (e.PeerError == nil || e.PeerError.Code != wire.CodeConditionsNotMet) {
			t.Errorf("%v: peer_error %+v, want the peer's body", tc.err, e.PeerError)
		}
	}
}

func TestTokenRequired(t *testing.T) {
	d := startDaemon(t, nil)
	for _, auth := range []string{"", "Bearer ", "Bearer " + strings.Repeat("0", 64), "Basic " + d.c.token, d.c.token} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.srv.Addr()+"/v1/status", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e Error
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || err != nil || e.Code != CodeUnauthorized || e.Message == "" {
			t.Errorf("Authorization %q: %d %+v %v, want a JSON 401", auth, resp.StatusCode, e, err)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	d := startDaemon(t, nil)
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", "[::]:0", "example.com:0", "127.0.0.1"} {
		if s, err := Listen(d.n, d.home, addr, nodetest.Logger()); err == nil {
			s.Close()
			t.Errorf("Listen(%q) succeeded", addr)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/v1/status", nil)
	req.RemoteAddr = "192.0.2.1:4242"
	req.Header.Set("Authorization", "Bearer "+d.c.token)
	d.srv.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `"code":"forbidden"`) {
		t.Errorf("a non-loopback caller got %d %s", rec.Code, rec.Body)
	}
}

func TestFiles(t *testing.T) {
	d := startDaemon(t, nil)
	for _, f := range []string{TokenFile(d.home), AddrFile(d.home), SocketFile(d.home)} {
		st, err := os.Lstat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, st.Mode(), err)
		}
	}
	if st, err := os.Lstat(SocketFile(d.home)); err != nil || !isSocket(st) || d.srv.Socket() != SocketFile(d.home) {
		t.Errorf("api.sock: %v %v (server: %q), want a socket", st.Mode(), err, d.srv.Socket())
	}
	if d.c.where != SocketFile(d.home) {
		t.Errorf("the client talks to %s, want the socket", d.c.where)
	}
	tok, _ := os.ReadFile(TokenFile(d.home))
	if len(strings.TrimSpace(string(tok))) != 64 {
		t.Errorf("token %q is not 32 bytes in hex", tok)
	}
	addr, _ := os.ReadFile(AddrFile(d.home))
	if strings.TrimSpace(string(addr)) != d.srv.Addr() {
		t.Errorf("api.addr holds %q, the server listens on %s", addr, d.srv.Addr())
	}
	// A second server in the same home, while the first answers on the
	// socket, is refused.
	if s2, err := Listen(d.n, d.home, "127.0.0.1:0", nodetest.Logger()); !errors.Is(err, errDaemonRunning) {
		if s2 != nil {
			s2.Close()
		}
		t.Errorf("a second Listen while the first runs: %v, want %v", err, errDaemonRunning)
	}
	if now, _ := os.ReadFile(TokenFile(d.home)); string(now) != string(tok) {
		t.Error("a second Listen that was refused replaced the running daemon's token")
	}
	if _, err := d.c.Status(testContext(t)); err != nil {
		t.Errorf("the first daemon after a refused second Listen: %v", err)
	}
	d.srv.Close()
	for _, f := range []string{AddrFile(d.home), SocketFile(d.home)} {
		if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Close: %v", f, err)
		}
	}
	// A restart makes a new token, and the old one opens nothing.
	s2, err := Listen(d.n, d.home, "127.0.0.1:0", nodetest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	again, _ := os.ReadFile(TokenFile(d.home))
	if string(again) == string(tok) {
		t.Error("the token did not change on a restart")
	}
	for _, c := range []struct {
		tok  string
		want int
	}{{strings.TrimSpace(string(tok)), http.StatusUnauthorized}, {strings.TrimSpace(string(again)), http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+s2.Addr()+"/v1/status", nil)
		req.Header.Set("Authorization", "Bearer "+c.tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("status with token %s…: %d, want %d", c.tok[:8], resp.StatusCode, c.want)
		}
	}
	// A home others may write is refused by the client: they could have
	// made the socket.
	os.Chmod(d.home.Dir, 0o770)
	if c, err := Dial(d.home); !errors.Is(err, config.ErrBadPermissions) || !strings.Contains(err.Error(), "chmod go-w "+d.home.Dir) {
		if c != nil {
			c.Close()
		}
		t.Errorf("Dial on a group-writable home: %v", err)
	}
	os.Chmod(d.home.Dir, 0o700)
	// A token others can read is refused by the client.
	os.Chmod(TokenFile(d.home), 0o644)
	if c, err := Dial(d.home); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		if c != nil {
			c.Close()
		}
		t.Errorf("Dial with a 0644 token: %v", err)
	}
}

// impostor is a process that took over the port a daemon that died left
// in api.addr: it answers every request, hello included (with a proof it
// cannot compute), and records the Authorization headers it is sent.
type impostor struct {
	ln    net.Listener
	mu    sync.Mutex
	conns int
	paths []string
	auth  []string
}

func newImpostor(t *testing.T) *impostor {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	im := &impostor{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			im.mu.Lock()
			im.conns++
			im.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					im.mu.Lock()
					im.paths = append(im.paths, req.URL.Path)
					if a := req.Header.Get("Authorization"); a != "" {
						im.auth = append(im.auth, a)
					}
					im.mu.Unlock()
					body := `{"proof":"` + strings.Repeat("00", 32) + `"}`
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				}
			}()
		}
	}()
	return im
}

func (im *impostor) seen() (conns int, paths, auth []string) {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.conns, slices.Clone(im.paths), slices.Clone(im.auth)
}

// TestStaleAddrImpostor: after an unclean stop, api.addr names a port
// another process now listens on. The client never sends it the token:
// with the stale socket left beside it, the client does not go there at
// all; without a socket, the process cannot answer the hello.
func TestStaleAddrImpostor(t *testing.T) {
	d := startDaemon(t, nil)
	tok := d.c.token
	d.c.Close()
	// An unclean stop: the socket and api.addr stay behind. The listeners
	// are closed here too: Close closes only those Serve has begun to
	// track, and on a busy machine a Serve goroutine may not have run yet,
	// which left the socket accepting (the kernel's backlog) and Dial
	// connected.
	d.srv.srv.Close()
	for _, ln := range d.srv.listeners {
		ln.Close()
	}
	im := newImpostor(t)
	if err := writeAddr(AddrFile(d.home), im.ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(SocketFile(d.home)); err != nil || !isSocket(st) {
		t.Fatalf("the stale socket: %v", err)
	}
	if _, err := Dial(d.home); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Dial with a stale socket: %v, want ErrNoDaemon", err)
	}
	if n, _, _ := im.seen(); n != 0 {
		t.Errorf("with the stale socket there, the impostor got %d connections", n)
	}

	os.Remove(SocketFile(d.home))
	c, err := Dial(d.home)
	if err == nil { // as the command line would go on
		c.Status(testContext(t))
		c.Close()
	}
	if !errors.Is(err, ErrNoDaemon) || !errors.Is(err, ErrUnproven) || !strings.Contains(err.Error(), im.ln.Addr().String()) {
		t.Errorf("Dial with an impostor on the stale address: %v, want ErrNoDaemon and ErrUnproven naming its address", err)
	}
	n, paths, auth := im.seen()
	if n == 0 || !slices.Equal(paths, []string{helloPath}) {
		t.Errorf("the impostor saw %d connections and requests %q, want only the hello", n, paths)
	}
	if len(auth) > 0 {
		t.Errorf("the impostor received Authorization headers %q", auth)
	}
	for _, a := range auth {
		if strings.Contains(a, tok) {
			t.Errorf("the impostor received the token")
		}
	}
}

// TestStaleSocketReplaced: a daemon starting where one died replaces the
// socket it left, and the client reaches the new one.
func TestStaleSocketReplaced(t *testing.T) {
	d := startDaemon(t, nil)
	d.c.Close()
	d.srv.srv.Close() // unclean: api.sock and api.addr stay
	// As a crash would, stop listening now: srv.Close closes only the
	// listeners its Serve goroutines have reached, and on a busy machine
	// the socket's may not have started yet.
	for _, ln := range d.srv.listeners {
		ln.Close()
	}
	s, err := Listen(d.n, d.home, "127.0.0.1:0", nodetest.Logger())
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer s.Close()
	c, err := Dial(d.home)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(testContext(t)); err != nil || c.where != SocketFile(d.home) {
		t.Errorf("status through %s: %v", c.where, err)
	}
	// Something else than a socket there is not replaced.
	s.Close()
	os.WriteFile(SocketFile(d.home), []byte("x"), 0o600)
	if s, err := Listen(d.n, d.home, "127.0.0.1:0", nodetest.Logger()); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Listen over a regular file at api.sock: %v", err)
	}
}

// TestTCPAfterProof: without a socket the client reaches the daemon over
// TCP once it has proved itself, on every connection it opens.
func TestTCPAfterProof(t *testing.T) {
	d := startDaemon(t, nil)
	os.Remove(SocketFile(d.home)) // as if the home's path were too long for one
	c, err := Dial(d.home)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.where != d.srv.Addr() {
		t.Fatalf("the client talks to %s, want %s", c.where, d.srv.Addr())
	}
	ctx := testContext(t)
	ev, err := c.Events(ctx) // holds one connection, so the status needs another
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if st, err := c.Status(ctx); err != nil || st.PeerID != d.peerID() {
		t.Errorf("status over TCP: %+v %v", st, err)
	}
	// The hello wants a nonce of the right size, and needs no token.
	resp, err := http.Get("http://" + d.srv.Addr() + helloPath + "?nonce=00")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("hello with a short nonce: %d", resp.StatusCode)
	}
}

func TestDialWithoutDaemon(t *testing.T) {
	h := config.Home{Dir: t.TempDir()}
	_, err := Dial(h)
	want := fmt.Sprintf(`no ifaced is running for %s (start one with "ifaced run")`, h.Dir)
	if !errors.Is(err, ErrNoDaemon) || err.Error() != want {
		t.Fatalf("Dial on an empty home: %v, want %q", err, want)
	}
	// A daemon that died leaves api.addr behind; nothing answers there.
	d := startDaemon(t, nil)
	addr := d.srv.Addr()
	d.srv.Close()
	if err := writeAddr(AddrFile(d.home), addr); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(d.home); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("Dial with a stale api.addr: %v", err)
	}
}

// TestEventStream checks that the stream outlives the server's read and
// write timeouts, keeps the connection alive with comments, and ends when
// the server closes.
func TestEventStream(t *testing.T) {
	to := defaultTimeouts()
	to.read, to.write, to.heartbeat = 200*time.Millisecond, 200*time.Millisecond, 50*time.Millisecond
	d := startDaemonWith(t, nil, to)
	ctx := testContext(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.srv.Addr()+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+d.c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	r := bufio.NewReader(resp.Body)
	start := time.Now()
	for beats := 0; beats < 3 || time.Since(start) < 3*to.write; {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %v and %d heartbeats: %v", time.Since(start), beats, err)
		}
		if line == ": heartbeat\n" {
			beats++
		}
	}

	// A document change arrives as an event in SSE form. The change is
	// made on the daemon, not through this server: its write timeout,
	// 200 ms here for the stream's sake, would bound the request too, and
	// a busy machine took longer (the client saw EOF).
	if _, err := d.n.Capabilities().Add([]negotiate.Capability{{Name: "x.y", Description: "d"}}); err != nil {
		t.Fatal(err)
	}
	var event string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "event: ") {
			event = line
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var ev events.Event
			if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Type != events.EventDocument || event != "event: document\n" {
				t.Fatalf("event %q %q: %+v %v", event, data, ev, err)
			}
			break
		}
	}

	s, err := d.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.srv.Close()
	for {
		if _, err := s.Next(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("the stream ended with %v, want io.EOF", err)
			}
			break
		}
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Errorf("the raw stream ended with %v", err)
	}
}

// TestNoGoroutineLeftBehind serves requests and an event stream, closes
// everything, and checks that nothing the API started still runs.
func TestNoGoroutineLeftBehind(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	bob := startDaemon(t, nil)
	alice := startDaemon(t, nil)
	ctx := testContext(t)
	evs, err := alice.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.c.Connect(ctx, alice.n.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.c.Greet(ctx, GreetRequest{Peer: alice.peerID()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, evs, "bob's greeting", func(e events.Event) bool { return e.Type == events.EventMessage })
	// One stream ends with its client, the other with the server.
	bobEvents, err := bob.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs.Close()
	for _, d := range []*daemon{alice, bob} {
		if err := d.srv.Close(); err != nil {
			t.Error(err)
		}
		d.n.Close()
		d.c.Close()
	}
	for {
		_, err := bobEvents.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("bob's stream ended with %v, want io.EOF", err)
			}
			break
		}
	}
	bobEvents.Close()
}

// TestLongHomeTCPOnly: a home whose path is too long for a Unix socket
// gets none, and the client reaches its daemon over TCP after the hello.
func TestLongHomeTCPOnly(t *testing.T) {
	d := startDaemon(t, nil)
	long := config.Home{Dir: filepath.Join(t.TempDir(), strings.Repeat("x", maxSocketPath))}
	if err := os.MkdirAll(long.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Listen(d.n, long, "127.0.0.1:0", nodetest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Socket() != "" {
		t.Errorf("a socket at %s", s.Socket())
	}
	c, err := Dial(long)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Status(testContext(t)); err != nil || c.where != s.Addr() {
		t.Errorf("status through %s: %v", c.where, err)
	}
}
