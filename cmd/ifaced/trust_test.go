package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/nodetest"
	"github.com/ifaced/ifaced/node/store"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestTrustVerbs(t *testing.T) {
	aliceHome, alice := startDaemon(t, nodetest.AliceConfig())
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
	wantLines(t, "introduce", out, "introduction token ", `for "Carol", valid until`, "ifaced accept-intro  ", "ifaced accept-intro --secret-file FILE", "ifaced introduce --revoke ")
	if strings.Contains(out, "accept-intro ifintro1") {
		t.Errorf("introduce tells the other human to put the token on a command line:\n%s", out)
	}

	wantLines(t, "accept-intro", mustRunIn(t, b, m.Token+"\n", "accept-intro"), "holding introduction token "+m.ID+` ("Bob") from `+aliceID)
	mustRun(t, b, "connect", alice.Addrs()[0].String())
	out = mustRun(t, b, "greet", aliceID)
	// Alice's grant follows the introduction once node/converse asks policyFor;
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
		{[]string{"introduce", "--label", "x", "--disclosure", "bestie"}, 2, "not a known tier"}, // a mistake in the command line (issue 29: exit 2)
		{[]string{"introduce", "--revoke", "0123456789abcdef"}, 1, "no introduction token"},
		{[]string{"accept-intro"}, 2, "no introduction token"},
		{[]string{"accept-intro", "ifintro1garbage"}, 2, "does not take the token on the command line"},
	} {
		r := ifaced(t, a, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("ifaced %q: exit %d, stderr %q; want exit %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

// ifacedIn runs a verb as ifaced does, with stdin as its standard input.
func ifacedIn(t *testing.T, home, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin), getenv: func(k string) string {
		if k == "IFACED_HOME" {
			return home
		}
		return ""
	}}
	code := run(context.Background(), e, args)
	return result{code, out.String(), errb.String()}
}

func mustRunIn(t *testing.T, home, stdin string, args ...string) string {
	t.Helper()
	r := ifacedIn(t, home, stdin, args...)
	if r.code != 0 {
		t.Fatalf("ifaced %q: exit %d\n%s", args, r.code, r.stderr)
	}
	return r.stdout
}

// TestAcceptIntroSecretNotOnCommandLine: accept-intro takes the token from
// standard input (no argument, or -) and from --secret-file, and refuses
// it as an argument, saying how to pass it, without accepting it (before,
// the token was an argument: readable by every local user in
// /proc/PID/cmdline and kept in shell history).
func TestAcceptIntroSecretNotOnCommandLine(t *testing.T) {
	aliceHome, alice := startDaemon(t, nodetest.AliceConfig())
	bobHome, _ := startDaemon(t, nil)
	a, b := aliceHome.Dir, bobHome.Dir
	mint := func(label string) trust.MintedIntro {
		var m trust.MintedIntro
		if err := json.Unmarshal([]byte(mustRun(t, a, "introduce", "--label", label, "--json")), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	held := func() int {
		var l api.IntroList
		if err := json.Unmarshal([]byte(mustRun(t, b, "introduce", "--list", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		return len(l.Held)
	}

	argv := mint("on the command line")
	r := ifaced(t, b, "accept-intro", argv.Token)
	if r.code != 2 || !strings.Contains(r.stderr, "does not take the token on the command line") || !strings.Contains(r.stderr, "--secret-file FILE") ||
		!strings.Contains(r.stderr, "ifaced accept-intro < FILE") || strings.Contains(r.stderr, argv.Token) {
		t.Errorf("accept-intro TOKEN: exit %d, %q", r.code, r.stderr)
	}
	if n := held(); n != 0 {
		t.Fatalf("a token given as an argument was accepted (%d held)", n)
	}

	aliceID := alice.ID().PeerID().String()
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		warn  bool
	}{
		{"standard input", []string{"accept-intro"}, "%s\n", false},
		{"standard input as -", []string{"accept-intro", "-"}, "  %s  \n", false},
		{"a file", []string{"accept-intro", "--secret-file", "private"}, "", false},
		{"a file others may read", []string{"accept-intro", "--secret-file", "public"}, "", true},
		{"standard input as --secret-file -", []string{"accept-intro", "--secret-file", "-", "--json"}, "%s", false},
	} {
		m := mint(tc.name)
		stdin := ""
		if tc.stdin != "" {
			stdin = fmt.Sprintf(tc.stdin, m.Token)
		}
		args := slices.Clone(tc.args)
		if i := slices.Index(args, "--secret-file"); i >= 0 && args[i+1] != "-" {
			mode := os.FileMode(0o600)
			if tc.warn {
				mode = 0o644
			}
			path := filepath.Join(dir, args[i+1])
			if err := os.WriteFile(path, []byte(m.Token+"\n"), mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, mode)
			args[i+1] = path
		}
		r := ifacedIn(t, b, stdin, args...)
		if r.code != 0 || !strings.Contains(r.stdout, m.ID) || !strings.Contains(r.stdout, aliceID) {
			t.Errorf("accept-intro from %s: exit %d, %q, %q", tc.name, r.code, r.stdout, r.stderr)
		}
		if warned := strings.Contains(r.stderr, "may be read by other users"); warned != tc.warn {
			t.Errorf("accept-intro from %s: warned %v: %q", tc.name, warned, r.stderr)
		}
	}
	if n := held(); n != 5 {
		t.Errorf("%d tokens held, want the 5 accepted", n)
	}

	for _, tc := range []struct {
		args  []string
		stdin string
		code  int
		want  string
	}{
		{[]string{"accept-intro"}, "", 2, "no introduction token (the ifintro1… string the issuer's `ifaced introduce` printed) on standard input"},
		{[]string{"accept-intro"}, " \n\t", 2, "no introduction token"},
		{[]string{"accept-intro"}, "ifintro1garbage\n", 1, "not a valid introduction token"},
		{[]string{"accept-intro"}, strings.Repeat("x", maxSecret+1), 2, "more than 65536 bytes"},
		{[]string{"accept-intro", "--secret-file", filepath.Join(dir, "missing")}, "", 1, "reading the introduction token"},
		{[]string{"accept-intro", "-", "--secret-file", filepath.Join(dir, "private")}, "", 2, "not both"},
		{[]string{"accept-intro", "-", "-"}, "", 2, "does not take the token on the command line"},
	} {
		r := ifacedIn(t, b, tc.stdin, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("ifaced %q with %d bytes in: exit %d, %q; want exit %d saying %q", tc.args, len(tc.stdin), r.code, r.stderr, tc.code, tc.want)
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
	h, alice := startDaemon(t, nodetest.AliceConfig())
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
