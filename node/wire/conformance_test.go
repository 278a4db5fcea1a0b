package wire

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
)

// The conformance vectors in testdata/conformance are written by this
// file (go test -run TestConformance -update) and checked by it on every
// run: each vector against the code, and the files against what the code
// writes now, so neither can drift. The package comment describes their
// format for other implementations.

var update = flag.Bool("update", false, "rewrite testdata/conformance from the current code")

const conformanceDir = "testdata/conformance"

// RFC 8032 §7.1 test keys: TEST 1 (alice), TEST 2 (bob), TEST 3 (carol).
var vectorSeeds = map[string]string{
	"alice": "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
	"bob":   "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
	"carol": "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
}

// vectorIntro is a level-0 introduction token with a fixed secret.
var vectorIntro = &identity.Introduction{ID: "0123456789abcdef", Label: "conformance",
	Secret: bytes.Repeat([]byte{0x42}, 32), Expires: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}

type vectorKey struct {
	Seed      string `json:"seed"`
	PublicKey string `json:"public_key"`
	PeerID    string `json:"peer_id"`
	DID       string `json:"did"`
	KeyID     string `json:"key_id"`
}

func vectorIdentity(t *testing.T, name string) *identity.Identity {
	t.Helper()
	seed, _ := hex.DecodeString(vectorSeeds[name])
	id, err := identity.FromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func vectorKeys(t *testing.T, names ...string) map[string]vectorKey {
	out := map[string]vectorKey{}
	for _, n := range names {
		id := vectorIdentity(t, n)
		out[n] = vectorKey{vectorSeeds[n], hex.EncodeToString(id.PublicKey()), id.PeerID().String(), id.DID(), id.KeyID()}
	}
	return out
}

// --- signing.json ---

type signingVectors struct {
	About        string               `json:"about"`
	Keys         map[string]vectorKey `json:"keys"`
	IntroSecrets map[string]string    `json:"intro_secrets"` // token ID → hex secret
	Cases        []signingCase        `json:"cases"`
}

type signingCase struct {
	Name       string          `json:"name"`
	Note       string          `json:"note,omitempty"`
	Message    json.RawMessage `json:"message"`
	Signatures []signingEntry  `json:"signatures"` // one per message.security.signatures entry, in order
}

type signingEntry struct {
	Signer          string `json:"signer"` // a key name, or "intro:<token ID>"
	SigningInput    string `json:"signing_input"`
	SigningInputHex string `json:"signing_input_hex"`
	Sig             string `json:"sig"`
}

var vectorDate = "2026-03-04T23:58:12Z"
var vectorTime, _ = time.Parse(time.RFC3339, vectorDate)

func minimalMessage(from, to *identity.Identity) *gossip.Message {
	return &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: "msg:01JNTP8R1S3X4V5W6Y7Z8A9B00", Date: vectorDate,
		From: gossip.Agent{Agent: from.DID()}, To: []gossip.Agent{{Agent: to.DID()}},
		ConversationID: "conv:01JNTP8R1S3X4V5W6Y7Z8A9C00", Sequence: 1, Phase: gossip.PhaseGreeting,
		ContentType: gossip.DefaultContentType,
	}, Body: gossip.Body{Text: "Hello."}}
}

