package identity

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// ErrInvalidDocument wraps every problem Validate finds in an identity document.
var ErrInvalidDocument = errors.New("invalid identity document")

// Key statuses of IFP-5 §5.
const (
	KeyActive  = "active"
	KeyRetired = "retired"
	KeyRevoked = "revoked"
)

// Document is an IFP-5 identity document (with the IFP-10 name extension
// and the IFP-8 relay preferences).
type Document struct {
	IFP       int            `json:"ifp"`
	AgentID   string         `json:"agent_id"`
	Display   string         `json:"display,omitempty"`
	Name      *AgentName     `json:"name,omitempty"`
	Keys      []DocumentKey  `json:"keys"`
	Endpoints map[string]any `json:"endpoints,omitempty"`
	Relay     *Relay         `json:"relay,omitempty"`
}

// DocumentKey is one entry of an identity document's keys.
type DocumentKey struct {
	KeyID       string `json:"key_id"`
	Type        string `json:"type"`
	PublicKey   string `json:"public_key"` // unpadded base64url of the raw key
	Created     string `json:"created"`
	Status      string `json:"status"`
	RetiredDate string `json:"retired_date,omitempty"`
}

// AgentName is the IFP-10 name object. It is display only: nothing is
// decided on it.
type AgentName struct {
	Canonical string   `json:"canonical"`
	Aliases   []string `json:"aliases,omitempty"`
	Human     string   `json:"human,omitempty"`
	Agent     string   `json:"agent,omitempty"`
	Display   string   `json:"display,omitempty"`
}

// Relay holds IFP-8 §2.3 relay preferences.
type Relay struct {
	URLs       []string `json:"urls"`
	Preference string   `json:"preference,omitempty"`
}

// NewDocument builds the identity document of id with one active key.
// agentID defaults to the did:key.
func NewDocument(id *Identity, agentID, display string, created time.Time) *Document {
	if agentID == "" {
		agentID = id.DID()
	}
	return &Document{
		IFP:     5,
		AgentID: agentID,
		Display: display,
		Keys: []DocumentKey{{
			KeyID:     id.KeyID(),
			Type:      AlgEd25519,
			PublicKey: base64.RawURLEncoding.EncodeToString(id.PublicKey()),
			Created:   created.UTC().Format(time.RFC3339),
			Status:    KeyActive,
		}},
	}
}

// Validate checks the document and returns every problem found, each
// naming its field.
func (d *Document) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidDocument, field, fmt.Sprintf(format, args...)))
	}
	if d.IFP != 5 {
		bad("ifp", "must be 5, got %d", d.IFP)
	}
	if strings.TrimSpace(d.AgentID) == "" {
		bad("agent_id", "is required (a simple name, an https URL or a DID)")
	}
	if len(d.Keys) == 0 {
		bad("keys", "needs at least one key")
	}
	active := 0
	ids := map[string]bool{}
	for i, k := range d.Keys {
		f := fmt.Sprintf("keys[%d]", i)
		if k.KeyID == "" {
			bad(f+".key_id", "is required")
		} else if ids[k.KeyID] {
			bad(f+".key_id", "%q appears twice", k.KeyID)
		}
		ids[k.KeyID] = true
		if k.Type != AlgEd25519 {
			bad(f+".type", "must be %q, got %q", AlgEd25519, k.Type)
		}
		pub, err := base64.RawURLEncoding.DecodeString(k.PublicKey)
		switch {
		case err != nil:
			bad(f+".public_key", "is not unpadded base64url: %v", err)
		case len(pub) != ed25519.PublicKeySize:
			bad(f+".public_key", "has %d bytes, want %d", len(pub), ed25519.PublicKeySize)
		case strings.HasPrefix(k.KeyID, "did:key:"):
			if want, err := PublicKeyFromKeyID(k.KeyID); err != nil {
				bad(f+".key_id", "%v", err)
			} else if !want.Equal(ed25519.PublicKey(pub)) {
				bad(f+".public_key", "does not match the key named by key_id %q", k.KeyID)
			}
		}
		if _, err := time.Parse(time.RFC3339, k.Created); err != nil {
			bad(f+".created", "%q is not an RFC 3339 time", k.Created)
		}
		switch k.Status {
		case KeyActive:
			active++
			if k.RetiredDate != "" {
				bad(f+".retired_date", "is set on an active key")
			}
		case KeyRetired, KeyRevoked:
			if k.Status == KeyRetired && k.RetiredDate == "" {
				bad(f+".retired_date", "is required when status is %q", KeyRetired)
			}
			if k.RetiredDate != "" {
				if _, err := time.Parse(time.RFC3339, k.RetiredDate); err != nil {
					bad(f+".retired_date", "%q is not an RFC 3339 time", k.RetiredDate)
				}
			}
		default:
			bad(f+".status", "must be active, retired or revoked, got %q", k.Status)
		}
	}
	if len(d.Keys) > 0 && active == 0 {
		bad("keys", "no key is active")
	}
	if d.Name != nil {
		if err := ValidateAgentName(d.Name.Canonical); err != nil {
			bad("name.canonical", "%v", err)
		}
		for i, a := range d.Name.Aliases {
			if err := ValidateAgentName(a); err != nil {
				bad(fmt.Sprintf("name.aliases[%d]", i), "%v", err)
			}
		}
		if d.Name.Agent != "" && !agentPart.MatchString(d.Name.Agent) {
			bad("name.agent", "%q: lowercase letters, digits and hyphens only", d.Name.Agent)
		}
	}
	return errors.Join(errs...)
}

