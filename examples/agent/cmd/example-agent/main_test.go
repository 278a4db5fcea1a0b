package main

import (
	"bytes"
	"context"
	"log"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/nodetest"
)

// startDaemon runs a daemon and its control API in this process, in a
// fresh home on loopback, until the test ends.
func startDaemon(t *testing.T) (config.Home, *node.Node) {
	t.Helper()
	cfg := nodetest.LoopbackConfig()
	n, h := nodetest.Start(t, cfg)
	srv, err := api.Listen(n, h, cfg.API.Listen, nodetest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return h, n
}

// TestReplyToSay: with the example agent following Alice's daemon, a
// message Bob says to Alice (`ifaced say`) is answered in the
// conversation with a recommend that quotes it; a recommend is not
// answered. Before, the example agent was a webhook only, and a peer's
// plain message got no reply.
func TestReplyToSay(t *testing.T) {
	aliceHome, alice := startDaemon(t)
	bobHome, _ := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logged syncBuffer
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		follow(ctx, aliceHome, log.New(&logged, "", 0), 50*time.Millisecond)
	}()
	defer func() { cancel(); <-followed }()

	bob, err := api.Dial(bobHome)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	stream, err := bob.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if _, err := bob.Connect(ctx, alice.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	g, err := bob.Greet(ctx, api.GreetRequest{Peer: alice.ID().PeerID().String()})
	if err != nil {
		t.Fatal(err)
	}
	// The agent follows once its stream is open: say until it answers,
	// each time a new message (its log says when it follows).
	for !strings.Contains(logText(&logged), "following the daemon") {
		select {
		case <-ctx.Done():
			t.Fatalf("the agent never followed the daemon; its log:\n%s", logText(&logged))
		case <-time.After(20 * time.Millisecond): // another goroutine's log, read as it grows
		}
	}
	if _, err := bob.Say(ctx, api.SayRequest{ConversationID: g.ConversationID, Phase: gossip.PhaseContext, Text: "Lunch on Friday?"}); err != nil {
		t.Fatal(err)
	}
	for {
		e, err := stream.Next()
		if err != nil {
			t.Fatalf("no reply before the stream ended: %v; the agent's log:\n%s", err, logText(&logged))
		}
		if e.Type != events.EventMessage || e.Message == nil {
			continue
		}
		h := e.Message.Headers
		if h.Phase != gossip.PhaseRecommend {
			continue // the greeting's answer
		}
		if e.ConversationID != g.ConversationID {
			t.Fatalf("Bob got the recommend in %s, want it in %s", e.ConversationID, g.ConversationID)
		}
		if !strings.Contains(e.Message.Body.Text, `You said: "Lunch on Friday?"`) {
			t.Fatalf("the reply does not quote Bob: %q", e.Message.Body.Text)
		}
		break
	}
}

// TestToAnswer: which events the agent answers.
func TestToAnswer(t *testing.T) {
	msg := func(phase gossip.Phase, request []string) *gossip.Message {
		m := &gossip.Message{}
		m.Headers.Phase = phase
		if request != nil {
			m.Headers.Capabilities = &gossip.CapabilityHeaders{Request: request}
		}
		m.Body.Text = "hi"
		return m
	}
	for _, c := range []struct {
		name string
		e    events.Event
		want bool
	}{
		{"context", events.Event{Type: events.EventMessage, ConversationID: "conv:1", Message: msg(gossip.PhaseContext, nil)}, true},
		{"probe", events.Event{Type: events.EventMessage, ConversationID: "conv:1", Message: msg(gossip.PhaseProbe, nil)}, true},
		{"recommend (never answered: no endless talk)", events.Event{Type: events.EventMessage, ConversationID: "conv:1", Message: msg(gossip.PhaseRecommend, nil)}, false},
		{"a capability request (its invocation answers it)", events.Event{Type: events.EventMessage, ConversationID: "conv:1", Message: msg(gossip.PhaseProbe, []string{"echo"})}, false},
		{"an A2A message (its invocation answers it)", events.Event{Type: events.EventMessage, Message: msg(gossip.PhaseContext, nil), Invocation: &events.Invocation{}}, false},
		{"not a message", events.Event{Type: events.EventPeerView, ConversationID: "conv:1"}, false},
	} {
		if _, _, got := toAnswer(c.e); got != c.want {
			t.Errorf("%s: answered %v, want %v", c.name, got, c.want)
		}
	}
}

// syncBuffer is a log another goroutine writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func logText(s *syncBuffer) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
