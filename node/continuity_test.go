package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/alias"
	"github.com/ifaced/ifaced/node/keys"
	"github.com/ifaced/ifaced/node/mail"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Key continuity (DESIGN §4, node/wire "Key lifecycle"), through the
// daemon's door: each test is one rule, and fails on the code before it.

func succession(t *testing.T, old, next *identity.Identity, date time.Time) *identity.Succession {
	t.Helper()
	s, err := identity.NewSuccession(old, next, date, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func refusedWith(t *testing.T, what string, err error, code wire.Code, says string) {
	t.Helper()
	if got := wire.CodeOf(err); got != code || !strings.Contains(err.Error(), says) {
		t.Errorf("%s: %v (%s), want %s saying %q", what, err, got, code, says)
	}
}

// TestRetiredKeyCannotTakeFromItsSuccessor: bob rotated and alice
// followed. Whoever holds bob's old key signs a revocation of it dated
// before the succession, and a stranger carries it: the old key is
// revoked, and nothing else — the successor keeps its level and grants,
// the old key cannot make another succession, and bob's own later `ifaced
// key revoke` is taken and recorded as his.
func TestRetiredKeyCannotTakeFromItsSuccessor(t *testing.T) {
	bob := startDaemon(t, tcpOnly(loopbackConfig()))
	alice := startDaemon(t, aliceConfig(bob.pid()))
	connect(t, bob, alice)
	greet(t, bob, alice)
	if _, err := alice.TrustBook().PinKey(bob.pid(), bob.ID().Fingerprint()); err != nil {
		t.Fatal(err)
	}
	events, stop := alice.Subscribe()
	defer stop()
	oldKey := bob.id
	bob2, rot := rotate(t, bob, time.Hour)
	keyEvent(t, events, bob2.pid())

	backdated := revocation(t, oldKey, oldKey.KeyID(), rot.Statement.DateTime().Add(-time.Hour))
	carrier := thief2(t)
	if err := admitStatement(alice, statementMessage(t, carrier, alice.pid(), keys.StatementPart(keys.PartKeyRevocation, backdated))); err != nil {
		t.Fatalf("the back-dated revocation: %v", err)
	}
	e := keyEvent(t, events, oldKey.PeerID())
	if !strings.Contains(e.Detail, "keeps what it was given") || !strings.Contains(e.Detail, "signed by the key itself") {
		t.Errorf("alice was told %q, want the successor kept and who signed", e.Detail)
	}
	if err := alice.trust.KeyRevoked(oldKey.PeerID()); !errors.Is(err, wire.ErrKeyRevoked) {
		t.Errorf("the old key after its revocation: %v", err)
	}
	if err := alice.trust.KeyRevoked(bob2.pid()); err != nil {
		t.Errorf("the successor after a revocation of its old key: %v", err)
	}
	if info := alice.TrustBook().Peer(bob2.pid()); info.Level != conditions.Verified || info.RevokedBy != "" {
		t.Fatalf("the successor after a revocation of its old key: %s", brief(info))
	}
	r := greet(t, bob2, alice)
	if r.GrantedToUs.Disclosure != "professional" || r.GrantedToUs.AuthLevel != conditions.Verified {
		t.Fatalf("the successor is granted %+v; want professional at level 2, as before", r.GrantedToUs)
	}
	// The old key cannot make another succession.
	thief := thief2(t)
	err := admitStatement(alice, statementMessage(t, thief, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, oldKey, thief, time.Now()))))
	refusedWith(t, "a second succession from the retired key", err, wire.CodeKeyStatementRefused, "already succeeded by "+bob2.pid().String())

	// Bob's own revocation of his old key still works: taken, and
	// recorded as signed by its successor.
	stop()
	events, stop = alice.Subscribe()
	defer stop()
	bob2.Close()
	if _, err := keys.RevokeOldKey(bob2.home, "", "sold the old laptop", time.Now()); err != nil {
		t.Fatal(err)
	}
	bob3 := restartDaemon(t, bob2)
	e = keyEvent(t, events, oldKey.PeerID())
	if !strings.Contains(e.Detail, "signed by its successor") {
		t.Errorf("alice was told %q, want the revocation by the successor", e.Detail)
	}
	if info := alice.TrustBook().Peer(oldKey.PeerID()); info.RevokedBy != store.KeySignedBySuccessor || info.Level != conditions.NoLevel {
		t.Errorf("the old key after bob's revocation: revoked by %q, level %s", info.RevokedBy, info.Level)
	}
	if info := alice.TrustBook().Peer(bob3.pid()); info.Level != conditions.Verified {
		t.Errorf("the successor after bob's revocation of the old key: %s", brief(info))
	}
}

