package conditions_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
)

// TestExplainEachCondition: every condition a capability sets is listed,
// met or not, with what it required and what the requester had; an unset
// condition is not listed.
func TestExplainEachCondition(t *testing.T) {
	type row struct {
		name           string
		c              conditions.Conditions
		f              conditions.Facts
		met            bool
		required, have string
	}
	warm := with(signedPeer, func(f *conditions.Facts) { f.Temperature = conditions.Warm })
	for _, tc := range []row{
		{"disclosure met", conditions.Conditions{MinDisclosure: "public"}, signedPeer, true, "public", "public"},
		{"disclosure unmet", conditions.Conditions{MinDisclosure: "professional"}, signedPeer, false, "professional", "public"},
		{"level met", conditions.Conditions{MinAuthLevel: level(conditions.Signed)}, signedPeer, true, "1 (signed)", "1 (signed)"},
		{"level unmet", conditions.Conditions{MinAuthLevel: level(conditions.Verified)}, signedPeer, false, "2 (verified)", "1 (signed)"},
		{"level: none meets no minimum", conditions.Conditions{MinAuthLevel: level(conditions.Introduced)},
			conditions.Facts{AuthLevel: conditions.NoLevel}, false, "0 (introduced)", "none"},
		{"temperature met", conditions.Conditions{Temperature: conditions.Warm}, warm, true, "warm", "warm"},
		{"temperature: none negotiated is cool", conditions.Conditions{Temperature: conditions.Cool}, signedPeer, true, "cool", "cool"},
		{"temperature unmet", conditions.Conditions{Temperature: conditions.Hot}, warm, false, "hot", "warm"},
		{"persona met", conditions.Conditions{Persona: []string{"researcher", "writer"}},
			with(signedPeer, func(f *conditions.Facts) { f.Persona = "writer" }), true, "one of researcher, writer", "writer"},
		{"persona unmet under the default persona", conditions.Conditions{Persona: []string{"researcher"}}, signedPeer, false, "researcher", "the default persona"},
		{"peers met", conditions.Conditions{Peers: []string{bob, alice}}, signedPeer, true, "an allow-listed peer", "allow-listed"},
		{"peers unmet", conditions.Conditions{Peers: []string{bob}}, signedPeer, false, "an allow-listed peer", "not allow-listed"},
		{"workload met", conditions.Conditions{MaxConcurrent: 2}, with(signedPeer, func(f *conditions.Facts) { f.InFlight = 1 }), true, "fewer than 2 running", "1 running"},
		{"workload unmet", conditions.Conditions{MaxConcurrent: 2}, with(signedPeer, func(f *conditions.Facts) { f.InFlight = 2 }), false, "fewer than 2 running", "2 running"},
		{"workload: a negative limit admits no one", conditions.Conditions{MaxConcurrent: -1}, signedPeer, false, "-1 (invalid)", "0 running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := conditions.Explain(tc.c, tc.f, nil, time.Second)
			if len(checks) != 1 {
				t.Fatalf("%d checks, want the one condition set: %+v", len(checks), checks)
			}
			ch := checks[0]
			if ch.Met != tc.met || ch.Required != tc.required || ch.Have != tc.have {
				t.Errorf("got %+v, want met %v, required %q, have %q", ch, tc.met, tc.required, tc.have)
			}
			if ch.Met != (ch.HowToMeet == "") {
				t.Errorf("how_to_meet %q on a check met=%v: only an unmet condition has advice", ch.HowToMeet, ch.Met)
			}
		})
	}
	if checks := conditions.Explain(conditions.Conditions{}, conditions.Facts{AuthLevel: conditions.NoLevel}, nil, 0); len(checks) != 0 {
		t.Errorf("no conditions: %+v, want no checks", checks)
	}
}

