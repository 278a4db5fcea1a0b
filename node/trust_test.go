package node

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/goleak"
)

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

func (d *testDaemon) pid() peer.ID { return d.id.PeerID() }

func greet(t *testing.T, from, to *testDaemon) *converse.GreetResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := from.Greet(ctx, to.pid(), negotiate.Proposal{})
	if err != nil {
		t.Fatalf("greeting: %v", err)
	}
	return r
}

// grantFor is what owner grants pid with the introduced tiers applied.
func grantFor(owner *testDaemon, pid peer.ID) negotiate.Granted {
	level, agentID := owner.trust.LevelOf(pid, nil, "")
	return owner.policy.InForce().GrantTo(owner.convs.Requester(pid, level, agentID), negotiate.Proposal{})
}

// introduce has alice mint a token with tier and the holders accept it.
func introduce(t *testing.T, alice *testDaemon, tier string, holders ...*testDaemon) trust.MintedIntro {
	t.Helper()
	m, err := alice.TrustBook().Introduce(trust.IntroRequest{Label: "Bob from the conference", Disclosure: tier})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range holders {
		held, err := h.TrustBook().Held().Accept(m.Token)
		if err != nil {
			t.Fatal(err)
		}
		if held.IssuerPeer != alice.pid().String() || held.ID != m.ID {
			t.Fatalf("accepted %+v, want a token of %s from %s", held, m.ID, alice.pid())
		}
	}
	return m
}

