package gossip

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
)

// A clock that steps back over midnight (a laptop waking, an NTP step)
// makes the log record into a day whose tree it left: the entries are
// recorded, each in its day's file, and the log verifies, every record
// matched, every received message's signature checked.
func TestProvenLogVerifiesAcrossAClockStepBack(t *testing.T) {
	owner, _ := identity.Generate(nil)
	peer, _ := identity.Generate(nil)
	p := &provenLog{dir: t.TempDir(), owner: owner, peer: peer, conv: auditConvID}
	var now atomic.Int64
	now.Store(testNow.UnixNano()) // 23:58:12
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	a, err := OpenAuditLog(p.dir, WithSigner(owner), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	seq := int64(0)
	record := func(n int) {
		t.Helper()
		for range n {
			seq++
			dir, signer, other := Received, peer, owner
			if seq%2 == 0 {
				dir, signer, other = Sent, owner, peer
			}
			m := auditMessage(t, signer, other, p.conv, seq, "")
			if err := a.Record(AuditEntry{At: clock(), Direction: dir, Peer: peer.PeerID().String(), Transport: "libp2p", Message: m}); err != nil {
				t.Fatalf("recording entry %d at %s: %v", seq, clock(), err)
			}
		}
	}
	record(3)
	now.Add(int64(time.Hour)) // 00:58:12 the next day
	record(3)
	if err := a.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	now.Add(-int64(time.Hour)) // back to 23:58:12
	record(3)
	now.Add(int64(time.Hour))
	record(1)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyAuditLog(p.dir, VerifyOptions{Trusted: p.trusted})
	if err != nil {
		t.Fatalf("verify after the clock stepped back over midnight: %v (%+v)", err, rep)
	}
	if rep.Days != 2 || rep.Pending != 0 || rep.Received != 5 {
		t.Errorf("report %+v, want 2 days, nothing pending, the 5 received messages verified", rep)
	}
	t.Logf("report: %+v", rep)
}
