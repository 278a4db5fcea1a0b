package trust

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// bogusIntroGreeting is a greeting from guest with the proof of a token
// this daemon never minted.
func bogusIntroGreeting(t *testing.T, guest *identity.Identity, now time.Time) *gossip.Message {
	t.Helper()
	other, _ := identity.Generate(nil)
	tok, err := identity.MintIntroduction(other.DID(), "forged", time.Hour, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{MessageID: "msg:" + guest.PeerID().String(),
		Date: now.UTC().Format(time.RFC3339), From: gossip.Agent{Agent: guest.DID()}, ConversationID: "conv:x",
		Sequence: 1, Phase: gossip.PhaseGreeting, ContentType: gossip.DefaultContentType}, Body: gossip.Body{Text: "hello"}}
	if err := m.AddIntroProof(tok, now); err != nil {
		t.Fatal(err)
	}
	return m
}

// Fresh keys presenting bogus introduction proofs create no stored trust
// record; the refusal is kept in memory, where `ifaced trust` shows it,
// and goes to the store with the record once the owner pins the key.
func TestRefusedIntroductionsCreateNoStoredRecord(t *testing.T) {
	b, st := newBook(t, Config{})
	now := time.Now()
	var last *identity.Identity
	for range 30 {
		guest, _ := identity.Generate(nil)
		b.LevelOf(guest.PeerID(), bogusIntroGreeting(t, guest, now), "")
		last = guest
	}
	if recs, err := st.Trusts(); err != nil || len(recs) != 0 {
		t.Fatalf("%d stored trust records after 30 refused proofs from fresh keys (%v), want none", len(recs), err)
	}
	info := b.Peer(last.PeerID())
	if !strings.Contains(info.Refusal, "no introduction token of that ID") {
		t.Fatalf("the refusal is not shown: %+v", info)
	}
	if _, err := b.PinKey(last.PeerID(), last.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	recs, err := st.Trusts()
	if err != nil || len(recs) != 1 || recs[0].Refusal == "" || recs[0].PinnedKey == "" {
		t.Fatalf("stored records after pinning: %+v, %v", recs, err)
	}
}

// A failed identity document check of a peer without a record is kept in
// memory, not in the store, and still spares a fetch at the next greeting.
func TestFailedCheckCreatesNoStoredRecord(t *testing.T) {
	b, st := newBook(t, Config{}) // private addresses refused: the fetch fails at once
	guest, _ := identity.Generate(nil)
	agentID := "https://127.0.0.1:1/agent"
	c, err := b.runCheck(context.Background(), guest.PeerID(), agentID)
	if err != nil || c.Outcome != CheckFetchFailed {
		t.Fatalf("check: %+v, %v", c, err)
	}
	if recs, err := st.Trusts(); err != nil || len(recs) != 0 {
		t.Fatalf("%d stored trust records after a failed check (%v), want none", len(recs), err)
	}
	if info := b.Peer(guest.PeerID()); info.Check == nil || info.Check.Outcome != CheckFetchFailed {
		t.Fatalf("the failed check is not shown: %+v", info)
	}
	b.LevelOf(guest.PeerID(), nil, agentID)
	if n := len(b.fetch.sem); n != 0 {
		t.Fatalf("%d fetches started for a peer checked a moment ago", n)
	}
}

// The strangers' trust records in memory are bounded by bytes; the least
// recently used go first.
func TestStrangerTrustIsBounded(t *testing.T) {
	b, st := newBook(t, Config{})
	reason := strings.Repeat("r", 1000)
	cost := strangerTrustCost(store.TrustRecord{PeerID: strings.Repeat("p", 52), Refusal: reason})
	n := int(2 * maxStrangerTrustBytes / cost)
	var first, lastID *identity.Identity
	for i := range n {
		id, _ := identity.Generate(nil)
		if i == 0 {
			first = id
		}
		lastID = id
		if _, err := b.update(id.PeerID(), func(r *store.TrustRecord) bool { r.Refusal = reason; return true }); err != nil {
			t.Fatal(err)
		}
	}
	if used := b.strangers.Used(); used > maxStrangerTrustBytes {
		t.Fatalf("strangers' trust records hold %d bytes, over %d", used, maxStrangerTrustBytes)
	}
	if b.Peer(first.PeerID()).Refusal != "" {
		t.Error("the oldest stranger's record was not evicted")
	}
	if b.Peer(lastID.PeerID()).Refusal != reason {
		t.Error("the newest stranger's record is gone")
	}
	if recs, _ := st.Trusts(); len(recs) != 0 {
		t.Errorf("%d stored records, want none", len(recs))
	}
}

// TestStrangerKeyRecordsAreBounded: statements of keys nobody made known
// are held in memory, the ones observed first evicted past
// MaxStrangerKeyRecords, and never written; a pinned peer's record is
// written and never evicted; the owner's own statement is always taken;
// a stranger the owner pins has its held records written.
func TestStrangerKeyRecordsAreBounded(t *testing.T) {
	b, st := newBook(t, Config{})
	met := func(peer.ID) bool { return true }
	revoke := func(id *identity.Identity) {
		t.Helper()
		r, err := identity.NewRevocation(id, id.KeyID(), time.Now(), "")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.CheckRevocation(r, nil, met); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.FollowRevocation(r, nil, "test"); err != nil {
			t.Fatal(err)
		}
	}
	pinned, _ := identity.Generate(nil)
	if _, err := b.PinKey(pinned.PeerID(), pinned.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	revoke(pinned)
	first, _ := identity.Generate(nil)
	revoke(first)
	var last *identity.Identity
	for range MaxStrangerKeyRecords + 100 {
		last, _ = identity.Generate(nil)
		revoke(last)
	}
	if n := b.StrangerKeyRecords(); n != MaxStrangerKeyRecords {
		t.Errorf("%d strangers' records held, want %d", n, MaxStrangerKeyRecords)
	}
	evs, err := st.KeyEvents()
	if err != nil || len(evs) != 1 || evs[0].Peer != pinned.PeerID().String() {
		t.Fatalf("the store holds %d records (%v), want the pinned peer's revocation only", len(evs), err)
	}
	if b.KeyRevoked(first.PeerID()) != nil || b.KeyRevoked(last.PeerID()) == nil || b.KeyRevoked(pinned.PeerID()) == nil {
		t.Error("want the first stranger's revocation evicted, the last one's and the pinned peer's kept")
	}
	if info := b.Peer(last.PeerID()); info.Class != ClassStranger || len(info.Keys) != 1 || info.Keys[0].Class != ClassStranger {
		t.Errorf("the last stranger: class %q, records %+v", info.Class, info.Keys)
	}
	// The owner pins the last stranger: its held record is written.
	if _, err := b.PinKey(last.PeerID(), last.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if evs, _ := st.KeyEvents(); len(evs) != 2 || b.StrangerKeyRecords() != MaxStrangerKeyRecords-1 {
		t.Errorf("after pinning a stranger: %d records in the store, %d held", len(evs), b.StrangerKeyRecords())
	}
	// The owner's own statement never lacks room.
	self, _ := identity.Generate(nil)
	next, _ := identity.Generate(nil)
	s, _ := identity.NewSuccession(self, next, time.Now(), time.Hour)
	raw, _ := json.Marshal(s)
	if err := b.RecordGiven(store.KeyEvent{Kind: store.KeySuccession, Peer: self.PeerID().String(), Successor: next.PeerID().String(),
		Date: s.DateTime(), Statement: raw, At: time.Now()}); err != nil {
		t.Fatalf("the owner's own statement: %v", err)
	}
	// A restart keeps the written records only.
	b2 := openBook(t, st, Config{})
	if b2.StrangerKeyRecords() != 0 || b2.KeyRevoked(pinned.PeerID()) == nil || b2.KeyRevoked(last.PeerID()) == nil {
		t.Error("after a restart: want the pinned peers' revocations, no stranger's")
	}
}

// TestHeldCommitmentKeptOnceKnown: a stranger's commitment is held in
// memory, and written once its key is made known: by a succession that
// carried a pin to it, by the owner's pin, or (made known by the owner's
// policy) when the key sends it again.
func TestHeldCommitmentKeptOnceKnown(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "ifaced.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pol := &testPolicy{p: negotiate.Policy{Order: conditions.DefaultTierOrder(), Map: map[string]map[string]string{}}}
	b := openBookWith(t, st, Config{}, time.Now, pol)
	gen := func() *identity.Identity { id, _ := identity.Generate(nil); return id }
	commit := func(key, next *identity.Identity) {
		t.Helper()
		c, err := identity.NewCommitment(key, next.PublicKey(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := b.CheckCommitment(c, key.PeerID()); err != nil {
			t.Fatal(err)
		}
		if _, err := b.FollowCommitment(c, "test"); err != nil {
			t.Fatal(err)
		}
	}
	written := func(pid peer.ID) bool {
		evs, _ := st.KeyEvents()
		for _, e := range evs {
			if e.Kind == store.KeyCommitment && e.Peer == pid.String() {
				return true
			}
		}
		return false
	}
	a, bk, c := gen(), gen(), gen()
	if _, err := b.PinKey(a.PeerID(), a.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	commit(bk, c)
	if written(bk.PeerID()) || b.StrangerKeyRecords() != 1 {
		t.Fatalf("a stranger's commitment was written (or not held): %d held", b.StrangerKeyRecords())
	}
	s, _ := identity.NewSuccession(a, bk, time.Now(), time.Hour)
	all := func(peer.ID) bool { return true }
	known := func(p peer.ID) bool { owner, _ := b.OwnerStanding(p); return owner }
	if err := b.CheckSuccession(s, bk.PeerID(), all, known, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.FollowSuccession(s, "test"); err != nil {
		t.Fatal(err)
	}
	if !written(bk.PeerID()) {
		t.Error("the commitment of a key a pin was carried to is not written")
	}
	pinned := gen()
	commit(pinned, gen())
	if _, err := b.PinKey(pinned.PeerID(), pinned.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if !written(pinned.PeerID()) {
		t.Error("the commitment of a key the owner pinned is not written")
	}
	granted, next := gen(), gen()
	commit(granted, next)
	pol.grant(granted.PeerID().String(), "professional")
	if written(granted.PeerID()) {
		t.Fatal("written before the key sent it again")
	}
	commit(granted, next)
	if !written(granted.PeerID()) || b.StrangerKeyRecords() != 0 {
		t.Errorf("the commitment of a key the owner's policy names, sent again: written %v, %d held", written(granted.PeerID()), b.StrangerKeyRecords())
	}
}