// jsonValue is v as the generic JSON value a part holds (numbers as
// doubles), as ifaced builds its parts.
func jsonValue(t *testing.T, v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func buildSigning(t *testing.T) signingVectors {
	alice, bob := vectorIdentity(t, "alice"), vectorIdentity(t, "bob")
	sign := func(m *gossip.Message) *gossip.Message {
		if err := m.Sign(alice, vectorTime); err != nil {
			t.Fatal(err)
		}
		return m
	}
	every := minimalMessage(alice, bob)
	h := &every.Headers
	h.From.Display, h.To[0].Human = "Alice's agent", "Bob"
	h.Sequence, h.Phase = 3, gossip.PhaseContext
	h.Subject = "What's current"
	h.Thread = &gossip.Thread{InReplyTo: "msg:01JNTP8R1S3X4V5W6Y7Z8A9B99", References: []string{"msg:01JNTP8R1S3X4V5W6Y7Z8A9B98", "msg:01JNTP8R1S3X4V5W6Y7Z8A9B99"}}
	h.Languages = &gossip.Languages{Content: "en", Preferred: []string{"en", "es"}, Human: []string{"en"}}
	h.Disclosure, h.Persona, h.Priority, h.TTLSeconds = "professional", "researcher", "normal", 604800
	h.Capabilities = &gossip.CapabilityHeaders{Request: []string{"calendar.availability"}, Offer: []string{"doc.summarize"}}
	h.Extensions = map[string]any{"x-iface-context": "prism-vault", "x-nested": jsonValue(t, map[string]any{"a": []any{true, nil, "b", 1.5}})}
	every.Body = gossip.Body{Text: "Here's what's current:\n\n**Projects:** a protocol. ¡Hola! € <tag> & \"quotes\" \u2028\n", Parts: []gossip.Part{
		{ContentType: "application/json", Name: "task", Content: jsonValue(t, map[string]any{
			"intent": "meeting_request", "weight": 0.25, "count": 12, "big": 1e21, "small": 1e-7, "neg_zero": -0.0, "exact": 9007199254740991,
			"text": "é\u0000\t\u001f", "empty": map[string]any{}, "none": []any{}})},
		{ContentType: "text/plain", Name: "note", Content: "plain €"},
	}}

	empties := minimalMessage(alice, bob)
	h = &empties.Headers
	h.From.Display, h.Subject, h.TTLSeconds = "", "", 0
	h.Thread = &gossip.Thread{References: []string{}}
	h.Languages = &gossip.Languages{}
	h.Capabilities = &gossip.CapabilityHeaders{Request: []string{}}
	h.Extensions = map[string]any{}
	empties.Body.Parts = []gossip.Part{}

	free := minimalMessage(alice, bob)
	free.Headers.Extensions = map[string]any{"x-empty": "", "x-object": map[string]any{}, "x-null": nil}
	free.Body.Parts = []gossip.Part{{ContentType: "text/plain", Content: ""}}

	intro := minimalMessage(alice, bob)
	if err := intro.AddIntroProof(vectorIntro, vectorTime); err != nil {
		t.Fatal(err)
	}

	v := signingVectors{
		About: "Message signatures (package identity, signing input; package wire, conformance vectors). " +
			"For each case: decode message (IFP-4 JSON); for each entry of message.security.signatures, build the signing input " +
			"from the entry's parameters and the message's signed form; it must equal signing_input (signing_input_hex: its UTF-8 bytes); " +
			"Ed25519 with the signer's seed (or HMAC-SHA256 with the introduction secret) over it gives sig, unpadded base64url.",
		Keys:         vectorKeys(t, "alice", "bob"),
		IntroSecrets: map[string]string{vectorIntro.ID: hex.EncodeToString(vectorIntro.Secret)},
	}
	add := func(name, note string, m *gossip.Message) {
		j, err := gossip.EncodeJSON(m)
		if err != nil {
			t.Fatal(err)
		}
		c := signingCase{Name: name, Note: note, Message: j}
		for i := range m.Security.Signatures {
			s := &m.Security.Signatures[i]
			headers, body, err := m.SignedValues(s)
			if err != nil {
				t.Fatal(err)
			}
			in, err := identity.MessageSigningInput(s, headers, body)
			if err != nil {
				t.Fatal(err)
			}
			signer := "alice"
			if s.Alg == identity.AlgHMACSHA256 {
				signer = s.KeyID
			}
			c.Signatures = append(c.Signatures, signingEntry{signer, string(in), hex.EncodeToString(in), s.Sig})
		}
		v.Cases = append(v.Cases, c)
	}
	add("minimal", "only the required members", sign(minimalMessage(alice, bob)))
	add("every member", "every IFP-4 member; numbers, escapes and non-ASCII text in RFC 8785 form", sign(every))
	add("empty members are absent",
		"the minimal message with display \"\", subject \"\", ttl_seconds 0, thread {references: []}, languages {}, "+
			"capabilities {request: []}, extensions {} and parts []: its signing input and signature are the minimal message's", sign(empties))
	add("free-form values are signed as received",
		"extension values \"\", {} and null, and a part content \"\", are present in the signed form", sign(free))
	add("introduction proof", "a level-0 HMAC-SHA256 proof (signatures[0]) beside the Ed25519 signature (signatures[1]), over the same signed form", sign(intro))
	return v
}

func checkSigning(t *testing.T, v signingVectors) {
	byName := map[string]signingCase{}
	for _, c := range v.Cases {
		byName[c.Name] = c
		m, err := gossip.DecodeJSON(c.Message)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if m.Security == nil || len(m.Security.Signatures) != len(c.Signatures) {
			t.Fatalf("%s: the message has not %d signatures", c.Name, len(c.Signatures))
		}
		for i, want := range c.Signatures {
			s := &m.Security.Signatures[i]
			headers, body, err := m.SignedValues(s)
			if err != nil {
				t.Fatal(err)
			}
			in, err := identity.MessageSigningInput(s, headers, body)
			if err != nil {
				t.Fatal(err)
			}
			if string(in) != want.SigningInput || hex.EncodeToString(in) != want.SigningInputHex {
				t.Errorf("%s[%d]: signing input\n got %s\nwant %s", c.Name, i, in, want.SigningInput)
			}
			var sig []byte
			if strings.HasPrefix(want.Signer, "intro:") {
				secret, _ := hex.DecodeString(v.IntroSecrets[strings.TrimPrefix(want.Signer, "intro:")])
				mac := hmac.New(sha256.New, secret)
				mac.Write(in)
				sig = mac.Sum(nil)
			} else {
				seed, _ := hex.DecodeString(v.Keys[want.Signer].Seed)
				sig = ed25519.Sign(ed25519.NewKeyFromSeed(seed), in)
			}
			if got := base64.RawURLEncoding.EncodeToString(sig); got != want.Sig || got != s.Sig {
				t.Errorf("%s[%d]: sig %s, vector %s, message %s", c.Name, i, got, want.Sig, s.Sig)
			}
		}
		pub, _ := hex.DecodeString(v.Keys["alice"].PublicKey)
		if err := m.Verify(pub); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		cb, _ := gossip.EncodeCBOR(m)
		if back, err := gossip.DecodeCBOR(cb); err != nil || back.Verify(pub) != nil {
			t.Errorf("%s: does not verify after CBOR: %v", c.Name, err)
		}
	}
	if a, b := byName["minimal"], byName["empty members are absent"]; a.Signatures[0].SigningInput != b.Signatures[0].SigningInput {
		t.Error("empty members change the signing input")
	}
}

// --- exchange.json ---

type exchangeVectors struct {
	About    string               `json:"about"`
	Keys     map[string]vectorKey `json:"keys"`
	Messages []exchangeMessage    `json:"messages"`
}

type exchangeMessage struct {
	Name     string          `json:"name"`
	Protocol string          `json:"protocol"`
	From     string          `json:"from"`
	To       string          `json:"to"`
	Message  json.RawMessage `json:"message"`
	Frame    string          `json:"frame"` // hex: varint length, then the CBOR payload
}

func buildExchange(t *testing.T) exchangeVectors {
	alice, bob := vectorIdentity(t, "alice"), vectorIdentity(t, "bob")
	order := conditions.DefaultTierOrder()
	two := conditions.Verified
	doc := func(id *identity.Identity) *negotiate.Document {
		return &negotiate.Document{IFP: 7, AgentID: id.DID(), Seq: 3, IFPSupport: []int{3, 4, 5, 7}, Capabilities: []negotiate.Capability{
			{Name: "ping", Description: "Responds to connectivity tests"},
			{Name: "calendar.availability", Description: "Free slots in the next two weeks",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{"days": map[string]any{"type": "integer"}}},
				Conditions: &conditions.Conditions{MinDisclosure: "professional", MinAuthLevel: &two}},
		}}
	}
	view := func(owner, peer *identity.Identity, at time.Time) any {
		v := doc(owner).View(conditions.Facts{Peer: peer.PeerID().String(), AuthLevel: conditions.Signed, Disclosure: "public", Temperature: conditions.Cool}, order)
		if _, err := v.Sign(owner, at); err != nil {
			t.Fatal(err)
		}
		return jsonValue(t, v)
	}
	hash := func(content any) string {
		c, err := identity.Canonicalize(content)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(c)
		return hex.EncodeToString(s[:])
	}
	msg := func(from, to *identity.Identity, id, conv string, seq int64, at time.Time) *gossip.Message {
		return &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
			MessageID: id, Date: gossip.FormatDate(at), From: gossip.Agent{Agent: from.DID()}, To: []gossip.Agent{{Agent: to.DID()}},
			ConversationID: conv, Sequence: seq, Phase: gossip.PhaseGreeting, ContentType: gossip.DefaultContentType,
		}}
	}
	t0 := vectorTime
	aliceView, bobView := view(alice, bob, t0), view(bob, alice, t0)

	// A cold greeting: alice holds no view of bob's.
	g := msg(alice, bob, "msg:01JNTP8R1S3X4V5W6Y7Z8A9B01", "conv:01JNTP8R1S3X4V5W6Y7Z8A9C01", 1, t0)
	g.Headers.Disclosure = "professional"
	g.Headers.Capabilities = &gossip.CapabilityHeaders{Offer: []string{"ping"}}
	g.Body = gossip.Body{Text: "Greetings from alice. I offer you 1 of my 2 capabilities; my signed view for you is attached.", Parts: []gossip.Part{
		{ContentType: "application/json", Name: "capabilities", Content: aliceView},
		{ContentType: "application/json", Name: "greeting", Content: jsonValue(t, negotiate.Proposal{Temperature: conditions.Warm,
			IFPSupport: []int{3, 4, 5, 7}, ToolCategories: []string{"search"}})},
	}}
	// The answer: bob's view for alice, what bob grants, and the hash of
	// alice's view, which bob now holds.
	policy := negotiate.Policy{Order: order, DefaultTier: "public", DefaultMaxTemp: conditions.Warm}
	granted := policy.GrantTo(negotiate.Requester{PeerID: alice.PeerID().String(), Level: conditions.Signed}, negotiate.Proposal{Disclosure: "professional", Temperature: conditions.Warm})
	a := msg(bob, alice, "msg:01JNTP8R1S3X4V5W6Y7Z8A9B02", g.Headers.ConversationID, 2, t0.Add(time.Second))
	a.Headers.Disclosure = granted.Disclosure
	a.Headers.Thread = &gossip.Thread{InReplyTo: g.Headers.MessageID}
	a.Headers.Capabilities = &gossip.CapabilityHeaders{Offer: []string{"ping"}}
	a.Body = gossip.Body{Text: fmt.Sprintf("Greetings from bob. I offer you 1 of my 2 capabilities; my signed view for you is attached. You are granted disclosure %q (%s), authentication level %s, temperature %q.",
		granted.Disclosure, granted.DisclosureOutcome, granted.AuthLevel, granted.Temperature), Parts: []gossip.Part{
		{ContentType: "application/json", Name: "capabilities", Content: bobView},
		{ContentType: "application/json", Name: "greeting", Content: jsonValue(t, negotiate.Proposal{Temperature: granted.Temperature,
			IFPSupport: []int{3, 4, 5, 7}, HaveView: hash(aliceView)})},
		{ContentType: "application/json", Name: "context", Content: jsonValue(t, granted)},
	}}
	// A warm greeting in a new conversation: alice names bob's view, and
	// leaves out her own, which bob said he holds.
	wg := msg(alice, bob, "msg:01JNTP8R1S3X4V5W6Y7Z8A9B03", "conv:01JNTP8R1S3X4V5W6Y7Z8A9C02", 1, t0.Add(time.Minute))
	wg.Headers.Capabilities = &gossip.CapabilityHeaders{Offer: []string{"ping"}}
	wg.Body = gossip.Body{Text: "Greetings from alice. I offer you 1 of my 2 capabilities; my signed view for you is the one you hold.", Parts: []gossip.Part{
		{ContentType: "application/json", Name: "greeting", Content: jsonValue(t, negotiate.Proposal{Temperature: conditions.Cool,
			IFPSupport: []int{3, 4, 5, 7}, HaveView: hash(bobView), ViewUnchanged: hash(aliceView), Acks: true})},
	}}
	granted2 := policy.GrantTo(negotiate.Requester{PeerID: alice.PeerID().String(), Level: conditions.Signed}, negotiate.Proposal{Temperature: conditions.Cool})
	wa := msg(bob, alice, "msg:01JNTP8R1S3X4V5W6Y7Z8A9B04", wg.Headers.ConversationID, 2, t0.Add(time.Minute+time.Second))
	wa.Headers.Disclosure = granted2.Disclosure
	wa.Headers.Thread = &gossip.Thread{InReplyTo: wg.Headers.MessageID}
	wa.Headers.Capabilities = &gossip.CapabilityHeaders{Offer: []string{"ping"}}
	wa.Body = gossip.Body{Text: "Greetings from bob. My signed view for you is the one you hold.", Parts: []gossip.Part{
		{ContentType: "application/json", Name: "greeting", Content: jsonValue(t, negotiate.Proposal{Temperature: granted2.Temperature,
			IFPSupport: []int{3, 4, 5, 7}, HaveView: hash(aliceView), ViewUnchanged: hash(bobView), Acks: true})},
		{ContentType: "application/json", Name: "context", Content: jsonValue(t, granted2)},
	}}
	// Both said acks: alice says something, and bob acknowledges it once
	// his door admitted and recorded it.
	said := msg(alice, bob, "msg:01JNTP8R1S3X4V5W6Y7Z8A9B07", wg.Headers.ConversationID, 3, t0.Add(time.Minute+2*time.Second))
	said.Headers.Phase = gossip.PhaseContext
	said.Headers.Thread = &gossip.Thread{InReplyTo: wa.Headers.MessageID}
	said.Body = gossip.Body{Text: "Are you free on Thursday?"}
	ack := msg(bob, alice, "msg:01JNTP8R1S3X4V5W6Y7Z8A9B08", wg.Headers.ConversationID, 4, t0.Add(time.Minute+3*time.Second))
	ack.Headers.Phase = gossip.PhaseContext
	ack.Headers.Thread = &gossip.Thread{InReplyTo: said.Headers.MessageID}
	ack.Body = gossip.Body{Parts: []gossip.Part{{ContentType: "application/json", Name: "delivered",
		Content: map[string]any{"message_id": said.Headers.MessageID}}}}

	// A greeting bob has no room for (his disk is low): refused with
	// unavailable, an error phase message in the greeting's conversation.
	lg := msg(alice, bob, "msg:01JNTP8R1S3X4V5W6Y7Z8A9B05", "conv:01JNTP8R1S3X4V5W6Y7Z8A9C03", 1, t0.Add(2*time.Minute))
	lg.Body = gossip.Body{Text: "Greetings from alice."}
	noRoom := NewErrorBody(fmt.Errorf("%w: %w", ErrUnavailable,
		fmt.Errorf("%w: the disk holding the audit log has 100 MiB free, below audit.min_free_mb (256 MiB)", gossip.ErrNoRoom)))
	le := msg(bob, alice, "msg:01JNTP8R1S3X4V5W6Y7Z8A9B06", lg.Headers.ConversationID, 2, t0.Add(2*time.Minute+time.Second))
	le.Headers.Phase = gossip.PhaseError
	le.Headers.Thread = &gossip.Thread{InReplyTo: lg.Headers.MessageID}
	le.Body = gossip.Body{Text: string(noRoom.Code) + ": " + noRoom.Message, Parts: []gossip.Part{
		{ContentType: "application/json", Name: "error", Content: jsonValue(t, noRoom)}}}

	v := exchangeVectors{
		About: "A cold greeting and its answer, then a warm greeting and its answer in a new conversation, on /ifp/4/conversation/1.0.0, " +
			"both saying acks, and a context message in it with its acknowledgement; " +
			"then a greeting refused with unavailable (the receiver has no room to record a new conversation), in a third. " +
			"Each message as IFP-4 JSON and as the frame ifaced writes (hex). A reader decodes frame to message, verifies its signature " +
			"by the sender's key, fits it into its conversation, and checks the views, have_view and view_unchanged, and the error part.",
		Keys: vectorKeys(t, "alice", "bob"),
	}
	for _, e := range []struct {
		name     string
		from, to string
		m        *gossip.Message
	}{{"greeting", "alice", "bob", g}, {"answer", "bob", "alice", a}, {"warm greeting", "alice", "bob", wg}, {"warm answer", "bob", "alice", wa},
		{"said", "alice", "bob", said}, {"acknowledgement", "bob", "alice", ack},
		{"greeting without room", "alice", "bob", lg}, {"unavailable", "bob", "alice", le}} {
		signer := alice
		if e.from == "bob" {
			signer = bob
		}
		at, _ := time.Parse(time.RFC3339, e.m.Headers.Date)
		if err := e.m.Sign(signer, at); err != nil {
			t.Fatal(err)
		}
		j, err := gossip.EncodeJSON(e.m)
		if err != nil {
			t.Fatal(err)
		}
		var frame bytes.Buffer
		if err := gossip.WriteMessage(&frame, e.m); err != nil {
			t.Fatal(err)
		}
		v.Messages = append(v.Messages, exchangeMessage{e.name, string(Conversation), e.from, e.to, j, hex.EncodeToString(frame.Bytes())})
	}
	return v
}

