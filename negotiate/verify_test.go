package negotiate

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/ifaced/ifaced/identity"
)

// The view conformance vectors (testdata/views/vectors.json): views signed
// over their RFC 8785 form as their signer wrote them, some with members
// this daemon does not model, and the result a receiver must reach. A
// receiver canonicalizes "view", removes its "signature" member, and
// checks the signature over the capability-document signing input
// (package identity) under "public_key".

// Results of a view vector.
const (
	resultValid              = "valid"               // verifies and decodes
	resultBadSignature       = "bad_signature"       // identity.ErrBadSignature
	resultMalformedSignature = "malformed_signature" // identity.ErrMalformedSignature
)

type viewVector struct {
	Name    string          `json:"name"`
	Note    string          `json:"note,omitempty"`
	View    json.RawMessage `json:"view"`
	Result  string          `json:"result"`
	DocHash string          `json:"doc_hash,omitempty"` // hex SHA-256 of the signed bytes, when valid
}

type viewVectors struct {
	About     string       `json:"about"`
	Seed      string       `json:"seed"`
	PublicKey string       `json:"public_key"` // hex
	Vectors   []viewVector `json:"vectors"`
}

// vectorKey is the RFC 8032 test 1 key, as in identity's vectors.
func vectorKey(t testing.TB) *identity.Identity {
	seed, _ := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	id, err := identity.FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// signedJSON signs view (a JSON object without "signature") by id over
// its canonical form, as a signer that models all of it would, and
// returns the canonical form with the signature.
func signedJSON(t testing.TB, id *identity.Identity, view string) []byte {
	t.Helper()
	canon, err := identity.CanonicalizeJSON([]byte(view))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := id.SignDocument(canon, time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(canon, &obj); err != nil {
		t.Fatal(err)
	}
	obj["signature"] = sig
	out, err := identity.Canonicalize(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// editView changes a signed view after signing.
func editView(t testing.TB, view []byte, change func(map[string]any)) []byte {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(view, &obj); err != nil {
		t.Fatal(err)
	}
	change(obj)
	out, err := identity.Canonicalize(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func capabilityAt(obj map[string]any, i int) map[string]any {
	return obj["capabilities"].([]any)[i].(map[string]any)
}

const vectorBase = `{"ifp":7,"agent_id":"did:key:z6MktwupdmLXVVqTzCw4i46r4uGyosGXRnR3XjN4Zq7oMMsw","seq":3,
	"updated":"2026-03-04T12:00:00Z","capabilities":[
	{"name":"doc.summarize","description":"Summarize a document","eligible":true,
	 "conditions":{"min_disclosure":"professional","persona":["researcher"]%s}%s}]%s}`

// makeViewVectors builds the vectors from scratch.
func makeViewVectors(t testing.TB) viewVectors {
	id := vectorKey(t)
	view := func(conds, capExtra, docExtra string) []byte {
		return signedJSON(t, id, fmtVector(conds, capExtra, docExtra))
	}
	plain := view("", "", "")
	all := view(`,"x-region":"eu"`, `,"x-rating":{"stars":5,"by":["a","b"]}`,
		`,"x-homepage":"https://pete.example","personas":[{"name":"researcher","default_disclosure":"professional-open"}]`)
	personaString := signedJSON(t, id, strings.Replace(fmtVector("", "", ""), `"persona":["researcher"]`, `"persona":"researcher"`, 1))
	other, _ := identity.FromSeed(bytes.Repeat([]byte{1}, 32))
	vs := viewVectors{
		About: "Signed IFP-7 capability views and the result a receiver must reach. Canonicalize \"view\" (RFC 8785), " +
			"remove its \"signature\" member, and verify the signature over the capability-document signing input " +
			"(package identity: \"ifp/7/capability-document-signature/v1\\n\" || JCS({\"document\": <that>, \"signature\": <alg, key_id, created>})) " +
			"under public_key. Members a receiver does not model are covered as they came, and kept. doc_hash is the hex SHA-256 of the signed bytes.",
		Seed:      "rfc8032-test1",
		PublicKey: hex.EncodeToString(id.PublicKey()),
		Vectors: []viewVector{
			{Name: "plain", Note: "only members ifaced models", View: plain, Result: resultValid},
			{Name: "unknown top-level member", View: view("", "", `,"x-homepage":"https://pete.example"`), Result: resultValid},
			{Name: "IFP-12 persona declaration", Note: "personas, a member ifaced does not model",
				View: view("", "", `,"personas":[{"name":"researcher","default_disclosure":"professional-open"}]`), Result: resultValid},
			{Name: "unknown capability member", View: view("", `,"x-rating":{"stars":5,"by":["a","b"]}`, ""), Result: resultValid},
			{Name: "unknown member inside conditions", View: view(`,"x-region":"eu"`, "", ""), Result: resultValid},
			{Name: "persona as a string", Note: "IFP-12 writes one persona as a string", View: personaString, Result: resultValid},
			{Name: "all of them", View: all, Result: resultValid},
			{Name: "tampered modeled member", Note: "description changed after signing",
				View: editView(t, all, func(o map[string]any) { capabilityAt(o, 0)["description"] = "Summarize anything" }), Result: resultBadSignature},
			{Name: "tampered unknown member", Note: "x-rating changed after signing: unknown members are signed too",
				View: editView(t, all, func(o map[string]any) { capabilityAt(o, 0)["x-rating"] = map[string]any{"stars": 1} }), Result: resultBadSignature},
			{Name: "unknown member dropped", Note: "a relay that drops what it does not model breaks the signature",
				View: editView(t, all, func(o map[string]any) { delete(o, "x-homepage") }), Result: resultBadSignature},
			{Name: "unknown condition added", View: editView(t, plain, func(o map[string]any) {
				capabilityAt(o, 0)["conditions"].(map[string]any)["x-region"] = "us"
			}), Result: resultBadSignature},
			{Name: "persona rewritten as a list", Note: "the same persona in another form is other content",
				View: editView(t, personaString, func(o map[string]any) {
					capabilityAt(o, 0)["conditions"].(map[string]any)["persona"] = []any{"researcher"}
				}), Result: resultBadSignature},
			{Name: "signed by another key", View: signedJSON(t, other, fmtVector("", "", "")), Result: resultBadSignature},
			{Name: "no signature", View: editView(t, plain, func(o map[string]any) { delete(o, "signature") }), Result: resultMalformedSignature},
		},
	}
	for i := range vs.Vectors {
		v := &vs.Vectors[i]
		if v.Result == resultValid {
			vv, err := VerifyView(id.PublicKey(), v.View)
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			v.DocHash = vv.DocHash
		}
	}
	return vs
}

func fmtVector(conds, capExtra, docExtra string) string {
	s := strings.Replace(vectorBase, "%s", conds, 1)
	s = strings.Replace(s, "%s", capExtra, 1)
	return strings.Replace(s, "%s", docExtra, 1)
}

func TestViewVectors(t *testing.T) {
	path := filepath.Join("testdata", "views", "vectors.json")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(makeViewVectors(t)); err != nil {
		t.Fatal(err)
	}
	made := buf.Bytes()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, made, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(raw, made) {
		t.Errorf("%s differs from what makeViewVectors builds (run with -update if the change is intended)", path)
	}
	var vs viewVectors
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	pub, err := hex.DecodeString(vs.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		t.Fatalf("public_key %q", vs.PublicKey)
	}
	for _, v := range vs.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			canon, err := identity.CanonicalizeJSON(v.View)
			if err != nil {
				t.Fatal(err)
			}
			vv, err := VerifyView(pub, canon)
			checkResult(t, "VerifyView", err, v.Result)
			// The same view decoded as a message part's JSON value and
			// checked with VerifyCanonical reaches the same result.
			var content any
			if err := json.Unmarshal(v.View, &content); err != nil {
				t.Fatal(err)
			}
			d, err := DecodeView(content)
			if err != nil {
				t.Fatalf("DecodeView: %v", err)
			}
			signed, verr := d.VerifyCanonical(pub)
			checkResult(t, "VerifyCanonical", verr, v.Result)
			if v.Result != resultValid {
				return
			}
			if vv.DocHash != v.DocHash || !bytes.Equal(vv.Canon, canon) || vv.Sum != sha(canon) {
				t.Errorf("doc hash %s, want %s", vv.DocHash, v.DocHash)
			}
			if got := sha(signed); hex.EncodeToString(got[:]) != v.DocHash {
				t.Errorf("VerifyCanonical covered other bytes: %s", signed)
			}
			checkReencoding(t, vv.Doc, canon)
		})
	}
}

func checkResult(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch want {
	case resultValid:
		if err != nil {
			t.Errorf("%s: %v, want it to verify", what, err)
		}
	case resultBadSignature:
		if !errors.Is(err, identity.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", what, err)
		}
	case resultMalformedSignature:
		if !errors.Is(err, identity.ErrMalformedSignature) {
			t.Errorf("%s: %v, want ErrMalformedSignature", what, err)
		}
	default:
		t.Fatalf("unknown result %q", want)
	}
}

// checkReencoding: encoding the decoded view writes back every member as
// received; only a persona written as a string comes back as a list.
func checkReencoding(t *testing.T, d *Document, canon []byte) {
	t.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	again, err := identity.CanonicalizeJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Replace(canon, []byte(`"persona":"researcher"`), []byte(`"persona":["researcher"]`), 1)
	if !bytes.Equal(again, want) {
		t.Errorf("re-encoded view differs:\n got %s\nwant %s", again, want)
	}
}

func sha(b []byte) [32]byte { return sha256.Sum256(b) }

func TestDecodeViewKeepsUnmodeledMembers(t *testing.T) {
	id := vectorKey(t)
	all := signedJSON(t, id, fmtVector(`,"x-region":"eu"`, `,"x-rating":{"stars":5}`, `,"x-homepage":"https://pete.example"`))
	vv, err := VerifyView(id.PublicKey(), all)
	if err != nil {
		t.Fatal(err)
	}
	d := vv.Doc
	c := &d.Capabilities[0]
	if got := slices.Sorted(maps.Keys(d.Extra)); !slices.Equal(got, []string{"x-homepage"}) {
		t.Errorf("document extras %v", got)
	}
	if string(c.Extra["x-rating"]) != `{"stars":5}` || string(c.ConditionsExtra["x-region"]) != `"eu"` {
		t.Errorf("capability extras %s / conditions extras %s", c.Extra, c.ConditionsExtra)
	}
	if c.Conds().MinDisclosure != "professional" || c.Conds().Persona[0] != "researcher" {
		t.Errorf("conditions %+v", c.Conds())
	}
	// A persona written as a string is the one-persona list.
	one := signedJSON(t, id, strings.Replace(fmtVector("", "", ""), `["researcher"]`, `"researcher"`, 1))
	if vv, err := VerifyView(id.PublicKey(), one); err != nil || !slices.Equal(vv.Doc.Capabilities[0].Conds().Persona, []string{"researcher"}) {
		t.Errorf("persona as a string: %v %+v", err, vv.Doc)
	}
	// Malformed conditions still refuse the view, naming them.
	for _, bad := range []string{`,"min_auth_level":"high"`, `,"persona":7`} {
		_, err := DecodeViewJSON([]byte(fmtVector(bad, "", "")))
		if !errors.Is(err, ErrNotAView) || !strings.Contains(err.Error(), "conditions") {
			t.Errorf("conditions %s: %v", bad, err)
		}
	}
	// Duplicate names are refused: two readers could read two views.
	dup := strings.Replace(fmtVector("", "", ""), `"seq":3,`, `"seq":3,"seq":4,`, 1)
	if _, err := DecodeViewJSON([]byte(dup)); !errors.Is(err, ErrNotAView) {
		t.Errorf("duplicate seq: %v", err)
	}
	dupCond := fmtVector(`,"x-a":1,"x-a":2`, "", "")
	if _, err := DecodeViewJSON([]byte(dupCond)); !errors.Is(err, ErrNotAView) {
		t.Errorf("duplicate condition: %v", err)
	}
}

// TestVerifyCanonicalFollowsChanges: a view decoded from a peer verifies
// over the bytes it came as only while it still says what they say.
func TestVerifyCanonicalFollowsChanges(t *testing.T) {
	id := vectorKey(t)
	all := signedJSON(t, id, fmtVector(`,"x-region":"eu"`, `,"x-rating":{"stars":5}`, `,"x-homepage":"https://pete.example"`))
	one := signedJSON(t, id, strings.Replace(fmtVector("", "", ""), `["researcher"]`, `"researcher"`, 1))
	for _, raw := range [][]byte{all, one} {
		for name, change := range map[string]func(d *Document){
			"seq": func(d *Document) { d.Seq++ },
			"extra": func(d *Document) {
				d.Extra = map[string]jsontext.Value{"x-homepage": jsontext.Value(`"https://evil.example"`)}
			},
			"conditions": func(d *Document) { d.Capabilities[0].Conditions.MinDisclosure = "public" },
			"signature":  func(d *Document) { s := *d.Signature; s.Created = "2026-03-05T00:00:00Z"; d.Signature = &s },
		} {
			d, err := DecodeViewJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Verify(id.PublicKey()); err != nil {
				t.Fatalf("unchanged: %v", err)
			}
			change(d)
			if err := d.Verify(id.PublicKey()); err == nil {
				t.Errorf("%s changed after decoding, and it still verified", name)
			}
		}
	}
}

func TestWithoutMember(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"signature":{"x":[1,2]},"z":3}`, `{"a":1,"z":3}`},
		{`{"signature":{},"z":3}`, `{"z":3}`},
		{`{"a":1,"signature":"s"}`, `{"a":1}`},
		{`{"signature":"s"}`, `{}`},
		{`{"a":1}`, `{"a":1}`},
		{`{ "signature" : 1 , "b" : 2 }`, `{ "b" : 2 }`},
		{`{"a":{"signature":1}}`, `{"a":{"signature":1}}`},
	} {
		got, err := withoutMember([]byte(tc.in), "signature")
		if err != nil || string(got) != tc.want {
			t.Errorf("withoutMember(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `{"a":`, ``} {
		if _, err := withoutMember([]byte(bad), "signature"); err == nil {
			t.Errorf("withoutMember(%q) succeeded", bad)
		}
	}
}
