package node

import (
	"context"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// queryStreams lists the capabilities streams d holds to pid.
func queryStreams(d *testDaemon, pid peer.ID) []network.Stream {
	var out []network.Stream
	for _, c := range d.Host().Network().ConnsToPeer(pid) {
		for _, s := range c.GetStreams() {
			if s.Protocol() == wire.Capabilities {
				out = append(out, s)
			}
		}
	}
	return out
}

// Queries to one peer go one after another on one kept stream, and each
// is a query of its own that passed the responder's door: its greeting
// received and its answer sent are in the responder's audit log under
// the query's own conversation.
func TestQueriesShareOneStream(t *testing.T) {
	alice, bob := startDaemon(t, nil), startDaemon(t, nil)
	connect(t, bob, alice)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var kept string
	seen := map[string]bool{}
	for i := range 3 {
		r, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{})
		if err != nil {
			t.Fatalf("query %d: %v", i+1, err)
		}
		if seen[r.ConversationID] {
			t.Fatalf("query %d reused conversation %s", i+1, r.ConversationID)
		}
		seen[r.ConversationID] = true
		streams := queryStreams(bob, alice.id.PeerID())
		if len(streams) != 1 {
			t.Fatalf("after query %d Bob holds %d query streams to Alice, want the one kept", i+1, len(streams))
		}
		if id := streams[0].ID(); kept == "" {
			kept = id
		} else if id != kept {
			t.Errorf("query %d went on stream %s, want the kept %s", i+1, id, kept)
		}
		entries, err := alice.Audit().Entries(r.ConversationID)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2 || entries[0].Direction != gossip.Received || entries[1].Direction != gossip.Sent ||
			entries[0].Message.Headers.Phase != gossip.PhaseGreeting {
			t.Fatalf("query %d in Alice's audit log: %d entries, want the greeting received then the answer sent", i+1, len(entries))
		}
	}
}

// A kept stream the responder closed (idle, or a daemon that answers one
// query per stream) is not a failed query: the next query goes on a new
// stream, which is kept in its place.
func TestQueryAfterKeptStreamClosed(t *testing.T) {
	alice, bob := startDaemon(t, nil), startDaemon(t, nil)
	connect(t, bob, alice)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	before := queryStreams(bob, alice.id.PeerID())
	if len(before) != 1 {
		t.Fatalf("Bob holds %d query streams to Alice after a query, want the one kept", len(before))
	}
	// Alice closes her side, as a responder does with an idle stream.
	at := queryStreams(alice, bob.id.PeerID())
	if len(at) != 1 {
		t.Fatalf("Alice holds %d query streams from Bob, want 1", len(at))
	}
	at[0].Close()
	if _, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatalf("query after Alice closed the kept stream: %v", err)
	}
	after := queryStreams(bob, alice.id.PeerID())
	if len(after) != 1 || after[0].ID() == before[0].ID() {
		t.Errorf("after the second query Bob holds %d query streams, want one new kept stream", len(after))
	}
}