func TestIntroductionGrantsItsTier(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	m := introduce(t, alice, "professional", bob)
	if m.State != trust.IntroUnused || m.Expires.Sub(m.Created).Round(time.Minute) != alice.cfg.Trust.IntroExpiry.Duration {
		t.Errorf("minted %+v", m.IssuedIntroInfo)
	}
	if _, ok := alice.trust.IntroducedTier(bob.pid(), ""); ok {
		t.Fatal("bob has a tier before proving the token")
	}
	connect(t, bob, alice)
	if r := greet(t, bob, alice); r.GrantedToUs.Disclosure != "professional" {
		t.Errorf("the introduced peer was granted %+v in its greeting, want professional", r.GrantedToUs)
	}

	if tier, ok := alice.trust.IntroducedTier(bob.pid(), ""); !ok || tier != "professional" {
		t.Fatalf("IntroducedTier(bob) = %q %v, want professional", tier, ok)
	}
	if _, ok := alice.trust.IntroducedTier(bob.pid(), "researcher"); ok {
		t.Error("the tier applies under another persona")
	}
	if g := grantFor(alice, bob.pid()); g.Disclosure != "professional" || g.AuthLevel != conditions.Signed {
		t.Errorf("alice grants bob %+v, want professional at level 1", g)
	}
	info := alice.TrustBook().Peer(bob.pid())
	if info.Level != conditions.Signed || len(info.Intros) != 1 || info.Intros[0].TokenID != m.ID || info.Refusal != "" ||
		!strings.Contains(strings.Join(info.How, "; "), `introduced via token "Bob from the conference" (professional under default)`) {
		t.Errorf("alice's trust in bob: %+v", info)
	}
	issued, err := alice.TrustBook().IssuedIntros()
	if err != nil || len(issued) != 1 || issued[0].State != trust.IntroBound || issued[0].BoundPeer != bob.pid().String() {
		t.Fatalf("issued: %+v %v", issued, err)
	}

	// The introduction holds across a restart, and greeting again changes nothing.
	alice.Close()
	waitDisconnected(t, bob, alice) // else bob may greet over the dying connection
	alice = restartDaemon(t, alice)
	connect(t, bob, alice)
	greet(t, bob, alice)
	if g := grantFor(alice, bob.pid()); g.Disclosure != "professional" {
		t.Errorf("after a restart alice grants bob %+v", g)
	}
	// The map still wins where it grants more.
	if err := alice.Policy().SetDisclosure("", bob.pid().String(), "personal"); err != nil {
		t.Fatal(err)
	}
	if g := grantFor(alice, bob.pid()); g.Disclosure != "personal" {
		t.Errorf("with the map granting personal, alice grants bob %+v", g)
	}
	if err := alice.Policy().SetDisclosure("", bob.pid().String(), ""); err != nil {
		t.Fatal(err)
	}

	// Revoking the token withdraws its tier.
	if _, err := alice.TrustBook().RevokeIntro(m.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := alice.trust.IntroducedTier(bob.pid(), ""); ok {
		t.Error("a revoked token still grants its tier")
	}
	if g := grantFor(alice, bob.pid()); g.Disclosure != "public" {
		t.Errorf("after revoking, alice grants bob %+v", g)
	}
	if _, err := alice.TrustBook().RevokeIntro("0123456789abcdef"); !errors.Is(err, trust.ErrNoSuchIntro) {
		t.Errorf("revoking an unknown token: %v", err)
	}
}

// refusal greets alice from peer and returns alice's trust in it, which
// must record a refusal saying want.
func refusal(t *testing.T, alice, peer *testDaemon, want string) trust.Info {
	t.Helper()
	connect(t, peer, alice)
	greet(t, peer, alice) // a refused proof does not fail the greeting
	if level, _ := alice.trust.LevelOf(peer.pid(), nil, ""); level != conditions.Signed {
		t.Errorf("level %s, want 1 (signed)", level)
	}
	if tier, ok := alice.trust.IntroducedTier(peer.pid(), ""); ok {
		t.Errorf("the refused peer got tier %q", tier)
	}
	info := alice.TrustBook().Peer(peer.pid())
	if !strings.Contains(info.Refusal, want) || info.RefusedAt.IsZero() || len(info.Intros) != 0 {
		t.Errorf("refusal %q (at %s), want one saying %q", info.Refusal, info.RefusedAt, want)
	}
	return info
}

func TestIntroductionRefusals(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	t.Run("copied", func(t *testing.T) {
		bob, carol := startDaemon(t, nil), startDaemon(t, nil)
		introduce(t, alice, "professional", bob, carol)
		connect(t, bob, alice)
		greet(t, bob, alice)
		refusal(t, alice, carol, "bound to another peer")
		if tier, _ := alice.trust.IntroducedTier(bob.pid(), ""); tier != "professional" {
			t.Errorf("bob, who used the token first, has %q", tier)
		}
	})
	t.Run("revoked", func(t *testing.T) {
		bob := startDaemon(t, nil)
		m := introduce(t, alice, "professional", bob)
		if _, err := alice.TrustBook().RevokeIntro(m.ID); err != nil {
			t.Fatal(err)
		}
		refusal(t, alice, bob, "revoked")
	})
	t.Run("expired", func(t *testing.T) {
		bob := startDaemon(t, nil)
		m := introduce(t, alice, "professional", bob)
		// Time passes for alice: her record of the token is past its expiry.
		rec, err := alice.Store().IssuedIntro(m.ID)
		if err != nil {
			t.Fatal(err)
		}
		rec.Expires = time.Now().Add(-time.Minute)
		if err := alice.Store().PutIssuedIntro(rec); err != nil {
			t.Fatal(err)
		}
		refusal(t, alice, bob, "expired")
	})
	t.Run("never issued", func(t *testing.T) {
		mallory := startDaemon(t, nil)
		// A token that names alice as issuer, minted by someone else.
		tok, err := identity.MintIntroduction(alice.ID().DID(), "forged", time.Hour, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mallory.TrustBook().Held().Accept(tok.Encode()); err != nil {
			t.Fatal(err)
		}
		refusal(t, alice, mallory, "no introduction token of that ID")
	})
	t.Run("wrong secret", func(t *testing.T) {
		bob := startDaemon(t, nil)
		m := introduce(t, alice, "professional")
		tok, err := identity.ParseIntroduction(m.Token)
		if err != nil {
			t.Fatal(err)
		}
		tok.Secret[0] ^= 0xff
		if _, err := bob.TrustBook().Held().Accept(tok.Encode()); err != nil {
			t.Fatal(err)
		}
		refusal(t, alice, bob, "does not verify")
	})
}

func TestAcceptIntroRefuses(t *testing.T) {
	alice, bob := startDaemon(t, nil), startDaemon(t, nil)
	old, err := identity.MintIntroduction(alice.ID().DID(), "old", time.Hour, time.Now().Add(-2*time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.TrustBook().Held().Accept(old.Encode())
	var ie *trust.InputError
	if !errors.Is(err, identity.ErrIntroExpired) || !errors.As(err, &ie) || ie.Field != "token" || !strings.Contains(err.Error(), "expired on") {
		t.Errorf("accepting an expired token: %v", err)
	}
	if _, err := bob.TrustBook().Held().Accept("ifintro1nonsense"); !errors.Is(err, identity.ErrBadIntroduction) {
		t.Errorf("accepting nonsense: %v", err)
	}
	m, err := alice.TrustBook().Introduce(trust.IntroRequest{Label: "someone"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.TrustBook().Held().Accept(m.Token); !errors.Is(err, trust.ErrOwnIntro) {
		t.Errorf("accepting one's own token: %v", err)
	}
	for _, tc := range []struct {
		req   trust.IntroRequest
		field string
	}{
		{trust.IntroRequest{}, "label"},
		{trust.IntroRequest{Label: strings.Repeat("x", 200)}, "label"},
		{trust.IntroRequest{Label: "x", TTL: -time.Hour}, "expires_seconds"},
		{trust.IntroRequest{Label: "x", Disclosure: "intimate"}, "disclosure"},
		{trust.IntroRequest{Label: "x", Disclosure: "personal", Persona: "two words"}, "persona"},
		{trust.IntroRequest{Label: "x", Persona: "default"}, "persona"},
	} {
		_, err := alice.TrustBook().Introduce(tc.req)
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("Introduce(%+v) = %v, want an error on %s", tc.req, err, tc.field)
		}
	}
}

func TestPinAndRevoke(t *testing.T) {
	alice, bob := startDaemon(t, nil), startDaemon(t, nil)
	connect(t, bob, alice)
	greet(t, bob, alice)
	if level, _ := alice.trust.LevelOf(bob.pid(), nil, ""); level != conditions.Signed {
		t.Fatalf("before pinning: level %s", level)
	}
	wrong := alice.ID().Fingerprint()
	_, err := alice.TrustBook().PinKey(bob.pid(), wrong)
	if !errors.Is(err, trust.ErrFingerprintMismatch) || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), bob.ID().Fingerprint()) {
		t.Fatalf("pinning the wrong fingerprint: %v (want both %s and %s shown)", err, wrong, bob.ID().Fingerprint())
	}
	info, err := alice.TrustBook().PinKey(bob.pid(), strings.TrimPrefix(bob.ID().Fingerprint(), "SHA256:"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Level != conditions.Verified || info.PinnedKey != bob.ID().Fingerprint() || info.How[0] != "pinned "+bob.ID().Fingerprint() {
		t.Errorf("after pinning: %+v", info)
	}
	if level, _ := alice.trust.LevelOf(bob.pid(), nil, ""); level != conditions.Verified {
		t.Errorf("trustOf after pinning: %s", level)
	}
	if err := alice.trust.KeyRevoked(bob.pid()); err != nil {
		t.Errorf("keyRevoked of a pinned key: %v", err)
	}

	if _, err := alice.TrustBook().RevokeKey(bob.pid()); err != nil {
		t.Fatal(err)
	}
	alice.Close()
	alice = restartDaemon(t, alice) // the revocation persists
	err = alice.trust.KeyRevoked(bob.pid())
	if !errors.Is(err, trust.ErrKeyRevoked) || !strings.Contains(err.Error(), "the owner revoked trust in key "+bob.ID().Fingerprint()) {
		t.Errorf("keyRevoked after revoking: %v", err)
	}
	if level, _ := alice.trust.LevelOf(bob.pid(), nil, ""); level != conditions.NoLevel {
		t.Errorf("trustOf a revoked key: %s", level)
	}
	info = alice.TrustBook().Peer(bob.pid())
	if info.PinnedKey != "" || info.RevokedKey != bob.ID().Fingerprint() || info.Level != conditions.NoLevel {
		t.Errorf("after revoking: %+v", info)
	}
	if list := alice.TrustBook().List(); len(list) != 1 || list[0].Peer != bob.pid().String() {
		t.Errorf("List() = %+v", list)
	}
	// Pinning again lifts the revocation.
	if _, err := alice.TrustBook().PinKey(bob.pid(), bob.ID().Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if err := alice.trust.KeyRevoked(bob.pid()); err != nil {
		t.Errorf("keyRevoked after pinning again: %v", err)
	}
}

// docServer is an HTTPS server whose certificate alice's config trusts.
type docServer struct {
	*httptest.Server
	mu       sync.Mutex
	docs     map[string][]byte
	requests atomic.Int64
}

func newDocServer(t *testing.T) (*docServer, string) {
	t.Helper()
	ds := &docServer{docs: map[string][]byte{}}
	ds.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ds.requests.Add(1)
		ds.mu.Lock()
		body, ok := ds.docs[r.URL.Path]
		ds.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	ds.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes refused on purpose
	ds.StartTLS()
	t.Cleanup(ds.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ds.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return ds, ca
}

func (ds *docServer) serve(path string, v any) {
	body, ok := v.([]byte)
	if !ok {
		body, _ = json.Marshal(v)
	}
	ds.mu.Lock()
	ds.docs[path] = body
	ds.mu.Unlock()
}

// withAgentID starts a daemon whose capability document names agentID.
func withAgentID(t *testing.T, agentID string) *testDaemon {
	c := loopbackConfig()
	c.Identity.AgentID = agentID
	return startDaemon(t, c)
}

func check(t *testing.T, alice, bob *testDaemon) trust.Info {
	t.Helper()
	connect(t, bob, alice)
	greet(t, bob, alice)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	info, err := alice.TrustBook().Check(ctx, bob.pid())
	if err != nil {
		t.Fatal(err)
	}
	if info.Check == nil {
		t.Fatalf("Check gave no check: %+v", info)
	}
	return info
}

func TestIdentityDocuments(t *testing.T) {
	ds, ca := newDocServer(t)
	cfg := loopbackConfig()
	cfg.Trust.CAFile = ca
	cfg.Trust.FetchPrivate = true // the test server is on loopback
	alice := startDaemon(t, cfg)

	t.Run("url bound", func(t *testing.T) {
		url := ds.URL + "/bound"
		bob := withAgentID(t, url)
		ds.serve("/bound", identity.NewDocument(bob.id, url, "Bob", time.Now()))
		connect(t, bob, alice)
		greet(t, bob, alice)
		// The greeting started the check; the level rises once it is done.
		eventually(t, "the background check", func() bool { return alice.TrustBook().Peer(bob.pid()).Check != nil })
		info := alice.TrustBook().Peer(bob.pid())
		if info.Level != conditions.Bound || info.AgentID != url || info.Check.Outcome != trust.CheckBound || info.How[0] != "bound to "+url {
			t.Fatalf("after the check: %+v %+v", info, info.Check)
		}
		if level, agentID := alice.trust.LevelOf(bob.pid(), nil, ""); level != conditions.Bound || agentID != url {
			t.Errorf("trustOf = %s %q", level, agentID)
		}
		// Not fetched again on every greeting.
		before := ds.requests.Load()
		greet(t, bob, alice)
		greet(t, bob, alice)
		if got := ds.requests.Load(); got != before {
			t.Errorf("greeting again fetched the document %d more times", got-before)
		}
		// The disclosure map can name the bound agent ID.
		if err := alice.Policy().SetDisclosure("", url, "personal"); err != nil {
			t.Fatal(err)
		}
		if g := grantFor(alice, bob.pid()); g.Disclosure != "personal" || g.AuthLevel != conditions.Bound {
			t.Errorf("alice grants bob %+v", g)
		}
	})
	t.Run("url verified", func(t *testing.T) {
		url := ds.URL + "/verified"
		bob := withAgentID(t, url)
		ds.serve("/verified", identity.NewDocument(bob.id, "https://elsewhere.example/bob", "Bob", time.Now()))
		info := check(t, alice, bob)
		if info.Level != conditions.Verified || info.AgentID != "" || info.Check.Outcome != trust.CheckIDMismatch {
			t.Errorf("%+v %+v", info, info.Check)
		}
	})
	t.Run("key not listed", func(t *testing.T) {
		url := ds.URL + "/other"
		bob := withAgentID(t, url)
		someone, _ := identity.Generate(nil)
		ds.serve("/other", identity.NewDocument(someone, url, "someone", time.Now()))
		info := check(t, alice, bob)
		if info.Level != conditions.Signed || info.Check.Outcome != trust.CheckKeyNotListed || !strings.Contains(info.Check.Reason, bob.ID().Fingerprint()) {
			t.Errorf("%+v %+v", info, info.Check)
		}
	})
	t.Run("key revoked in the document", func(t *testing.T) {
		url := ds.URL + "/revoked"
		bob := withAgentID(t, url)
		doc := identity.NewDocument(bob.id, url, "Bob", time.Now())
		someone, _ := identity.Generate(nil)
		doc.Keys[0].Status = identity.KeyRevoked
		doc.Keys = append(doc.Keys, identity.DocumentKey{KeyID: someone.KeyID(), Type: identity.AlgEd25519,
			PublicKey: base64.RawURLEncoding.EncodeToString(someone.PublicKey()), Created: doc.Keys[0].Created, Status: identity.KeyActive})
		ds.serve("/revoked", doc)
		info := check(t, alice, bob)
		if info.Level != conditions.Signed || info.Check.Outcome != trust.CheckKeyRevoked {
			t.Errorf("%+v %+v", info, info.Check)
		}
	})
	t.Run("did:web", func(t *testing.T) {
		did := "did:web:" + strings.ReplaceAll(strings.TrimPrefix(ds.URL, "https://"), ":", "%3A") + ":people:bob"
		bob := withAgentID(t, did)
		mb := strings.TrimPrefix(bob.ID().DID(), "did:key:")
		ds.serve("/people/bob/did.json", map[string]any{
			"@context": []string{"https://www.w3.org/ns/did/v1"},
			"id":       did,
			"verificationMethod": []map[string]any{{"id": did + "#key-1", "type": "Ed25519VerificationKey2020",
				"controller": did, "publicKeyMultibase": mb}},
			"authentication": []string{"#key-1"},
		})
		info := check(t, alice, bob)
		if info.Level != conditions.Bound || info.AgentID != did || info.Check.URL != ds.URL+"/people/bob/did.json" {
			t.Errorf("%+v %+v", info, info.Check)
		}
	})
	t.Run("http never fetched", func(t *testing.T) {
		var hits atomic.Int64
		plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		defer plain.Close()
		bob := withAgentID(t, plain.URL+"/bob")
		info := check(t, alice, bob)
		if info.Level != conditions.Signed || info.Check.Outcome != trust.CheckNotFetched || hits.Load() != 0 {
			t.Errorf("%+v %+v, %d requests", info, info.Check, hits.Load())
		}
	})
	t.Run("too large", func(t *testing.T) {
		url := ds.URL + "/huge"
		bob := withAgentID(t, url)
		ds.serve("/huge", []byte(`{"ifp":5,"display":"`+strings.Repeat("x", 2<<20)+`"}`))
		info := check(t, alice, bob)
		if info.Level != conditions.Signed || info.Check.Outcome != trust.CheckFetchFailed || !strings.Contains(info.Check.Reason, "limit") {
			t.Errorf("%+v %+v", info, info.Check)
		}
	})
	t.Run("redirect to http", func(t *testing.T) {
		mux := http.NewServeMux()
		redirector := httptest.NewUnstartedServer(mux)
		redirector.TLS = ds.TLS
		redirector.StartTLS()
		defer redirector.Close()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:1/doc", http.StatusFound)
		})
		bob := withAgentID(t, redirector.URL+"/doc")
		info := check(t, alice, bob)
		if info.Check.Outcome != trust.CheckFetchFailed || !strings.Contains(info.Check.Reason, "only https") {
			t.Errorf("%+v", info.Check)
		}
	})
	t.Run("private address refused by default", func(t *testing.T) {
		other := startDaemon(t, nil)
		url := ds.URL + "/bound3"
		bob := withAgentID(t, url)
		ds.serve("/bound3", identity.NewDocument(bob.id, url, "Bob", time.Now()))
		info := check(t, other, bob)
		if info.Level != conditions.Signed || info.Check.Outcome != trust.CheckFetchFailed || !strings.Contains(info.Check.Reason, "fetch_private") {
			t.Errorf("%+v", info.Check)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		cfg := loopbackConfig()
		cfg.Trust.FetchPrivate = true // no ca_file: the test server's certificate is unknown
		other := startDaemon(t, cfg)
		url := ds.URL + "/bound2"
		bob := withAgentID(t, url)
		ds.serve("/bound2", identity.NewDocument(bob.id, url, "Bob", time.Now()))
		info := check(t, other, bob)
		if info.Level != conditions.Signed || info.Check.Outcome != trust.CheckFetchFailed || !strings.Contains(info.Check.Reason, "certificate") {
			t.Errorf("%+v", info.Check)
		}
	})
}

func TestTrustConfig(t *testing.T) {
	if c := config.DefaultConfig(); c.Trust.CAFile != "" {
		t.Errorf("default trust.ca_file = %q, want empty", c.Trust.CAFile)
	}
	src, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "\nca_file = \"\"\n") {
		t.Error("config.example.toml does not document trust.ca_file with its default")
	}
	junk := filepath.Join(t.TempDir(), "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	for file, want := range map[string]string{
		"relative.pem":        "not an absolute path",
		"/nonexistent/ca.pem": "no such file",
		junk:                  "no PEM certificate",
	} {
		_, err := config.ParseConfig([]byte("version = 1\n[trust]\nca_file = " + strconv.Quote(file) + "\n"))
		if err == nil || !strings.Contains(err.Error(), "trust.ca_file") || !strings.Contains(err.Error(), want) {
			t.Errorf("ca_file %q: %v, want an error saying %q", file, err, want)
		}
	}
}

// TestTrustChecksLeaveNoGoroutine runs a background identity document
// check, closes the daemons, and checks that nothing they started runs on.
func TestTrustChecksLeaveNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ds, ca := newDocServer(t)
	defer ds.Close()
	cfg := loopbackConfig()
	cfg.Trust.CAFile = ca
	cfg.Trust.FetchPrivate = true // the test server is on loopback
	alice := startDaemon(t, cfg)
	url := ds.URL + "/bob"
	bob := withAgentID(t, url)
	ds.serve("/bob", identity.NewDocument(bob.id, url, "Bob", time.Now()))
	connect(t, bob, alice)
	greet(t, bob, alice)
	eventually(t, "the background check", func() bool { return alice.TrustBook().Peer(bob.pid()).Check != nil })
	bob.Close()
	alice.Close()
}

// TestRevokedKeyIsRefusedOnTheWire: after the owner revokes trust in a
// peer's key, that peer's greeting is answered with key_revoked.
func TestRevokedKeyIsRefusedOnTheWire(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob := startDaemon(t, nil)
	connect(t, bob, alice)
	if _, err := alice.TrustBook().RevokeKey(bob.pid()); err != nil {
		t.Fatal(err)
	}
	_, err := bob.Greet(context.Background(), alice.pid(), negotiate.Proposal{})
	if b := remoteCode(t, err); b.Code != wire.CodeKeyRevoked || !strings.Contains(b.Hint, "pin your key") {
		t.Fatalf("greeting with a revoked key: %+v", b)
	}
	// Pinning the key again, after comparing fingerprints, lifts the revocation.
	if _, err := alice.TrustBook().PinKey(bob.pid(), bob.id.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Greet(context.Background(), alice.pid(), negotiate.Proposal{}); err != nil {
		t.Fatalf("after pinning again: %v", err)
	}
}
