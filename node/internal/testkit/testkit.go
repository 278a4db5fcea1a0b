// Package testkit holds the small helpers the daemon's component tests
// share: fresh peer IDs, a document of twenty realistic capabilities, a
// readable list of a view's capabilities, and polling until a condition
// holds. It is imported by tests only; starting a daemon is
// node/nodetest's.
package testkit

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/libp2p/go-libp2p/core/peer"
)

// NewPeerID is a fresh key's peer ID.
func NewPeerID(t testing.TB) peer.ID {
	t.Helper()
	id, err := identity.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return id.PeerID()
}

// TwentyCapabilities is a document's capabilities as the benchmarks use
// them: twenty, each with parameters, an output schema, a condition, a
// price and a category (about 13 KB of JSON).
func TwentyCapabilities() []map[string]any {
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

// CapNames lists a view's capabilities, each marked + when eligible and -
// when not.
func CapNames(d *negotiate.Document) string {
	var s []string
	for _, c := range d.Capabilities {
		mark := "-"
		if c.Eligible != nil && *c.Eligible {
			mark = "+"
		}
		s = append(s, mark+c.Name)
	}
	return strings.Join(s, " ")
}

// WaitFor polls cond until it holds, failing the test after 15 s. It is
// for what the test cannot be told of directly (a background task's
// effect); what a test can wait on, it waits on.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitFirst reads ch until a value matches, for at most d, and returns
// it; the test fails when ch closes or d passes first. Event streams use
// it (nodetest.WaitEvent, and node's own tests, which cannot import
// nodetest).
func WaitFirst[T any](t testing.TB, d time.Duration, ch <-chan T, match func(T) bool) T {
	t.Helper()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				t.Fatal("event stream closed")
			}
			if match(v) {
				return v
			}
		case <-timeout.C:
			t.Fatalf("timed out after %s waiting for an event", d)
		}
	}
}
