package peerid

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func newPeerID(t *testing.T) peer.ID {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := crypto.UnmarshalEd25519PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	p, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// String is peer.ID.String, remembered: the same text for every ID, past
// the memo's bound and after eviction too.
func TestStringIsPeerIDString(t *testing.T) {
	for range 5000 {
		p := newPeerID(t)
		if got, want := String(p), p.String(); got != want {
			t.Fatalf("String = %q, want %q", got, want)
		}
	}
	if memo.Len() > 4096 {
		t.Fatalf("the memo holds %d IDs, over its bound of 4096", memo.Len())
	}
	first := newPeerID(t)
	if String(first) != first.String() || String(first) != first.String() {
		t.Fatal("a remembered ID reads back differently")
	}
}
