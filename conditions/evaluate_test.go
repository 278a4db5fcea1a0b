package conditions_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
)

const (
	alice = "12D3KooWAliceAliceAlice"
	bob   = "12D3KooWBobBobBobBobBob"
	carol = "https://carol.example/agent"
)

// signedPeer is a requester as most libp2p peers arrive: signed, unknown to
// the disclosure map (so public), cool, under the owner's default persona.
var signedPeer = conditions.Facts{Peer: alice, AuthLevel: conditions.Signed, Disclosure: "public"}

func with(f conditions.Facts, edit func(*conditions.Facts)) conditions.Facts {
	edit(&f)
	return f
}

// TestEvaluateEachCondition is the specification of each condition on its
// own: met, unmet, and at its boundaries. For an unmet row, required and have
// are what the requester is told.
func TestEvaluateEachCondition(t *testing.T) {
	custom, err := conditions.NewTierOrder([]conditions.CustomTier{{Name: "colleagues", After: "professional"}})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name           string
		c              conditions.Conditions
		f              conditions.Facts
		order          *conditions.TierOrder
		unmet          conditions.Condition // "" means met
		required, have string
	}
	disclosure := func(min, have string) row {
		return row{c: conditions.Conditions{MinDisclosure: min}, f: with(signedPeer, func(f *conditions.Facts) { f.Disclosure = have })}
	}
	authLevel := func(min, have conditions.Level) row {
		return row{c: conditions.Conditions{MinAuthLevel: level(min)}, f: with(signedPeer, func(f *conditions.Facts) { f.AuthLevel = have })}
	}
	temperature := func(min, have string) row {
		return row{c: conditions.Conditions{Temperature: min}, f: with(signedPeer, func(f *conditions.Facts) { f.Temperature = have })}
	}
	persona := func(personas []string, active string) row {
		return row{c: conditions.Conditions{Persona: personas}, f: with(signedPeer, func(f *conditions.Facts) { f.Persona = active })}
	}
	peers := func(list []string, peer string) row {
		return row{c: conditions.Conditions{Peers: list}, f: with(signedPeer, func(f *conditions.Facts) { f.Peer = peer })}
	}
	workload := func(max, inFlight int) row {
		return row{c: conditions.Conditions{MaxConcurrent: max}, f: with(signedPeer, func(f *conditions.Facts) { f.InFlight = inFlight })}
	}
	r := func(name string, x row) row { x.name = name; return x }
	unmet := func(name string, x row, cond conditions.Condition, required, have string) row {
		x.name, x.unmet, x.required, x.have = name, cond, required, have
		return x
	}
	inOrder := func(x row, o *conditions.TierOrder) row { x.order = o; return x }

	for _, tc := range []row{
		r("no conditions: an anonymous unauthenticated caller is served", row{f: conditions.Facts{AuthLevel: conditions.NoLevel}}),

		// min_disclosure
		r("disclosure: the equal tier meets", disclosure("professional", "professional")),
		r("disclosure: a higher tier meets", disclosure("professional", "close")),
		unmet("disclosure: one tier below fails", disclosure("professional", "public"), conditions.CondMinDisclosure, "professional", "public"),
		unmet("disclosure: no tier granted fails", disclosure("public", ""), conditions.CondMinDisclosure, "public", "none"),
		unmet("disclosure: an unknown granted tier ranks below public", disclosure("public", "vip"), conditions.CondMinDisclosure, "public", "vip (not a tier of this owner)"),
		inOrder(r("disclosure: a custom tier meets itself", disclosure("colleagues", "colleagues")), custom),
		inOrder(r("disclosure: the tier after a custom tier meets it", disclosure("colleagues", "professional-open")), custom),
		inOrder(unmet("disclosure: the tier a custom tier follows is below it", disclosure("colleagues", "professional"), conditions.CondMinDisclosure, "colleagues", "professional"), custom),
		unmet("disclosure: a minimum the order does not know is met by no one", disclosure("colleagues", "close"), conditions.CondMinDisclosure, "colleagues", "close"),

		// min_auth_level
		r("level: the equal level meets", authLevel(conditions.Verified, conditions.Verified)),
		r("level: a higher level meets", authLevel(conditions.Verified, conditions.Bound)),
		unmet("level: one below fails", authLevel(conditions.Verified, conditions.Signed), conditions.CondMinAuthLevel, "2 (verified)", "1 (signed)"),
		r("level: 0 is met by an introduced peer", authLevel(conditions.Introduced, conditions.Introduced)),
		r("level: 0 is met by a signed peer", authLevel(conditions.Introduced, conditions.Signed)),
		unmet("level: 0 is not met by an unauthenticated caller", authLevel(conditions.Introduced, conditions.NoLevel), conditions.CondMinAuthLevel, "0 (introduced)", "none"),
		unmet("level: bound not met by verified", authLevel(conditions.Bound, conditions.Verified), conditions.CondMinAuthLevel, "3 (bound)", "2 (verified)"),
		unmet("level: an invalid fact meets nothing", authLevel(conditions.Introduced, 8), conditions.CondMinAuthLevel, "0 (introduced)", "8 (invalid)"),
		unmet("level: an invalid minimum is met by no one", authLevel(4, conditions.Bound), conditions.CondMinAuthLevel, "4 (invalid)", "3 (bound)"),

		// temperature
		r("temperature: the equal temperature meets", temperature("warm", "warm")),
		r("temperature: hotter meets", temperature("warm", "hot")),
		unmet("temperature: one cooler fails", temperature("hot", "warm"), conditions.CondTemperature, "hot", "warm"),
		r("temperature: no negotiated temperature is cool, which meets cool", temperature("cool", "")),
		unmet("temperature: no negotiated temperature is cool, which fails warm", temperature("warm", ""), conditions.CondTemperature, "warm", "cool"),
		unmet("temperature: an unknown fact ranks below cool", temperature("cool", "tepid"), conditions.CondTemperature, "cool", "tepid (not a temperature)"),
		unmet("temperature: an unknown minimum is met by no one", temperature("boiling", "hot"), conditions.CondTemperature, "boiling", "hot"),

		// persona
		r("persona: the active persona is listed", persona([]string{"researcher"}, "researcher")),
		r("persona: one of several", persona([]string{"researcher", "writer"}, "writer")),
		unmet("persona: another persona", persona([]string{"researcher"}, "writer"), conditions.CondPersona, "researcher", "writer"),
		unmet("persona: the default persona is not a named one", persona([]string{"researcher"}, ""), conditions.CondPersona, "researcher", "the default persona"),
		unmet("persona: the default persona even against an (invalid) empty entry", persona([]string{""}, ""), conditions.CondPersona, "", "the default persona"),
		unmet("persona: several required", persona([]string{"researcher", "writer"}, "parent"), conditions.CondPersona, "one of researcher, writer", "parent"),
		unmet("persona: names are compared exactly", persona([]string{"researcher"}, "Researcher"), conditions.CondPersona, "researcher", "Researcher"),

		// peers
		r("peers: a listed peer ID", peers([]string{bob, alice}, alice)),
		r("peers: a listed agent id", peers([]string{carol}, carol)),
		unmet("peers: a peer not listed", peers([]string{bob, carol}, alice), conditions.CondPeers, "an allow-listed peer", "not allow-listed"),
		unmet("peers: an anonymous caller", peers([]string{bob}, ""), conditions.CondPeers, "an allow-listed peer", "anonymous"),
		unmet("peers: an anonymous caller even against an (invalid) empty entry", peers([]string{""}, ""), conditions.CondPeers, "an allow-listed peer", "anonymous"),
		unmet("peers: IDs are compared exactly", peers([]string{alice}, strings.ToLower(alice)), conditions.CondPeers, "an allow-listed peer", "not allow-listed"),

		// max_concurrent
		r("workload: 0 is unlimited", workload(0, 1000)),
		r("workload: N-1 running leaves a slot", workload(3, 2)),
		unmet("workload: N running is busy", workload(3, 3), conditions.CondMaxConcurrent, "fewer than 3 running", "3 running"),
		unmet("workload: over N running is busy", workload(1, 2), conditions.CondMaxConcurrent, "fewer than 1 running", "2 running"),
		unmet("workload: a negative limit admits no one", workload(-1, 0), conditions.CondMaxConcurrent, "-1 (invalid)", "0 running"),
		unmet("workload: a negative limit admits no one, whatever the count", workload(-1, -7), conditions.CondMaxConcurrent, "-1 (invalid)", "-7 running"),
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := conditions.Evaluate(tc.c, tc.f, tc.order, time.Second)
			if tc.unmet == "" {
				if !d.Met() || d.Error() != nil {
					t.Fatalf("unmet: %+v", d.Unmet)
				}
				return
			}
			if len(d.Unmet) != 1 || d.Unmet[0].Condition != tc.unmet {
				t.Fatalf("Unmet = %+v, want only %s", d.Unmet, tc.unmet)
			}
			u := d.Unmet[0]
			if u.Required != tc.required || u.Have != tc.have {
				t.Errorf("required %q, have %q; want required %q, have %q", u.Required, u.Have, tc.required, tc.have)
			}
			if u.HowToMeet == "" {
				t.Error("no advice in HowToMeet")
			}
			if d.Met() || d.Error() == nil || !errors.Is(d.Error(), conditions.ErrNotMet) {
				t.Errorf("Met() = %v, Error() = %v", d.Met(), d.Error())
			}
		})
	}
}

