// The A2A agent card (a2aproject/A2A docs/specification.md §4.4, §8).
//
// The card carries the members of A2A 1.0 (supportedInterfaces, and the
// rest of AgentCard) and, beside them, the A2A 0.3 members that 0.3 clients
// such as a2a-go v0.3 require: url, protocolVersion "0.3.0" and
// preferredTransport. The two sets do not collide, and both versions tell
// readers to ignore members they do not know. The endpoint the card points
// at speaks both versions, each in its own shapes (node/httpapi tells them
// apart by method name), so supportedInterfaces lists it twice: first as
// "1.0", which 1.0 clients prefer (a2a-go v2 and @a2a-js/sdk pick the
// highest version they speak), then as "0.3", for a 1.0 client that only
// speaks 0.3 through its compatibility layer. A 0.3 client reads url and
// preferredTransport and never sees supportedInterfaces.
//
// The transport defaults to JSONRPC: it is the binding every 0.3 client
// has (a2a-go v0.3 ships JSON-RPC and gRPC clients, no HTTP+JSON one), and
// it is one POST route on the daemon's public HTTP listener.
//
// # Signatures (§8.4)
//
// A signature is a JWS (RFC 7515) with a detached payload: the payload is
// the RFC 8785 canonical JSON of the card's A2A 1.0 AgentCard members
// (§8.4.1, see "What a signature covers" below) without "signatures",
// the JWS signing input is BASE64URL(protected) "." BASE64URL(payload), and
// the card carries only {"protected", "signature"}. The protected header is
// {"alg":"EdDSA","typ":"JOSE","kid":<IFP-5 key_id>}; the key_id is
// did:key based, so a verifier that knows nothing else can still recover
// the key from it (identity.PublicKeyFromKeyID) — whether to trust that
// key is the verifier's decision, made in its resolveKey.
//
// This is built on crypto/ed25519, encoding/base64 and the JCS already in
// package identity rather than on a JOSE library: the profile is fixed
// (one algorithm, one header shape, detached payload), the whole of it is
// a few dozen lines, and a general JOSE library would add a dependency and
// a larger surface (algorithm choice, unencoded payloads, critical
// headers) that the verifier would then have to fence off again. The
// verifier here accepts EdDSA only and refuses any "crit" header.
//
// Domain separation: a JWS signing input always begins with the base64url
// of the protected header, "eyJ" (`{"`), while every other signing input of
// the daemon's key begins with an "ifp/" prefix (package identity) or a
// libp2p varint-prefixed domain, so no signature of one kind is valid as
// another.
//
// # What a signature covers
//
// §8.4.1 canonicalizes the card as the JSON of the AgentCard message of
// spec/a2a.proto, with proto field presence: a member that is REQUIRED or
// proto3 optional is kept whatever its value, any other member is left out
// when it holds its default ("", false, 0, [] or {}), and null is unset.
// Members outside that message are not in it at all. So the payload holds
// the 1.0 members only (a2aCardFields), and not the 0.3 members beside
// them — url, protocolVersion, preferredTransport, additionalInterfaces,
// security, capabilities.stateTransitionHistory — nor any unknown member.
// The official verifiers compute it the same way (@a2a-js/sdk's
// canonicalizeAgentCard round-trips the card through the 1.0 AgentCard
// type first), and reject a signature over anything more.
//
// A 0.3 client connects to url with preferredTransport, which no signature
// covers, so the verifier accepts those members only when they repeat
// signed ones: url and preferredTransport (JSONRPC when absent) must be a
// signed supportedInterfaces entry, protocolVersion must be that entry's
// version, and each additionalInterfaces entry must be a signed entry too;
// otherwise the card is refused as altered. security and
// stateTransitionHistory have no signed counterpart to be compared with,
// so the verified card does not carry them.
//
// Within the 1.0 members, any re-serialization (key order, white space,
// escapes) verifies, but adding or removing a member that is kept whatever
// its value, or changing any value, does not: it is no longer the card that
// was signed.

package negotiate

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/ifaced/ifaced/identity"
)

