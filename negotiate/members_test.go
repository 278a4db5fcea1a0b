package negotiate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
)

// oldEncoding is how encoding/json wrote a document before Document and
// Capability had methods: the bytes every signature so far was made over.
func oldEncoding(t *testing.T, d *Document) []byte {
	t.Helper()
	type plainCaps struct {
		plainDocument
		Capabilities []plainCapability `json:"capabilities"`
	}
	var caps []plainCapability
	if d.Capabilities != nil {
		caps = make([]plainCapability, len(d.Capabilities))
		for i := range caps {
			caps[i] = plainCapability(d.Capabilities[i])
		}
	}
	b, err := json.Marshal(plainCaps{plainDocument(*d), caps})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEncodingUnchanged pins that documents without unmodeled members
// encode to the same JSON as before, so their canonical form, and every
// signature made over it, are unchanged.
func TestEncodingUnchanged(t *testing.T) {
	owner := load(t, "document.json")
	f := conditions.Facts{Peer: "peer-bob", AuthLevel: conditions.Verified, Disclosure: "close", Persona: "researcher"}
	edge := &Document{IFP: 7, AgentID: "a<b>&c", Capabilities: []Capability{
		{Name: "x", Description: "\u2028 é <tag>", Parameters: map[string]any{}, Conditions: &conditions.Conditions{},
			Price: &Price{}, Eligible: new(bool), Unmet: []conditions.Unmet{}},
		{Name: "y", Description: "d", Parameters: map[string]any{"b": 1.5, "a": []any{nil, true, 1e21}}},
	}, Relay: &identity.Relay{}, AGUI: &AGUICapabilities{}, IFPSupport: []int{}}
	for name, d := range map[string]*Document{
		"owner": owner, "view": owner.View(f, nil), "twenty": twentyCapabilities(),
		"empty": {}, "no capabilities": {IFP: 7, AgentID: "a"}, "edge": edge,
	} {
		// The same members and values (oldEncoding writes capabilities
		// last, so the order is compared apart).
		want, _ := identity.CanonicalizeJSON(oldEncoding(t, d))
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, _ := identity.CanonicalizeJSON(raw); !bytes.Equal(got, want) {
			t.Errorf("%s: encoding changed:\n got %s\nwant %s", name, got, want)
		}
		if d.IFP != 0 && !bytes.HasPrefix(raw, []byte(`{"ifp":`)) {
			t.Errorf("%s: members out of the struct's order: %.40s", name, raw)
		}
		canon, err := d.Canonical()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := *d
		c.Signature = nil
		wantCanon, _ := identity.CanonicalizeJSON(oldEncoding(t, &c))
		if !bytes.Equal(canon, wantCanon) {
			t.Errorf("%s: canonical form changed:\n got %s\nwant %s", name, canon, wantCanon)
		}
	}
}

func TestUnmodeledMembersAreWrittenBack(t *testing.T) {
	d := &Document{IFP: 7, AgentID: "a", Capabilities: []Capability{{
		Name: "x", Description: "d", Conditions: &conditions.Conditions{MinDisclosure: "professional"},
		Extra:           map[string]jsontext.Value{"x-rating": jsontext.Value(`{"stars":5}`)},
		ConditionsExtra: map[string]jsontext.Value{"x-region": jsontext.Value(`"eu"`)},
	}}, Extra: map[string]jsontext.Value{"x-home": jsontext.Value(`"https://a.example"`), "personas": jsontext.Value(`[]`)}}
	got, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"x-home":"https://a.example"`, `"personas":[]`, `"x-rating":{"stars":5}`,
		`"conditions":{"min_disclosure":"professional","x-region":"eu"}`} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("encoding lacks %s: %s", want, got)
		}
	}
	// A capability on its own keeps them too.
	if c, _ := json.Marshal(d.Capabilities[0]); !bytes.Contains(c, []byte(`"x-region":"eu"`)) || !bytes.Contains(c, []byte(`"x-rating"`)) {
		t.Errorf("capability encoding: %s", c)
	}
	// Only conditions' extras: the conditions object is still written.
	bare := Capability{Name: "y", Description: "d", ConditionsExtra: map[string]jsontext.Value{"x-a": jsontext.Value(`1`)}}
	if c, _ := json.Marshal(bare); !bytes.Contains(c, []byte(`"conditions":{"x-a":1}`)) {
		t.Errorf("conditions extras without conditions: %s", c)
	}
	// An extra may not repeat a modeled member: the object would hold it twice.
	for _, bad := range []*Document{
		{IFP: 7, AgentID: "a", Extra: map[string]jsontext.Value{"seq": jsontext.Value(`9`)}},
		{IFP: 7, AgentID: "a", Capabilities: []Capability{{Name: "x", Extra: map[string]jsontext.Value{"name": jsontext.Value(`"y"`)}}}},
		{IFP: 7, AgentID: "a", Capabilities: []Capability{{Name: "x", ConditionsExtra: map[string]jsontext.Value{"persona": jsontext.Value(`"y"`)}}}},
		{IFP: 7, AgentID: "a", Extra: map[string]jsontext.Value{"x": jsontext.Value(`{`)}},
	} {
		if b, err := json.Marshal(bad); err == nil {
			t.Errorf("encoded %s", b)
		} else if !strings.Contains(err.Error(), "unmodeled member") {
			t.Errorf("error %v", err)
		}
	}
}

// TestDecodingFollowsTheCallersStrictness: an owner's file refuses what a
// peer's view keeps, and encoding/json's Unmarshal (the control API's
// client) keeps it too.
func TestDecodingFollowsTheCallersStrictness(t *testing.T) {
	src := []byte(`{"ifp":7,"agent_id":"a","x-home":"h","capabilities":[{"name":"x","description":"d","x-rating":5,
		"conditions":{"min_disclosure":"professional","min_disclosur":"close"}}]}`)
	_, err := LoadDocument(src, FormatJSON, nil)
	if fes := fieldErrors(err); len(fes) == 0 || fes[0].Field != "x-home" {
		t.Errorf("LoadDocument: %v", err)
	}
	var c Capability
	err = DecodeStrict([]byte(`{"name":"x","description":"d","conditions":{"min_disclosur":"close"}}`), FormatJSON, "", &c)
	if fes := fieldErrors(err); len(fes) == 0 || fes[0].Field != "conditions.min_disclosur" {
		t.Errorf("DecodeStrict: %v", err)
	}

	var d Document
	if err := json.Unmarshal(src, &d); err != nil {
		t.Fatal(err)
	}
	cp := d.Capabilities[0]
	if string(d.Extra["x-home"]) != `"h"` || string(cp.Extra["x-rating"]) != `5` || string(cp.ConditionsExtra["min_disclosur"]) != `"close"` ||
		cp.Conds().MinDisclosure != "professional" {
		t.Errorf("json.Unmarshal kept %v / %v / %v", d.Extra, cp.Extra, cp.ConditionsExtra)
	}
	var peerCaps struct {
		View *Document `json:"view"`
	}
	if err := json.Unmarshal([]byte(`{"view":`+string(src)+`}`), &peerCaps); err != nil || peerCaps.View.Extra["x-home"] == nil {
		t.Errorf("a view inside an answer: %v", err)
	}
	// Whatever decoded it leniently, such a document is no owner's.
	fes := fieldErrors(d.Validate(nil))
	var fields []string
	for _, fe := range fes {
		fields = append(fields, fe.Field)
	}
	if strings.Join(fields, " ") != "x-home capabilities[0].x-rating capabilities[0].conditions.min_disclosur" {
		t.Errorf("Validate: %v", fields)
	}
}