// TestHowToMeet pins the advice a refused requester reads.
func TestHowToMeet(t *testing.T) {
	for _, tc := range []struct {
		c    conditions.Conditions
		f    conditions.Facts
		want string
	}{
		{
			conditions.Conditions{MinDisclosure: "professional"}, signedPeer,
			`ask the owner to raise your disclosure tier to "professional" or higher`,
		},
		{
			conditions.Conditions{MinAuthLevel: level(conditions.Introduced)}, conditions.Facts{AuthLevel: conditions.NoLevel},
			"reach authentication level 0 (introduced): present an introduction token minted by the owner (`ifaced introduce`), or sign your messages with the key of your peer ID",
		},
		{
			conditions.Conditions{MinAuthLevel: level(conditions.Signed)}, conditions.Facts{AuthLevel: conditions.Introduced},
			"reach authentication level 1 (signed): sign your messages with the key of your peer ID",
		},
		{
			conditions.Conditions{MinAuthLevel: level(conditions.Verified)}, signedPeer,
			"reach authentication level 2 (verified): have the owner pin your key with `ifaced trust " + alice + " --verify <fingerprint>`, or publish an identity document at your agent_id URL that lists your key",
		},
		{
			// A keyless caller (HTTP, nothing signed) has no key to pin: it is told to get one first.
			conditions.Conditions{MinAuthLevel: level(conditions.Verified)}, conditions.Facts{AuthLevel: conditions.NoLevel},
			"reach authentication level 2 (verified): you called without a key: sign your requests with a key of your own (an IFP-5 signed message, over libp2p or to the HTTP inbox), then have the owner pin that key (`ifaced trust <your peer ID> --verify <fingerprint>`), or publish an identity document at your agent_id URL that lists it",
		},
		{
			conditions.Conditions{MinAuthLevel: level(conditions.Signed)}, conditions.Facts{AuthLevel: conditions.NoLevel},
			"reach authentication level 1 (signed): you called without a key: sign your requests with a key of your own (an IFP-5 signed message, over libp2p or to the HTTP inbox)",
		},
		{
			conditions.Conditions{MinAuthLevel: level(conditions.Bound)}, conditions.Facts{AuthLevel: conditions.NoLevel},
			"reach authentication level 3 (bound): you called without a key: sign your requests with a key of your own (an IFP-5 signed message, over libp2p or to the HTTP inbox), under an agent_id that is an https URL or did:web whose document binds that key",
		},
		{
			conditions.Conditions{MinDisclosure: "professional"}, conditions.Facts{AuthLevel: conditions.NoLevel, Disclosure: "public"},
			`you called without a key: sign your requests with a key of your own (an IFP-5 signed message, over libp2p or to the HTTP inbox), then ask the owner to raise its disclosure tier to "professional" or higher`,
		},
		{
			conditions.Conditions{Temperature: conditions.Warm}, conditions.Facts{AuthLevel: conditions.NoLevel},
			`an anonymous request is cool; you called without a key: sign your requests with a key of your own (an IFP-5 signed message, over libp2p or to the HTTP inbox), greet, and propose temperature "warm" in your greeting; the owner must allow it for you`,
		},
		{
			conditions.Conditions{MinAuthLevel: level(conditions.Bound)}, signedPeer,
			"reach authentication level 3 (bound): use an agent_id that is an https URL or did:web whose document binds your key",
		},
		{
			conditions.Conditions{Temperature: conditions.Warm}, signedPeer,
			`propose temperature "warm" in your greeting; the owner must allow it for you`,
		},
		{
			conditions.Conditions{Persona: []string{"researcher"}}, signedPeer,
			`this capability is offered only under persona "researcher"`,
		},
		{
			conditions.Conditions{Persona: []string{"researcher", "writer"}}, signedPeer,
			`this capability is offered only under personas "researcher", "writer"`,
		},
		{
			conditions.Conditions{Peers: []string{bob}}, signedPeer,
			"this capability is limited to a list of peers chosen by the owner; ask the owner to add your peer ID",
		},
		{
			conditions.Conditions{Peers: []string{bob}}, conditions.Facts{AuthLevel: conditions.NoLevel},
			"this capability is limited to a list of peers chosen by the owner; identify yourself by signing your messages, and ask the owner to add your peer ID",
		},
		{
			conditions.Conditions{MaxConcurrent: 2}, with(signedPeer, func(f *conditions.Facts) { f.InFlight = 2 }),
			"busy: 2 of 2 running; retry after 1.5s",
		},
	} {
		d := conditions.Evaluate(tc.c, tc.f, nil, 1500*time.Millisecond)
		if len(d.Unmet) != 1 {
			t.Errorf("%+v on %+v: Unmet = %+v, want one", tc.c, tc.f, d.Unmet)
			continue
		}
		if got := d.Unmet[0].HowToMeet; got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", d.Unmet[0].Condition, got, tc.want)
		}
	}
	// No advice to a keyless caller presumes the key it does not have.
	for _, c := range []conditions.Conditions{{MinAuthLevel: level(conditions.Signed)}, {MinAuthLevel: level(conditions.Verified)},
		{MinAuthLevel: level(conditions.Bound)}, {MinDisclosure: "professional"}, {Temperature: conditions.Hot}} {
		for _, u := range conditions.Evaluate(c, conditions.Facts{AuthLevel: conditions.NoLevel}, nil, 0).Unmet {
			if strings.Contains(u.HowToMeet, "your key") || strings.Contains(u.HowToMeet, "your disclosure tier") || !strings.Contains(u.HowToMeet, "without a key") {
				t.Errorf("%s, to a keyless caller: %q", u.Condition, u.HowToMeet)
			}
		}
	}
	busy := conditions.Evaluate(conditions.Conditions{MaxConcurrent: 1}, with(signedPeer, func(f *conditions.Facts) { f.InFlight = 1 }), nil, 0)
	if got, want := busy.Unmet[0].HowToMeet, "busy: 1 of 1 running; retry later"; got != want {
		t.Errorf("without a retry hint: %q, want %q", got, want)
	}
}

