package trust

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/store"
)

// introGreeting is a greeting from holder to b's owner carrying the proof
// of the token b minted.
func introGreeting(t *testing.T, b *Book, holder *identity.Identity, minted MintedIntro) *gossip.Message {
	t.Helper()
	tok, err := identity.ParseIntroduction(minted.Token)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: holder.DID()}, To: []gossip.Agent{{Agent: b.did}},
		ConversationID: gossip.NewID("conv", now), Sequence: 1, Phase: gossip.PhaseGreeting, ContentType: gossip.DefaultContentType,
	}}
	if err := m.AddIntroProof(tok, now); err != nil {
		t.Fatal(err)
	}
	if err := m.Sign(holder, now); err != nil {
		t.Fatal(err)
	}
	return m
}

func introduced(t *testing.T, b *Book, holder *identity.Identity) (tier string, intros int, how string) {
	t.Helper()
	tier, _ = b.IntroducedTier(holder.PeerID(), "")
	return tier, len(b.Introductions(holder.PeerID())), strings.Join(b.Peer(holder.PeerID()).How, "; ")
}

// TestRevokeDuringAdmission: the owner revokes a token between the moment
// a greeting's proof of it is admitted and the moment the peer's record
// notes it. The record must not get the token back, and the peer is not
// introduced. (The hook runs the revocation at exactly that point.)
func TestRevokeDuringAdmission(t *testing.T) {
	alice, _ := newBook(t, Config{IntroExpiry: time.Hour})
	bob, _ := identity.Generate(nil)
	minted, err := alice.Introduce(IntroRequest{Label: "Bob", Disclosure: "professional"})
	if err != nil {
		t.Fatal(err)
	}
	revoked := false
	alice.testAdmitted = func() {
		if _, err := alice.RevokeIntro(minted.ID); err != nil {
			t.Error(err)
		}
		revoked = true
	}
	alice.LevelOf(bob.PeerID(), introGreeting(t, alice, bob, minted), "")
	if !revoked {
		t.Fatal("the proof was not admitted, so the revocation never ran")
	}
	if info := alice.Peer(bob.PeerID()); len(info.Intros) != 0 {
		t.Errorf("the record holds %+v after the token was revoked", info.Intros)
	}
	if tier, n, how := introduced(t, alice, bob); tier != "" || n != 0 || strings.Contains(how, "introduced") {
		t.Errorf("after the revocation: tier %q, %d introductions, how %q", tier, n, how)
	}
	// Admitted again with the revoked token: refused, not introduced.
	alice.testAdmitted = nil
	alice.LevelOf(bob.PeerID(), introGreeting(t, alice, bob, minted), "")
	if info := alice.Peer(bob.PeerID()); len(info.Intros) != 0 || !strings.Contains(info.Refusal, "revoked") {
		t.Errorf("a revoked token presented again: intros %+v, refusal %q", info.Intros, info.Refusal)
	}
}

// TestIntroducedTierConsultsIssuedToken: a token revoked in the issued
// record no longer introduces its peer, even when the peer's trust record
// still lists it (RevokeIntro marks the token first and cleans the record
// after; a failure between the two must not leave the peer introduced).
func TestIntroducedTierConsultsIssuedToken(t *testing.T) {
	alice, st := newBook(t, Config{IntroExpiry: time.Hour})
	bob, _ := identity.Generate(nil)
	minted, err := alice.Introduce(IntroRequest{Label: "Bob", Disclosure: "professional"})
	if err != nil {
		t.Fatal(err)
	}
	alice.LevelOf(bob.PeerID(), introGreeting(t, alice, bob, minted), "")
	if tier, n, how := introduced(t, alice, bob); tier != "professional" || n != 1 || !strings.Contains(how, `introduced via token "Bob"`) {
		t.Fatalf("after admission: tier %q, %d introductions, how %q", tier, n, how)
	}
	rec, err := st.IssuedIntro(minted.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec.Revoked, rec.RevokedAt = true, time.Now().UTC()
	if err := st.PutIssuedIntro(rec); err != nil {
		t.Fatal(err)
	}
	if len(alice.Peer(bob.PeerID()).Intros) != 1 {
		t.Fatal("the test means the record to still list the token")
	}
	if tier, n, how := introduced(t, alice, bob); tier != "" || n != 0 || strings.Contains(how, "introduced") {
		t.Errorf("token revoked in the issued record: tier %q, %d introductions, how %q", tier, n, how)
	}
}

// docHost serves an identity document over TLS, or fails on demand.
type docHost struct {
	*httptest.Server
	ca   string
	mu   sync.Mutex
	body []byte // nil: answer 503
}

func newDocHost(t *testing.T) *docHost {
	h := &docHost{}
	h.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		body := h.body
		h.mu.Unlock()
		if body == nil {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(h.Close)
	h.ca = filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(h.ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.Certificate().Raw}), 0o600)
	return h
}