// A2A protocol constants.
const (
	A2AProtocolVersion   = "0.3.0"     // the 0.3 protocolVersion member, as 0.3 clients write it
	A2AInterfaceVersion  = "0.3"       // the same version as 1.0 writes it (Major.Minor) in supportedInterfaces
	A2AVersion1          = "1.0"       // A2A 1.0, in supportedInterfaces and the A2A-Version header
	A2ATransportJSONRPC  = "JSONRPC"   // JSON-RPC 2.0 over HTTP POST
	A2ATransportHTTPJSON = "HTTP+JSON" // the REST binding
	A2AJWSAlgorithm      = "EdDSA"     // RFC 8037: Ed25519
)

// Limits on a card a verifier reads.
const (
	MaxAgentCardSize       = 1 << 20 // bytes
	MaxAgentCardSignatures = 8       // more is refused: each costs a key lookup and a verification
)

// A2AOptions is what an agent card needs that the document does not hold.
type A2AOptions struct {
	Identity    AGUIIdentity // name, description, version, provider, documentation URL
	URL         string       // where the daemon serves A2A with Transport (an absolute URL)
	Transport   string       // A2ATransportJSONRPC (the default) or A2ATransportHTTPJSON
	ProviderURL string       // the provider's web site; provider is written only with both it and Identity.Provider
	IconURL     string
}

