package negotiate

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
)

var update = flag.Bool("update", false, "rewrite testdata/projections and testdata/views from the current code")

// projectionDoc is testdata/document.json with a secret category and tag on
// the hidden diary.read, so that a leak through any member would show.
func projectionDoc(t testing.TB) *Document {
	d := load(t, "document.json")
	c, _ := d.Capability("diary.read")
	c.Categories = []string{"custom:diary"}
	c.Tags = []string{"private-diary"}
	return d
}

// The requesters the projection tests look through.
var (
	stranger   = conditions.Facts{Peer: "peer-x", AuthLevel: conditions.Signed, Disclosure: "public"}
	anonymous  = conditions.Facts{AuthLevel: conditions.NoLevel, Disclosure: "public"}
	researcher = conditions.Facts{Peer: "peer-x", AuthLevel: conditions.Signed, Disclosure: "professional", Persona: "researcher", Temperature: "warm"}
	friend     = conditions.Facts{Peer: "peer-bob", AuthLevel: conditions.Verified, Disclosure: "close"}
)

var pete = AGUIIdentity{DisplayName: "Pete's agent", Description: "Pete's personal agent: calendar, documents, gossip.", Version: "0.4.0",
	Provider: "Pete", DocumentationURL: "https://pete.example/agent"}

// testKey is the fixed key of the signed golden card.
func testKey(t testing.TB) *identity.Identity {
	id, err := identity.FromSeed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func cardOptions() A2AOptions {
	return A2AOptions{Identity: pete, URL: "https://pete.example/a2a", ProviderURL: "https://pete.example"}
}

// golden compares v, as indented JSON, with testdata/projections/name, or
// rewrites the file under -update.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "projections", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestProjectionGolden(t *testing.T) {
	d := projectionDoc(t)
	views := []struct {
		name  string
		facts conditions.Facts
	}{{"stranger", stranger}, {"researcher", researcher}}
	for _, v := range views {
		t.Run(v.name, func(t *testing.T) {
			view := d.View(v.facts, nil)
			golden(t, "capabilities-"+v.name+".json", view.CapabilitiesObject(pete))
			golden(t, "agent-card-"+v.name+".json", view.AgentCard(cardOptions()))
		})
	}
	t.Run("signed", func(t *testing.T) {
		card := d.View(anonymous, nil).AgentCard(cardOptions())
		if err := card.Sign(testKey(t)); err != nil {
			t.Fatal(err)
		}
		golden(t, "agent-card-signed.json", card)
	})
}

