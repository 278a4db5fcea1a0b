package node

import "testing"

// idString is peer.ID.String, remembered: the same text for every ID, past
// the memo's bound and after eviction too.
func TestIDStringIsPeerIDString(t *testing.T) {
	for range 5000 {
		p := newPeerID(t)
		if got, want := idString(p), p.String(); got != want {
			t.Fatalf("idString = %q, want %q", got, want)
		}
	}
	if peerIDs.Len() > 4096 {
		t.Fatalf("the memo holds %d IDs, over its bound of 4096", peerIDs.Len())
	}
	first := newPeerID(t)
	if idString(first) != first.String() || idString(first) != first.String() {
		t.Fatal("a remembered ID reads back differently")
	}
}
