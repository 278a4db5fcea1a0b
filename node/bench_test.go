package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// twentyCapabilities is the 20-capability document of DESIGN.md §8.
func twentyCapabilities() []map[string]any {
	var caps []map[string]any
	for i := 0; i < 20; i++ {
		caps = append(caps, map[string]any{
			"name":        fmt.Sprintf("tool%02d.run", i),
			"description": strings.Repeat("Does something useful with the input and explains the result. ", 4),
			"parameters": map[string]any{"type": "object", "required": []any{"text"}, "properties": map[string]any{
				"text":      map[string]any{"type": "string", "description": "The text to work on"},
				"max_words": map[string]any{"type": "integer", "minimum": 1, "default": 200},
				"language":  map[string]any{"type": "string", "enum": []any{"en", "es", "de", "fr"}},
			}},
			"output_schema": map[string]any{"type": "object", "properties": map[string]any{"result": map[string]any{"type": "string"}}},
			"conditions":    map[string]any{"min_auth_level": 1},
			"price":         map[string]any{"amount": "0.05", "currency": "USDC"},
			"categories":    []any{"web"},
		})
	}
	return caps
}

// BenchmarkGreeting measures a warm greeting — an open connection, both
// sides signing and verifying and auditing, 20-capability documents each
// way — beside its floor: a raw libp2p stream round trip on the same
// connection carrying the same bytes. Compare the two ns/op figures of one
// run: go test ./node -run '^$' -bench Greeting
func BenchmarkGreeting(b *testing.B) {
	cfg := func() *Config {
		c := loopbackConfig()
		c.Capabilities = twentyCapabilities()
		// The benchmark greets as fast as it can; the rate limit would refuse it.
		c.Rates = RatesConfig{Cool: 1 << 30, Warm: 1 << 30, Hot: 1 << 30}
		return c
	}
	alice := startDaemonB(b, cfg())
	bob := startDaemonB(b, cfg())
	ctx := context.Background()
	if _, err := bob.Connect(ctx, alice.Addrs()[0].String()); err != nil {
		b.Fatal(err)
	}
	if _, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{}); err != nil {
		b.Fatal(err)
	}
	// A warm greeting: Bob now holds Alice's view, and she answers without it.
	r, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{})
	if err != nil {
		b.Fatal(err)
	}
	// The floor carries what a warm greeting carries: one frame of the size
	// of Bob's greeting out, one of the size of Alice's answer back.
	entries, err := bob.Audit().Entries(r.ConversationID)
	if err != nil || len(entries) != 2 {
		b.Fatalf("audit: %d entries, %v", len(entries), err)
	}
	var out, back strings.Builder
	gossip.WriteMessage(&out, entries[0].Message)
	gossip.WriteMessage(&back, entries[1].Message)
	request, reply := []byte(out.String()), []byte(back.String())

	b.Run("ifaced", func(b *testing.B) {
		b.SetBytes(int64(len(request) + len(reply)))
		for b.Loop() {
			if _, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{}); err != nil {
				b.Fatal(err)
			}
		}
	})

	const echo = protocol.ID("/ifaced-bench/echo/1.0.0")
	alice.Host().SetStreamHandler(echo, func(s network.Stream) {
		defer s.Close()
		if _, err := gossip.ReadFrame(bufio.NewReader(s)); err != nil {
			s.Reset()
			return
		}
		s.Write(reply)
	})
	b.Run("raw-stream-floor", func(b *testing.B) {
		b.SetBytes(int64(len(request) + len(reply)))
		for b.Loop() {
			s, err := bob.Host().NewStream(ctx, alice.id.PeerID(), echo)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Write(request); err != nil {
				b.Fatal(err)
			}
			if _, err := gossip.ReadFrame(bufio.NewReader(s)); err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, s)
			s.Close()
		}
	})
}