// Each table row is one mapping rule, checked on the JSON a client reads.
func TestProjectionMappings(t *testing.T) {
	d := projectionDoc(t)
	d.Capabilities = append(d.Capabilities,
		Capability{Name: "translate", Description: "Translate text", Price: &Price{Amount: "2", Currency: "EUR"}},
		Capability{Name: "media.gen.image", Description: "Make an image", Categories: []string{"media_gen"}, OutputSchema: map[string]any{"type": "string"}})
	d.AGUI.Output = map[string]any{} // an empty category is not declared
	view := d.View(researcher, nil)
	obj := toMap(t, view.CapabilitiesObject(AGUIIdentity{}))
	card := toMap(t, view.AgentCard(A2AOptions{URL: "https://h.example/a2a"}))
	tool := func(name string) map[string]any { return find(t, obj, "tools.items", "name", name) }
	action := func(name string) map[string]any { return find(t, obj, "actions", "name", name) }
	skill := func(name string) map[string]any { return find(t, card, "skills", "id", name) }

	cases := []struct {
		name string
		got  any
		want string // JSON
	}{
		{"identity falls back to the agent id", get(obj, "identity"), `{"name":"pete-agent","type":"ifaced","metadata":{"agent_id":"pete-agent"}}`},
		{"agui block passes through", get(obj, "humanInTheLoop"), `{"approvals":true}`},
		{"empty agui category omitted", get(obj, "output"), `null`},
		{"undeclared agui category omitted", get(obj, "reasoning"), `null`},
		{"tools declared supported", get(obj, "tools.supported"), `true`},
		{"tool without parameters gets an empty object schema", tool("gossip.exchange"), `{"name":"gossip.exchange","description":"Participate in IFP-3 gossip exchanges","parameters":{"type":"object","properties":{}}}`},
		{"tool parameters are the capability's schema", get(tool("calendar.availability"), "parameters.required"), `["days"]`},
		{"tool metadata carries categories, tags, price", get(tool("doc.summarize"), "metadata"), `{"categories":["web","custom:summaries"],"tags":["docs"],"price":{"amount":"0.05","currency":"USDC"}}`},
		{"non-USDC price stays a tool", get(tool("translate"), "metadata.price.currency"), `"EUR"`},
		{"message summarises when no description", get(obj, "message"), `"pete-agent offers: gossip.exchange (Participate in IFP-3 gossip exchanges); calendar.availability (Share calendar availability windows); doc.summarize (Summarize a document); translate (Translate text); media.gen.image (Make an image)."`},
		{"action price in USDC", action("doc.summarize"), `{"name":"doc.summarize","description":"Summarize a document","input_schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"output_schema":{"type":"object","properties":{"summary":{"type":"string"}}},"price":"0.05"}`},
		{"action without output schema gets {}", get(action("gossip.exchange"), "output_schema"), `{}`},
		{"free action has no price", get(action("gossip.exchange"), "price"), `null`},
		{"non-USDC action left out", names(t, obj, "actions"), `["gossip.exchange","calendar.availability","doc.summarize","media.gen.image"]`},
		{"card 0.3 members", pick(card, "url", "protocolVersion", "preferredTransport"), `{"url":"https://h.example/a2a","protocolVersion":"0.3.0","preferredTransport":"JSONRPC"}`},
		{"card 1.0 interface", get(card, "supportedInterfaces"), `[{"url":"https://h.example/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"https://h.example/a2a","protocolBinding":"JSONRPC","protocolVersion":"0.3"}]`},
		{"card capabilities explicit", get(card, "capabilities"), `{"streaming":true,"pushNotifications":false}`},
		{"card modes", pick(card, "defaultInputModes", "defaultOutputModes"), `{"defaultInputModes":["application/json","text/plain"],"defaultOutputModes":["application/json","text/plain"]}`},
		{"card version falls back to seq", get(card, "version"), `"4"`},
		{"card without provider URL has no provider", get(card, "provider"), `null`},
		{"skill tags are tags then categories", skill("doc.summarize"), `{"id":"doc.summarize","name":"doc.summarize","description":"Summarize a document","tags":["docs","web","custom:summaries"]}`},
		{"skill without tags is tagged by its first name segment", get(skill("media.gen.image"), "tags"), `["media_gen"]`},
		{"skill with neither", get(skill("calendar.availability"), "tags"), `["calendar"]`},
		{"ACP supported categories sorted", view.SupportedToolCategories(), `["custom:summaries","media_gen","web"]`},
	}
	for _, tc := range cases {
		got, err := json.Marshal(tc.got)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, got, []byte(tc.want)) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestProjectionsOmitEmpty(t *testing.T) {
	d := &Document{IFP: 7, AgentID: "a", Capabilities: []Capability{{Name: "x", Description: "X", Conditions: &conditions.Conditions{MinDisclosure: "close"}}}}
	obj := toMap(t, d.View(stranger, nil).CapabilitiesObject(AGUIIdentity{}))
	keys := slices.Sorted(maps.Keys(obj))
	if strings.Join(keys, " ") != "actions identity message" {
		t.Errorf("members %v, want actions identity message only (no tools, no agui categories)", keys)
	}
	if b, _ := json.Marshal(obj["actions"]); string(b) != "[]" {
		t.Errorf("actions %s, want []", b)
	}
	card := toMap(t, d.View(stranger, nil).AgentCard(A2AOptions{URL: "u"}))
	if b, _ := json.Marshal(card["skills"]); string(b) != "[]" {
		t.Errorf("skills %s, want [] (a required member)", b)
	}
}

// TestHiddenNeverProjected builds every projection from the views of
// requesters who may not see diary.read and finds no trace of it; an
// eligible friend's projections do list it, so the test is not vacuous.
func TestHiddenNeverProjected(t *testing.T) {
	d := projectionDoc(t)
	id := testKey(t)
	all := func(v *Document) []byte {
		card := v.AgentCard(cardOptions())
		if err := card.Sign(id); err != nil {
			t.Fatal(err)
		}
		ordered, honoured := OrderByCategories(v, []string{"custom:diary", "web"})
		b, err := json.Marshal([]any{v.AGUICapabilities(pete), v.Actions(), v.OrchestratorCapabilities(AGUIIdentity{}),
			v.CapabilitiesObject(AGUIIdentity{}), card, v.SupportedToolCategories(), ordered.Capabilities, honoured})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	secrets := []string{"diary", "Read entries from the diary", "private-diary"}
	for name, f := range map[string]conditions.Facts{"stranger": stranger, "anonymous": anonymous, "researcher": researcher,
		"close but only signed": {Peer: "peer-bob", AuthLevel: conditions.Signed, Disclosure: "close"}} {
		out := all(d.View(f, nil))
		for _, s := range secrets {
			if bytes.Contains(out, []byte(s)) {
				t.Errorf("%s: a projection leaks %q: %s", name, s, out)
			}
		}
	}
	out := all(d.View(friend, nil))
	if n := bytes.Count(out, []byte(`"diary.read"`)); n < 6 {
		t.Errorf("eligible friend: diary.read appears %d times, want it in every listing projection: %s", n, out)
	}
	// Another persona's capability is absent too.
	if out := all(d.View(stranger, nil)); bytes.Contains(out, []byte("doc.summarize")) {
		t.Errorf("a capability of another persona is projected: %s", out)
	}
}

// TestOwnerDocumentProjectsNothing: projecting the owner's document instead
// of a view lists nothing callable, rather than everything.
func TestOwnerDocumentProjectsNothing(t *testing.T) {
	d := projectionDoc(t)
	if tools := d.AGUICapabilities(pete).Tools; tools != nil {
		t.Errorf("tools from the owner's document: %+v", tools)
	}
	if a := d.Actions(); len(a) != 0 {
		t.Errorf("actions from the owner's document: %+v", a)
	}
	if s := d.AgentCard(cardOptions()).Skills; len(s) != 0 {
		t.Errorf("skills from the owner's document: %+v", s)
	}
}

func TestOrderByCategories(t *testing.T) {
	mk := func(name string, cats ...string) Capability {
		return Capability{Name: name, Description: name, Categories: cats}
	}
	v := &Document{IFP: 7, AgentID: "a", Seq: 9, Capabilities: []Capability{
		mk("a"), mk("b", "web"), mk("c", "voice"), mk("d", "search", "web"), mk("e"), mk("f", "custom:x")}}
	if got := v.SupportedToolCategories(); strings.Join(got, ",") != "custom:x,search,voice,web" {
		t.Fatalf("supported %v", got)
	}
	cases := []struct {
		requested []string
		order     string
		honoured  string
	}{
		{nil, "a b c d e f", ""},
		{[]string{"web"}, "b d a c e f", "web"},
		{[]string{"voice", "web"}, "b c d a e f", "voice,web"},
		{[]string{"custom:x", "search"}, "d f a b c e", "custom:x,search"},
		{[]string{"media_gen", "not a category", "", "custom:y", "WEB"}, "a b c d e f", ""},
		{[]string{"web", "bogus", "web", "voice", "voice"}, "b c d a e f", "web,voice"},
	}
	for _, tc := range cases {
		got, honoured := OrderByCategories(v, tc.requested)
		var order []string
		for _, c := range got.Capabilities {
			order = append(order, c.Name)
		}
		if strings.Join(order, " ") != tc.order || strings.Join(honoured, ",") != tc.honoured {
			t.Errorf("%q: order %v honoured %v, want %s / %s", tc.requested, order, honoured, tc.order, tc.honoured)
		}
		if got.Seq != v.Seq || got.AgentID != v.AgentID {
			t.Errorf("%q: copy lost document members", tc.requested)
		}
	}
	if v.Capabilities[0].Name != "a" || v.Capabilities[1].Name != "b" {
		t.Error("OrderByCategories modified its input")
	}
}

// --- helpers: look at projections as the JSON a client reads ---

func toMap(t testing.TB, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// get follows a dotted path of object members.
func get(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// find returns the element of the array at path whose member key is val.
func find(t testing.TB, v any, path, key, val string) map[string]any {
	t.Helper()
	arr, _ := get(v, path).([]any)
	for _, e := range arr {
		if m, ok := e.(map[string]any); ok && m[key] == val {
			return m
		}
	}
	t.Fatalf("no %s with %s %q", path, key, val)
	return nil
}

func names(t testing.TB, v any, path string) []string {
	arr, _ := get(v, path).([]any)
	var out []string
	for _, e := range arr {
		out = append(out, e.(map[string]any)["name"].(string))
	}
	return out
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	ca, err := identity.CanonicalizeJSON(a)
	if err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	cb, err := identity.CanonicalizeJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return bytes.Equal(ca, cb)
}