// TestOwnerRevokedKeyPassesNothing: the owner revoked X, which had a
// tier, a temperature cap, a pin and an alias. Whoever holds X signs X→Y
// (dated before the revocation, and after) and sends it from Y: refused
// with key_revoked, and Y inherits nothing.
func TestOwnerRevokedKeyPassesNothing(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	x, _ := identity.Generate(nil)
	if _, err := alice.TrustBook().PinKey(x.PeerID(), x.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if err := alice.Policy().SetDisclosure("default", x.PeerID().String(), "close"); err != nil {
		t.Fatal(err)
	}
	if err := alice.Policy().SetMaxTemperature(x.PeerID().String(), "hot"); err != nil {
		t.Fatal(err)
	}
	aliases := alias.Open(alice.home.Dir)
	if _, err := aliases.Set("x", x.PeerID()); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	if _, err := alice.TrustBook().RevokeKey(x.PeerID()); err != nil {
		t.Fatal(err)
	}
	y, _ := identity.Generate(nil)
	for _, date := range []time.Time{revokedAt.Add(-time.Minute), revokedAt.Add(time.Second)} {
		err := admitStatement(alice, statementMessage(t, y, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, x, y, date))))
		refusedWith(t, "a succession from a key the owner revoked, dated "+date.Format(time.RFC3339), err, wire.CodeKeyRevoked, "passes nothing to a successor")
	}
	if info := alice.TrustBook().Peer(y.PeerID()); info.Level != conditions.Signed || info.RotatedFrom != "" || info.PinnedKey != "" {
		t.Errorf("the new key got %s", brief(info))
	}
	pol := alice.Policy().Current()
	if tier, ok := pol.Map["default"][y.PeerID().String()]; ok {
		t.Errorf("the new key got tier %s", tier)
	}
	if temp, ok := pol.MaxTemp[y.PeerID().String()]; ok {
		t.Errorf("the new key got temperature cap %s", temp)
	}
	if pid, ok, _ := aliases.Lookup("x"); !ok || pid != x.PeerID() {
		t.Errorf("alias x names %s, want the revoked key still", pid)
	}
	if _, ok := alice.TrustBook().Successor(x.PeerID()); ok {
		t.Error("a succession from the revoked key was recorded")
	}
}

// TestOwnerRevocationFollowsTheIdentity: A→B was followed; the owner
// revokes A: B, the same identity, is revoked with it and the owner is
// told; no succession from B is followed after that; pinning B again
// lifts its revocation only.
func TestOwnerRevocationFollowsTheIdentity(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	a, b, c := thief2(t), thief2(t), thief2(t)
	if _, err := alice.TrustBook().PinKey(a.PeerID(), a.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if err := admitStatement(alice, statementMessage(t, b, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, a, b, time.Now())))); err != nil {
		t.Fatal(err)
	}
	info, err := alice.TrustBook().RevokeKey(a.PeerID())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.RevokedAlso, []string{b.PeerID().String()}) || info.RevokedBy != "owner" {
		t.Errorf("the owner's revocation of A answered %s, want B revoked with it", brief(info))
	}
	if err := alice.trust.KeyRevoked(b.PeerID()); !errors.Is(err, wire.ErrKeyRevoked) {
		t.Errorf("B after the owner revoked A: %v", err)
	}
	if bi := alice.TrustBook().Peer(b.PeerID()); bi.Level != conditions.NoLevel || bi.RevokedWith != a.PeerID().String() {
		t.Errorf("B after the owner revoked A: %s", brief(bi))
	}
	err = admitStatement(alice, statementMessage(t, c, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, b, c, time.Now()))))
	refusedWith(t, "a succession from B", err, wire.CodeKeyRevoked, "revoked")
	if _, err := alice.TrustBook().PinKey(b.PeerID(), b.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if bi := alice.TrustBook().Peer(b.PeerID()); bi.Level != conditions.Verified {
		t.Errorf("B pinned again: %s", brief(bi))
	}
	if err := alice.trust.KeyRevoked(a.PeerID()); !errors.Is(err, wire.ErrKeyRevoked) {
		t.Errorf("A after B was pinned again: %v", err)
	}
}

