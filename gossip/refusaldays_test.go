package gossip

import (
	"slices"
	"testing"

	"github.com/ifaced/ifaced/identity"
)

// RefusalDays lists the days whose record of refusals holds something,
// newest first, and leaves out days of conversations only.
func TestRefusalDays(t *testing.T) {
	a, err := OpenAuditLog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if days, err := a.RefusalDays(); err != nil || len(days) != 0 {
		t.Fatalf("an empty log: %v, %v", days, err)
	}
	for _, at := range []int{0, 2} {
		if err := a.RecordRefusal(Refusal{At: testNow.AddDate(0, 0, at), Transport: "libp2p", Code: "key_revoked", Reason: "revoked"}); err != nil {
			t.Fatal(err)
		}
	}
	alice, _ := identity.Generate(nil)
	bob, _ := identity.Generate(nil)
	m := sampleMessage(alice, bob)
	if err := a.Record(AuditEntry{At: testNow.AddDate(0, 0, 1), Direction: Received, Peer: "bob", Transport: "libp2p", Message: m}); err != nil {
		t.Fatal(err)
	}
	days, err := a.RefusalDays()
	want := []string{testNow.AddDate(0, 0, 2).Format("2006-01-02"), testNow.Format("2006-01-02")}
	if err != nil || !slices.Equal(days, want) {
		t.Fatalf("RefusalDays: %v, %v; want %v", days, err, want)
	}
}
