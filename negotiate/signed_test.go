package negotiate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
)

var t0 = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

func TestSignViewVerifies(t *testing.T) {
	id := vectorKey(t)
	d := load(t, "document.json")
	sv, err := SignView(d.View(researcher, nil), id, t0)
	if err != nil {
		t.Fatal(err)
	}
	canon := sv.Content.Canonical()
	if sum := sha256.Sum256(canon); sv.Sum != hex.EncodeToString(sum[:]) {
		t.Errorf("Sum %s is not the SHA-256 of the sealed content", sv.Sum)
	}
	if p := sv.Part(); p.Name != PartCapabilities || p.ContentType != "application/json" {
		t.Errorf("part %+v", p)
	}
	if got := strings.Join(sv.Offer(), " "); got != "gossip.exchange calendar.availability doc.summarize" {
		t.Errorf("offer %q", got)
	}
	vv, err := VerifyView(id.PublicKey(), canon)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(vv.Sum[:]) != sv.Sum || vv.Doc.Seq != d.Seq || len(vv.Doc.Capabilities) != len(sv.Doc.Capabilities) {
		t.Errorf("verified view differs from the signed one: %+v", vv)
	}
	signed, err := sv.Doc.VerifyCanonical(id.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(signed); vv.DocHash != hex.EncodeToString(sum[:]) {
		t.Error("VerifyView and VerifyCanonical hash different signed bytes")
	}
	other, _ := identity.FromSeed(bytes.Repeat([]byte{9}, 32))
	if _, err := VerifyView(other.PublicKey(), canon); !errors.Is(err, identity.ErrBadSignature) {
		t.Errorf("another key: %v", err)
	}
	if _, err := VerifyView(id.PublicKey(), []byte(`{"ifp":7}`)); !errors.Is(err, ErrNotAView) {
		t.Errorf("not a view: %v", err)
	}
}

// TestContentKey: a view re-signed, or saved again with a new seq and
// time, keeps its key; a change of what the peer may see changes it.
func TestContentKey(t *testing.T) {
	id := vectorKey(t)
	d := load(t, "document.json")
	a, err := SignView(d.View(researcher, nil), id, t0)
	if err != nil {
		t.Fatal(err)
	}
	next := *d
	next.Seq, next.Updated = d.Seq+1, "2026-03-05T00:00:00Z"
	b, err := SignView(next.View(researcher, nil), id, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Key, b.Key) || a.Sum == b.Sum {
		t.Errorf("re-signed view: keys equal %v, sums differ %v", bytes.Equal(a.Key, b.Key), a.Sum != b.Sum)
	}
	c, err := SignView(d.View(friend, nil), id, t0)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Key, c.Key) {
		t.Error("views with different content share a key")
	}
	if k, _ := ContentKey(a.Doc); !bytes.Equal(k, a.Key) {
		t.Error("Key is not ContentKey of the view")
	}
	// Ordering by requested categories re-signs but keeps the key.
	web, honoured, err := a.Ordered([]string{"web"}, id, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(honoured, []string{"web"}) || !bytes.Equal(web.Key, a.Key) || web.Sum == a.Sum {
		t.Errorf("ordered: honoured %v, same key %v, new sum %v", honoured, bytes.Equal(web.Key, a.Key), web.Sum != a.Sum)
	}
	if same, honoured, _ := a.Ordered([]string{"voice"}, id, t0); same != a || honoured != nil {
		t.Error("an order that changes nothing re-signed the view")
	}
}

func greetingMessage(t *testing.T) *gossip.Message {
	t.Helper()
	me, peer := vectorKey(t), testKey(t)
	c := gossip.NewConversation(gossip.NewID("conv", t0), gossip.Agent{Agent: me.DID()}, gossip.Agent{Agent: peer.DID()})
	m, err := c.Next(gossip.PhaseGreeting, t0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// roundTrip sends m the way the wire does: signed, as CBOR.
func roundTrip(t *testing.T, m *gossip.Message) *gossip.Message {
	t.Helper()
	if err := m.Sign(vectorKey(t), t0); err != nil {
		t.Fatal(err)
	}
	b, err := gossip.EncodeCBOR(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := gossip.DecodeCBOR(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGreetingRoundTrip(t *testing.T) {
	id := vectorKey(t)
	sv, err := SignView(load(t, "document.json").View(researcher, nil), id, t0)
	if err != nil {
		t.Fatal(err)
	}
	held := strings.Repeat("ab", 32)
	g := Greeting{
		Proposal: Proposal{Disclosure: "professional", Persona: "researcher", Temperature: "warm", IFPSupport: []int{3, 4, 7},
			ToolCategories: []string{"web"}, HaveView: held, Acks: true},
		Granted: &Granted{Disclosure: "public", DisclosureOutcome: OutcomeGranted, AuthLevel: conditions.Signed, Temperature: "cool", Notes: []string{"n"}},
	}
	m := greetingMessage(t)
	m.Body.Text = "hello"
	g.Write(m, sv)
	if names := partNames(m); names != "capabilities greeting context" {
		t.Errorf("parts %q", names)
	}
	if m.Headers.Capabilities == nil || !slices.Equal(m.Headers.Capabilities.Offer, sv.Offer()) || m.Headers.Persona != "researcher" {
		t.Errorf("headers %+v", m.Headers)
	}
	got, err := ReadGreeting(roundTrip(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if got.Disclosure != "professional" || got.Persona != "researcher" || got.Temperature != "warm" ||
		!slices.Equal(got.IFPSupport, []int{3, 4, 7}) || !slices.Equal(got.ToolCategories, []string{"web"}) ||
		got.HaveView != held || got.ViewUnchanged != "" || !got.Acks {
		t.Errorf("proposal read back as %+v", got.Proposal)
	}
	if got.Granted == nil || got.Granted.Disclosure != "public" || got.Granted.AuthLevel != conditions.Signed || len(got.Granted.Notes) != 1 {
		t.Errorf("granted read back as %+v", got.Granted)
	}

	// A peer that holds the view gets the greeting without it.
	g.ViewUnchanged, g.Granted = sv.Sum, nil
	m = greetingMessage(t)
	g.Write(m, sv)
	if names := partNames(m); names != "greeting" {
		t.Errorf("parts with the view unchanged: %q", names)
	}
	if got, err := ReadGreeting(roundTrip(t, m)); err != nil || got.ViewUnchanged != sv.Sum || got.Granted != nil || !got.Acks {
		t.Errorf("read back %+v, %v", got, err)
	}

	// A greeting with no greeting part proposes only what its headers do.
	m = greetingMessage(t)
	m.Headers.Disclosure = "close"
	if got, err := ReadGreeting(m); err != nil || got.Disclosure != "close" || got.Temperature != "" || got.Granted != nil || got.Acks {
		t.Errorf("bare greeting: %+v, %v", got, err)
	}
}

func TestReadGreetingRefusesWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		parts   []gossip.Part
		field   string
		problem string
	}{
		{"greeting is a string", []gossip.Part{{Name: PartGreeting, Content: "warm"}},
			"body.parts[0].content", "expected an object, got a string"},
		{"temperature is a number", []gossip.Part{{Name: "text"}, {Name: PartGreeting, Content: map[string]any{"temperature": 3.0}}},
			"body.parts[1].content.temperature", "expected a string, got a number"},
		{"ifp_support holds a string", []gossip.Part{{Name: PartGreeting, Content: map[string]any{"ifp_support": []any{4.0, "7"}}}},
			"body.parts[0].content.ifp_support[1]", "expected an integer, got a string"},
		{"ifp_support is not a list", []gossip.Part{{Name: PartGreeting, Content: map[string]any{"ifp_support": 7.0}}},
			"body.parts[0].content.ifp_support", "expected an array of integers, got a number"},
		{"categories hold a number", []gossip.Part{{Name: PartGreeting, Content: map[string]any{"requested_tool_categories": []any{1.0}}}},
			"body.parts[0].content.requested_tool_categories[0]", "expected a string, got a number"},
		{"acks is a string", []gossip.Part{{Name: PartGreeting, Content: map[string]any{"acks": "yes"}}},
			"body.parts[0].content.acks", "expected a boolean, got a string"},
		{"context level is a string", []gossip.Part{{Name: PartGreeting, Content: map[string]any{}}, {Name: PartContext, Content: map[string]any{"auth_level": "high"}}},
			"body.parts[1].content.auth_level", "expected an integer, got a string"},
	} {
		m := greetingMessage(t)
		m.Body.Parts = tc.parts
		_, err := ReadGreeting(m)
		var fe *gossip.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidGreeting) || !errors.Is(err, gossip.ErrInvalidMessage) {
			t.Errorf("%s: %v, want a FieldError wrapping ErrInvalidGreeting", tc.name, err)
			continue
		}
		if fe.Field != tc.field || !strings.Contains(fe.Problem, tc.problem) {
			t.Errorf("%s: %s: %s, want %s: …%s", tc.name, fe.Field, fe.Problem, tc.field, tc.problem)
		}
	}
}

func TestReadGreetingIsLenientWhereItMayBe(t *testing.T) {
	m := greetingMessage(t)
	many := make([]any, 40)
	for i := range many {
		many[i] = "web"
	}
	m.Body.Parts = []gossip.Part{{Name: PartGreeting, Content: map[string]any{
		"temperature": "warm", "x-future": map[string]any{"a": 1.0}, "have_view": "not a sum", "view_unchanged": strings.Repeat("z", 64),
		"requested_tool_categories": many, "disclosure": "close",
	}}}
	g, err := ReadGreeting(m)
	if err != nil {
		t.Fatal(err)
	}
	if g.Temperature != "warm" || g.HaveView != "" || g.ViewUnchanged != "" || len(g.ToolCategories) != MaxRequestedCategories {
		t.Errorf("read %+v", g.Proposal)
	}
	if g.Disclosure != "" {
		t.Error("a disclosure in the greeting part counted: only headers.disclosure proposes a tier")
	}
}

func partNames(m *gossip.Message) string {
	var s []string
	for _, p := range m.Body.Parts {
		s = append(s, p.Name)
	}
	return strings.Join(s, " ")
}