// TestRevocationOrderIsObserved: a revocation of A received before any
// succession from A blocks a succession from A dated before the
// revocation; one received after a followed succession does not touch
// the successor, however it is dated.
func TestRevocationOrderIsObserved(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	now := time.Now()
	a, b := thief2(t), thief2(t)
	if _, err := alice.TrustBook().PinKey(a.PeerID(), a.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if err := admitStatement(alice, statementMessage(t, a, alice.pid(), keys.StatementPart(keys.PartKeyRevocation, revocation(t, a, a.KeyID(), now)))); err != nil {
		t.Fatal(err)
	}
	err := admitStatement(alice, statementMessage(t, b, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, a, b, now.Add(-time.Minute)))))
	refusedWith(t, "a succession dated before a revocation observed first", err, wire.CodeKeyRevoked, "whatever the succession is dated")
	if info := alice.TrustBook().Peer(b.PeerID()); info.Level != conditions.Signed || info.RotatedFrom != "" {
		t.Errorf("the successor named after the revocation got %s", brief(info))
	}

	c, d := thief2(t), thief2(t)
	if _, err := alice.TrustBook().PinKey(c.PeerID(), c.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if err := admitStatement(alice, statementMessage(t, d, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, c, d, now)))); err != nil {
		t.Fatal(err)
	}
	if err := admitStatement(alice, statementMessage(t, c, alice.pid(), keys.StatementPart(keys.PartKeyRevocation, revocation(t, c, c.KeyID(), now.Add(-24*time.Hour))))); err != nil {
		t.Fatal(err)
	}
	if info := alice.TrustBook().Peer(d.PeerID()); info.Level != conditions.Verified || info.RevokedBy != "" {
		t.Errorf("the successor after a revocation of its old key observed later: %s", brief(info))
	}
	if info := alice.TrustBook().Peer(c.PeerID()); info.Level != conditions.NoLevel || info.RevokedBy != store.KeySignedBySelf || info.RevokedVia != mail.ViaMailbox {
		t.Errorf("the old key: level %s, revoked by %q via %q", info.Level, info.RevokedBy, info.RevokedVia)
	}
}

// TestNetworkRevocationIsNotTheOwners: a revocation statement from the
// network refuses its key, and `ifaced trust` says who signed it and how
// it came; it makes no owner's record (nor makes the peer known).
func TestNetworkRevocationIsNotTheOwners(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	stranger := startDaemon(t, tcpOnly(loopbackConfig()))
	connect(t, stranger, alice)
	greet(t, stranger, alice) // met: alice holds its view
	r := revocation(t, stranger.id, stranger.id.KeyID(), time.Now())
	if err := admitStatement(alice, statementMessage(t, stranger.id, alice.pid(), keys.StatementPart(keys.PartKeyRevocation, r))); err != nil {
		t.Fatal(err)
	}
	info := alice.TrustBook().Peer(stranger.pid())
	how := strings.Join(info.How, "; ")
	if info.Level != conditions.NoLevel || info.RevokedBy != store.KeySignedBySelf || info.RevokedVia != mail.ViaMailbox || info.RevokedKey != "" ||
		strings.Contains(how, "by the owner") || !strings.Contains(how, "signed by the key itself") || info.Class != trust.ClassStranger {
		t.Errorf("a stranger's own revocation shows as %s", brief(info))
	}
	if rec, err := alice.Store().Trust(stranger.pid().String()); err == nil {
		t.Errorf("a network revocation made a stored trust record: %+v", rec)
	}
	if owner, _ := alice.TrustBook().OwnerStanding(stranger.pid()); owner {
		t.Error("a network revocation gave the stranger an owner's standing")
	}
}

