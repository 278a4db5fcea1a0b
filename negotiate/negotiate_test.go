package negotiate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
)

func load(t testing.TB, name string) *Document {
	t.Helper()
	src, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := LoadDocument(src, FormatOf(name), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

func TestLoadJSONAndTOMLAgree(t *testing.T) {
	j, tm := load(t, "document.json"), load(t, "document.toml")
	cj, err := j.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	ct, err := tm.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cj, ct) {
		t.Fatalf("JSON and TOML forms differ:\n%s\n%s", cj, ct)
	}
	c, ok := j.Capability("doc.summarize")
	if !ok || c.VersionOrDefault() != "1" || c.Conds().Persona[0] != "researcher" {
		t.Fatalf("doc.summarize read wrong: %+v", c)
	}
}

// firstError returns the first *FieldError of err.
func fieldErrors(err error) []*FieldError {
	var out []*FieldError
	for _, e := range Errors(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			out = append(out, fe)
		}
	}
	return out
}

func TestLoadErrorsNameLineAndField(t *testing.T) {
	src, _ := os.ReadFile("testdata/document.toml")
	jsrc, _ := os.ReadFile("testdata/document.json")
	lineOf := func(src []byte, needle string) int {
		i := bytes.Index(src, []byte(needle))
		if i < 0 {
			t.Fatalf("no %q in source", needle)
		}
		return bytes.Count(src[:i], []byte("\n")) + 1
	}
	cases := []struct {
		name      string
		src       []byte
		format    Format
		field     string
		capName   string
		line      int
		inMessage string
	}{
		{"TOML misspelt key", bytes.Replace(src, []byte("min_disclosure = \"professional\""), []byte("min_disclosur = \"professional\""), 1), FormatTOML,
			"capabilities[1].conditions.min_disclosur", "", lineOf(src, "min_disclosure = \"professional\""), "not a known condition"},
		{"TOML unknown tier", bytes.Replace(src, []byte("\"professional\""), []byte("\"profesional\""), 1), FormatTOML,
			"capabilities[1].conditions.min_disclosure", "calendar.availability", lineOf(src, "min_disclosure = \"professional\""), "profesional"},
		{"TOML duplicate name", bytes.Replace(src, []byte("name = \"diary.read\""), []byte("name = \"doc.summarize\""), 1), FormatTOML,
			"capabilities[3].name", "doc.summarize", lineOf(src, "name = \"diary.read\""), "capabilities[2]"},
		{"TOML wrong type", bytes.Replace(src, []byte("seq = 4"), []byte("seq = \"four\""), 1), FormatTOML,
			"seq", "", lineOf(src, "seq = 4"), "string"},
		{"TOML syntax", bytes.Replace(src, []byte("[agui]"), []byte("[agui"), 1), FormatTOML,
			"", "", lineOf(src, "[agui]"), ""},
		{"TOML bad schema", bytes.Replace(src, []byte("type = \"object\"\nrequired"), []byte("type = \"objekt\"\nrequired"), 1), FormatTOML,
			"capabilities[2].parameters", "doc.summarize", lineOf(src, "[capabilities.parameters]"), "JSON Schema"},
		{"JSON missing description", bytes.Replace(jsrc, []byte(`"description": "Read entries from the diary",`), nil, 1), FormatJSON,
			"capabilities[3].description", "diary.read", lineOf(jsrc, `"name": "diary.read"`) - 1, "required"},
		{"JSON bad advertise", bytes.Replace(jsrc, []byte(`"when-eligible"`), []byte(`"sometimes"`), 1), FormatJSON,
			"capabilities[3].advertise", "diary.read", lineOf(jsrc, `"advertise"`), "sometimes"},
		{"JSON duplicate key", bytes.Replace(jsrc, []byte(`"seq": 4,`), []byte(`"seq": 4, "seq": 5,`), 1), FormatJSON,
			"seq", "", lineOf(jsrc, `"seq": 4`), "duplicate"},
		{"JSON bad category", bytes.Replace(jsrc, []byte(`"custom:summaries"`), []byte(`"summaries"`), 1), FormatJSON,
			"capabilities[2].categories[1]", "doc.summarize", lineOf(jsrc, `"categories"`), "custom:<name>"},
		{"JSON bad price", bytes.Replace(jsrc, []byte(`"0.05"`), []byte(`"5 cents"`), 1), FormatJSON,
			"capabilities[2].price.amount", "doc.summarize", lineOf(jsrc, `"price"`), "decimal"},
		{"JSON bad name", bytes.Replace(jsrc, []byte(`"gossip.exchange"`), []byte(`"Gossip Exchange"`), 1), FormatJSON,
			"capabilities[0].name", "Gossip Exchange", lineOf(jsrc, `"gossip.exchange"`), "dot notation"},
		{"JSON truncated", jsrc[:len(jsrc)/2], FormatJSON, "", "", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadDocument(tc.src, tc.format, nil)
			fes := fieldErrors(err)
			if len(fes) == 0 {
				t.Fatalf("got %v, want a *FieldError", err)
			}
			fe := fes[0]
			if tc.field != "" && fe.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", fe.Field, tc.field, err)
			}
			if fe.Capability != tc.capName {
				t.Errorf("capability %q, want %q (%v)", fe.Capability, tc.capName, err)
			}
			if tc.line != 0 && fe.Line != tc.line {
				t.Errorf("line %d, want %d (%v)", fe.Line, tc.line, err)
			}
			if !strings.Contains(err.Error(), tc.inMessage) {
				t.Errorf("error %q does not mention %q", err, tc.inMessage)
			}
		})
	}
}