// KeyStatusAt says whether key_id may verify a signature created at t,
// under a transition period for retired keys. It returns the public key.
func (d *Document) KeyStatusAt(keyID string, created time.Time, transition time.Duration) (ed25519.PublicKey, error) {
	for _, k := range d.Keys {
		if k.KeyID != keyID {
			continue
		}
		pub, err := base64.RawURLEncoding.DecodeString(k.PublicKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("key %q: %w: bad public_key", keyID, ErrInvalidDocument)
		}
		switch k.Status {
		case KeyActive:
			return pub, nil
		case KeyRetired:
			retired, err := time.Parse(time.RFC3339, k.RetiredDate)
			if err != nil {
				return nil, fmt.Errorf("key %q: %w: bad retired_date", keyID, ErrInvalidDocument)
			}
			if created.After(retired.Add(transition)) {
				return nil, fmt.Errorf("key %q: %w: retired on %s and its %s transition period is over", keyID, ErrKeyRetired, k.RetiredDate, transition)
			}
			return pub, nil
		default:
			return nil, fmt.Errorf("key %q: %w", keyID, ErrKeyRevoked)
		}
	}
	return nil, fmt.Errorf("key %q: %w", keyID, ErrUnknownKey)
}

var (
	// ErrKeyRevoked: a revoked key never verifies.
	ErrKeyRevoked = errors.New("key is revoked")
	// ErrKeyRetired: a retired key past its transition period.
	ErrKeyRetired = errors.New("key is retired")
	// ErrUnknownKey: the document does not list the key.
	ErrUnknownKey = errors.New("key not in identity document")
)

var (
	namespacePart = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	agentPart     = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
)

// ValidateAgentName checks an IFP-10 name namespace:human.agent[.sub]: a
// lowercase namespace, a non-empty path whose last component (the agent or
// sub-agent name) is lowercase alphanumeric with hyphens. The human part is
// kept as the namespace allows it, so only its presence is checked.
func ValidateAgentName(name string) error {
	if len(name) > 256 {
		return fmt.Errorf("agent name is %d bytes, at most 256", len(name))
	}
	ns, path, ok := strings.Cut(name, ":")
	if !ok {
		return fmt.Errorf("agent name %q: want namespace:human.agent (e.g. github:alice.freya)", name)
	}
	if !namespacePart.MatchString(ns) {
		return fmt.Errorf("agent name %q: namespace %q must be lowercase ASCII letters, digits or hyphens", name, ns)
	}
	dot := strings.LastIndexByte(path, '.')
	if dot <= 0 || dot == len(path)-1 {
		return fmt.Errorf("agent name %q: want human.agent after the namespace", name)
	}
	if last := path[dot+1:]; !agentPart.MatchString(last) {
		return fmt.Errorf("agent name %q: agent part %q must be lowercase letters, digits and hyphens", name, last)
	}
	if strings.ContainsAny(path, " \t\r\n") {
		return fmt.Errorf("agent name %q contains white space", name)
	}
	return nil
}