// TestForgetKeyRecords: the owner forgets a peer's records: its trust
// record and the statements about its key go; what this daemon gave about
// its own key stays.
func TestForgetKeyRecords(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	a, b := thief2(t), thief2(t)
	if _, err := alice.TrustBook().PinKey(a.PeerID(), a.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if err := admitStatement(alice, statementMessage(t, b, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, a, b, time.Now())))); err != nil {
		t.Fatal(err)
	}
	if err := admitStatement(alice, statementMessage(t, a, alice.pid(), keys.StatementPart(keys.PartKeyRevocation, revocation(t, a, a.KeyID(), time.Now())))); err != nil {
		t.Fatal(err)
	}
	info, err := alice.TrustBook().Forget(a.PeerID())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Forgot) != 3 || info.Level != conditions.Signed || info.SucceededBy != "" || info.PinnedKey != "" {
		t.Errorf("after forgetting A: %s", brief(info))
	}
	evs, _ := alice.Store().KeyEvents()
	if slices.ContainsFunc(evs, func(e store.KeyEvent) bool { return e.Peer == a.PeerID().String() }) {
		t.Errorf("the store still holds statements about A (%d records)", len(evs))
	}
	if _, err := alice.Store().Trust(a.PeerID().String()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the store still holds A's trust record: %v", err)
	}
	next, _ := identity.Generate(nil)
	own, err := identity.NewCommitment(alice.id, next.PublicKey(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.TrustBook().RecordGiven(store.KeyEvent{Kind: store.KeyCommitment, Peer: alice.pid().String(), Date: own.DateTime(),
		Statement: mustJSON(t, own), NextKeyDigest: own.NextKeyDigest, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var ie *trust.InputError
	if _, err := alice.TrustBook().Forget(alice.pid()); !errors.As(err, &ie) || !strings.Contains(err.Error(), "own key") {
		t.Errorf("forgetting this daemon's own statements: %v", err)
	}
	if _, ok := alice.TrustBook().Commitment(alice.pid()); !ok {
		t.Error("this daemon's own commitment was forgotten")
	}
}

// TestPreRotation: bob commits to his next key; alice, who sees the
// commitment in his greeting, refuses a thief's rotation of bob's key to
// another key and a second commitment, and follows bob's rotation to the
// committed key, whose statement commits to the key after it.
func TestPreRotation(t *testing.T) {
	bob := startDaemon(t, tcpOnly(loopbackConfig()))
	alice := startDaemon(t, aliceConfig(bob.pid()))
	bob.Close()
	nextFile := filepath.Join(t.TempDir(), "next.pem")
	c, err := keys.CommitNextKey(bob.home, nextFile, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.CommitNextKey(bob.home, filepath.Join(t.TempDir(), "other.pem"), false, time.Now()); !errors.Is(err, keys.ErrCommitted) {
		t.Errorf("a second commitment without --replace: %v", err)
	}
	bob = restartDaemon(t, bob)
	connect(t, bob, alice)
	greet(t, bob, alice)
	if _, err := alice.TrustBook().PinKey(bob.pid(), bob.ID().Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if got := alice.TrustBook().Peer(bob.pid()).NextKeyDigest; got != c.NextKeyDigest {
		t.Fatalf("alice holds bob's commitment %q, want %q from his greeting", got, c.NextKeyDigest)
	}
	// A thief of bob's current key cannot rotate it to a key of his own,
	// nor commit it to another.
	thief := thief2(t)
	err = admitStatement(alice, statementMessage(t, thief, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, bob.id, thief, time.Now()))))
	refusedWith(t, "a thief's rotation of a committed key", err, wire.CodeKeyStatementRefused, "committed to its next key")
	other, err := identity.NewCommitment(bob.id, thief.PublicKey(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	err = admitStatement(alice, statementMessage(t, bob.id, alice.pid(), keys.StatementPart(keys.PartKeyCommitment, other)))
	refusedWith(t, "a second commitment", err, wire.CodeKeyStatementRefused, "observed first binds")
	if info := alice.TrustBook().Peer(thief.PeerID()); info.Level != conditions.Signed {
		t.Errorf("the thief got %s", brief(info))
	}

	// Bob rotates: to the committed key only.
	events, stop := alice.Subscribe()
	defer stop()
	bob.Close()
	if _, err := keys.RotateKey(bob.home, time.Hour, time.Now(), keys.RotateOptions{}); !errors.Is(err, keys.ErrCommitted) {
		t.Fatalf("rotating to a fresh key while committed: %v", err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong.pem")
	if err := identity.SaveKey(wrong, thief); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.RotateKey(bob.home, time.Hour, time.Now(), keys.RotateOptions{NextKey: wrong}); !errors.Is(err, keys.ErrCommitted) {
		t.Fatalf("rotating to another key than the committed one: %v", err)
	}
	after := filepath.Join(t.TempDir(), "after.pem")
	rot, err := keys.RotateKey(bob.home, time.Hour, time.Now(), keys.RotateOptions{NextKey: nextFile, CommitNext: after})
	if err != nil {
		t.Fatal(err)
	}
	next, err := identity.LoadKey(bob.home.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	if !identity.Commits(c.NextKeyDigest, next.KeyID()) || rot.New != next.PeerID() {
		t.Fatalf("bob rotated to %s, not the committed key", next.PeerID())
	}
	bob2 := restartDaemon(t, &testDaemon{home: bob.home, cfg: bob.cfg, id: next})
	keyEvent(t, events, bob2.pid())
	info := alice.TrustBook().Peer(bob2.pid())
	if info.Level != conditions.Verified || info.RotatedFrom != bob.pid().String() || info.NextKeyDigest != rot.Statement.NextKeyDigest || info.NextKeyDigest == "" {
		t.Fatalf("alice after bob's rotation: %s", brief(info))
	}
	err = admitStatement(alice, statementMessage(t, thief, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, bob2.id, thief, time.Now()))))
	refusedWith(t, "a rotation of the new key to another key than the one its succession committed to", err, wire.CodeKeyStatementRefused, "committed to its next key")
	greet(t, bob2, alice) // his greetings carry the same commitment: taken
}

// TestStrangersCannotSwitchRotationOff: 5,000 fresh keys that alice met
// (their views in her peer cache, as a greeting leaves them) revoke
// themselves through her door. The key lifecycle records they cause
// stay within MaxStrangerKeyRecords, in memory: none is written to the
// store, none becomes a trust record; the records of peers the owner made
// known are all kept, a pinned peer's rotation is still recorded, a key
// the owner revoked still passes nothing, and the owner's own rotation,
// revocation and commitment work.
func TestStrangersCannotSwitchRotationOff(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob, carol, dave := thief2(t), thief2(t), thief2(t)
	for _, id := range []*identity.Identity{bob, carol, dave} {
		if _, err := alice.TrustBook().PinKey(id.PeerID(), id.Fingerprint()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.TrustBook().RevokeKey(carol.PeerID()); err != nil {
		t.Fatal(err)
	}
	// Dave, pinned, revokes his key before the flood: a record of a peer
	// the owner made known.
	if err := admitStatement(alice, statementMessage(t, dave, alice.pid(), keys.StatementPart(keys.PartKeyRevocation, revocation(t, dave, dave.KeyID(), time.Now())))); err != nil {
		t.Fatal(err)
	}
	// A few at once, as many strangers would: the first ones observed are
	// the first quarter, sent before the rest.
	const flood, workers = 5000, 8
	strangers := make([]peer.ID, flood)
	send := func(from, to int) {
		next := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					k, _ := identity.Generate(nil)
					strangers[i] = k.PeerID()
					met(t, alice, k)
					if err := admitStatement(alice, statementMessage(t, k, alice.pid(), keys.StatementPart(keys.PartKeyRevocation, revocation(t, k, k.KeyID(), time.Now())))); err != nil {
						t.Errorf("a stranger's revocation of its own key: %v", err)
					}
				}
			}()
		}
		for i := from; i < to; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	send(0, flood/4)
	send(flood/4, flood)
	if t.Failed() {
		t.FailNow()
	}
	if n := alice.TrustBook().StrangerKeyRecords(); n != trust.MaxStrangerKeyRecords {
		t.Errorf("%d strangers' key records held, want the last %d", n, trust.MaxStrangerKeyRecords)
	}
	evs, err := alice.Store().KeyEvents()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Peer != dave.PeerID().String() || evs[0].Kind != store.KeyRevocation {
		t.Errorf("the store holds %d key lifecycle records after %d strangers, want dave's revocation only", len(evs), flood)
	}
	if err := alice.trust.KeyRevoked(dave.PeerID()); !errors.Is(err, wire.ErrKeyRevoked) {
		t.Errorf("dave's revoked key after the flood: %v", err)
	}
	// The last strangers' revocations are held, the first ones went.
	if err := alice.trust.KeyRevoked(strangers[flood-1]); !errors.Is(err, wire.ErrKeyRevoked) {
		t.Errorf("the last stranger's revoked key: %v", err)
	}
	if err := alice.trust.KeyRevoked(strangers[0]); err != nil {
		t.Errorf("the first stranger's revocation is still held: %v", err)
	}
	trusts, err := alice.Store().Trusts()
	if err != nil {
		t.Fatal(err)
	}
	if len(trusts) != 3 {
		t.Errorf("%d stored trust records, want bob's, carol's and dave's only", len(trusts))
	}

	// A pinned peer's rotation is followed and recorded.
	bob2 := thief2(t)
	if err := admitStatement(alice, statementMessage(t, bob2, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, bob, bob2, time.Now())))); err != nil {
		t.Fatalf("a pinned peer's rotation after the flood: %v", err)
	}
	if info := alice.TrustBook().Peer(bob2.PeerID()); info.Level != conditions.Verified || info.RotatedFrom != bob.PeerID().String() {
		t.Errorf("bob's new key after the flood: %s", brief(info))
	}
	if evs, _ := alice.Store().KeyEvents(); !slices.ContainsFunc(evs, func(e store.KeyEvent) bool {
		return e.Kind == store.KeySuccession && e.Peer == bob.PeerID().String()
	}) {
		t.Error("bob's rotation was not recorded in the store")
	}
	// The key the owner revoked still passes nothing.
	y := thief2(t)
	err = admitStatement(alice, statementMessage(t, y, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succession(t, carol, y, time.Now()))))
	refusedWith(t, "a rotation of the key the owner revoked, after the flood", err, wire.CodeKeyRevoked, "passes nothing")

	// The owner's own rotation, revocation and commitment never lack room.
	alice.Close()
	st, err := os.Stat(filepath.Join(alice.home.Dir, "ifaced.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d strangers: %d key lifecycle records in the store, the store is %.1f MiB", flood, len(evs), float64(st.Size())/(1<<20))
	if _, err := keys.RotateKey(alice.home, time.Hour, time.Now(), keys.RotateOptions{}); err != nil {
		t.Fatalf("the owner's rotation after the flood: %v", err)
	}
	if _, err := keys.RevokeOldKey(alice.home, "", "rotated", time.Now()); err != nil {
		t.Fatalf("the owner's revocation after the flood: %v", err)
	}
	if _, err := keys.CommitNextKey(alice.home, filepath.Join(t.TempDir(), "next.pem"), false, time.Now()); err != nil {
		t.Fatalf("the owner's commitment after the flood: %v", err)
	}
}

// met puts a view of id in d's peer cache, as id's greeting would: d has
// met id (a stranger's view stays in memory).
func met(t testing.TB, d *testDaemon, id *identity.Identity) {
	t.Helper()
	doc := &negotiate.Document{IFP: 7, AgentID: id.DID(), Seq: 1,
		Capabilities: []negotiate.Capability{{Name: "ping", Description: "Respond to connectivity tests"}}}
	v, err := negotiate.SignView(doc, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Store().PutPeer(store.PeerRecord{PeerID: id.PeerID().String(), AgentID: id.DID(), Seq: 1, DocHash: v.Sum,
		View: v.Content.Canonical(), FetchedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// brief is what a test failure shows of a peer's trust.
func brief(i trust.Info) string {
	var ks []string
	for _, k := range i.Keys {
		ks = append(ks, k.Kind+" "+k.Direction+" of "+k.Peer+" ["+k.Class+"]")
	}
	return fmt.Sprintf("{peer %s level %s class %s how %q revoked_by %q via %q with %q also %v rotated_from %q succeeded_by %q next_key %q forgot %v keys %v}",
		i.Peer, i.Level, i.Class, i.How, i.RevokedBy, i.RevokedVia, i.RevokedWith, i.RevokedAlso, i.RotatedFrom, i.SucceededBy, i.NextKeyDigest, i.Forgot, ks)
}
