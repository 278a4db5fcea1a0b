// Package python holds a local agent for ifaced written in Python with
// only the standard library (agent.py), and the test that runs it against
// real daemons on loopback.
package python

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
)

// python3 finds the interpreter. Without one the test is skipped, unless
// IFACED_REQUIRE_INTEROP=1 (as in .ci/run), which makes it a failure.
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err == nil {
		return p
	}
	if os.Getenv("IFACED_REQUIRE_INTEROP") == "1" {
		t.Fatalf("python3 is not installed, and IFACED_REQUIRE_INTEROP=1 requires this test (it runs examples/python/agent.py): install python3 (.ci/run does, as root): %v", err)
	}
	t.Skipf("python3 is not installed: this test runs examples/python/agent.py against a daemon (set IFACED_REQUIRE_INTEROP=1 to fail instead): %v", err)
	return ""
}

// daemon is a real daemon in its own home, with its control API.
type daemon struct {
	n    *node.Node
	home config.Home
	c    *api.Client
}

func (d *daemon) peerID() string { return d.n.ID().PeerID().String() }

func startDaemon(t *testing.T, home string) *daemon {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.API.Listen = "127.0.0.1:0"
	cfg.Discovery.MDNS, cfg.Discovery.DHT, cfg.Discovery.Gossip = false, config.DHTOff, false
	h := config.Home{Dir: home}
	id, err := h.Init(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("IFACED_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	n, err := node.New(cfg, id, h, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	srv, err := api.Listen(n, h, cfg.API.Listen, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := api.Dial(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &daemon{n: n, home: h, c: c}
}

// syncBuffer collects the agent's stderr for the test log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPythonAgent runs agent.py as Alice's local agent, over the Unix
// socket and (with a home too long for one) over TCP after the hello: it
// offers its capabilities, Bob sees them in Alice's view and invokes one,
// the answer is the Python agent's, and when the agent stops its
// capabilities leave Alice's document and Bob's view.
func TestPythonAgent(t *testing.T) {
	py := python3(t)
	for _, tc := range []struct {
		name string
		home func(t *testing.T) string
	}{
		{"socket", func(t *testing.T) string { return filepath.Join(t.TempDir(), "alice") }},
		// No socket in a home whose path is over the limit (about 90 bytes).
		{"tcp", func(t *testing.T) string { return filepath.Join(t.TempDir(), strings.Repeat("x", 110)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			alice, bob := startDaemon(t, tc.home(t)), startDaemon(t, filepath.Join(t.TempDir(), "bob"))
			_, err := os.Stat(api.SocketFile(alice.home))
			if hasSocket := err == nil; hasSocket != (tc.name == "socket") {
				t.Fatalf("alice's home has a socket: %v, want %v", hasSocket, tc.name == "socket")
			}

			cmd := exec.CommandContext(ctx, py, "agent.py", "--home", alice.home.Dir)
			cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			stopped := false
			defer func() {
				if !stopped {
					cmd.Process.Kill()
					<-exited
				}
				if t.Failed() {
					t.Logf("agent.py's stderr:\n%s", stderr)
				}
			}()
			// The agent prints "ready" once it is subscribed and offers
			// its capabilities.
			lines := bufio.NewScanner(stdout)
			if !lines.Scan() || lines.Text() != "ready" {
				t.Fatalf("agent.py did not get ready (first line %q, %v)", lines.Text(), lines.Err())
			}

			if _, err := bob.c.Connect(ctx, alice.n.Addrs()[0].String()); err != nil {
				t.Fatal(err)
			}
			res, err := bob.c.Greet(ctx, api.GreetRequest{Peer: alice.peerID()})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"text.reverse", "text.count"} {
				if c, ok := res.View.Capability(name); !ok || c.Eligible == nil || !*c.Eligible {
					t.Fatalf("alice's view for bob: %s %+v", name, c)
				}
			}
			bobEvents, err := bob.c.Events(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer bobEvents.Close()

			got, err := bob.c.Invoke(ctx, api.InvokeRequest{Peer: alice.peerID(), Capability: "text.reverse",
				Params: json.RawMessage(`{"text": "stressed"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if r, _ := got.Result.(map[string]any); r["reversed"] != "desserts" {
				t.Errorf("text.reverse answered %+v, want the Python agent's {reversed: desserts}", got.Result)
			}
			got, err = bob.c.Invoke(ctx, api.InvokeRequest{Peer: alice.peerID(), Capability: "text.count",
				Params: json.RawMessage(`{"text": "one two three"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if r, _ := got.Result.(map[string]any); r["words"] != 3.0 || r["characters"] != 13.0 {
				t.Errorf("text.count answered %+v", got.Result)
			}
			// Parameters outside the agent's schema never reach it: the
			// daemon refuses them with its explanation.
			_, err = bob.c.Invoke(ctx, api.InvokeRequest{Peer: alice.peerID(), Capability: "text.reverse", Params: json.RawMessage(`{}`)})
			var e *api.Error
			if !errors.As(err, &e) || e.Status != http.StatusBadGateway || e.PeerError == nil || e.PeerError.Code != "invalid_params" {
				t.Errorf("invalid parameters: %v", err)
			}

			// A message asking for a reply (what an A2A client's text
			// message becomes) gets the agent's reply.
			reply, err := alice.n.Inbox().AskAnonymous("a2a", "127.0.0.1:1", "m1", "", "Hello, who are you?", nil)
			if s, _ := reply.(string); err != nil || !strings.Contains(s, `You said: "Hello, who are you?"`) || !strings.Contains(s, "text.reverse") {
				t.Errorf("a plain-text message: %v %v", reply, err)
			}
			// A peer's message in the conversation (ifaced say) is answered
			// in it, with a recommend; the recommend is not answered back.
			said, err := bob.c.Say(ctx, api.SayRequest{Peer: alice.peerID(), Phase: gossip.PhaseContext, Text: "Bob here. What can you do?"})
			if err != nil {
				t.Fatal(err)
			}
			for {
				ev, err := bobEvents.Next()
				if err != nil {
					t.Fatalf("waiting for alice's reply in %s: %v", said.Headers.ConversationID, err)
				}
				// (Earlier messages of alice's, the capability results,
				// come first on the stream.)
				if ev.Type != events.EventMessage || ev.Message == nil || ev.Peer != alice.peerID() || ev.Message.Headers.Phase != gossip.PhaseRecommend {
					continue
				}
				h := ev.Message.Headers
				if h.ConversationID != said.Headers.ConversationID || !strings.Contains(ev.Message.Body.Text, `You said: "Bob here. What can you do?"`) {
					t.Fatalf("alice's reply: %+v %q", h, ev.Message.Body.Text)
				}
				break
			}

			// Stopped, the agent withdraws its capabilities, and bob is told.
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			stopped = true
			if err := <-exited; err != nil {
				t.Fatalf("agent.py exited with %v", err)
			}
			doc := alice.n.Document()
			for _, name := range []string{"text.reverse", "text.count"} {
				if _, ok := doc.Capability(name); ok {
					t.Errorf("%s is still in alice's document (seq %d) after the agent stopped", name, doc.Seq)
				}
			}
			for {
				ev, err := bobEvents.Next()
				if err != nil {
					t.Fatalf("waiting for alice's view at seq %d: %v", doc.Seq, err)
				}
				if ev.Type == events.EventPeerView && ev.Peer == alice.peerID() && strings.HasPrefix(ev.Detail, "seq "+strconv.FormatUint(doc.Seq, 10)+",") {
					break
				}
			}
			view, err := bob.c.PeerCapabilities(ctx, alice.peerID(), false)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := view.View.Capability("text.reverse"); ok {
				t.Errorf("bob still sees text.reverse at seq %d", view.Seq)
			}
		})
	}
}