func TestSchemasLoadNothingFromOutside(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/s.json", []byte(`{"type":"string"}`), 0o644)
	for _, ref := range []string{"file://" + dir + "/s.json", "https://example.com/s.json", "s.json"} {
		d := &Document{IFP: 7, AgentID: "a", Capabilities: []Capability{{Name: "x", Description: "x", Parameters: map[string]any{"$ref": ref}}}}
		err := d.Validate(nil)
		if err == nil || !strings.Contains(err.Error(), "capabilities[0].parameters") {
			t.Errorf("$ref %s: %v, want the schema refused", ref, err)
		}
	}
	inner := &Document{IFP: 7, AgentID: "a", Capabilities: []Capability{{Name: "x", Description: "x", Parameters: map[string]any{
		"$defs": map[string]any{"s": map[string]any{"type": "string"}}, "$ref": "#/$defs/s"}}}}
	if err := inner.Validate(nil); err != nil {
		t.Errorf("internal $ref refused: %v", err)
	}
}

func TestValidateWithCustomTiers(t *testing.T) {
	order, err := conditions.NewTierOrder([]conditions.CustomTier{{Name: "lab", After: "professional"}})
	if err != nil {
		t.Fatal(err)
	}
	d := &Document{IFP: 7, AgentID: "a", Capabilities: []Capability{{Name: "lab.notes", Description: "x", Conditions: &conditions.Conditions{MinDisclosure: "lab"}}}}
	if err := d.Validate(order); err != nil {
		t.Fatalf("custom tier: %v", err)
	}
	if err := d.Validate(nil); err == nil {
		t.Fatal("custom tier accepted without its configuration")
	}
}

func lvl(l conditions.Level) conditions.Level { return l }