// AgentCard is an A2A agent card. The members ifaced writes are A2A 1.0's
// plus the 0.3 members url, protocolVersion and preferredTransport; the
// others are read from cards a peer serves (security schemes and
// requirements, 0.3 additional interfaces) so that an importer can see
// them.
type AgentCard struct {
	Name                 string           `json:"name"`
	Description          string           `json:"description"`
	SupportedInterfaces  []A2AInterface   `json:"supportedInterfaces,omitempty"`
	Provider             *A2AProvider     `json:"provider,omitempty"`
	Version              string           `json:"version"`
	DocumentationURL     string           `json:"documentationUrl,omitempty"`
	Capabilities         A2ACapabilities  `json:"capabilities"`
	SecuritySchemes      map[string]any   `json:"securitySchemes,omitempty"`
	SecurityRequirements []map[string]any `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string         `json:"defaultInputModes"`
	DefaultOutputModes   []string         `json:"defaultOutputModes"`
	Skills               []A2ASkill       `json:"skills"`
	Signatures           []A2ASignature   `json:"signatures,omitempty"`
	IconURL              string           `json:"iconUrl,omitempty"`
	URL                  string           `json:"url"`                            // 0.3: the preferred endpoint
	ProtocolVersion      string           `json:"protocolVersion"`                // 0.3
	PreferredTransport   string           `json:"preferredTransport,omitempty"`   // 0.3: the transport at url
	AdditionalInterfaces []A2AInterface03 `json:"additionalInterfaces,omitempty"` // 0.3
	Security             []map[string]any `json:"security,omitempty"`             // 0.3 name of securityRequirements
}

// A2AInterface is an A2A 1.0 AgentInterface.
type A2AInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
	Tenant          string `json:"tenant,omitempty"`
}

// A2AInterface03 is an A2A 0.3 AgentInterface.
type A2AInterface03 struct {
	URL       string `json:"url"`
	Transport string `json:"transport"`
}

// A2AProvider is an A2A AgentProvider.
type A2AProvider struct {
	Organization string `json:"organization"`
	URL          string `json:"url"`
}

// A2ACapabilities is an A2A AgentCapabilities. Its flags are proto3
// optional: written when set, even to false.
type A2ACapabilities struct {
	Streaming              *bool            `json:"streaming,omitempty"`
	PushNotifications      *bool            `json:"pushNotifications,omitempty"`
	ExtendedAgentCard      *bool            `json:"extendedAgentCard,omitempty"`
	StateTransitionHistory *bool            `json:"stateTransitionHistory,omitempty"` // 0.3
	Extensions             []map[string]any `json:"extensions,omitempty"`
}

// A2ASkill is an A2A AgentSkill.
type A2ASkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// A2ASignature is an A2A AgentCardSignature: a JWS in the flattened JSON
// serialization without its payload.
type A2ASignature struct {
	Protected string         `json:"protected"`
	Signature string         `json:"signature"`
	Header    map[string]any `json:"header,omitempty"`
}

// jwsHeader is the protected header ifaced writes, in this member order.
type jwsHeader struct {
	Alg  string   `json:"alg"`
	Typ  string   `json:"typ,omitempty"`
	Kid  string   `json:"kid"`
	Crit []string `json:"crit,omitempty"` // read only, to refuse it
}

// AgentCard projects the view d (never the owner's document; see agui.go)
// onto an A2A agent card. Its skills are the capabilities the caller may
// use now (Eligible true), since a card has no place for conditions: id
// and name are the capability name, tags its tags and ACP categories (or,
// with neither, the first segment of its name, as A2A requires at least
// one tag). Input and output modes are JSON and plain text; the daemon
// streams (SendStreamingMessage and SubscribeToTask over server-sent
// events), does not push, and declares no extended card. Name, description and version come from
// opts.Identity, falling back to the agent id, a summary of the skills,
// and the document's seq.
//
// The card is unsigned; see Sign.
func (d *Document) AgentCard(opts A2AOptions) *AgentCard {
	ident := opts.Identity
	transport := opts.Transport
	if transport == "" {
		transport = A2ATransportJSONRPC
	}
	usable := d.usable()
	modes := func() []string { return []string{"application/json", "text/plain"} }
	flag := func(b bool) *bool { return &b }
	card := &AgentCard{
		Name:        displayName(d, ident),
		Description: ident.Description,
		SupportedInterfaces: []A2AInterface{
			{URL: opts.URL, ProtocolBinding: transport, ProtocolVersion: A2AVersion1},
			{URL: opts.URL, ProtocolBinding: transport, ProtocolVersion: A2AInterfaceVersion},
		},
		Version:            ident.Version,
		DocumentationURL:   ident.DocumentationURL,
		Capabilities:       A2ACapabilities{Streaming: flag(true), PushNotifications: flag(false)},
		DefaultInputModes:  modes(),
		DefaultOutputModes: modes(),
		Skills:             make([]A2ASkill, 0, len(usable)),
		IconURL:            opts.IconURL,
		URL:                opts.URL,
		ProtocolVersion:    A2AProtocolVersion,
		PreferredTransport: transport,
	}
	if card.Description == "" {
		card.Description = summary(card.Name, usable)
	}
	if card.Version == "" {
		card.Version = strconv.FormatUint(d.Seq, 10)
	}
	if ident.Provider != "" && opts.ProviderURL != "" {
		card.Provider = &A2AProvider{Organization: ident.Provider, URL: opts.ProviderURL}
	}
	for _, c := range usable {
		card.Skills = append(card.Skills, A2ASkill{ID: c.Name, Name: c.Name, Description: c.Description, Tags: skillTags(c)})
	}
	return card
}

func skillTags(c *Capability) []string {
	var tags []string
	for _, t := range append(append([]string(nil), c.Tags...), c.Categories...) {
		if !contains(tags, t) {
			tags = append(tags, t)
		}
	}
	if len(tags) == 0 {
		first, _, _ := strings.Cut(c.Name, ".")
		tags = []string{first}
	}
	return tags
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// SigningPayload returns the bytes a signature on the card covers: the
// RFC 8785 form of its A2A 1.0 members without its signatures (see the
// file comment). It changes only when the card does, so a server can keep
// it (and the signed card) per document seq.
func (c *AgentCard) SigningPayload() ([]byte, error) {
	u := *c
	u.Signatures = nil
	raw, err := json.Marshal(&u)
	if err != nil {
		return nil, fmt.Errorf("canonicalizing agent card: %w", err)
	}
	var members map[string]jsontext.Value
	if err := jsonv2.Unmarshal(raw, &members); err != nil {
		return nil, fmt.Errorf("canonicalizing agent card: %w", err)
	}
	return a2aPayload(members)
}

// a2aField is a member of an A2A 1.0 message in spec/a2a.proto.
type a2aField struct {
	// keep: REQUIRED, proto3 optional, or a message — present whenever
	// set, even to a default value.
	keep bool
	// message lists the members of the member's message type, when it is
	// a message or a repeated message; nil for scalars, maps and Structs,
	// which are taken whole.
	message map[string]a2aField
}

// a2aCardFields are the members of A2A 1.0's AgentCard, the only ones a
// signature covers (§8.4.1). signatures is left out: it is never signed.
var a2aCardFields = map[string]a2aField{
	"name":        {keep: true},
	"description": {keep: true},
	"supportedInterfaces": {keep: true, message: map[string]a2aField{
		"url": {keep: true}, "protocolBinding": {keep: true}, "tenant": {}, "protocolVersion": {keep: true},
	}},
	"provider":         {keep: true, message: map[string]a2aField{"url": {keep: true}, "organization": {keep: true}}},
	"version":          {keep: true},
	"documentationUrl": {keep: true},
	"capabilities": {keep: true, message: map[string]a2aField{
		"streaming": {keep: true}, "pushNotifications": {keep: true}, "extendedAgentCard": {keep: true},
		"extensions": {message: map[string]a2aField{"uri": {}, "description": {}, "required": {}, "params": {}}},
	}},
	"securitySchemes":      {},
	"securityRequirements": {},
	"defaultInputModes":    {keep: true},
	"defaultOutputModes":   {keep: true},
	"skills": {keep: true, message: map[string]a2aField{
		"id": {keep: true}, "name": {keep: true}, "description": {keep: true}, "tags": {keep: true},
		"examples": {}, "inputModes": {}, "outputModes": {}, "securityRequirements": {},
	}},
	"iconUrl": {keep: true},
}

// a2aPayload is the RFC 8785 form of the A2A 1.0 members of a card's
// top-level members.
func a2aPayload(members map[string]jsontext.Value) ([]byte, error) {
	kept, err := a2aMembers(members, a2aCardFields)
	if err != nil {
		return nil, err
	}
	raw, err := jsonv2.Marshal(kept)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAgentCardMalformed, err)
	}
	b, err := identity.CanonicalizeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAgentCardMalformed, err)
	}
	return b, nil
}

// a2aMembers keeps the members of an object that fields lists, with
// proto field presence: null is unset, and a member that is not kept
// whatever its value is left out when it holds its default.
func a2aMembers(members map[string]jsontext.Value, fields map[string]a2aField) (map[string]jsontext.Value, error) {
	out := make(map[string]jsontext.Value, len(members))
	for name, v := range members {
		f, ok := fields[name]
		if !ok || v.Kind() == 'n' || (!f.keep && isDefaultJSON(v)) {
			continue
		}
		if f.message != nil {
			var err error
			if v, err = a2aMessage(v, f.message); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		out[name] = v
	}
	return out, nil
}

// a2aMessage applies a2aMembers to a message, or to each message of an
// array. Any other value is kept as it is: the signature covers it, and
// it is the reader's business whether it makes sense.
func a2aMessage(v jsontext.Value, fields map[string]a2aField) (jsontext.Value, error) {
	var out any
	switch v.Kind() {
	case '{':
		var m map[string]jsontext.Value
		if err := jsonv2.Unmarshal(v, &m); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrAgentCardMalformed, err)
		}
		kept, err := a2aMembers(m, fields)
		if err != nil {
			return nil, err
		}
		out = kept
	case '[':
		var list []jsontext.Value
		if err := jsonv2.Unmarshal(v, &list); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrAgentCardMalformed, err)
		}
		for i, e := range list {
			if e.Kind() != '{' {
				continue
			}
			var err error
			if list[i], err = a2aMessage(e, fields); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		out = list
	default:
		return v, nil
	}
	b, err := jsonv2.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAgentCardMalformed, err)
	}
	return b, nil
}

// isDefaultJSON reports whether v is a proto3 default: "", false, 0, []
// or {}.
func isDefaultJSON(v jsontext.Value) bool {
	var x any
	if err := jsonv2.Unmarshal(v, &x); err != nil {
		return false
	}
	switch x := x.(type) {
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// Sign adds a signature by id to the card (replacing an earlier one by the
// same key; signatures by other keys stay, as during a key rotation). The
// protected header is {"alg":"EdDSA","typ":"JOSE","kid":id.KeyID()}.
func (c *AgentCard) Sign(id *identity.Identity) error {
	if id == nil {
		return errors.New("signing agent card: no identity")
	}
	payload, err := c.SigningPayload()
	if err != nil {
		return err
	}
	hdr, err := json.Marshal(jwsHeader{Alg: A2AJWSAlgorithm, Typ: "JOSE", Kid: id.KeyID()})
	if err != nil {
		return fmt.Errorf("signing agent card: %w", err)
	}
	protected := base64.RawURLEncoding.EncodeToString(hdr)
	// The daemon's key is also its libp2p key; this is the one exported way
	// to make a plain Ed25519 signature with it. See the file comment on
	// why a JWS signing input cannot pass for any other signed thing.
	sig, err := id.LibP2PKey().Sign(jwsSigningInput(protected, payload))
	if err != nil {
		return fmt.Errorf("signing agent card: %w", err)
	}
	kept := c.Signatures[:0:0]
	for _, s := range c.Signatures {
		if h, err := decodeJWSHeader(s.Protected); err != nil || h.Kid != id.KeyID() {
			kept = append(kept, s)
		}
	}
	c.Signatures = append(kept, A2ASignature{Protected: protected, Signature: base64.RawURLEncoding.EncodeToString(sig)})
	return nil
}

func jwsSigningInput(protected string, payload []byte) []byte {
	enc := base64.RawURLEncoding
	in := make([]byte, 0, len(protected)+1+enc.EncodedLen(len(payload)))
	in = append(in, protected...)
	in = append(in, '.')
	return enc.AppendEncode(in, payload)
}

// Errors of VerifyAgentCard. Each failing signature contributes one, so
// errors.Is finds every reason when a card carries several signatures.
var (
	// ErrAgentCardMalformed: the card or a signature cannot be read.
	ErrAgentCardMalformed = errors.New("malformed agent card")
	// ErrAgentCardUnsigned: the card has no signatures.
	ErrAgentCardUnsigned = errors.New("agent card is not signed")
	// ErrAgentCardUnsupported: a signature uses an algorithm or a critical
	// header this verifier does not implement (it implements EdDSA only).
	ErrAgentCardUnsupported = errors.New("agent card signature not supported")
	// ErrAgentCardUnknownKey: resolveKey knows no key for the signature's kid.
	ErrAgentCardUnknownKey = errors.New("agent card signed by an unknown key")
	// ErrAgentCardBadSignature: the signature does not verify under the
	// kid's key — the card was changed after it was signed, or the key is
	// not the one that signed it (the two cannot be told apart) — or an
	// A2A 0.3 member, which no signature covers, does not repeat a signed
	// one (see the file comment).
	ErrAgentCardBadSignature = errors.New("agent card signature does not verify")
)

// VerifyAgentCard reads a signed agent card and returns it if at least one
// of its signatures verifies (A2A §8.4.3) under the key resolveKey returns
// for its kid; resolveKey decides which keys are trusted, and returns an
// error for any other kid. The signature covers the card's A2A 1.0
// members, minus "signatures", in their RFC 8785 form, so any
// re-serialization of a signed card verifies and any change of their
// content does not. The A2A 0.3 members are accepted only when they repeat
// signed ones, and security and capabilities.stateTransitionHistory, which
// cannot be checked so, are not returned (see the file comment). Duplicate
// member names and invalid UTF-8 are refused outright, so that what was
// verified and what is returned cannot differ; members this package does
// not know are not returned.
func VerifyAgentCard(raw []byte, resolveKey func(kid string) (ed25519.PublicKey, error)) (*AgentCard, error) {
	if resolveKey == nil {
		return nil, errors.New("verifying agent card: no key resolver")
	}
	payload, sigs, err := agentCardPayload(raw)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i, s := range sigs {
		err := verifyCardSignature(s, payload, resolveKey)
		if err == nil {
			var card AgentCard
			if err := jsonv2.Unmarshal(raw, &card); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrAgentCardMalformed, err)
			}
			if err := checkUnsigned03(&card); err != nil {
				return nil, fmt.Errorf("verifying agent card: %w", err)
			}
			return &card, nil
		}
		errs = append(errs, fmt.Errorf("signatures[%d]: %w", i, err))
	}
	return nil, fmt.Errorf("verifying agent card: %w", errors.Join(errs...))
}

// agentCardPayload splits a card into the canonical bytes its signatures
// cover and its signatures.
func agentCardPayload(raw []byte) ([]byte, []A2ASignature, error) {
	if len(raw) > MaxAgentCardSize {
		return nil, nil, fmt.Errorf("%w: %d bytes, at most %d", ErrAgentCardMalformed, len(raw), MaxAgentCardSize)
	}
	var members map[string]jsontext.Value
	if err := jsonv2.Unmarshal(raw, &members); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrAgentCardMalformed, err)
	}
	if members == nil {
		return nil, nil, fmt.Errorf("%w: not a JSON object", ErrAgentCardMalformed)
	}
	var sigs []A2ASignature
	if s, ok := members["signatures"]; ok {
		if err := jsonv2.Unmarshal(s, &sigs); err != nil {
			return nil, nil, fmt.Errorf("%w: signatures: %v", ErrAgentCardMalformed, err)
		}
	}
	if len(sigs) == 0 {
		return nil, nil, ErrAgentCardUnsigned
	}
	if len(sigs) > MaxAgentCardSignatures {
		return nil, nil, fmt.Errorf("%w: %d signatures, at most %d", ErrAgentCardMalformed, len(sigs), MaxAgentCardSignatures)
	}
	payload, err := a2aPayload(members)
	if err != nil {
		return nil, nil, err
	}
	return payload, sigs, nil
}

// checkUnsigned03 checks the A2A 0.3 members of a card whose signature
// verified, which the signature does not cover, against its signed
// supportedInterfaces, and clears the two that cannot be checked.
func checkUnsigned03(c *AgentCard) error {
	// signed finds a signed interface at url with binding, preferring one
	// of version (when not ""): one endpoint may be listed once per
	// version it speaks. ok is false when there is none of that version.
	signed := func(url, binding, version string) (in *A2AInterface, ok bool) {
		for i := range c.SupportedInterfaces {
			s := &c.SupportedInterfaces[i]
			if s.URL != url || !strings.EqualFold(s.ProtocolBinding, binding) {
				continue
			}
			if version == "" || majorMinor(version) == majorMinor(s.ProtocolVersion) {
				return s, true
			}
			in = s
		}
		return in, false
	}
	if c.URL != "" || c.PreferredTransport != "" || c.ProtocolVersion != "" {
		transport := c.PreferredTransport
		if transport == "" {
			transport = A2ATransportJSONRPC // the 0.3 default
		}
		in, ok := signed(c.URL, transport, c.ProtocolVersion)
		switch {
		case in == nil:
			return fmt.Errorf("%w: url %q with preferredTransport %q is not one of the signed supportedInterfaces, and no signature covers it",
				ErrAgentCardBadSignature, c.URL, transport)
		case !ok:
			return fmt.Errorf("%w: protocolVersion %q differs from the signed interface's %q, and no signature covers it",
				ErrAgentCardBadSignature, c.ProtocolVersion, in.ProtocolVersion)
		}
	}
	for i, a := range c.AdditionalInterfaces {
		if in, _ := signed(a.URL, a.Transport, ""); in == nil {
			return fmt.Errorf("%w: additionalInterfaces[%d] (%s at %q) is not one of the signed supportedInterfaces, and no signature covers it",
				ErrAgentCardBadSignature, i, a.Transport, a.URL)
		}
	}
	c.Security, c.Capabilities.StateTransitionHistory = nil, nil
	return nil
}

// majorMinor is "0.3" of "0.3", "0.3.0" or "0.3.1".
func majorMinor(v string) string {
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	return major + "." + minor
}

func decodeJWSHeader(protected string) (*jwsHeader, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(protected)
	if err != nil {
		return nil, fmt.Errorf("%w: protected header is not unpadded base64url: %v", ErrAgentCardMalformed, err)
	}
	var h jwsHeader
	if err := jsonv2.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%w: protected header: %v", ErrAgentCardMalformed, err)
	}
	return &h, nil
}

func verifyCardSignature(s A2ASignature, payload []byte, resolveKey func(string) (ed25519.PublicKey, error)) error {
	h, err := decodeJWSHeader(s.Protected)
	if err != nil {
		return err
	}
	switch {
	case h.Alg != A2AJWSAlgorithm:
		return fmt.Errorf("%w: alg %q (only %s is implemented)", ErrAgentCardUnsupported, h.Alg, A2AJWSAlgorithm)
	case h.Crit != nil:
		return fmt.Errorf("%w: critical header parameters %q", ErrAgentCardUnsupported, h.Crit)
	case h.Kid == "":
		return fmt.Errorf("%w: protected header has no kid", ErrAgentCardMalformed)
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(s.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: signature is not %d bytes of unpadded base64url", ErrAgentCardMalformed, ed25519.SignatureSize)
	}
	pub, err := resolveKey(h.Kid)
	if err != nil {
		return fmt.Errorf("%w: kid %q: %v", ErrAgentCardUnknownKey, h.Kid, err)
	}
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: kid %q resolves to a %d-byte key, not Ed25519", ErrAgentCardUnknownKey, h.Kid, len(pub))
	}
	if !ed25519.Verify(pub, jwsSigningInput(s.Protected, payload), sig) {
		return fmt.Errorf("%w: kid %q: the card was changed after it was signed, or this is not the key that signed it", ErrAgentCardBadSignature, h.Kid)
	}
	return nil
}