// TestEvaluateCombined is the specification of several conditions together.
func TestEvaluateCombined(t *testing.T) {
	everything := conditions.Conditions{
		MinDisclosure: "personal",
		MinAuthLevel:  level(conditions.Verified),
		Temperature:   conditions.Hot,
		Persona:       []string{"friend"},
		Peers:         []string{bob},
		MaxConcurrent: 1,
	}
	meetsAll := conditions.Facts{Peer: bob, AuthLevel: conditions.Bound, Disclosure: "close", Temperature: conditions.Hot, Persona: "friend"}
	busyNow := func(f conditions.Facts) conditions.Facts { f.InFlight = 1; return f }
	all := []conditions.Condition{
		conditions.CondMinDisclosure, conditions.CondMinAuthLevel, conditions.CondTemperature,
		conditions.CondPersona, conditions.CondPeers, conditions.CondMaxConcurrent,
	}
	for _, tc := range []struct {
		name     string
		c        conditions.Conditions
		f        conditions.Facts
		unmet    []conditions.Condition
		eligible bool
		busy     bool
		absent   bool
	}{
		{
			name: "everything met", c: everything, f: meetsAll,
			eligible: true,
		},
		{
			name: "only busy: eligible, busy, retry", c: everything, f: busyNow(meetsAll),
			unmet: []conditions.Condition{conditions.CondMaxConcurrent}, eligible: true, busy: true,
		},
		{
			name: "nothing met is reported in the fixed order",
			c:    everything, f: busyNow(conditions.Facts{AuthLevel: conditions.NoLevel}),
			unmet: all, absent: true,
		},
		{
			name: "busy and another problem is not busy: retrying would not help",
			c:    everything, f: busyNow(with(meetsAll, func(f *conditions.Facts) { f.Disclosure = "community-trust" })),
			unmet: []conditions.Condition{conditions.CondMinDisclosure, conditions.CondMaxConcurrent},
		},
		{
			name: "level and temperature",
			c:    everything, f: with(meetsAll, func(f *conditions.Facts) { f.AuthLevel = conditions.Signed; f.Temperature = "" }),
			unmet: []conditions.Condition{conditions.CondMinAuthLevel, conditions.CondTemperature},
		},
		{
			name: "the wrong persona alone: absent, not merely ineligible",
			c:    everything, f: with(meetsAll, func(f *conditions.Facts) { f.Persona = "" }),
			unmet: []conditions.Condition{conditions.CondPersona}, absent: true,
		},
		{
			name: "the wrong persona while busy is absent and not busy",
			c:    everything, f: busyNow(with(meetsAll, func(f *conditions.Facts) { f.Persona = "work" })),
			unmet: []conditions.Condition{conditions.CondPersona, conditions.CondMaxConcurrent}, absent: true,
		},
		{
			name: "an outsider to the allow list",
			c:    everything, f: with(meetsAll, func(f *conditions.Facts) { f.Peer = alice }),
			unmet: []conditions.Condition{conditions.CondPeers},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const hint = 30 * time.Second
			d := conditions.Evaluate(tc.c, tc.f, nil, hint)
			var got []conditions.Condition
			for _, u := range d.Unmet {
				got = append(got, u.Condition)
			}
			if !slices.Equal(got, tc.unmet) {
				t.Fatalf("unmet %v, want %v", got, tc.unmet)
			}
			if d.Met() != (len(tc.unmet) == 0) || d.Eligible() != tc.eligible || d.Busy() != tc.busy || d.Absent() != tc.absent {
				t.Errorf("Met %v Eligible %v Busy %v Absent %v; want Met %v Eligible %v Busy %v Absent %v",
					d.Met(), d.Eligible(), d.Busy(), d.Absent(), len(tc.unmet) == 0, tc.eligible, tc.busy, tc.absent)
			}
			wantRetry := time.Duration(0)
			if tc.busy {
				wantRetry = hint
			}
			if d.RetryAfter != wantRetry {
				t.Errorf("RetryAfter = %v, want %v", d.RetryAfter, wantRetry)
			}

			err := d.Error()
			if d.Met() {
				if err != nil {
					t.Errorf("Error() = %v on a met decision", err)
				}
				return
			}
			if !errors.Is(err, conditions.ErrNotMet) {
				t.Errorf("error %q does not wrap ErrNotMet", err)
			}
			if errors.Is(err, conditions.ErrBusy) != tc.busy {
				t.Errorf("errors.Is(err, ErrBusy) = %v, want %v", !tc.busy, tc.busy)
			}
			if errors.Is(err, conditions.ErrInvalid) {
				t.Errorf("a refusal %q wraps ErrInvalid", err)
			}
			// The message says, for each condition, what was required, what
			// the requester has and how to meet it.
			for _, u := range d.Unmet {
				want := string(u.Condition) + ": required " + u.Required + ", have " + u.Have + " (" + u.HowToMeet + ")"
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n  %s\ndoes not contain\n  %s", err, want)
				}
			}
			var notMet *conditions.NotMetError
			if !errors.As(err, &notMet) || !reflect.DeepEqual(notMet.Unmet, d.Unmet) || notMet.RetryAfter != d.RetryAfter {
				t.Errorf("errors.As NotMetError: %+v", notMet)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	d := conditions.Evaluate(
		conditions.Conditions{MinDisclosure: "professional", MinAuthLevel: level(conditions.Verified)},
		signedPeer, nil, 0)
	want := `conditions not met: ` +
		`min_disclosure: required professional, have public (ask the owner to raise your disclosure tier to "professional" or higher); ` +
		"min_auth_level: required 2 (verified), have 1 (signed) (reach authentication level 2 (verified): have the owner pin your key with `ifaced trust " + alice + " --verify <fingerprint>`, or publish an identity document at your agent_id URL that lists your key)"
	if got := d.Error().Error(); got != want {
		t.Errorf("got\n  %s\nwant\n  %s", got, want)
	}

	busy := conditions.Evaluate(conditions.Conditions{MaxConcurrent: 4}, with(signedPeer, func(f *conditions.Facts) { f.InFlight = 4 }), nil, 2*time.Second)
	want = "capability busy: max_concurrent: required fewer than 4 running, have 4 running (busy: 4 of 4 running; retry after 2s)"
	if got := busy.Error().Error(); got != want {
		t.Errorf("got\n  %s\nwant\n  %s", got, want)
	}
}

// TestAllowListNeverEchoed: whatever the requester and whatever else fails,
// no entry of the owner's allow list reaches what the requester is told.
func TestAllowListNeverEchoed(t *testing.T) {
	secret := []string{"12D3KooWSecretFriendOne", "https://secret-friend.example/agent", "did:web:confidant.example"}
	requesters := []conditions.Facts{
		signedPeer,
		{AuthLevel: conditions.NoLevel},
		{Peer: "12D3KooWSecretFriend", AuthLevel: conditions.Signed}, // a prefix of a listed ID
		{Peer: "https://secret-friend.example", AuthLevel: conditions.Verified, Disclosure: "close", Temperature: "hot"},
		{Peer: carol, AuthLevel: conditions.Bound, Disclosure: "personal", Persona: "other", InFlight: 9},
	}
	shapes := []conditions.Conditions{
		{Peers: secret},
		{Peers: secret, MinDisclosure: "close", MinAuthLevel: level(conditions.Bound), Temperature: "hot", Persona: []string{"friend"}, MaxConcurrent: 1},
		{Peers: secret[:1]},
	}
	for _, c := range shapes {
		for _, f := range requesters {
			d := conditions.Evaluate(c, f, nil, time.Second)
			if d.Eligible() {
				t.Fatalf("%+v was admitted by %+v", f, c)
			}
			unmetJSON, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			told := d.Error().Error() + "\n" + string(unmetJSON)
			for _, s := range secret {
				if strings.Contains(told, s) {
					t.Errorf("requester %q was told allow-list entry %q:\n%s", f.Peer, s, told)
				}
			}
			for _, u := range d.Unmet {
				if u.Condition == conditions.CondPeers && u.Required != "an allow-listed peer" {
					t.Errorf("peers Required = %q", u.Required)
				}
			}
		}
	}
	// The answer does not depend on the list, so it cannot encode it.
	one := conditions.Evaluate(conditions.Conditions{Peers: secret[:1]}, signedPeer, nil, 0)
	three := conditions.Evaluate(conditions.Conditions{Peers: secret}, signedPeer, nil, 0)
	if !reflect.DeepEqual(one, three) {
		t.Errorf("the refusal depends on the list:\n%+v\n%+v", one, three)
	}
}

func TestDecisionJSON(t *testing.T) {
	d := conditions.Evaluate(conditions.Conditions{Temperature: "warm"}, signedPeer, nil, time.Minute)
	got, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"unmet":[{"condition":"temperature","required":"warm","have":"cool","how_to_meet":"propose temperature \"warm\" in your greeting; the owner must allow it for you"}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if met, _ := json.Marshal(conditions.Decision{}); string(met) != `{}` {
		t.Errorf("a met decision marshals to %s", met)
	}
}

// TestEvaluateOddInputs: whatever the configuration or facts, Evaluate
// returns a decision rather than panicking, and grants nothing it does not
// understand.
func TestEvaluateOddInputs(t *testing.T) {
	odd := []conditions.Conditions{
		{MinDisclosure: "\x00", MinAuthLevel: level(-100), Temperature: "\xff", Persona: []string{""}, Peers: []string{""}, MaxConcurrent: -5},
		{MinAuthLevel: level(1 << 30)},
		{Persona: []string{"a", "a"}},
	}
	facts := []conditions.Facts{
		{},
		{AuthLevel: -100, Disclosure: "\xff", Temperature: "HOT", InFlight: -1},
		{AuthLevel: 1 << 30, Persona: "\x00"},
	}
	for _, c := range odd {
		for _, f := range facts {
			for _, o := range []*conditions.TierOrder{nil, conditions.DefaultTierOrder()} {
				d := conditions.Evaluate(c, f, o, -time.Second)
				if d.Met() {
					t.Errorf("invalid %+v met by %+v", c, f)
				}
				if d.RetryAfter < 0 {
					t.Errorf("negative RetryAfter %v", d.RetryAfter)
				}
				_ = d.Error().Error()
			}
		}
	}
}