func TestView(t *testing.T) {
	d := load(t, "document.json")
	d.Capabilities = append(d.Capabilities, Capability{Name: "family.photos", Description: "Share family photos",
		Conditions: &conditions.Conditions{Peers: []string{"peer-alice", "peer-bob"}}})
	names := func(v *Document) string {
		var s []string
		for _, c := range v.Capabilities {
			mark := "-"
			if c.Eligible != nil && *c.Eligible {
				mark = "+"
			}
			s = append(s, mark+c.Name)
		}
		return strings.Join(s, " ")
	}
	cases := []struct {
		name  string
		facts conditions.Facts
		want  string
	}{
		{"stranger", conditions.Facts{Peer: "peer-x", AuthLevel: conditions.Signed, Disclosure: "public"},
			"+gossip.exchange -calendar.availability -family.photos"},
		{"anonymous HTTP caller", conditions.Facts{AuthLevel: conditions.NoLevel, Disclosure: "public"},
			"+gossip.exchange -calendar.availability -family.photos"},
		{"colleague", conditions.Facts{Peer: "peer-x", AuthLevel: conditions.Signed, Disclosure: "professional"},
			"+gossip.exchange +calendar.availability -family.photos"},
		{"researcher persona, cool", conditions.Facts{Peer: "peer-x", AuthLevel: conditions.Signed, Disclosure: "professional", Persona: "researcher"},
			"+gossip.exchange +calendar.availability -doc.summarize -family.photos"},
		{"researcher persona, warm, busy", conditions.Facts{Peer: "peer-x", AuthLevel: conditions.Signed, Disclosure: "professional", Persona: "researcher", Temperature: "warm", InFlight: 5},
			"+gossip.exchange +calendar.availability +doc.summarize -family.photos"},
		{"close friend, verified", conditions.Facts{Peer: "peer-bob", AuthLevel: conditions.Verified, Disclosure: "close"},
			"+gossip.exchange +calendar.availability +diary.read +family.photos"},
		{"close friend, only signed", conditions.Facts{Peer: "peer-bob", AuthLevel: conditions.Signed, Disclosure: "close"},
			"+gossip.exchange +calendar.availability +family.photos"},
	}
	for _, tc := range cases {
		v := d.View(tc.facts, nil)
		if got := names(v); got != tc.want {
			t.Errorf("%s: view %q, want %q", tc.name, got, tc.want)
		}
		if v.Seq != d.Seq || v.Signature != nil {
			t.Errorf("%s: view seq %d signature %v", tc.name, v.Seq, v.Signature)
		}
		all, _ := v.Canonical()
		for _, secret := range []string{"diary.read", "peer-alice", "peer-bob"} {
			if tc.facts.Peer != "peer-bob" && bytes.Contains(all, []byte(secret)) {
				t.Errorf("%s: view leaks %q: %s", tc.name, secret, all)
			}
		}
		if tc.facts.Peer == "peer-bob" && bytes.Contains(all, []byte("peer-alice")) {
			t.Errorf("%s: view shows the rest of the allow list: %s", tc.name, all)
		}
	}
	// An ineligible capability says what is missing.
	v := d.View(conditions.Facts{Peer: "peer-x", AuthLevel: conditions.Signed, Disclosure: "public"}, nil)
	c, _ := v.Capability("calendar.availability")
	if len(c.Unmet) != 1 || c.Unmet[0].Condition != conditions.CondMinDisclosure || c.Unmet[0].Required != "professional" || c.Unmet[0].Have != "public" {
		t.Errorf("unmet for calendar.availability: %+v", c.Unmet)
	}
	// The owner's document is not modified by computing views.
	if orig, _ := d.Capability("family.photos"); len(orig.Conditions.Peers) != 2 || orig.Eligible != nil {
		t.Error("View modified the owner's document")
	}
	if err := v.Validate(nil); err == nil {
		t.Error("a view validated as an owner's document")
	}
}

func TestAdvertisedNeverListsHidden(t *testing.T) {
	d := load(t, "document.json")
	got := strings.Join(d.Advertised(), " ")
	if got != "gossip.exchange calendar.availability doc.summarize" {
		t.Fatalf("advertised %q", got)
	}
}