func checkExchange(t *testing.T, v exchangeVectors) {
	keys := map[string]ed25519.PublicKey{}
	agents := map[string]gossip.Agent{}
	for name, k := range v.Keys {
		pub, _ := hex.DecodeString(k.PublicKey)
		keys[name], agents[name] = pub, gossip.Agent{Agent: k.DID}
	}
	convs := map[string]*gossip.Conversation{} // receiver + conversation ID → its state
	parts := map[string]*gossip.Message{}
	for _, e := range v.Messages {
		frame, err := hex.DecodeString(e.Frame)
		if err != nil {
			t.Fatal(err)
		}
		m, err := gossip.ReadMessage(bufio.NewReader(bytes.NewReader(frame)))
		if err != nil {
			t.Fatalf("%s: frame: %v", e.Name, err)
		}
		fromJSON, err := gossip.DecodeJSON(e.Message)
		if err != nil {
			t.Fatalf("%s: message: %v", e.Name, err)
		}
		if a, b := canonicalJSON(t, m), canonicalJSON(t, fromJSON); !bytes.Equal(a, b) {
			t.Errorf("%s: the frame holds\n%s\nthe message is\n%s", e.Name, a, b)
		}
		var again bytes.Buffer
		gossip.WriteMessage(&again, fromJSON)
		if !bytes.Equal(again.Bytes(), frame) {
			t.Errorf("%s: the message encodes to another frame:\n%x", e.Name, again.Bytes())
		}
		for _, x := range []*gossip.Message{m, fromJSON} {
			if err := x.Verify(keys[e.From]); err != nil {
				t.Errorf("%s: signature by %s: %v", e.Name, e.From, err)
			}
		}
		key := e.To + " " + m.Headers.ConversationID
		if convs[key] == nil {
			convs[key] = gossip.NewConversation(m.Headers.ConversationID, agents[e.To], agents[e.From])
		}
		if err := convs[key].Accept(m); err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
		parts[e.Name] = m
		if p, ok := m.Body.Part("capabilities"); ok {
			c, err := p.CanonicalContent()
			if err != nil {
				t.Fatal(err)
			}
			d, err := negotiate.DecodeViewJSON(c)
			if err != nil {
				t.Fatalf("%s: view: %v", e.Name, err)
			}
			if _, err := d.VerifyCanonical(keys[e.From]); err != nil || d.AgentID != agents[e.From].Agent {
				t.Errorf("%s: view of %s (agent_id %s): %v", e.Name, e.From, d.AgentID, err)
			}
		}
	}
	viewHash := func(name string) string {
		p, ok := parts[name].Body.Part("capabilities")
		if !ok {
			t.Fatalf("%s has no view", name)
		}
		c, _ := p.CanonicalContent()
		s := sha256.Sum256(c)
		return hex.EncodeToString(s[:])
	}
	proposal := func(name string) negotiate.Proposal {
		var p negotiate.Proposal
		part, ok := parts[name].Body.Part("greeting")
		if !ok {
			t.Fatalf("%s has no greeting part", name)
		}
		raw, _ := json.Marshal(part.Content)
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	g, a := parts["greeting"], parts["answer"]
	if a.Headers.Sequence != g.Headers.Sequence+1 || a.Headers.Thread.InReplyTo != g.Headers.MessageID {
		t.Error("the answer does not follow the greeting")
	}
	if proposal("answer").HaveView != viewHash("greeting") {
		t.Error("the answer's have_view is not the hash of the greeting's view")
	}
	if p := proposal("warm greeting"); p.HaveView != viewHash("answer") || p.ViewUnchanged != proposal("answer").HaveView {
		t.Error("the warm greeting does not name bob's view, or does not say alice's is unchanged")
	}
	if _, ok := parts["warm greeting"].Body.Part("capabilities"); ok {
		t.Error("the warm greeting carries a view")
	}
	if _, ok := parts["warm answer"].Body.Part("capabilities"); ok || proposal("warm answer").ViewUnchanged != proposal("warm greeting").HaveView {
		t.Error("the warm answer carries a view, or does not say it is unchanged")
	}
	if !proposal("warm greeting").Acks || !proposal("warm answer").Acks || proposal("greeting").Acks || proposal("answer").Acks {
		t.Error("acks: the warm greeting and answer say it, the cold ones do not (an older peer's form)")
	}
	said, ack := parts["said"], parts["acknowledgement"]
	if said == nil || ack == nil {
		t.Fatal("no said message and acknowledgement")
	}
	delivered, ok := ack.Body.Part("delivered")
	content, _ := delivered.Content.(map[string]any)
	if !ok || ack.Headers.Phase != gossip.PhaseContext || ack.Headers.Thread == nil || ack.Headers.Thread.InReplyTo != said.Headers.MessageID ||
		content["message_id"] != said.Headers.MessageID {
		t.Errorf("the acknowledgement does not name the said message in thread.in_reply_to and its delivered part: %+v", ack.Headers)
	}
	var refused ErrorBody
	if parts["unavailable"] == nil {
		t.Fatal("no refusal for want of room (unavailable)")
	}
	ep, ok := parts["unavailable"].Body.Part("error")
	raw, _ := json.Marshal(ep.Content)
	if !ok || json.Unmarshal(raw, &refused) != nil || refused.Code != CodeUnavailable || HTTPStatus(refused.Code) != 503 ||
		!errors.Is(&RemoteError{Body: refused}, ErrUnavailable) || refused.Hint == "" {
		t.Errorf("the refusal for want of room: %+v", refused)
	}
	var granted negotiate.Granted
	p, _ := a.Body.Part("context")
	raw, _ = json.Marshal(p.Content)
	if err := json.Unmarshal(raw, &granted); err != nil || granted.Disclosure != a.Headers.Disclosure || granted.AuthLevel != conditions.Signed {
		t.Errorf("the answer's context: %+v, %v", granted, err)
	}
}

func canonicalJSON(t *testing.T, m *gossip.Message) []byte {
	j, err := gossip.EncodeJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := identity.CanonicalizeJSON(j)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// --- refusals.json ---

type refusalVectors struct {
	About string               `json:"about"`
	Keys  map[string]vectorKey `json:"keys"`
	Cases []refusalCase        `json:"cases"`
}

type refusalCase struct {
	Name   string   `json:"name"`
	Stage  string   `json:"stage"`            // read, verify, conversation, lifecycle or update
	Frames []string `json:"frames,omitempty"` // hex: the bytes on a stream, one entry per message (conversation: all but the last are accepted)
	JSON   string   `json:"json,omitempty"`   // or: an HTTP request body
	Peer   string   `json:"peer"`             // the key name of the stream's peer (the expected signer)
	Code   Code     `json:"code"`
	Field  string   `json:"field,omitempty"` // the IFP-4 path the refusal names, when it names one
	// Stage lifecycle: the key statement the receiver followed (identity's
	// form), its clock when the message arrives, and the peer ID the
	// refusal names (the successor, for key_retired).
	Held  json.RawMessage `json:"held,omitempty"`
	At    string          `json:"at,omitempty"`
	Names string          `json:"names,omitempty"`
}

func buildRefusals(t *testing.T) refusalVectors {
	alice, bob, carol := vectorIdentity(t, "alice"), vectorIdentity(t, "bob"), vectorIdentity(t, "carol")
	frame := func(payload []byte) string {
		var b bytes.Buffer
		if len(payload) > gossip.MaxMessageSize {
			t.Fatal("payload too large for a frame")
		}
		if err := gossip.WriteFrame(&b, payload); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(b.Bytes())
	}
	signed := func(m *gossip.Message, by *identity.Identity) *gossip.Message {
		if err := m.Sign(by, vectorTime); err != nil {
			t.Fatal(err)
		}
		return m
	}
	cborOf := func(m *gossip.Message) []byte {
		b, err := gossip.EncodeCBOR(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// generic is a signed message as plain values, to be broken.
	generic := func() map[string]any {
		j, _ := gossip.EncodeJSON(signed(minimalMessage(alice, bob), alice))
		var v map[string]any
		d := json.NewDecoder(bytes.NewReader(j))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return fixNumbers(v).(map[string]any)
	}
	encodeGeneric := func(v any) []byte {
		b, err := cborCore.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := cborOf(signed(minimalMessage(alice, bob), alice))
	goodFrame, _ := hex.DecodeString(frame(good))

	seqString := generic()
	seqString["headers"].(map[string]any)["sequence"] = "1"
	seqHuge := generic()
	seqHuge["headers"].(map[string]any)["sequence"] = int64(gossip.MaxSequence + 1)
	seqZero := generic()
	seqZero["headers"].(map[string]any)["sequence"] = int64(0)
	noTo := generic()
	delete(noTo["headers"].(map[string]any), "to")
	v5 := generic()
	v5["ifp"] = int64(5)
	tagged := append([]byte{0xa1, 0x63, 'i', 'f', 'p', 0xc1}, 0x04) // {"ifp": 1(4)}
	dup := append([]byte{0xa2, 0x63, 'i', 'f', 'p', 0x04, 0x63, 'i', 'f', 'p'}, 0x04)
	bomb := generic()
	maps := make([]any, 8193)
	for i := range maps {
		maps[i] = map[string]any{}
	}
	bomb["body"] = map[string]any{"parts": []any{map[string]any{"content_type": "application/json", "content": []any{maps, maps}}}}
	nan := generic()
	nan["body"] = map[string]any{"parts": []any{map[string]any{"content_type": "application/json", "content": []any{nanValue()}}}}

	unsigned := minimalMessage(alice, bob)
	tampered := signed(minimalMessage(alice, bob), alice)
	tampered.Body.Text = "Hello!"
	weak := minimalMessage(alice, bob)
	wsig := identity.MessageSignature{Created: vectorDate, SignedHeaders: []string{"message_id", "date", "from", "to", "conversation_id", "sequence", "phase", "content_type"}, SignedBody: true}
	headers, body, _ := weak.SignedValues(&wsig)
	if err := alice.SignMessage(&wsig, headers, body); err != nil {
		t.Fatal(err)
	}
	weak.Security = &gossip.Security{Signatures: []identity.MessageSignature{wsig}}
	badSig := signed(minimalMessage(alice, bob), alice)
	badSig.Security.Signatures[0].Sig = "AAAA"

	context1 := minimalMessage(alice, bob)
	context1.Headers.Phase = gossip.PhaseContext
	second := minimalMessage(alice, bob)
	second.Headers.MessageID = "msg:01JNTP8R1S3X4V5W6Y7Z8A9B01"
	greeting := signed(minimalMessage(alice, bob), alice)
	afterClose := minimalMessage(alice, bob)
	afterClose.Headers.MessageID, afterClose.Headers.Sequence, afterClose.Headers.Phase = "msg:01JNTP8R1S3X4V5W6Y7Z8A9B01", 2, gossip.PhaseClose
	afterClose2 := minimalMessage(alice, bob)
	afterClose2.Headers.MessageID, afterClose2.Headers.Sequence, afterClose2.Headers.Phase = "msg:01JNTP8R1S3X4V5W6Y7Z8A9B02", 3, gossip.PhaseProbe

	goodJSON, _ := gossip.EncodeJSON(signed(minimalMessage(alice, bob), alice))
	jsonWith := func(old, new string) string {
		s := strings.Replace(string(goodJSON), old, new, 1)
		if s == string(goodJSON) {
			t.Fatalf("%q is not in the JSON message", old)
		}
		return s
	}

	v := refusalVectors{
		About: "Refusals and their wire codes. stage read: the frames (or the JSON body) do not decode or validate; " +
			"stage verify: the message decodes but its signature is not an acceptable one by the stream's peer (peer); " +
			"stage conversation: every frame but the last is accepted in one conversation, the last is refused. " +
			"stage lifecycle: the message verifies, but the receiver holds a key statement (held) about the peer's key and its clock reads at: " +
			"a revocation refuses the key, a succession once at is past date + transition_seconds, naming the successor (names). " +
			"stage update: the frame is pushed on /ifp/7/update/1.0.0 by peer to a receiver holding no open conversation with it: " +
			"one that is not a context message is refused before anything else, one that is names no open conversation. " +
			"field names the IFP-4 member the refusal names, when it names one.",
		Keys: vectorKeys(t, "alice", "bob", "carol"),
	}
	add := func(c refusalCase) {
		c.Peer = "alice"
		v.Cases = append(v.Cases, c)
	}
	add(refusalCase{Name: "truncated length", Stage: "read", Frames: []string{"80"}, Code: CodeInvalidFormat})
	add(refusalCase{Name: "truncated payload", Stage: "read", Frames: []string{hex.EncodeToString(goodFrame[:len(goodFrame)/2])}, Code: CodeInvalidFormat})
	add(refusalCase{Name: "empty frame", Stage: "read", Frames: []string{"00"}, Code: CodeInvalidFormat})
	add(refusalCase{Name: "oversized length", Stage: "read", Frames: []string{"81808001"}, Code: CodePayloadTooLarge}) // 2 MiB + 1
	add(refusalCase{Name: "non-minimal varint", Stage: "read", Frames: []string{"8100a0"}, Code: CodeInvalidFormat})
	add(refusalCase{Name: "overflowing varint", Stage: "read", Frames: []string{"ffffffffffffffffff01"}, Code: CodeInvalidFormat})
	add(refusalCase{Name: "invalid CBOR", Stage: "read", Frames: []string{frame([]byte{0xff, 0x00, 0x13})}, Code: CodeInvalidFormat, Field: ""})
	add(refusalCase{Name: "bytes after the CBOR item", Stage: "read", Frames: []string{frame(append(bytes.Clone(good), 0x00))}, Code: CodeInvalidFormat, Field: ""})
	add(refusalCase{Name: "duplicate map key", Stage: "read", Frames: []string{frame(dup)}, Code: CodeInvalidFormat, Field: ""})
	add(refusalCase{Name: "tag", Stage: "read", Frames: []string{frame(tagged)}, Code: CodeInvalidFormat, Field: "ifp"})
	add(refusalCase{Name: "NaN in a part content", Stage: "read", Frames: []string{frame(encodeGeneric(nan))}, Code: CodeInvalidFormat, Field: "body.parts[0].content[0]"})
	add(refusalCase{Name: "container bomb: 16,386 empty maps in a part content (more than 16,384 containers)", Stage: "read",
		Frames: []string{frame(encodeGeneric(bomb))}, Code: CodeInvalidFormat, Field: ""})
	add(refusalCase{Name: "wrong type at headers.sequence", Stage: "read", Frames: []string{frame(encodeGeneric(seqString))}, Code: CodeInvalidFormat, Field: "headers.sequence"})
	add(refusalCase{Name: "sequence 0", Stage: "read", Frames: []string{frame(encodeGeneric(seqZero))}, Code: CodeInvalidFormat, Field: "headers.sequence"})
	add(refusalCase{Name: "sequence too large", Stage: "read", Frames: []string{frame(encodeGeneric(seqHuge))}, Code: CodeInvalidFormat, Field: "headers.sequence"})
	add(refusalCase{Name: "no recipient", Stage: "read", Frames: []string{frame(encodeGeneric(noTo))}, Code: CodeInvalidFormat, Field: "headers.to"})
	add(refusalCase{Name: "unsupported version", Stage: "read", Frames: []string{frame(encodeGeneric(v5))}, Code: CodeUnsupportedVersion, Field: "ifp"})
	add(refusalCase{Name: "JSON: wrong type at headers.sequence", Stage: "read", JSON: jsonWith(`"sequence":1`, `"sequence":"1"`), Code: CodeInvalidFormat, Field: "headers.sequence"})
	add(refusalCase{Name: "JSON: fractional sequence", Stage: "read", JSON: jsonWith(`"sequence":1`, `"sequence":1.5`), Code: CodeInvalidFormat, Field: "headers.sequence"})
	add(refusalCase{Name: "JSON: sequence too large", Stage: "read", JSON: jsonWith(`"sequence":1`, `"sequence":9007199254740992`), Code: CodeInvalidFormat, Field: "headers.sequence"})
	add(refusalCase{Name: "JSON: duplicate member", Stage: "read", JSON: jsonWith(`{"ifp":4,`, `{"ifp":4,"ifp":4,`), Code: CodeInvalidFormat, Field: "ifp"})
	add(refusalCase{Name: "JSON: container bomb: 16,385 empty objects in a part content", Stage: "read",
		JSON: jsonWith(`"body":{`, `"body":{"parts":[{"content_type":"application/json","content":[`+strings.Repeat(`{},`, 16384)+`{}]}],`), Code: CodeInvalidFormat, Field: ""})
	add(refusalCase{Name: "JSON: not JSON", Stage: "read", JSON: `{"ifp":4,`, Code: CodeInvalidFormat, Field: ""})
	add(refusalCase{Name: "JSON: unsupported version", Stage: "read", JSON: jsonWith(`{"ifp":4,`, `{"ifp":3,`), Code: CodeUnsupportedVersion, Field: "ifp"})
	add(refusalCase{Name: "unsigned", Stage: "verify", Frames: []string{frame(cborOf(unsigned))}, Code: CodeInvalidSignature})
	add(refusalCase{Name: "bad signature", Stage: "verify", Frames: []string{frame(cborOf(tampered))}, Code: CodeInvalidSignature})
	add(refusalCase{Name: "malformed signature", Stage: "verify", Frames: []string{frame(cborOf(badSig))}, Code: CodeInvalidSignature})
	// The same signature spelt with a padding bit of its last base64url
	// character set: the bytes decode the same under a lax decoder, but a
	// signature has one spelling.
	respelt := signed(minimalMessage(alice, bob), alice)
	rs := &respelt.Security.Signatures[0]
	rs.Sig = rs.Sig[:len(rs.Sig)-1] + string(base64URLAlphabet[strings.IndexByte(base64URLAlphabet, rs.Sig[len(rs.Sig)-1])|1])
	add(refusalCase{Name: "signature not in canonical base64url (a padding bit set)", Stage: "verify", Frames: []string{frame(cborOf(respelt))}, Code: CodeInvalidSignature})
	add(refusalCase{Name: "signature leaves headers unsigned", Stage: "verify", Frames: []string{frame(cborOf(weak))}, Code: CodeInvalidSignature})
	add(refusalCase{Name: "signed by another key", Stage: "verify", Frames: []string{frame(cborOf(signed(minimalMessage(alice, bob), carol)))}, Code: CodeWrongKey})
	add(refusalCase{Name: "first message not a greeting", Stage: "conversation", Frames: []string{frame(cborOf(signed(context1, alice)))}, Code: CodeOutOfSequence})
	add(refusalCase{Name: "sequence does not increase", Stage: "conversation",
		Frames: []string{frame(cborOf(greeting)), frame(cborOf(signed(second, alice)))}, Code: CodeOutOfSequence})
	add(refusalCase{Name: "a message after close", Stage: "conversation",
		Frames: []string{frame(cborOf(greeting)), frame(cborOf(signed(afterClose, alice))), frame(cborOf(signed(afterClose2, alice)))}, Code: CodeOutOfSequence})
	retiredAt, _ := time.Parse(time.RFC3339, vectorDate)
	succ, err := identity.NewSuccession(alice, carol, retiredAt.Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := identity.NewRevocation(alice, alice.KeyID(), retiredAt.Add(-time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	add(refusalCase{Name: "a retired key after its transition period", Stage: "lifecycle", Frames: []string{frame(cborOf(greeting))},
		Held: mustMarshal(t, succ), At: vectorDate, Names: carol.PeerID().String(), Code: CodeKeyRetired})
	add(refusalCase{Name: "a key its revocation statement revoked", Stage: "lifecycle", Frames: []string{frame(cborOf(greeting))},
		Held: mustMarshal(t, rev), At: vectorDate, Code: CodeKeyRevoked})
	// Update pushes (/ifp/7/update/1.0.0) to a receiver that holds no
	// open conversation with alice: one that is not a context message is
	// refused as such before anything else (it carries a view, which only
	// a context message on this protocol may), and one that is names no
	// open conversation.
	viewDoc := &negotiate.Document{IFP: 7, AgentID: alice.DID(), Seq: 3, Capabilities: []negotiate.Capability{{Name: "ping", Description: "Responds to connectivity tests"}}}
	if _, err := viewDoc.Sign(alice, vectorTime); err != nil {
		t.Fatal(err)
	}
	push := func(id string, phase gossip.Phase) *gossip.Message {
		m := minimalMessage(alice, bob)
		m.Headers.MessageID, m.Headers.Sequence, m.Headers.Phase, m.Headers.Subject = id, 3, phase, "capability update"
		m.Body = gossip.Body{Text: "My capabilities changed (seq 3); my new signed view for you is attached.",
			Parts: []gossip.Part{{ContentType: "application/json", Name: "capabilities", Content: jsonValue(t, viewDoc)}}}
		return signed(m, alice)
	}
	add(refusalCase{Name: "update push that is not a context message", Stage: "update",
		Frames: []string{frame(cborOf(push("msg:01JNTP8R1S3X4V5W6Y7Z8A9B10", gossip.PhaseGreeting)))}, Code: CodeOutOfSequence})
	add(refusalCase{Name: "update push naming no open conversation", Stage: "update",
		Frames: []string{frame(cborOf(push("msg:01JNTP8R1S3X4V5W6Y7Z8A9B11", gossip.PhaseContext)))}, Code: CodeOutOfSequence})
	return v
}

// updateRefusal is the receiver's rule for an update push from a peer it
// holds no open conversation with: a message that is not a context
// message is refused before anything else; one that is names no open
// conversation once its signature verifies.
func updateRefusal(m *gossip.Message, pub ed25519.PublicKey) error {
	if m.Headers.Phase != gossip.PhaseContext {
		return fmt.Errorf("%w: an update push is a context message, not a %s", gossip.ErrUnexpectedPhase, m.Headers.Phase)
	}
	if err := m.Verify(pub); err != nil {
		return err
	}
	return fmt.Errorf("%w: no open conversation %s with you; greet first", gossip.ErrWrongConversation, m.Headers.ConversationID)
}

func mustMarshal(t *testing.T, v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// lifecycleRefusal is the receiver's rule for a message from a key it
// holds a statement about: a revoked key is refused (key_revoked), a
// retired one once its transition period is over (key_retired, naming
// the successor).
func lifecycleRefusal(c refusalCase, peerKeyID string) error {
	at, err := time.Parse(time.RFC3339, c.At)
	if err != nil {
		return err
	}
	if r, err := identity.DecodeRevocation(c.Held); err == nil {
		if err := r.Verify(nil); err != nil {
			return err
		}
		if r.KeyID == peerKeyID {
			return fmt.Errorf("%w: revoked by a revocation statement dated %s", ErrKeyRevoked, r.Date)
		}
		return nil
	}
	s, err := identity.DecodeSuccession(c.Held)
	if err != nil {
		return err
	}
	if err := s.Verify(); err != nil {
		return err
	}
	if s.OldKeyID == peerKeyID && !at.Before(s.Until()) {
		next, _ := s.NewPeer()
		return fmt.Errorf("%w: its successor is %s", ErrKeyRetired, next)
	}
	return nil
}

func checkRefusals(t *testing.T, v refusalVectors) {
	for _, c := range v.Cases {
		pub, _ := hex.DecodeString(v.Keys[c.Peer].PublicKey)
		var msgs []*gossip.Message
		var err error
		if c.JSON != "" {
			var m *gossip.Message
			if m, err = gossip.DecodeJSON([]byte(c.JSON)); err == nil {
				msgs = append(msgs, m)
			}
		}
		for _, f := range c.Frames {
			b, herr := hex.DecodeString(f)
			if herr != nil {
				t.Fatal(herr)
			}
			var m *gossip.Message
			if m, err = gossip.ReadMessage(bufio.NewReader(bytes.NewReader(b))); err != nil {
				break
			}
			msgs = append(msgs, m)
		}
		switch c.Stage {
		case "read":
		case "lifecycle":
			if err != nil {
				t.Errorf("%s: does not decode: %v", c.Name, err)
				continue
			}
			if err = msgs[0].Verify(pub); err != nil {
				t.Errorf("%s: does not verify: %v", c.Name, err)
				continue
			}
			err = lifecycleRefusal(c, v.Keys[c.Peer].KeyID)
			if err != nil && !strings.Contains(err.Error(), c.Names) {
				t.Errorf("%s: %v does not name %s", c.Name, err, c.Names)
			}
		case "update":
			if err != nil {
				t.Errorf("%s: does not decode: %v", c.Name, err)
				continue
			}
			err = updateRefusal(msgs[0], pub)
		case "verify", "conversation":
			if err != nil {
				t.Errorf("%s: does not decode: %v", c.Name, err)
				continue
			}
			for _, m := range msgs {
				if err = m.Verify(pub); err != nil {
					break
				}
			}
			if c.Stage == "conversation" && err == nil {
				h := msgs[0].Headers
				conv := gossip.NewConversation(h.ConversationID, h.To[0], h.From)
				for i, m := range msgs {
					err = conv.Accept(m)
					if i < len(msgs)-1 && err != nil {
						t.Errorf("%s: message %d refused: %v", c.Name, i, err)
					}
				}
			}
		default:
			t.Fatalf("%s: unknown stage %q", c.Name, c.Stage)
		}
		if err == nil {
			t.Errorf("%s: accepted", c.Name)
			continue
		}
		if got := CodeOf(err); got != c.Code {
			t.Errorf("%s: %v is %s, want %s", c.Name, err, got, c.Code)
		}
		var fe *gossip.FieldError
		if c.Field != "" && (!errors.As(err, &fe) || fe.Field != c.Field) {
			t.Errorf("%s: %v does not name %s", c.Name, err, c.Field)
		}
	}
}

var cborCore, _ = cbor.CoreDetEncOptions().EncMode()

func nanValue() float64 { return math.NaN() }

// fixNumbers turns json.Number into int64 (integers) or float64, as a
// message decoded from CBOR holds them.
func fixNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = fixNumbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = fixNumbers(v[k])
		}
	}
	return v
}

// --- views.json ---

type viewVectors struct {
	About     string               `json:"about"`
	Keys      map[string]vectorKey `json:"keys"`
	Documents []json.RawMessage    `json:"documents"` // the owner's document after each change, in order
	Requests  []viewRequest        `json:"requests"`  // in order
}

type viewRequest struct {
	After     int       `json:"after"`               // index in documents of the document current
	Requester string    `json:"requester,omitempty"` // a key name: the peer shown the view; "" for a caller nobody remembers
	Facts     viewFacts `json:"facts"`
	Seq       uint64    `json:"seq"`     // the view's seq
	Updated   string    `json:"updated"` // the view's updated
	Shows     []string  `json:"shows"`   // the names of the capabilities in the view
	Note      string    `json:"note,omitempty"`
}

type viewFacts struct {
	AuthLevel   int    `json:"auth_level"`
	Disclosure  string `json:"disclosure"`
	Temperature string `json:"temperature,omitempty"`
	Persona     string `json:"persona,omitempty"`
}

func (f viewFacts) facts() conditions.Facts {
	return conditions.Facts{AuthLevel: conditions.Level(f.AuthLevel), Disclosure: f.Disclosure, Temperature: f.Temperature, Persona: f.Persona}
}

// buildViews writes views.json: the owner's documents, in order, and the
// views requested of them (the node package replays them against a
// daemon and checks its views against them).
func buildViews(t *testing.T) viewVectors {
	alice := vectorIdentity(t, "alice")
	at := func(min int) string { return gossip.FormatDate(vectorTime.Add(time.Duration(min) * time.Minute)) }
	caps := []negotiate.Capability{
		{Name: "ping", Description: "Responds to connectivity tests"},
		{Name: "calendar.availability", Description: "Free slots in the next two weeks", Conditions: &conditions.Conditions{MinDisclosure: "professional"}},
	}
	var docs []*negotiate.Document
	step := func(add ...negotiate.Capability) {
		caps = append(slices.Clone(caps), add...)
		docs = append(docs, &negotiate.Document{IFP: 7, AgentID: alice.DID(), Seq: uint64(len(docs) + 1), Updated: at(len(docs) * 10), Capabilities: caps})
	}
	step()
	step(negotiate.Capability{Name: "vault.open", Description: "Open the vault", Advertise: negotiate.AdvertiseWhenEligible,
		Conditions: &conditions.Conditions{MinDisclosure: "close"}})
	step(negotiate.Capability{Name: "notes.share", Description: "Share notes", Advertise: negotiate.AdvertiseWhenEligible,
		Conditions: &conditions.Conditions{MinDisclosure: "professional"}})
	step(negotiate.Capability{Name: "weather.now", Description: "Current weather"})
	v := viewVectors{
		About: "A view's seq and updated are those of the last change visible in it (node/wire package comment, Views). " +
			"documents are the owner's document after each change; requests, in order, each ask for the view of the document at index after " +
			"for facts, shown to requester (a key name; \"\" for a caller nobody remembers). A class of view is its facts (the requester's " +
			"peer ID only where an allow list names it). A class's mark is the content of its view (without seq, updated and signature) and the " +
			"seq and updated of the document where that content last differed; a class first asked for takes the current document's. " +
			"A view shown to a requester has the larger of its class's mark and the highest seq that requester was shown before (with its updated).",
		Keys: vectorKeys(t, "alice", "bob", "carol"),
	}
	for _, d := range docs {
		v.Documents = append(v.Documents, mustMarshal(t, d))
	}
	stranger := viewFacts{AuthLevel: 1, Disclosure: "public", Temperature: "cool"}
	http := viewFacts{AuthLevel: -1, Disclosure: "public", Temperature: "cool"}
	professional := viewFacts{AuthLevel: 1, Disclosure: "professional", Temperature: "cool"}
	reqs := []viewRequest{
		{After: 0, Facts: stranger, Note: "the first view of a class takes the document's seq"},
		{After: 0, Requester: "bob", Facts: professional},
		{After: 1, Facts: stranger, Note: "vault.open is for close friends only: nothing a stranger sees changed"},
		{After: 1, Facts: http, Note: "an HTTP caller's class, first asked for now, takes the current seq"},
		{After: 1, Requester: "bob", Facts: professional, Note: "nor anything a professional sees"},
		{After: 2, Requester: "bob", Facts: professional, Note: "notes.share is shown to professionals"},
		{After: 2, Facts: stranger, Note: "but not to strangers"},
		{After: 2, Requester: "bob", Facts: stranger, Note: "bob lowered to public: the public class's mark is lower than what bob holds"},
		{After: 2, Requester: "carol", Facts: stranger},
		{After: 3, Facts: stranger, Note: "weather.now is shown to everyone"},
		{After: 3, Requester: "bob", Facts: stranger},
	}
	v.Requests = expectedViews(t, docs, reqs)
	return v
}

// expectedViews fills each request's seq, updated and shows by the rule
// of the package comment (Views), from the documents alone.
func expectedViews(t *testing.T, docs []*negotiate.Document, reqs []viewRequest) []viewRequest {
	order := conditions.DefaultTierOrder()
	type mark struct {
		key     string
		seq     uint64
		updated string
	}
	marks := map[viewFacts]*mark{}
	floors := map[string]mark{}
	seen := 0 // documents whose changes the marks have taken
	for i, r := range reqs {
		for ; seen <= r.After; seen++ {
			d := docs[seen]
			for f, m := range marks {
				if k := contentKey(t, d.View(f.facts(), order)); k != m.key {
					*m = mark{k, d.Seq, d.Updated}
				}
			}
		}
		d := docs[r.After]
		view := d.View(r.Facts.facts(), order)
		m, ok := marks[r.Facts]
		if !ok {
			m = &mark{contentKey(t, view), d.Seq, d.Updated}
			marks[r.Facts] = m
		}
		shown := *m
		if fl, ok := floors[r.Requester]; ok && r.Requester != "" && fl.seq > shown.seq {
			shown = fl
		}
		if r.Requester != "" {
			floors[r.Requester] = shown
		}
		reqs[i].Seq, reqs[i].Updated, reqs[i].Shows = shown.seq, shown.updated, nil
		for _, c := range view.Capabilities {
			reqs[i].Shows = append(reqs[i].Shows, c.Name)
		}
	}
	return reqs
}

func contentKey(t *testing.T, d *negotiate.Document) string {
	k, err := negotiate.ContentKey(d)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(k)
}

func checkViews(t *testing.T, v viewVectors) {
	var docs []*negotiate.Document
	for _, raw := range v.Documents {
		var d negotiate.Document
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, &d)
	}
	want := slices.Clone(v.Requests)
	got := expectedViews(t, docs, slices.Clone(v.Requests))
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Updated != want[i].Updated || !slices.Equal(got[i].Shows, want[i].Shows) {
			t.Errorf("request %d: the rule gives seq %d (%s) showing %v, the vector %d (%s) showing %v",
				i, got[i].Seq, got[i].Updated, got[i].Shows, want[i].Seq, want[i].Updated, want[i].Shows)
		}
	}
}

// --- the files ---

type vectorFile struct {
	name  string
	build func(*testing.T) any
	check func(*testing.T, []byte)
}

var vectorFiles = []vectorFile{
	{"signing.json", func(t *testing.T) any { return buildSigning(t) }, func(t *testing.T, b []byte) {
		var v signingVectors
		mustUnmarshal(t, b, &v)
		checkSigning(t, v)
	}},
	{"exchange.json", func(t *testing.T) any { return buildExchange(t) }, func(t *testing.T, b []byte) {
		var v exchangeVectors
		mustUnmarshal(t, b, &v)
		checkExchange(t, v)
	}},
	{"refusals.json", func(t *testing.T) any { return buildRefusals(t) }, func(t *testing.T, b []byte) {
		var v refusalVectors
		mustUnmarshal(t, b, &v)
		checkRefusals(t, v)
	}},
	{"views.json", func(t *testing.T) any { return buildViews(t) }, func(t *testing.T, b []byte) {
		var v viewVectors
		mustUnmarshal(t, b, &v)
		checkViews(t, v)
	}},
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	for _, f := range vectorFiles {
		t.Run(f.name, func(t *testing.T) {
			path := filepath.Join(conformanceDir, f.name)
			want, err := json.MarshalIndent(f.build(t), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')
			if *update {
				if err := os.MkdirAll(conformanceDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f.check(t, got)
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from what the code writes now; if the change is meant, run go test -run TestConformance -update", path)
			}
		})
	}
}

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
