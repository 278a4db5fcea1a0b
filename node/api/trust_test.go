package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/trust"
)

// greetFrom connects from to to and greets it through from's API.
func greetFrom(t *testing.T, from, to *daemon) {
	t.Helper()
	ctx := testContext(t)
	if _, err := from.c.Connect(ctx, to.n.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	if _, err := from.c.Greet(ctx, GreetRequest{Peer: to.peerID()}); err != nil {
		t.Fatal(err)
	}
}

func trustOf(t *testing.T, list []trust.Info, peer string) trust.Info {
	t.Helper()
	i := slices.IndexFunc(list, func(ti trust.Info) bool { return ti.Peer == peer })
	if i < 0 {
		t.Fatalf("no trust record for %s in %+v", peer, list)
	}
	return list[i]
}

func TestIntroductionsThroughTheAPI(t *testing.T) {
	alice := startDaemon(t, aliceConfig(""))
	bob, carol := startDaemon(t, nil), startDaemon(t, nil)
	ctx := testContext(t)

	m, err := alice.c.Introductions().Mint(ctx, IntroRequest{Label: "Bob", ExpiresSeconds: 3600, Disclosure: "professional"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Token, "ifintro1") || m.ID == "" || time.Until(m.Expires) > time.Hour || m.State != trust.IntroUnused {
		t.Fatalf("minted %+v", m)
	}
	for _, d := range []*daemon{bob, carol} { // carol got a copy of bob's token
		held, err := d.c.Introductions().Accept(ctx, m.Token)
		if err != nil || held.ID != m.ID || held.IssuerPeer != alice.peerID() {
			t.Fatalf("accept: %+v %v", held, err)
		}
	}
	greetFrom(t, bob, alice)
	greetFrom(t, carol, alice)

	list, err := alice.c.Trust(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b := trustOf(t, list, bob.peerID()); len(b.Intros) != 1 || b.Intros[0].Disclosure != "professional" || b.Refusal != "" {
		t.Errorf("bob: %+v", b)
	}
	if c := trustOf(t, list, carol.peerID()); c.Level != conditions.Signed || !strings.Contains(c.Refusal, "bound to another peer") {
		t.Errorf("carol: %+v", c)
	}
	intros, err := alice.c.Introductions().List(ctx)
	if err != nil || len(intros.Issued) != 1 || intros.Issued[0].State != trust.IntroBound || intros.Issued[0].BoundPeer != bob.peerID() {
		t.Fatalf("intros: %+v %v", intros, err)
	}
	if held, err := bob.c.Introductions().List(ctx); err != nil || len(held.Held) != 1 || len(held.Issued) != 0 {
		t.Errorf("bob's intros: %+v %v", held, err)
	}
	revoked, err := alice.c.Introductions().Revoke(ctx, m.ID)
	if err != nil || revoked.State != trust.IntroRevoked {
		t.Errorf("revoke: %+v %v", revoked, err)
	}

	_, err = alice.c.Introductions().Revoke(ctx, "0123456789abcdef")
	apiError(t, err, http.StatusNotFound)
	_, err = alice.c.Introductions().Mint(ctx, IntroRequest{Label: "x", ExpiresSeconds: -1})
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "expires_seconds" {
		t.Errorf("negative expiry: %+v", e)
	}
	_, err = alice.c.Introductions().Mint(ctx, IntroRequest{Label: "x", Disclosure: "bestie"})
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "disclosure" {
		t.Errorf("unknown tier: %+v", e)
	}
	old, _ := identity.MintIntroduction(alice.n.ID().DID(), "old", time.Minute, time.Now().Add(-time.Hour), nil)
	_, err = bob.c.Introductions().Accept(ctx, old.Encode())
	if e := apiError(t, err, http.StatusBadRequest); e.Field != "token" || !strings.Contains(e.Message, "expired") {
		t.Errorf("expired token: %+v", e)
	}
	_, err = bob.c.Introductions().Accept(ctx, "")
	apiError(t, err, http.StatusBadRequest)
}

func TestTrustThroughTheAPI(t *testing.T) {
	alice, bob := startDaemon(t, nil), startDaemon(t, nil)
	ctx := testContext(t)
	greetFrom(t, bob, alice)

	info, err := alice.c.PeerTrust(ctx, bob.peerID())
	if err != nil || info.Level != conditions.Signed || info.How[0] != "signed only" || info.Fingerprint != bob.n.ID().Fingerprint() {
		t.Fatalf("before: %+v %v", info, err)
	}
	wrong := alice.n.ID().Fingerprint()
	_, err = alice.c.TrustPeer(ctx, bob.peerID(), TrustAction{Verify: wrong})
	e := apiError(t, err, http.StatusBadRequest)
	if e.Field != "verify" || !strings.Contains(e.Message, wrong) || !strings.Contains(e.Message, bob.n.ID().Fingerprint()) {
		t.Errorf("wrong fingerprint: %+v", e)
	}
	info, err = alice.c.TrustPeer(ctx, bob.peerID(), TrustAction{Verify: bob.n.ID().Fingerprint()})
	if err != nil || info.Level != conditions.Verified {
		t.Fatalf("pin: %+v %v", info, err)
	}
	info, err = alice.c.TrustPeer(ctx, bob.peerID(), TrustAction{Check: true})
	if err != nil || info.Level != conditions.Verified || info.Check == nil || info.Check.Outcome != trust.CheckNotFetched {
		t.Errorf("check of a did:key agent: %+v %v", info, err)
	}
	info, err = alice.c.TrustPeer(ctx, bob.peerID(), TrustAction{Revoke: true})
	if err != nil || info.Level != conditions.NoLevel || info.RevokedKey != bob.n.ID().Fingerprint() {
		t.Fatalf("revoke: %+v %v", info, err)
	}
	list, err := alice.c.Trust(ctx)
	if err != nil || len(list) != 1 || list[0].Peer != bob.peerID() {
		t.Errorf("list: %+v %v", list, err)
	}

	for _, a := range []TrustAction{{}, {Revoke: true, Check: true}} {
		_, err = alice.c.TrustPeer(ctx, bob.peerID(), a)
		apiError(t, err, http.StatusBadRequest)
	}
	_, err = alice.c.TrustPeer(ctx, "nobody-we-know", TrustAction{Check: true})
	apiError(t, err, http.StatusNotFound)
	stranger, _ := identity.Generate(nil)
	info, err = alice.c.TrustPeer(ctx, stranger.PeerID().String(), TrustAction{Check: true})
	if err != nil || info.Check == nil || info.Check.Outcome != trust.CheckNoAgentID {
		t.Errorf("check of a peer never greeted: %+v %v", info, err)
	}
}
