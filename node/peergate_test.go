package node

import (
	"context"
	"errors"
	"testing"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
)

// A stranger's greeting leaves its view in memory, not in the store file:
// after a restart it is gone. Once the owner makes the peer known (here, a
// disclosure tier above public; pinning or an introduction does the same),
// its next greeting persists the view.
func TestStrangersViewIsPersistedOnlyOnceKnown(t *testing.T) {
	alice := startDaemon(t, nil)
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	ctx := context.Background()
	if _, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{}); err != nil {
		t.Fatal(err)
	}
	if rec, err := alice.Store().Peer(bob.id.PeerID().String()); err != nil || rec.AgentID != bob.id.DID() {
		t.Fatalf("alice's memory of the stranger bob: %+v, %v", rec, err)
	}
	// bob asked alice himself (the owner's request): alice is known to bob.
	if !bob.TrustBook().Known(alice.id.PeerID().String()) {
		t.Fatal("a peer the owner queried is not known")
	}
	alice.Close()
	alice = restartDaemon(t, alice)
	if _, err := alice.Store().Peer(bob.id.PeerID().String()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the stranger's view after alice's restart: %v, want %v", err, store.ErrNotFound)
	}

	if err := alice.Policy().SetDisclosure("", bob.id.PeerID().String(), "professional"); err != nil {
		t.Fatal(err)
	}
	connect(t, bob, alice)
	// The first greeting leaves bob's view out (alice said she held it
	// before her restart); her answer says she does not, so it comes again.
	for range 2 {
		if _, err := bob.QueryCapabilities(ctx, alice.id.PeerID(), negotiate.Proposal{}); err != nil {
			t.Fatal(err)
		}
	}
	alice.Close()
	alice = restartDaemon(t, alice)
	if rec, err := alice.Store().Peer(bob.id.PeerID().String()); err != nil || rec.AgentID != bob.id.DID() {
		t.Fatalf("a known peer's view after a restart: %+v, %v", rec, err)
	}
}