// TestExplainAgreesWithEvaluate: with every condition set, met and unmet
// ones mixed, the checks come in the fixed order, and the unmet ones are
// exactly what Evaluate reports (the requester's error and the owner's
// record never disagree).
func TestExplainAgreesWithEvaluate(t *testing.T) {
	all := conditions.Conditions{MinDisclosure: "professional", MinAuthLevel: level(conditions.Signed), Temperature: conditions.Warm,
		Persona: []string{"researcher"}, Peers: []string{alice}, MaxConcurrent: 3}
	order := []conditions.Condition{conditions.CondMinDisclosure, conditions.CondMinAuthLevel, conditions.CondTemperature,
		conditions.CondPersona, conditions.CondPeers, conditions.CondMaxConcurrent}
	for _, f := range []conditions.Facts{
		signedPeer,
		{Peer: alice, AuthLevel: conditions.Verified, Disclosure: "close", Temperature: conditions.Hot, Persona: "researcher"},
		{Peer: bob, AuthLevel: conditions.Introduced, Disclosure: "professional", Temperature: conditions.Warm, Persona: "writer", InFlight: 3},
		{AuthLevel: conditions.NoLevel},
		{Peer: alice, AuthLevel: conditions.Signed, Disclosure: "personal", Persona: "researcher", InFlight: 3},
	} {
		checks := conditions.Explain(all, f, nil, 5*time.Second)
		if len(checks) != len(order) {
			t.Fatalf("facts %+v: %d checks, want %d", f, len(checks), len(order))
		}
		var unmet []conditions.Unmet
		for i, ch := range checks {
			if ch.Condition != order[i] {
				t.Errorf("facts %+v: check %d is %s, want %s", f, i, ch.Condition, order[i])
			}
			if !ch.Met {
				unmet = append(unmet, conditions.Unmet{Condition: ch.Condition, Required: ch.Required, Have: ch.Have, HowToMeet: ch.HowToMeet})
			}
		}
		if want := conditions.Evaluate(all, f, nil, 5*time.Second).Unmet; !reflect.DeepEqual(unmet, want) {
			t.Errorf("facts %+v:\nExplain's unmet %+v\nEvaluate's      %+v", f, unmet, want)
		}
	}
}

// FuzzExplain: for any conditions object that decodes and any facts,
// Explain never panics, lists only set conditions, and its unmet checks
// are Evaluate's Unmet.
func FuzzExplain(f *testing.F) {
	f.Add([]byte(`{"min_disclosure": "professional", "min_auth_level": 2, "temperature": "warm", "persona": ["a"], "peers": ["p"], "max_concurrent": 1}`),
		"p", 1, "public", "cool", "a", 0)
	f.Add([]byte(`{"min_auth_level": 7, "max_concurrent": -2, "min_disclosure": "vip"}`), "", -1, "", "tepid", "", 5)
	f.Add([]byte(`{}`), "x", 3, "close", "hot", "b", 100)
	f.Fuzz(func(t *testing.T, data []byte, peer string, lvl int, tier, temp, persona string, inFlight int) {
		var c conditions.Conditions
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		facts := conditions.Facts{Peer: peer, AuthLevel: conditions.Level(lvl), Disclosure: tier, Temperature: temp, Persona: persona, InFlight: inFlight}
		checks := conditions.Explain(c, facts, nil, time.Second)
		var unmet []conditions.Unmet
		for _, ch := range checks {
			if !ch.Met {
				unmet = append(unmet, conditions.Unmet{Condition: ch.Condition, Required: ch.Required, Have: ch.Have, HowToMeet: ch.HowToMeet})
			}
		}
		if want := conditions.Evaluate(c, facts, nil, time.Second).Unmet; !reflect.DeepEqual(unmet, want) {
			t.Fatalf("conditions %s, facts %+v:\nExplain's unmet %+v\nEvaluate's      %+v", data, facts, unmet, want)
		}
		if c.IsZero() && len(checks) > 0 {
			t.Fatalf("no conditions, yet checks %+v", checks)
		}
	})
}
