package node

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/alias"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/keys"
	"github.com/ifaced/ifaced/node/mail"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// offsetClock is the real clock moved ahead by what a test advances it.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }

// rotate stops d, rotates its key (`ifaced key rotate`) and starts it
// again on the new key.
func rotate(t *testing.T, d *testDaemon, transition time.Duration) (*testDaemon, *keys.Rotation) {
	t.Helper()
	d.Close()
	rot, err := keys.RotateKey(d.home, transition, time.Now(), keys.RotateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.LoadKey(d.home.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	if id.PeerID() != rot.New || rot.Old != d.id.PeerID() {
		t.Fatalf("rotation %s → %s, the key file now holds %s", rot.Old, rot.New, id.PeerID())
	}
	return restartDaemon(t, &testDaemon{home: d.home, cfg: d.cfg, id: id}), rot
}

// withKey starts a daemon in a fresh home on a given key: whoever still
// holds an old key.
func withKey(t *testing.T, id *identity.Identity, cfg *config.Config) *testDaemon {
	t.Helper()
	h := config.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if err := identity.SaveKey(h.KeyPath(), id); err != nil {
		t.Fatal(err)
	}
	return restartDaemon(t, &testDaemon{home: h, cfg: cfg, id: id})
}

// keyEvent waits for the key event about pid.
func keyEvent(t *testing.T, ch <-chan events.Event, pid peer.ID) events.Event {
	t.Helper()
	return waitEvent(t, ch, func(e events.Event) bool {
		if e.Type == events.EventRefused {
			t.Fatalf("refused: %s", e.Detail)
		}
		return e.Type == events.EventKey && e.Peer == pid.String()
	})
}

// TestRotationKeepsWhatThePeerGranted: alice pinned bob and granted him
// a tier and a temperature; bob rotates his key; alice follows, and under
// his new peer ID bob is still at level 2 with the same tier. His old key
// verifies during the transition period and is refused after it, with a
// code naming the successor.
func TestRotationKeepsWhatThePeerGranted(t *testing.T) {
	bob := startDaemon(t, tcpOnly(loopbackConfig()))
	clock := &offsetClock{}
	alice := startWith(t, aliceConfig(bob.pid()), WithClock(clock.now))
	connect(t, bob, alice)
	greet(t, bob, alice) // bob's cache holds alice
	if _, err := alice.TrustBook().PinKey(bob.pid(), bob.ID().Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if err := alice.Policy().SetMaxTemperature(bob.pid().String(), "warm"); err != nil {
		t.Fatal(err)
	}
	aliases := alias.Open(alice.home.Dir)
	if _, err := aliases.Set("bob", bob.pid()); err != nil {
		t.Fatal(err)
	}
	evs, stop := alice.Subscribe()
	defer stop()
	oldKey := bob.id

	// A transition of two minutes: alice's clock moves past it and stays
	// within the clock skew peers allow each other.
	bob2, rot := rotate(t, bob, 2*time.Minute)
	e := keyEvent(t, evs, bob2.pid())
	for _, want := range []string{"rotated its key", oldKey.PeerID().String(), "pin (level 2)", "tier professional under default", "temperature cap warm", "alias bob"} {
		if !strings.Contains(e.Detail, want) {
			t.Errorf("alice was told %q, want it to say %q", e.Detail, want)
		}
	}
	info := alice.TrustBook().Peer(bob2.pid())
	if info.Level != conditions.Verified || info.PinnedKey != bob2.ID().Fingerprint() || info.RotatedFrom != oldKey.PeerID().String() {
		t.Fatalf("alice's trust in bob's new key: %+v", info)
	}
	if !strings.Contains(strings.Join(info.How, "; "), "rotated from "+oldKey.PeerID().String()) {
		t.Errorf("how = %q, want it to say rotated from the old key", info.How)
	}
	r := greet(t, bob2, alice)
	if r.GrantedToUs.Disclosure != "professional" || r.GrantedToUs.AuthLevel != conditions.Verified || !strings.Contains(testkit.CapNames(r.View), "+calendar.availability") {
		t.Fatalf("bob's new key is granted %+v, view %s; want professional at level 2 as before", r.GrantedToUs, testkit.CapNames(r.View))
	}
	if got := alice.Policy().Current().MaxTemp[bob2.pid().String()]; got != "warm" {
		t.Errorf("temperature cap of the new key %q, want warm", got)
	}
	if pid, ok, err := aliases.Lookup("bob"); err != nil || !ok || pid != bob2.pid() {
		t.Errorf("alias bob names %s (%v), want the new key %s", pid, err, bob2.pid())
	}
	doc := bob2.IdentityDocument()
	if err := doc.Validate(); err != nil || len(doc.Keys) != 2 || doc.Keys[1].KeyID != oldKey.KeyID() ||
		doc.Keys[1].Status != identity.KeyRetired || doc.Keys[1].RetiredDate != rot.Statement.Date {
		t.Fatalf("bob's identity document %+v (%v): want the old key retired on %s", doc.Keys, err, rot.Statement.Date)
	}

	// Whoever holds the old key is still believed during the transition…
	old := withKey(t, oldKey, tcpOnly(loopbackConfig()))
	connect(t, old, alice)
	greet(t, old, alice)
	// …and refused after it, with the successor named.
	clock.advance(2*time.Minute + 2*time.Second)
	_, err := old.Greet(context.Background(), alice.pid(), negotiate.Proposal{})
	if b := remoteCode(t, err); b.Code != wire.CodeKeyRetired || !strings.Contains(b.Message, bob2.pid().String()) {
		t.Fatalf("the old key after its transition: %+v, want key_retired naming %s", b, bob2.pid())
	}
	// The same statement again changes nothing; alice still follows after a restart.
	alice.Close()
	alice = restartWith(t, alice, WithClock(clock.now))
	if err := alice.trust.KeyRevoked(oldKey.PeerID()); !errors.Is(err, wire.ErrKeyRetired) {
		t.Errorf("after a restart, the old key: %v", err)
	}
}

// TestRotationReachesAPeerThatWasAway: alice rotates while bob is away;
// the statement waits at bob's mailbox relay, and bob follows it when he
// fetches his mail.
func TestRotationReachesAPeerThatWasAway(t *testing.T) {
	relay, alice, bob := mailSetup(t)
	if _, err := bob.TrustBook().PinKey(alice.pid(), alice.ID().Fingerprint()); err != nil {
		t.Fatal(err)
	}
	bob.Close()
	waitGone(t, alice, bob)
	oldAlice := alice.pid()
	alice2, _ := rotate(t, alice, time.Hour)
	testkit.WaitFor(t, "the statement at bob's mailbox", func() bool {
		held, _, _ := relay.Store().Mailboxes().Mail(bob.pid().String(), time.Now(), 10, 1<<20)
		return len(held) == 1
	})

	bob = restartDaemon(t, bob)
	testkit.WaitFor(t, "bob to follow alice's rotation", func() bool {
		return bob.TrustBook().Peer(alice2.pid()).RotatedFrom == oldAlice.String()
	})

	if info := bob.TrustBook().Peer(alice2.pid()); info.Level != conditions.Verified {
		t.Fatalf("bob's trust in alice's new key: %+v", info)
	}
}

// statementMessage is a one-message conversation from `from` to `to`
// carrying parts, signed by from.
func statementMessage(t *testing.T, from *identity.Identity, to peer.ID, parts ...gossip.Part) *gossip.Message {
	t.Helper()
	m := signedMail(t, from, to, "key statement")
	m.Body.Parts = parts
	m.Security = nil
	if err := m.Sign(from, time.Now()); err != nil {
		t.Fatal(err)
	}
	return m
}

// admitStatement takes m through alice's door as fetched mail would come.
func admitStatement(alice *testDaemon, m *gossip.Message) error {
	_, err := alice.door.Admit(&admit.Arrival{Via: mail.ViaMailbox, Msg: m, Addressed: true, Window: alice.mailReplay, Uncharged: true})
	return err
}

// TestKeyStatementsRefused: forged and unfollowable statements are refused
// at the door with a code and a reason naming what is wrong, and nothing
// the owner granted moves.
func TestKeyStatementsRefused(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob, _ := identity.Generate(nil)   // met: alice pinned him
	thief, _ := identity.Generate(nil) // holds no key of bob's
	carol, _ := identity.Generate(nil) // another of alice's peers
	never, _ := identity.Generate(nil) // a key alice never met
	if _, err := alice.TrustBook().PinKey(bob.PeerID(), bob.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.TrustBook().PinKey(carol.PeerID(), carol.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	succ := func(old, next *identity.Identity, date time.Time) *identity.Succession {
		s, err := identity.NewSuccession(old, next, date, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	onlyNew := succ(bob, thief, now)
	forgery := succ(thief, thief2(t), now) // signed by the thief's keys…
	onlyNew.SigOld = forgery.SigOld        // …in place of bob's
	for _, tc := range []struct {
		name    string
		carrier *identity.Identity
		part    gossip.Part
		code    wire.Code
		says    string
	}{
		{"signed by the new key only", thief, keys.StatementPart(keys.PartKeySuccession, onlyNew), wire.CodeInvalidSignature, "sig_old"},
		{"carried by a third key", thief, keys.StatementPart(keys.PartKeySuccession, succ(bob, carol, now)), wire.CodeWrongKey, "travels in a message signed by its old key"},
		{"successor already someone else's", carol, keys.StatementPart(keys.PartKeySuccession, succ(bob, carol, now)), wire.CodeKeyStatementRefused, "already a peer of this daemon's owner"},
		{"back-dated", thief, keys.StatementPart(keys.PartKeySuccession, succ(bob, thief, now.Add(-30*24*time.Hour))), wire.CodeReplay, "back-dated"},
		{"dated ahead", thief, keys.StatementPart(keys.PartKeySuccession, succ(bob, thief, now.Add(time.Hour))), wire.CodeReplay, "ahead"},
		{"a peer never met", never, keys.StatementPart(keys.PartKeySuccession, succ(never, thief2(t), now)), wire.CodeKeyStatementRefused, "never met"},
		{"a revocation by a key that does not hold it", thief, keys.StatementPart(keys.PartKeyRevocation, revocation(t, thief, bob.KeyID(), now)), wire.CodeWrongKey, "revoked key itself or by its successor"},
		{"a revocation of a key never met", never, keys.StatementPart(keys.PartKeyRevocation, revocation(t, never, never.KeyID(), now)), wire.CodeKeyStatementRefused, "never met"},
		{"a malformed statement", thief, gossip.Part{ContentType: "application/json", Name: keys.PartKeySuccession, Content: map[string]any{"type": "key_succession", "sig": 1}}, wire.CodeInvalidFormat, "sig"},
	} {
		err := admitStatement(alice, statementMessage(t, tc.carrier, alice.pid(), tc.part))
		if got := wire.CodeOf(err); got != tc.code || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v (%s), want %s saying %q", tc.name, err, got, tc.code, tc.says)
		}
	}
	if info := alice.TrustBook().Peer(thief.PeerID()); info.Level != conditions.Signed || info.RotatedFrom != "" {
		t.Errorf("the thief got %+v", info)
	}
	if info := alice.TrustBook().Peer(carol.PeerID()); info.RotatedFrom != "" {
		t.Errorf("carol's record was merged: %+v", info)
	}

	// A genuine succession is followed, once; a second successor for the
	// same key is refused, and so is a chain back to a retired key.
	next, _ := identity.Generate(nil)
	s := succ(bob, next, now)
	for range 2 {
		if err := admitStatement(alice, statementMessage(t, next, alice.pid(), keys.StatementPart(keys.PartKeySuccession, s))); err != nil {
			t.Fatalf("a genuine succession: %v", err)
		}
	}
	if info := alice.TrustBook().Peer(next.PeerID()); info.Level != conditions.Verified || info.RotatedFrom != bob.PeerID().String() {
		t.Fatalf("after the succession: %+v", info)
	}
	err := admitStatement(alice, statementMessage(t, bob, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succ(bob, thief, now))))
	if wire.CodeOf(err) != wire.CodeKeyStatementRefused || !strings.Contains(err.Error(), "already succeeded by "+next.PeerID().String()) {
		t.Errorf("a second successor: %v", err)
	}
	err = admitStatement(alice, statementMessage(t, next, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succ(next, bob, now))))
	if wire.CodeOf(err) != wire.CodeKeyStatementRefused || !strings.Contains(err.Error(), "was itself succeeded") {
		t.Errorf("a chain back to the retired key: %v", err)
	}
	// A chain forward is followed one statement at a time.
	third, _ := identity.Generate(nil)
	if err := admitStatement(alice, statementMessage(t, third, alice.pid(), keys.StatementPart(keys.PartKeySuccession, succ(next, third, now)))); err != nil {
		t.Fatalf("the next link of the chain: %v", err)
	}
	if info := alice.TrustBook().Peer(third.PeerID()); info.Level != conditions.Verified || info.RotatedFrom != next.PeerID().String() {
		t.Fatalf("after the chain: %+v", info)
	}
}

// TestRevocationStopsAThiefsRotation: a thief who stole bob's key tries
// to rotate it to a key of his own. Bob committed to his next key, so
// alice refuses the thief's succession; bob publishes the revocation
// statement he prepared at init from a new daemon of his, and alice
// refuses the stolen key on every transport. A peer that hears bob's
// revocation before the thief's succession refuses the succession too,
// however it is dated. (A succession alice followed before a revocation
// arrived keeps its successor: TestRetiredKeyCannotTakeFromItsSuccessor.)
func TestRevocationStopsAThiefsRotation(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	carol := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, tcpOnly(loopbackConfig()))
	prepared, err := keys.RevocationStatement(bob.home.KeyPath(), "laptop stolen", time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	bob.Close()
	if _, err := keys.CommitNextKey(bob.home, filepath.Join(t.TempDir(), "next.pem"), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	bob = restartDaemon(t, bob)
	for _, d := range []*testDaemon{alice, carol} {
		if _, err := d.TrustBook().PinKey(bob.pid(), bob.ID().Fingerprint()); err != nil {
			t.Fatal(err)
		}
		connect(t, bob, d)
		greet(t, bob, d) // carries bob's commitment
	}
	thief, _ := identity.Generate(nil)
	s, _ := identity.NewSuccession(bob.id, thief, time.Now(), time.Hour)
	err = admitStatement(alice, statementMessage(t, thief, alice.pid(), keys.StatementPart(keys.PartKeySuccession, s)))
	if wire.CodeOf(err) != wire.CodeKeyStatementRefused || !strings.Contains(err.Error(), "committed to its next key") {
		t.Fatalf("the thief's rotation: %v, want key_statement_refused (bob committed to another key)", err)
	}
	if info := alice.TrustBook().Peer(thief.PeerID()); info.Level != conditions.Signed || info.RotatedFrom != "" {
		t.Fatalf("the thief's key got %+v", info)
	}
	// Bob publishes his prepared statement from a new daemon of his.
	bobNew := startDaemon(t, tcpOnly(loopbackConfig()))
	connect(t, bobNew, alice)
	greet(t, bobNew, alice) // bob's new daemon has alice in its cache
	bobNew.Close()
	raw := mustJSON(t, prepared)
	if _, err := keys.PublishRevocation(bobNew.home, raw, time.Now()); err != nil {
		t.Fatal(err)
	}
	evs, stop := alice.Subscribe()
	defer stop()
	restartDaemon(t, bobNew)
	e := keyEvent(t, evs, bob.pid())
	if !strings.Contains(e.Detail, "revoked") || !strings.Contains(e.Detail, "signed by the key itself") {
		t.Errorf("alice was told %q, want bob's key revoked by its own statement", e.Detail)
	}
	if err := alice.trust.KeyRevoked(bob.pid()); !errors.Is(err, wire.ErrKeyRevoked) {
		t.Errorf("bob's stolen key after the revocation: %v", err)
	}
	if info := alice.TrustBook().Peer(bob.pid()); info.Level != conditions.NoLevel {
		t.Errorf("bob's stolen key keeps level %s", info.Level)
	}
	// The stolen key is refused on the wire.
	_, err = bob.Greet(context.Background(), alice.pid(), negotiate.Proposal{})
	if b := remoteCode(t, err); b.Code != wire.CodeKeyRevoked || !strings.Contains(b.Message, "revocation statement") {
		t.Fatalf("the revoked key greeting: %+v", b)
	}
	kevs := alice.TrustBook().KeyEvents()
	if !slices.ContainsFunc(kevs, func(e store.KeyEvent) bool {
		return e.Peer == bob.pid().String() && e.Kind == store.KeyRevocation && e.Direction == store.KeyReceived && e.Reason == "laptop stolen"
	}) {
		t.Errorf("alice's key events: %+v, want bob's key revoked", kevs)
	}
	// Carol hears the revocation before any succession: the thief's
	// rotation, even one dated before the revocation, is refused.
	if err := admitStatement(carol, statementMessage(t, thief, carol.pid(), keys.StatementPart(keys.PartKeyRevocation, prepared))); err != nil {
		t.Fatal(err)
	}
	early, _ := identity.NewSuccession(bob.id, thief, time.Now().Add(-time.Hour), time.Hour)
	err = admitStatement(carol, statementMessage(t, thief, carol.pid(), keys.StatementPart(keys.PartKeySuccession, early)))
	if wire.CodeOf(err) != wire.CodeKeyRevoked {
		t.Errorf("a succession from a key revoked first: %v, want key_revoked", err)
	}
}

// TestRevokeOldKeyFromTheSuccessor: `ifaced key revoke` on the daemon
// that holds the successor revokes the old key at the peers.
func TestRevokeOldKeyFromTheSuccessor(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, tcpOnly(loopbackConfig()))
	connect(t, bob, alice)
	greet(t, bob, alice)
	if _, err := alice.TrustBook().PinKey(bob.pid(), bob.ID().Fingerprint()); err != nil {
		t.Fatal(err)
	}
	evs, stop := alice.Subscribe()
	defer stop()
	oldKey := bob.id
	bob2, _ := rotate(t, bob, time.Hour)
	keyEvent(t, evs, bob2.pid())

	bob2.Close()
	if _, err := keys.RevokeOldKey(bob2.home, "", "sold the old laptop", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.RevokeOldKey(bob2.home, alice.pid(), "", time.Now()); err == nil || !strings.Contains(err.Error(), "not its successor") {
		t.Errorf("revoking a key this daemon did not succeed: %v", err)
	}
	bob3 := restartDaemon(t, bob2)
	keyEvent(t, evs, oldKey.PeerID())
	if err := alice.trust.KeyRevoked(oldKey.PeerID()); !errors.Is(err, wire.ErrKeyRevoked) {
		t.Errorf("the old key after its revocation: %v", err)
	}
	// The successor keeps what it was granted: the revocation is dated
	// after the succession.
	if info := alice.TrustBook().Peer(bob3.pid()); info.Level != conditions.Verified {
		t.Errorf("the successor after the revocation of the old key: %+v", info)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func thief2(t *testing.T) *identity.Identity {
	id, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func revocation(t *testing.T, signer *identity.Identity, keyID string, date time.Time) *identity.Revocation {
	r, err := identity.NewRevocation(signer, keyID, date, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRevocationHonouredWithinOneAnnouncement: a daemon that never met
// alice publishes the revocation statement prepared for a key alice
// pinned; alice hears it on GossipSub as soon as the two share the topic,
// and refuses the key.
func TestRevocationHonouredWithinOneAnnouncement(t *testing.T) {
	gossipConfig := func() *config.Config {
		c := tcpOnly(loopbackConfig())
		c.Discovery.Gossip = true
		return c
	}
	alice := startDaemon(t, gossipConfig())
	lost, _ := identity.Generate(nil)
	if _, err := alice.TrustBook().PinKey(lost.PeerID(), lost.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	prepared := revocation(t, lost, lost.KeyID(), time.Now().Add(-time.Hour))
	publisher := startDaemon(t, gossipConfig())
	publisher.Close()
	if _, err := keys.PublishRevocation(publisher.home, mustJSON(t, prepared), time.Now()); err != nil {
		t.Fatal(err)
	}
	evs, stop := alice.Subscribe()
	defer stop()
	publisher = restartDaemon(t, publisher)
	connect(t, publisher, alice)
	e := keyEvent(t, evs, lost.PeerID())
	if !strings.Contains(e.Detail, "revoked") {
		t.Errorf("alice was told %q", e.Detail)
	}
	if err := alice.trust.KeyRevoked(lost.PeerID()); !errors.Is(err, wire.ErrKeyRevoked) {
		t.Errorf("the revoked key at alice: %v", err)
	}
	if got := publisher.keyNotices.Published(); got != 1 {
		t.Errorf("the publisher announced %d times, want once", got)
	}
}
