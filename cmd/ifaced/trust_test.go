package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestTrustVerbs(t *testing.T) {
	aliceHome, alice := startDaemon(t, aliceConfig())
	bobHome, bob := startDaemon(t, nil)
	a, b := aliceHome.Dir, bobHome.Dir
	aliceID, bobID := alice.ID().PeerID().String(), bob.ID().PeerID().String()

	wantLines(t, "trust before anything", mustRun(t, a, "trust"), "no trust records")

	var m trust.MintedIntro
	out := mustRun(t, a, "introduce", "--label", "Bob", "--expires", "2d", "--disclosure", "professional", "--json")
	if err := json.Unmarshal([]byte(out), &m); err != nil || !strings.HasPrefix(m.Token, "ifintro1") {
		t.Fatalf("introduce --json: %+v %v\n%s", m, err, out)
	}
	if d := time.Until(m.Expires); d < 47*time.Hour || d > 48*time.Hour {
		t.Errorf("--expires 2d gave a token until %s", m.Expires)
	}
	out = mustRun(t, a, "introduce", "--label", "Carol")
	wantLines(t, "introduce", out, "introduction token ", `for "Carol", valid until`, "ifaced accept-intro ifintro1", "ifaced introduce --revoke ")

	wantLines(t, "accept-intro", mustRun(t, b, "accept-intro", m.Token), "holding introduction token "+m.ID+` ("Bob") from `+aliceID)
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	out = mustRun(t, b, "greet", aliceID)
	// Alice's grant follows the introduction once converse.go asks policyFor;
	// her trust record shows it already.
	wantLines(t, "greet", out, "granted you")

	out = mustRun(t, a, "trust")
	wantLines(t, "trust", out, "PEER", bobID, "1 (signed)", `introduced via token "Bob" (professional under default)`)
	out = mustRun(t, a, "introduce", "--list")
	wantLines(t, "introduce --list", out, m.ID, "bound", bobID, "professional", "Carol", "unused")
	wantLines(t, "bob's introduce --list", mustRun(t, b, "introduce", "--list"), "HELD", m.ID, aliceID)

	// Pinning: the wrong fingerprint is refused with both shown.
	r := ifaced(t, a, "trust", bobID, "--verify", alice.ID().Fingerprint())
	if r.code != 1 || !strings.Contains(r.stderr, alice.ID().Fingerprint()) || !strings.Contains(r.stderr, bob.ID().Fingerprint()) {
		t.Errorf("verify with the wrong fingerprint: exit %d\n%s", r.code, r.stderr)
	}
	out = mustRun(t, a, "trust", bobID, "--verify", bob.ID().Fingerprint())
	wantLines(t, "trust --verify", out, "pinned "+bob.ID().Fingerprint()+": "+bobID+" is now at level 2 (verified)", "how          pinned ")
	out = mustRun(t, a, "trust", bobID, "--check")
	wantLines(t, "trust --check", out, "identity document: no level beyond 1 (signed): nothing to fetch:", "level        2 (verified)")
	var info trust.Info
	if err := json.Unmarshal([]byte(mustRun(t, a, "trust", bobID, "--json")), &info); err != nil || info.Level != conditions.Verified {
		t.Errorf("trust PEER --json: %+v %v", info, err)
	}
	out = mustRun(t, a, "trust", bobID, "--revoke")
	wantLines(t, "trust --revoke", out, "revoked trust in key "+bob.ID().Fingerprint(), "level        none")
	var list []trust.Info
	if err := json.Unmarshal([]byte(mustRun(t, a, "trust", "--json")), &list); err != nil || len(list) != 1 || list[0].Level != conditions.NoLevel {
		t.Errorf("trust --json: %+v %v", list, err)
	}

	wantLines(t, "introduce --revoke", mustRun(t, a, "introduce", "--revoke", m.ID), "revoked introduction token "+m.ID, bobID+" no longer gets its tier")
	var l api.IntroList
	if err := json.Unmarshal([]byte(mustRun(t, a, "introduce", "--list", "--json")), &l); err != nil || len(l.Issued) != 2 {
		t.Errorf("introduce --list --json: %+v %v", l, err)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"trust", bobID, "--revoke", "--check"}, 2, "one of"},
		{[]string{"trust", "--check"}, 2, "need a PEER"},
		{[]string{"introduce"}, 2, "--label"},
		{[]string{"introduce", "--label", "x", "--expires", "soon"}, 2, "--expires"},
		{[]string{"introduce", "--label", "x", "--disclosure", "bestie"}, 1, "not a known tier"},
		{[]string{"introduce", "--revoke", "0123456789abcdef"}, 1, "no introduction token"},
		{[]string{"accept-intro"}, 2, "one TOKEN"},
		{[]string{"accept-intro", "ifintro1garbage"}, 1, "not a valid introduction token"},
	} {
		r := ifaced(t, a, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("ifaced %q: exit %d, stderr %q; want exit %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

func TestParseExpiry(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "1.5d": 36 * time.Hour, "2w": 14 * 24 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute,
	} {
		if got, err := parseExpiry(in); err != nil || got != want {
			t.Errorf("parseExpiry(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "-1d", "0h", "soon", "1ms", "99999999d"} {
		if got, err := parseExpiry(in); err == nil {
			t.Errorf("parseExpiry(%q) = %s, want an error", in, got)
		}
	}
}

// TestTrustShowsCheckFailure: a failed fetch kept beside an earlier
// successful check shows in `ifaced trust` and `ifaced trust PEER`, with
// how long the earlier check stands.
func TestTrustShowsCheckFailure(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	info := trust.Info{Peer: "12D3KooWBob", Level: conditions.Bound, How: []string{"bound to https://bob.example/id"},
		AgentID:          "https://bob.example/id",
		Check:            &store.DocCheck{AgentID: "https://bob.example/id", Level: 3, Outcome: trust.CheckBound, CheckedAt: t0},
		CheckFailure:     &store.DocCheck{AgentID: "https://bob.example/id", Level: 1, Outcome: trust.CheckFetchFailed, Reason: "fetching the identity document: 503", CheckedAt: t0.Add(25 * time.Hour)},
		CheckStandsUntil: t0.Add(7 * 24 * time.Hour)}
	var one, list strings.Builder
	printTrust(&one, &info)
	wantLines(t, "trust PEER", one.String(),
		"document      https://bob.example/id (bound, checked 2026-05-01T12:00:00Z, stands until 2026-05-08T12:00:00Z)",
		"check failed  2026-05-02T13:00:00Z: fetching the identity document: 503")
	printTrustList(&list, []trust.Info{info})
	wantLines(t, "trust", list.String(),
		"12D3KooWBob: identity document check failed 2026-05-02T13:00:00Z (the earlier check stands until 2026-05-08T12:00:00Z): fetching the identity document: 503")
}

// TestTrustShowsKeyRecords: `ifaced trust` lists the key lifecycle records
// with who signed them, how they came and their class; a revocation from
// the network is shown as such, not as the owner's; the owner's
// revocation names the keys of the same identity revoked with it; --forget
// forgets.
func TestTrustShowsKeyRecords(t *testing.T) {
	h, alice := startDaemon(t, aliceConfig())
	a := h.Dir
	book := alice.TrustBook()
	met := func(peer.ID) bool { return true }
	known := func(p peer.ID) bool { owner, _ := book.OwnerStanding(p); return owner }
	stranger, _ := identity.Generate(nil)
	r, _ := identity.NewRevocation(stranger, stranger.KeyID(), time.Now(), "lost \"it\"")
	if err := book.CheckRevocation(r, nil, met); err != nil {
		t.Fatal(err)
	}
	if _, _, err := book.FollowRevocation(r, nil, "https"); err != nil {
		t.Fatal(err)
	}
	old, next := thirdKey(t), thirdKey(t)
	if _, err := book.PinKey(old.PeerID(), old.Fingerprint()); err != nil {
		t.Fatal(err)
	}
	s, _ := identity.NewSuccession(old, next, time.Now(), time.Hour)
	if err := book.CheckSuccession(s, next.PeerID(), met, known, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := book.FollowSuccession(s, "libp2p"); err != nil {
		t.Fatal(err)
	}
	sid, oid, nid := stranger.PeerID().String(), old.PeerID().String(), next.PeerID().String()

	out := mustRun(t, a, "trust")
	wantLines(t, "trust", out, "CLASS", sid+"  none", "stranger", "owner",
		sid+": key revocation received of "+sid+", signed by the key itself, via https",
		`reason: "lost \"it\""`, "[stranger]",
		oid+": key succession received "+oid+" → "+nid+", signed by both keys, via libp2p", "[established]")
	out = mustRun(t, a, "trust", sid)
	wantLines(t, "trust PEER", out, "stranger", "a revocation statement signed by the key itself, received via https")
	if strings.Contains(out, "by the owner") {
		t.Errorf("a network revocation shown as the owner's:\n%s", out)
	}
	out = mustRun(t, a, "trust", oid, "--revoke")
	wantLines(t, "trust --revoke", out, "revoked with it, as keys of the same identity (successions followed between them): "+nid)
	out = mustRun(t, a, "trust", nid)
	wantLines(t, "trust NEXT", out, "you (ifaced trust --revoke), with "+oid+", a key of the same identity")
	out = mustRun(t, a, "trust", sid, "--forget")
	wantLines(t, "trust --forget", out, "forgot about "+sid+": revocation statement", "1 (signed)")
	var info trust.Info
	if err := json.Unmarshal([]byte(mustRun(t, a, "trust", sid, "--json")), &info); err != nil || info.Level != conditions.Signed || len(info.Keys) != 0 {
		t.Errorf("after --forget: %+v %v", info, err)
	}
	if r := ifaced(t, a, "trust", "--forget"); r.code != 2 || !strings.Contains(r.stderr, "need a PEER") {
		t.Errorf("--forget without a PEER: %d %s", r.code, r.stderr)
	}
}

func thirdKey(t *testing.T) *identity.Identity {
	t.Helper()
	id, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
