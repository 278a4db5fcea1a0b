package identity

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json from the current code")

func rfc8032Test1(t *testing.T) (seed, pub, sig []byte) {
	t.Helper()
	b, err := os.ReadFile("testdata/rfc8032-test1.json")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	dh := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return dh(v["secret_key"]), dh(v["public_key"]), dh(v["signature"])
}

func TestRFC8032Test1(t *testing.T) {
	seed, pub, sig := rfc8032Test1(t)
	id, err := FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(id.PublicKey(), pub) {
		t.Fatalf("public key %x, want %x", id.PublicKey(), pub)
	}
	if got := id.sign(nil); !bytes.Equal(got, sig) {
		t.Fatalf("signature %x, want %x", got, sig)
	}
	if !ed25519.Verify(pub, nil, sig) {
		t.Fatal("RFC 8032 signature does not verify")
	}
}

func TestDIDKeyZeroSeed(t *testing.T) {
	// The did:key method's published Ed25519 example: the all-zero seed.
	id, err := FromSeed(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	const want = "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp"
	if id.DID() != want {
		t.Fatalf("did %s, want %s", id.DID(), want)
	}
	pub, err := PublicKeyFromKeyID(id.KeyID())
	if err != nil || !pub.Equal(id.PublicKey()) {
		t.Fatalf("key_id %s does not give back the key: %v", id.KeyID(), err)
	}
	back, err := PublicKeyFromPeerID(id.PeerID())
	if err != nil || !back.Equal(id.PublicKey()) {
		t.Fatalf("peer ID %s does not give back the key: %v", id.PeerID(), err)
	}
}

func TestDIDKeyRejects(t *testing.T) {
	good := DIDKey(make(ed25519.PublicKey, 32))
	for _, s := range []string{
		"", "did:web:example.com", "did:key:", "did:key:z0OIl", // 0, O, I, l are not base58
		"did:key:z" + "6Mk", // too short
		strings.Replace(good, "z6Mk", "z6Lk", 1),
	} {
		if _, err := PublicKeyFromDID(s); !errors.Is(err, ErrBadKeyID) {
			t.Errorf("PublicKeyFromDID(%q) = %v, want ErrBadKeyID", s, err)
		}
	}
	for _, s := range []string{good, good + "#other", "did:key:#"} {
		if _, err := PublicKeyFromKeyID(s); !errors.Is(err, ErrBadKeyID) {
			t.Errorf("PublicKeyFromKeyID(%q) = %v, want ErrBadKeyID", s, err)
		}
	}
}

func TestCanonicalizeRFC8785Examples(t *testing.T) {
	for _, name := range []string{"example-3.2.2", "sorting-3.2.3"} {
		in, err := os.ReadFile(filepath.Join("testdata/rfc8785", name+".in.json"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("testdata/rfc8785", name+".out.json"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := CanonicalizeJSON(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func TestCanonicalizeRFC8785Numbers(t *testing.T) {
	f, err := os.Open("testdata/rfc8785/numbers-appendix-b.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		hexBits, want, _ := strings.Cut(line, " ")
		bits, err := strconv.ParseUint(hexBits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		v := math.Float64frombits(bits)
		n++
		got, err := Canonicalize(v)
		if want == "error" {
			if err == nil {
				t.Errorf("%s: got %s, want an error", hexBits, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", hexBits, err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s: got %s, want %s", hexBits, got, want)
		}
	}
	if n < 20 {
		t.Fatalf("read only %d vectors", n)
	}
}

func TestCanonicalizeRejectsBadJSON(t *testing.T) {
	for _, in := range []string{`{"a":1`, `{"a":1}x`, `"\ud800"`, `[1,]`, ``} {
		if _, err := CanonicalizeJSON([]byte(in)); err == nil {
			t.Errorf("CanonicalizeJSON(%q) succeeded", in)
		}
	}
}

func TestKeySaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "key.pem")
	id, err := Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := SaveKey(path, id); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %#o, want 0600", st.Mode().Perm())
	}
	back, err := LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.PeerID() != id.PeerID() {
		t.Fatalf("loaded %s, saved %s", back.PeerID(), id.PeerID())
	}
	if err := SaveKey(path, id); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("second SaveKey = %v, want ErrKeyExists", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadKey(path)
	if !errors.Is(err, ErrKeyPermissions) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("LoadKey of a 0644 file = %v, want ErrKeyPermissions telling how to fix it", err)
	}
	if _, err := LoadKey(filepath.Join(dir, "missing.pem")); !errors.Is(err, ErrNoKey) {
		t.Fatalf("LoadKey of a missing file = %v, want ErrNoKey", err)
	}
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a key"), 0o600)
	if _, err := LoadKey(junk); err == nil {
		t.Fatal("LoadKey of junk succeeded")
	}
}

func TestIdentityNeverPrintsKey(t *testing.T) {
	seed, _, _ := rfc8032Test1(t)
	id, _ := FromSeed(seed)
	for _, s := range []string{id.String(), id.LogValue().String()} {
		if strings.Contains(s, hex.EncodeToString(seed)) || strings.Contains(s, base64.RawURLEncoding.EncodeToString(seed)) {
			t.Fatalf("identity printed its seed: %s", s)
		}
		if s != id.PeerID().String() {
			t.Fatalf("identity prints %q, want its peer ID", s)
		}
	}
}

// vectors is the layout of testdata/vectors.json.
type vectors struct {
	Seed        string `json:"seed"`
	PublicKey   string `json:"public_key"`
	PeerID      string `json:"peer_id"`
	DID         string `json:"did"`
	KeyID       string `json:"key_id"`
	Fingerprint string `json:"fingerprint"`
	Message     struct {
		Signature    MessageSignature `json:"signature"`
		Headers      map[string]any   `json:"headers"`
		Body         any              `json:"body"`
		SigningInput string           `json:"signing_input"`
	} `json:"message"`
	Document struct {
		Document     any               `json:"document"`
		Signature    DocumentSignature `json:"signature"`
		SigningInput string            `json:"signing_input"`
	} `json:"document"`
}

func vectorKey(t *testing.T) *Identity {
	seed, _, _ := rfc8032Test1(t)
	id, err := FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestVectors(t *testing.T) {
	id := vectorKey(t)
	var v vectors
	if *update {
		v.Seed = "rfc8032-test1"
		v.PublicKey = hex.EncodeToString(id.PublicKey())
		v.PeerID, v.DID, v.KeyID, v.Fingerprint = id.PeerID().String(), id.DID(), id.KeyID(), id.Fingerprint()
		v.Message.Signature = MessageSignature{
			Created:       "2026-03-04T23:58:12Z",
			SignedHeaders: []string{"message_id", "date", "from", "to", "conversation_id", "sequence", "phase", "content_type", "disclosure"},
			SignedBody:    true,
		}
		v.Message.Headers = map[string]any{
			"message_id": "msg:01JNTP8R1S3X4V5W6Y7Z8A9BCD", "date": "2026-03-04T23:58:12Z",
			"from":            map[string]any{"agent": id.DID(), "display": "Pete's agent"},
			"to":              []any{map[string]any{"agent": "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp"}},
			"conversation_id": "conv:01JNTP8R1S3X4V5W6Y7Z8A9BCE", "sequence": 1, "phase": "greeting",
			"content_type": "text/markdown; charset=utf-8", "disclosure": nil,
		}
		v.Message.Body = map[string]any{"text": "I'm Pete's agent. ¡Hola! \u20ac <tag> & \"quotes\"", "parts": []any{
			map[string]any{"content_type": "application/json", "name": "task", "content": map[string]any{"n": 1.5e3, "ok": true}},
		}}
		body, _ := Canonicalize(v.Message.Body)
		if err := id.SignMessage(&v.Message.Signature, v.Message.Headers, body); err != nil {
			t.Fatal(err)
		}
		in, _ := MessageSigningInput(&v.Message.Signature, v.Message.Headers, body)
		v.Message.SigningInput = string(in)
		v.Document.Document = map[string]any{"ifp": 7, "agent_id": id.DID(), "seq": 3, "capabilities": []any{
			map[string]any{"name": "ping", "description": "Responds to connectivity tests"}}}
		doc, _ := Canonicalize(v.Document.Document)
		sig, err := id.SignDocument(doc, time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		v.Document.Signature = *sig
		din, _ := DocumentSigningInput(sig, doc)
		v.Document.SigningInput = string(din)
		out, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile("testdata/vectors.json", append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	v = vectors{}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][2]string{
		"public_key":  {hex.EncodeToString(id.PublicKey()), v.PublicKey},
		"peer_id":     {id.PeerID().String(), v.PeerID},
		"did":         {id.DID(), v.DID},
		"key_id":      {id.KeyID(), v.KeyID},
		"fingerprint": {id.Fingerprint(), v.Fingerprint},
	} {
		if got[0] != got[1] {
			t.Errorf("%s = %s, vector says %s", name, got[0], got[1])
		}
	}
	body, err := Canonicalize(v.Message.Body)
	if err != nil {
		t.Fatal(err)
	}
	in, err := MessageSigningInput(&v.Message.Signature, v.Message.Headers, body)
	if err != nil {
		t.Fatal(err)
	}
	if string(in) != v.Message.SigningInput {
		t.Errorf("message signing input\n got %s\nwant %s", in, v.Message.SigningInput)
	}
	resigned := v.Message.Signature
	resigned.Sig = ""
	if err := id.SignMessage(&resigned, v.Message.Headers, body); err != nil || resigned.Sig != v.Message.Signature.Sig {
		t.Errorf("message signature %s (%v), vector says %s", resigned.Sig, err, v.Message.Signature.Sig)
	}
	if err := VerifyMessage(id.PublicKey(), &v.Message.Signature, v.Message.Headers, body); err != nil {
		t.Errorf("vector message signature: %v", err)
	}
	doc, _ := Canonicalize(v.Document.Document)
	din, err := DocumentSigningInput(&v.Document.Signature, doc)
	if err != nil || string(din) != v.Document.SigningInput {
		t.Errorf("document signing input\n got %s (%v)\nwant %s", din, err, v.Document.SigningInput)
	}
	if err := VerifyDocument(id.PublicKey(), &v.Document.Signature, doc); err != nil {
		t.Errorf("vector document signature: %v", err)
	}
}

func signedVector(t *testing.T) (*Identity, MessageSignature, map[string]any, []byte) {
	id := vectorKey(t)
	sig := MessageSignature{Created: "2026-03-04T23:58:12Z", SignedHeaders: []string{"message_id", "phase"}, SignedBody: true}
	headers := map[string]any{"message_id": "m1", "phase": "greeting"}
	body, _ := Canonicalize(map[string]any{"text": "hi"})
	if err := id.SignMessage(&sig, headers, body); err != nil {
		t.Fatal(err)
	}
	return id, sig, headers, body
}

func TestMessageSignatureCoversEverything(t *testing.T) {
	id, sig, headers, body := signedVector(t)
	if err := VerifyMessage(id.PublicKey(), &sig, headers, body); err != nil {
		t.Fatal(err)
	}
	other, _ := Generate(nil)
	tamper := []struct {
		name   string
		mutate func(s *MessageSignature, h map[string]any, b *[]byte) *Identity
	}{
		{"header value", func(s *MessageSignature, h map[string]any, b *[]byte) *Identity { h["phase"] = "close"; return id }},
		{"body", func(s *MessageSignature, h map[string]any, b *[]byte) *Identity {
			*b = []byte(`{"text":"ho"}`)
			return id
		}},
		{"created", func(s *MessageSignature, h map[string]any, b *[]byte) *Identity {
			s.Created = "2026-03-05T00:00:00Z"
			return id
		}},
		{"signed_body", func(s *MessageSignature, h map[string]any, b *[]byte) *Identity { s.SignedBody = false; return id }},
		{"header order", func(s *MessageSignature, h map[string]any, b *[]byte) *Identity {
			s.SignedHeaders = []string{"phase", "message_id"}
			return id
		}},
		{"key_id", func(s *MessageSignature, h map[string]any, b *[]byte) *Identity { s.KeyID = other.KeyID(); return id }},
		{"other key", func(s *MessageSignature, h map[string]any, b *[]byte) *Identity { return other }},
	}
	for _, tc := range tamper {
		s := sig
		s.SignedHeaders = append([]string(nil), sig.SignedHeaders...)
		h := map[string]any{}
		for k, v := range headers {
			h[k] = v
		}
		b := body
		k := tc.mutate(&s, h, &b)
		if err := VerifyMessage(k.PublicKey(), &s, h, b); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s changed: VerifyMessage = %v, want ErrBadSignature", tc.name, err)
		}
	}
}

func TestMessageSignatureMalformed(t *testing.T) {
	id, sig, headers, body := signedVector(t)
	cases := []struct {
		name    string
		mutate  func(s *MessageSignature, h map[string]any) []byte
		wantErr error
	}{
		{"unknown alg", func(s *MessageSignature, h map[string]any) []byte { s.Alg = "rsa"; return body }, ErrMalformedSignature},
		{"bad created", func(s *MessageSignature, h map[string]any) []byte { s.Created = "yesterday"; return body }, ErrMalformedSignature},
		{"duplicate header", func(s *MessageSignature, h map[string]any) []byte {
			s.SignedHeaders = []string{"phase", "phase"}
			return body
		}, ErrMalformedSignature},
		{"no headers", func(s *MessageSignature, h map[string]any) []byte { s.SignedHeaders = nil; return body }, ErrMalformedSignature},
		{"missing header value", func(s *MessageSignature, h map[string]any) []byte { delete(h, "phase"); return body }, ErrMalformedSignature},
		{"extra header value", func(s *MessageSignature, h map[string]any) []byte { h["extra"] = 1; return body }, ErrMalformedSignature},
		{"no body", func(s *MessageSignature, h map[string]any) []byte { return nil }, ErrMalformedSignature},
		{"sig not base64url", func(s *MessageSignature, h map[string]any) []byte { s.Sig = "!!"; return body }, ErrMalformedSignature},
		{"sig too short", func(s *MessageSignature, h map[string]any) []byte { s.Sig = "AAAA"; return body }, ErrMalformedSignature},
		{"hmac alg", func(s *MessageSignature, h map[string]any) []byte { s.Alg = AlgHMACSHA256; return body }, ErrMalformedSignature},
	}
	for _, tc := range cases {
		s := sig
		h := map[string]any{}
		for k, v := range headers {
			h[k] = v
		}
		b := tc.mutate(&s, h)
		if err := VerifyMessage(id.PublicKey(), &s, h, b); !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: VerifyMessage = %v, want %v", tc.name, err, tc.wantErr)
		}
	}
}

func TestSigningInputsAreDomainSeparated(t *testing.T) {
	id := vectorKey(t)
	// A document whose canonical bytes equal a message's object must still
	// not yield a message signature, because the prefixes differ.
	dsig, err := id.SignDocument([]byte(`{}`), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	msig := MessageSignature{Alg: AlgEd25519, KeyID: dsig.KeyID, Created: dsig.Created, SignedHeaders: []string{"x"}, Sig: dsig.Sig}
	if err := VerifyMessage(id.PublicKey(), &msig, map[string]any{"x": nil}, nil); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("document signature accepted as message signature: %v", err)
	}
	min, _ := MessageSigningInput(&msig, map[string]any{"x": nil}, nil)
	din, _ := DocumentSigningInput(dsig, []byte(`{}`))
	if !bytes.HasPrefix(min, []byte(MessagePrefix)) || !bytes.HasPrefix(din, []byte(DocumentPrefix)) {
		t.Fatal("signing inputs lack their prefixes")
	}
}

func TestSignedHeaderAbsentIsNull(t *testing.T) {
	id := vectorKey(t)
	sig := MessageSignature{Created: "2026-03-04T23:58:12Z", SignedHeaders: []string{"persona"}}
	if err := id.SignMessage(&sig, map[string]any{"persona": nil}, nil); err != nil {
		t.Fatal(err)
	}
	if err := VerifyMessage(id.PublicKey(), &sig, map[string]any{"persona": "researcher"}, nil); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("adding a signed-as-absent header kept the signature valid: %v", err)
	}
}

func TestIdentityDocument(t *testing.T) {
	id := vectorKey(t)
	created := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	d := NewDocument(id, "", "Pete's agent", created)
	d.Name = &AgentName{Canonical: "github:peterkaminski.freya", Aliases: []string{"bsky:pete.kaminski.freya"}, Agent: "freya"}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.AgentID != id.DID() {
		t.Fatalf("agent_id %s, want the did", d.AgentID)
	}
	pub, err := d.KeyStatusAt(id.KeyID(), created, 0)
	if err != nil || !pub.Equal(id.PublicKey()) {
		t.Fatalf("active key: %v", err)
	}

	other, _ := Generate(nil)
	cases := []struct {
		field  string
		mutate func(d *Document)
	}{
		{"ifp", func(d *Document) { d.IFP = 4 }},
		{"agent_id", func(d *Document) { d.AgentID = " " }},
		{"keys", func(d *Document) { d.Keys = nil }},
		{"keys[0].type", func(d *Document) { d.Keys[0].Type = "rsa" }},
		{"keys[0].public_key", func(d *Document) { d.Keys[0].PublicKey = "AAAA" }},
		{"keys[0].public_key", func(d *Document) {
			d.Keys[0].PublicKey = base64.RawURLEncoding.EncodeToString(other.PublicKey())
		}},
		{"keys[0].created", func(d *Document) { d.Keys[0].Created = "March" }},
		{"keys[0].status", func(d *Document) { d.Keys[0].Status = "lost" }},
		{"keys[0].retired_date", func(d *Document) { d.Keys[0].Status = KeyRetired }},
		{"keys[1].key_id", func(d *Document) { d.Keys = append(d.Keys, d.Keys[0]) }},
		{"name.canonical", func(d *Document) { d.Name.Canonical = "freya" }},
		{"name.aliases[0]", func(d *Document) { d.Name.Aliases[0] = "GitHub:x.y" }},
		{"name.agent", func(d *Document) { d.Name.Agent = "Freya" }},
	}
	for _, tc := range cases {
		c := *d
		c.Keys = append([]DocumentKey(nil), d.Keys...)
		n := *d.Name
		n.Aliases = append([]string(nil), d.Name.Aliases...)
		c.Name = &n
		tc.mutate(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidDocument) || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s broken: Validate = %v, want an error naming it", tc.field, err)
		}
	}
}

func TestKeyRotation(t *testing.T) {
	oldID := vectorKey(t)
	newID, _ := Generate(nil)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	d := NewDocument(oldID, "https://pete.example/.well-known/iface", "", t0)
	d.Keys = append(d.Keys, NewDocument(newID, "", "", t0.Add(time.Hour)).Keys[0])
	retired := t0.Add(24 * time.Hour)
	d.Keys[0].Status, d.Keys[0].RetiredDate = KeyRetired, retired.Format(time.RFC3339)
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	week := 7 * 24 * time.Hour
	if _, err := d.KeyStatusAt(oldID.KeyID(), retired.Add(week-time.Second), week); err != nil {
		t.Fatalf("retired key inside its transition period: %v", err)
	}
	if _, err := d.KeyStatusAt(oldID.KeyID(), retired.Add(week+time.Second), week); !errors.Is(err, ErrKeyRetired) {
		t.Fatalf("retired key after its transition period: %v, want ErrKeyRetired", err)
	}
	d.Keys[0].Status = KeyRevoked
	if _, err := d.KeyStatusAt(oldID.KeyID(), t0, week); !errors.Is(err, ErrKeyRevoked) {
		t.Fatalf("revoked key: %v, want ErrKeyRevoked", err)
	}
	if _, err := d.KeyStatusAt("did:key:nope#nope", t0, week); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown key: %v, want ErrUnknownKey", err)
	}
}

func TestValidateAgentName(t *testing.T) {
	for _, ok := range []string{"github:alice.freya", "github:peterkaminski.freya.nightlight", "bsky:pete.kaminski.kai",
		"matrix:@pete:kaminski.org.atlas", "did:key:z6Mk.envoy", "email:pete@example.com.scout"} {
		if err := ValidateAgentName(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "freya", "github:", "github:alice", "github:alice.", "GitHub:alice.freya", "github:alice.Freya", "github:al ice.freya", "github:.freya"} {
		if err := ValidateAgentName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestIntroduction(t *testing.T) {
	issuer := vectorKey(t)
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	tok, err := MintIntroduction(issuer.DID(), "Bob from the conference", 7*24*time.Hour, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := tok.Encode()
	if strings.ContainsAny(s, " \n\t/+=") {
		t.Fatalf("token %q is not one pasteable word", s)
	}
	back, err := ParseIntroduction("  " + s + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != tok.ID || back.Issuer != tok.Issuer || back.Label != tok.Label || !back.Expires.Equal(tok.Expires) || !bytes.Equal(back.Secret, tok.Secret) {
		t.Fatalf("round trip changed the token: %+v vs %+v", back, tok)
	}
	// One changed character is caught by the checksum.
	mangled := s[:len(s)-3] + string("123456789"[(strings.IndexByte("123456789", s[len(s)-3])+1)%9]) + s[len(s)-2:]
	if _, err := ParseIntroduction(mangled); !errors.Is(err, ErrBadIntroduction) {
		t.Fatalf("mangled token: %v, want ErrBadIntroduction", err)
	}
	for _, bad := range []string{"", "hello", "ifintro1", "ifintro10OIl"} {
		if _, err := ParseIntroduction(bad); !errors.Is(err, ErrBadIntroduction) {
			t.Errorf("ParseIntroduction(%q) = %v", bad, err)
		}
	}
	if _, err := MintIntroduction(issuer.DID(), "", time.Hour, now, nil); err == nil {
		t.Error("minted a token without a label")
	}
	if _, err := MintIntroduction("alice", "x", time.Hour, now, nil); err == nil {
		t.Error("minted a token for a non-did:key issuer")
	}
	if _, err := MintIntroduction(issuer.DID(), "x", 0, now, nil); err == nil {
		t.Error("minted an already expired token")
	}

	headers := map[string]any{"message_id": "m1", "phase": "greeting"}
	body, _ := Canonicalize(map[string]any{"text": "hello"})
	prove := func(t *Introduction) MessageSignature {
		sig := MessageSignature{Created: "2026-03-04T12:00:00Z", SignedHeaders: []string{"message_id", "phase"}, SignedBody: true}
		if err := t.Prove(&sig, headers, body); err != nil {
			panic(err)
		}
		return sig
	}
	rec := &IssuedIntroduction{Introduction: *tok}
	proof := prove(back)
	if err := rec.Admit("peerB", &proof, headers, body, now); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if rec.BoundPeer != "peerB" {
		t.Fatalf("token bound to %q, want peerB", rec.BoundPeer)
	}
	if err := rec.Admit("peerB", &proof, headers, body, now.Add(time.Hour)); err != nil {
		t.Fatalf("second use by the same peer: %v", err)
	}
	if err := rec.Admit("peerC", &proof, headers, body, now); !errors.Is(err, ErrIntroBound) {
		t.Fatalf("use by another peer: %v, want ErrIntroBound", err)
	}
	wrong := *back
	wrong.Secret = make([]byte, 32)
	forged := prove(&wrong)
	if err := rec.Admit("peerB", &forged, headers, body, now); !errors.Is(err, ErrBadIntroProof) {
		t.Fatalf("wrong secret: %v, want ErrBadIntroProof", err)
	}
	otherHeaders := map[string]any{"message_id": "m2", "phase": "greeting"}
	if err := rec.Admit("peerB", &proof, otherHeaders, body, now); !errors.Is(err, ErrBadIntroProof) {
		t.Fatalf("proof moved to another message: %v, want ErrBadIntroProof", err)
	}
	if err := rec.Admit("peerB", &proof, headers, body, tok.Expires.Add(time.Second)); !errors.Is(err, ErrIntroExpired) {
		t.Fatalf("after expiry: %v, want ErrIntroExpired", err)
	}
	rec.Revoked = true
	if err := rec.Admit("peerB", &proof, headers, body, now); !errors.Is(err, ErrIntroRevoked) {
		t.Fatalf("revoked: %v, want ErrIntroRevoked", err)
	}
}

func TestReplayGuard(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	seen := NewMemorySeenSet()
	g := NewReplayGuard(seen, 0, 0)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	if err := g.Check("m1", at(0), now); err != nil {
		t.Fatal(err)
	}
	if err := g.Check("m1", at(0), now); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: %v", err)
	}
	if err := g.Check("m2", at(DefaultClockSkew-time.Second), now); err != nil {
		t.Fatalf("inside skew: %v", err)
	}
	if err := g.Check("m3", at(DefaultClockSkew+time.Second), now); !errors.Is(err, ErrFuture) {
		t.Fatalf("beyond skew: %v", err)
	}
	if err := g.Check("m4", at(-DefaultReplayWindow), now); err != nil {
		t.Fatalf("at the window edge: %v", err)
	}
	if err := g.Check("m5", at(-DefaultReplayWindow-DefaultClockSkew-time.Second), now); !errors.Is(err, ErrStale) {
		t.Fatalf("beyond the window: %v", err)
	}
	if err := g.Check("m6", "yesterday", now); err == nil {
		t.Fatal("accepted a malformed date")
	}
	// Pruning forgets only what the date check already rejects.
	if err := g.Prune(now.Add(DefaultReplayWindow)); err != nil {
		t.Fatal(err)
	}
	if err := g.Check("m1", at(0), now); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay after a prune inside the window: %v", err)
	}
	later := now.Add(DefaultReplayWindow + 3*DefaultClockSkew)
	g.Prune(later)
	if seen.Len() != 0 {
		t.Fatalf("%d IDs left after the window passed", seen.Len())
	}
	if err := g.Check("m1", at(0), later); !errors.Is(err, ErrStale) {
		t.Fatalf("old replay after prune: %v, want ErrStale", err)
	}
}

// A clock that jumps ahead, prunes the seen-set there, and comes back
// (a laptop's sleep, an NTP step) makes the dates the window had left
// fresh again: a message whose ID was pruned is refused as stale, not
// accepted again, while fresh messages still pass.
func TestReplayGuardClockBack(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	seen := NewMemorySeenSet()
	g := NewReplayGuard(seen, 0, 0)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	old := at(-DefaultReplayWindow + 30*time.Minute) // inside the window
	if err := g.Check("m1", old, now); err != nil {
		t.Fatal(err)
	}
	if err := g.Prune(now.Add(time.Hour)); err != nil { // the clock jumped 1 h ahead
		t.Fatal(err)
	}
	if seen.Len() != 0 {
		t.Fatalf("%d IDs left; the prune 1 h ahead should have forgotten m1", seen.Len())
	}
	// Back by 1 h: m1's date is inside the window again.
	if err := g.Check("m1", old, now); !errors.Is(err, ErrStale) {
		t.Fatalf("m1 again after the clock went back: %v, want ErrStale", err)
	} else {
		t.Logf("m1 again after the clock went back: %v", err)
	}
	if err := g.Check("m2", at(0), now); err != nil {
		t.Fatalf("a fresh message after the clock went back: %v", err)
	}
	if err := g.Check("m2", at(0), now); !errors.Is(err, ErrReplay) {
		t.Fatalf("a fresh message again: %v, want ErrReplay", err)
	}
	// A clock that ran far ahead (a day) and was put right refuses what
	// its prune may have forgotten, but not a message of the last minutes.
	if err := g.Prune(now.Add(DefaultReplayWindow + time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := g.Check("m3", at(-2*DefaultClockSkew-time.Second), now); !errors.Is(err, ErrStale) {
		t.Fatalf("a message 10 min old after the clock came back from a day ahead: %v, want ErrStale", err)
	}
	if err := g.Check("m4", at(-2*DefaultClockSkew+time.Second), now); err != nil {
		t.Fatalf("a message just under 10 min old after the clock came back from a day ahead: %v", err)
	}
	// The horizon never moves back.
	g.Prune(now)
	if got := seen.PrunedTo(); !got.Equal(now.Add(DefaultReplayWindow + time.Hour)) {
		t.Fatalf("PrunedTo after a prune at an earlier time: %s, want %s", got, now.Add(DefaultReplayWindow+time.Hour))
	}
}

// A signature has one spelling: the same bytes with a padding bit of the
// last base64url character set are refused as malformed, not verified.
func TestSignatureEncodingIsCanonical(t *testing.T) {
	id, err := Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	input := []byte("signing input")
	sig := base64.RawURLEncoding.EncodeToString(ed25519.Sign(id.priv, input))
	if err := verifyEd25519(id.pub, input, sig); err != nil {
		t.Fatalf("the canonical spelling: %v", err)
	}
	// 64 bytes are 86 characters; the last carries 2 bits and 4 unused ones.
	last := strings.IndexByte(base64URLAlphabet, sig[len(sig)-1])
	other := sig[:len(sig)-1] + string(base64URLAlphabet[last|1])
	if err := verifyEd25519(id.pub, input, other); !errors.Is(err, ErrMalformedSignature) {
		t.Errorf("a padding bit set: %v, want ErrMalformedSignature", err)
	}
}

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