func TestDocumentSignature(t *testing.T) {
	id, _ := identity.Generate(nil)
	d := load(t, "document.json")
	canon, err := d.Sign(id, time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := d.Canonical(); !bytes.Equal(canon, again) {
		t.Fatal("Sign returned other bytes than Canonical")
	}
	if err := d.Verify(id.PublicKey()); err != nil {
		t.Fatal(err)
	}
	d.Seq++
	if err := d.Verify(id.PublicKey()); !errors.Is(err, identity.ErrBadSignature) {
		t.Fatalf("seq changed: %v", err)
	}
	d.Seq--
	d.Capabilities[1].Conditions.MinDisclosure = "public"
	if err := d.Verify(id.PublicKey()); !errors.Is(err, identity.ErrBadSignature) {
		t.Fatalf("condition lowered: %v", err)
	}
	d.Signature = nil
	if err := d.Verify(id.PublicKey()); !errors.Is(err, identity.ErrMalformedSignature) {
		t.Fatalf("unsigned: %v", err)
	}
}

// TwentyCapabilities builds the 20-capability document DESIGN.md §8 uses.
func twentyCapabilities() *Document {
	d := &Document{IFP: 7, AgentID: "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp", Seq: 1, IFPSupport: []int{3, 4, 5, 6, 7}, Updated: "2026-03-04T12:00:00Z"}
	for i := 0; i < 20; i++ {
		d.Capabilities = append(d.Capabilities, Capability{
			Name:        fmt.Sprintf("tool%02d.run", i),
			Description: strings.Repeat("Does something useful with the input and explains the result. ", 4),
			Parameters: map[string]any{"type": "object", "required": []any{"text"}, "properties": map[string]any{
				"text":      map[string]any{"type": "string", "description": "The text to work on"},
				"max_words": map[string]any{"type": "integer", "minimum": 1, "default": 200},
				"language":  map[string]any{"type": "string", "enum": []any{"en", "es", "de", "fr"}},
			}},
			OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"result": map[string]any{"type": "string"}, "tokens": map[string]any{"type": "integer"}}},
			Conditions:   &conditions.Conditions{MinDisclosure: "professional", MinAuthLevel: ptr(conditions.Signed)},
			Price:        &Price{Amount: "0.05", Currency: "USDC"},
			Categories:   []string{"web"},
			Tags:         []string{"text", "tools"},
		})
	}
	return d
}

func ptr[T any](v T) *T { return &v }

func TestTwentyCapabilityDocumentIsValid(t *testing.T) {
	d := twentyCapabilities()
	if err := d.Validate(nil); err != nil {
		t.Fatal(err)
	}
	canon, _ := d.Canonical()
	t.Logf("20-capability document: %d bytes canonical JSON", len(canon))
}

// BenchmarkDocumentSignVerify measures what a daemon pays when its document
// changes (canonicalize + sign) and when a peer's document changes
// (canonicalize + verify).
func BenchmarkDocumentSignVerify(b *testing.B) {
	id, _ := identity.Generate(nil)
	d := twentyCapabilities()
	now := time.Now()
	b.Run("canonicalize", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.Canonical(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			if _, err := d.Sign(id, now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		d.Sign(id, now)
		for b.Loop() {
			if err := d.Verify(id.PublicKey()); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What a receiver pays for a peer's changed view: decoding and
	// verifying its canonical bytes as received (VerifyView), against
	// decoding, re-encoding and verifying (DecodeViewJSON + Verify).
	sv, err := SignView(d, id, now)
	if err != nil {
		b.Fatal(err)
	}
	canon := sv.Content.Canonical()
	b.Run("verify view as received", func(b *testing.B) {
		for b.Loop() {
			if _, err := VerifyView(id.PublicKey(), canon); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode and verify re-encoded", func(b *testing.B) {
		for b.Loop() {
			v, err := DecodeViewJSON(canon)
			if err != nil {
				b.Fatal(err)
			}
			if err := v.Verify(id.PublicKey()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