func (h *docHost) serve(doc *identity.Document) {
	var body []byte
	if doc != nil {
		body, _ = json.Marshal(doc)
	}
	h.mu.Lock()
	h.body = body
	h.mu.Unlock()
}

// TestFailedFetchKeepsCheck: a fetch that fails after a successful check
// leaves the peer bound, with the failure beside the check, until the
// check is a week old; a document that is fetched and no longer lists the
// key replaces the check at once.
func TestFailedFetchKeepsCheck(t *testing.T) {
	host := newDocHost(t)
	var (
		mu  sync.Mutex
		now = time.Now()
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	st, err := store.Open(filepath.Join(t.TempDir(), "ifaced.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	alice := openBookAt(t, st, Config{CAFile: host.ca, FetchPrivate: true}, clock) // the host is on loopback
	bob, _ := identity.Generate(nil)
	url := host.URL + "/bob"
	ctx := context.Background()
	level := func() conditions.Level { l, _ := alice.LevelOf(bob.PeerID(), nil, url); return l }

	host.serve(identity.NewDocument(bob, url, "Bob", time.Now()))
	if _, err := alice.runCheck(ctx, bob.PeerID(), url); err != nil {
		t.Fatal(err)
	}
	first := alice.Peer(bob.PeerID())
	if first.Level != conditions.Bound || first.Check.Outcome != CheckBound {
		t.Fatalf("after the first check: %+v %+v", first, first.Check)
	}

	host.serve(nil) // the server is down
	advance(25 * time.Hour)
	if _, err := alice.runCheck(ctx, bob.PeerID(), url); err != nil {
		t.Fatal(err)
	}
	info := alice.Peer(bob.PeerID())
	if info.Level != conditions.Bound || level() != conditions.Bound || info.AgentID != url {
		t.Errorf("after a failed fetch: level %s (LevelOf %s), want the earlier check to stand", info.Level, level())
	}
	if info.Check == nil || !info.Check.CheckedAt.Equal(first.Check.CheckedAt) || info.Check.Outcome != CheckBound {
		t.Errorf("the check after a failed fetch: %+v, want the first one", info.Check)
	}
	if f := info.CheckFailure; f == nil || f.Outcome != CheckFetchFailed || !strings.Contains(f.Reason, "503") {
		t.Errorf("the failure beside it: %+v", f)
	}
	if want := first.Check.CheckedAt.Add(docCheckLifetime); !info.CheckStandsUntil.Equal(want) {
		t.Errorf("stands until %s, want %s", info.CheckStandsUntil, want)
	}
	// A failure is an attempt: the next greeting does not fetch again at once.
	rec, _ := alice.record(bob.PeerID())
	if last, _ := lastAttempt(rec, url); !last.Equal(clock().UTC()) {
		t.Errorf("the last attempt is %s, want the failure's %s", last, clock())
	}

	// Past its lifetime the check no longer vouches for the key.
	advance(docCheckLifetime)
	if info := alice.Peer(bob.PeerID()); info.Level != conditions.Signed || level() != conditions.Signed || info.AgentID != "" {
		t.Errorf("a week after the last success: level %s (LevelOf %s), agent_id %q, want 1", info.Level, level(), info.AgentID)
	}

	// Back up and bound again; then a document that no longer lists the
	// key replaces the check at once.
	host.serve(identity.NewDocument(bob, url, "Bob", time.Now()))
	alice.runCheck(ctx, bob.PeerID(), url)
	if info := alice.Peer(bob.PeerID()); info.Level != conditions.Bound || info.CheckFailure != nil {
		t.Fatalf("checked again: level %s, failure %+v", info.Level, info.CheckFailure)
	}
	someone, _ := identity.Generate(nil)
	host.serve(identity.NewDocument(someone, url, "Someone", time.Now()))
	alice.runCheck(ctx, bob.PeerID(), url)
	if info := alice.Peer(bob.PeerID()); info.Level != conditions.Signed || info.Check.Outcome != CheckKeyNotListed || info.CheckFailure != nil {
		t.Errorf("a document without the key: level %s, check %+v, failure %+v", info.Level, info.Check, info.CheckFailure)
	}
}
