package trust

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// newBook builds a Book over a store of its own, the way the daemon does:
// a lifetime that ends, and a spawn whose work the test's end waits for.
func newBook(t *testing.T, cfg Config) (*Book, *store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "ifaced.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return openBook(t, st, cfg), st
}

func openBook(t *testing.T, st *store.Store, cfg Config) *Book {
	t.Helper()
	return openBookAt(t, st, cfg, time.Now)
}

// openBookAt is openBook with a clock.
func openBookAt(t *testing.T, st *store.Store, cfg Config, now func() time.Time) *Book {
	t.Helper()
	return openBookWith(t, st, cfg, now, nil)
}

// testPolicy is a Policy the test changes.
type testPolicy struct {
	mu sync.Mutex
	p  negotiate.Policy
}

func (tp *testPolicy) InForce() *negotiate.Policy {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	p := tp.p
	return &p
}

// grant names peer at tier under the default persona.
func (tp *testPolicy) grant(peer, tier string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	m := map[string]map[string]string{negotiate.DefaultPersona: {peer: tier}}
	for persona, peers := range tp.p.Map {
		for k, v := range peers {
			if m[persona] == nil {
				m[persona] = map[string]string{}
			}
			m[persona][k] = v
		}
	}
	tp.p.Map = m
}

// openBookWith is openBookAt with the owner's policy.
func openBookWith(t *testing.T, st *store.Store, cfg Config, now func() time.Time, policy Policy) *Book {
	t.Helper()
	self, _ := identity.Generate(nil)
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu      sync.Mutex
		closing bool
		wg      sync.WaitGroup
	)
	spawn := func(f func()) bool {
		mu.Lock()
		defer mu.Unlock()
		if closing {
			return false
		}
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
		return true
	}
	t.Cleanup(func() {
		cancel()
		mu.Lock()
		closing = true
		mu.Unlock()
		wg.Wait()
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(ctx, st, cfg, conditions.DefaultTierOrder(), policy, self.DID(), now, log, spawn)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPinAndRevokeKey: pins and revocations are kept in the store and
// read back by the next Book; a revoked key has no level and its messages
// are refused.
func TestPinAndRevokeKey(t *testing.T) {
	b, st := newBook(t, Config{})
	bob, _ := identity.Generate(nil)
	if level, _ := b.LevelOf(bob.PeerID(), nil, ""); level != conditions.Signed {
		t.Fatalf("a peer without a record: level %s, want 1", level)
	}
	if _, err := b.PinKey(bob.PeerID(), "SHA256:nope"); !errors.Is(err, ErrFingerprintMismatch) {
		t.Fatalf("pinning the wrong fingerprint: %v", err)
	}
	var ie *InputError
	if _, err := b.PinKey(bob.PeerID(), " "); !errors.As(err, &ie) || ie.Field != "verify" {
		t.Fatalf("pinning no fingerprint: %v, want an error on verify", err)
	}
	if info, err := b.PinKey(bob.PeerID(), strings.ToLower("sha256:")+strings.TrimPrefix(bob.Fingerprint(), "SHA256:")); err != nil || info.Level != conditions.Verified {
		t.Fatalf("pinning: %+v, %v", info, err)
	}
	if _, err := b.RevokeKey(bob.PeerID()); err != nil {
		t.Fatal(err)
	}
	again := openBook(t, st, Config{})
	if err := again.KeyRevoked(bob.PeerID()); !errors.Is(err, ErrKeyRevoked) {
		t.Errorf("KeyRevoked after reopening: %v", err)
	}
	if level, _ := again.LevelOf(bob.PeerID(), nil, ""); level != conditions.NoLevel {
		t.Errorf("level of a revoked key: %s", level)
	}
	if list := again.List(); len(list) != 1 || list[0].RevokedKey != bob.Fingerprint() || list[0].Fingerprint != bob.Fingerprint() {
		t.Errorf("List() = %+v", list)
	}
}

func TestDocumentChecksAreBounded(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-release
		http.NotFound(w, r)
	}))
	defer srv.Close()
	defer close(release)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	alice, _ := newBook(t, Config{CAFile: ca, FetchPrivate: true}) // the test server is on loopback

	now := time.Now()
	var peers []peer.ID
	for range 6 {
		id, _ := identity.Generate(nil)
		peers = append(peers, id.PeerID())
	}
	// Nothing is fetched for an agent ID that is not https or did:web.
	alice.checkInBackground(peers[5], "http://example.com/bob", store.TrustRecord{}, now)
	alice.checkInBackground(peers[5], "did:key:z6Mkfoo", store.TrustRecord{}, now)
	if n := len(alice.fetch.sem); n != 0 {
		t.Fatalf("%d checks started for agent IDs that are not fetched", n)
	}
	// One in flight per peer.
	alice.checkInBackground(peers[0], srv.URL+"/0", store.TrustRecord{}, now)
	alice.checkInBackground(peers[0], srv.URL+"/0", store.TrustRecord{}, now)
	if n := len(alice.fetch.sem); n != 1 {
		t.Fatalf("%d checks in flight for one peer", n)
	}
	// Four in all.
	for _, pid := range peers {
		alice.checkInBackground(pid, srv.URL+"/"+pid.String(), store.TrustRecord{}, now)
	}
	alice.mu.RLock()
	inflight := len(alice.inflight)
	alice.mu.RUnlock()
	if inflight != maxChecksInFlight || len(alice.fetch.sem) != maxChecksInFlight {
		t.Fatalf("%d checks in flight, want %d", inflight, maxChecksInFlight)
	}
	eventually(t, "four fetches", func() bool { return arrived.Load() == maxChecksInFlight })
	// A fresh check is not repeated; a day-old one is.
	fresh := store.TrustRecord{Check: &store.DocCheck{AgentID: srv.URL + "/x", CheckedAt: now.Add(-time.Hour)}}
	stale := store.TrustRecord{Check: &store.DocCheck{AgentID: srv.URL + "/x", CheckedAt: now.Add(-25 * time.Hour)}}
	release <- struct{}{} // one check ends
	eventually(t, "a free slot", func() bool { return len(alice.fetch.sem) < maxChecksInFlight })
	extra, _ := identity.Generate(nil)
	alice.checkInBackground(extra.PeerID(), srv.URL+"/x", fresh, now)
	if len(alice.fetch.sem) != maxChecksInFlight-1 {
		t.Error("a fresh check was repeated")
	}
	alice.checkInBackground(extra.PeerID(), srv.URL+"/x", stale, now)
	if len(alice.fetch.sem) != maxChecksInFlight {
		t.Error("a day-old check was not repeated")
	}
}
