package identity

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Checking that an identity document, or the DID document of a did:web,
// lists a key: what levels 2 and 3 (IFP-5) rest on. Fetching the documents
// is the daemon's; judging them is here.

var (
	// ErrInvalidDIDDocument: a DID document is not JSON of the shape a
	// binding needs.
	ErrInvalidDIDDocument = errors.New("invalid DID document")
	// ErrDIDMismatch: a DID document names another DID than the one it was
	// fetched for.
	ErrDIDMismatch = errors.New("DID document of another DID")
)

// findingError is what a check found, said for people; Unwrap tells which
// kind it is (errors.Is with the Err values of this package).
type findingError struct {
	kind error
	msg  string
}

func (e *findingError) Error() string { return e.msg }
func (e *findingError) Unwrap() error { return e.kind }

func finding(kind error, format string, args ...any) error {
	return &findingError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// ListsKey checks that d lists pub with a status that may verify at now
// (active, or retired within transition). It returns nil, or an error
// wrapping ErrKeyRevoked, ErrKeyRetired or ErrUnknownKey.
func (d *Document) ListsKey(pub ed25519.PublicKey, now time.Time, transition time.Duration) error {
	var first error
	for _, k := range d.Keys {
		raw, err := base64.RawURLEncoding.DecodeString(k.PublicKey)
		if err != nil || !pub.Equal(ed25519.PublicKey(raw)) {
			continue
		}
		_, err = d.KeyStatusAt(k.KeyID, now, transition)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return fmt.Errorf("key %s: %w", Fingerprint(pub), ErrUnknownKey)
}

// DIDWebURL is where the DID document of a did:web lives (did:web method
// §3.2.1): did:web:example.com → https://example.com/.well-known/did.json,
// did:web:example.com:user:alice → https://example.com/user/alice/did.json,
// with a port written percent-encoded (did:web:localhost%3A8443).
func DIDWebURL(did string) (string, error) {
	rest := strings.TrimPrefix(did, "did:web:")
	if rest == "" || rest == did || strings.ContainsAny(rest, "/?#") {
		return "", fmt.Errorf("%q is not a did:web", did)
	}
	parts := strings.Split(rest, ":")
	host, err := url.PathUnescape(parts[0])
	if err != nil || host == "" || strings.ContainsAny(host, "/@?#") {
		return "", fmt.Errorf("%q is not a did:web: bad host %q", did, parts[0])
	}
	path := "/.well-known"
	if len(parts) > 1 {
		path = ""
		for _, p := range parts[1:] {
			seg, err := url.PathUnescape(p)
			if err != nil || seg == "" || strings.Contains(seg, "/") || seg == "." || seg == ".." {
				return "", fmt.Errorf("%q is not a did:web: bad path segment %q", did, p)
			}
			path += "/" + seg
		}
	}
	u := url.URL{Scheme: "https", Host: host, Path: path + "/did.json"}
	if u.Hostname() == "" {
		return "", fmt.Errorf("%q is not a did:web: bad host %q", did, host)
	}
	return u.String(), nil
}

// didKeyTypes are the DID verification method types that carry an Ed25519
// key as multibase.
var didKeyTypes = []string{"Ed25519VerificationKey2020", "Multikey"}

// didDocument is what a DID document holds that binding needs.
type didDocument struct {
	ID                 string            `json:"id"`
	VerificationMethod []didMethod       `json:"verificationMethod"`
	Authentication     []json.RawMessage `json:"authentication"`
}

type didMethod struct {
	ID                 string `json:"id"`
	Type               string `json:"type"`
	PublicKeyMultibase string `json:"publicKeyMultibase"`
}

// DIDWebBinds checks that the DID document raw of did lists pub, as an
// Ed25519VerificationKey2020 or Multikey whose publicKeyMultibase is the
// multibase part of pub's did:key, under authentication (by reference or
// embedded). It returns nil when it does, or an error saying why not that
// wraps ErrInvalidDIDDocument, ErrDIDMismatch or ErrUnknownKey (the key is
// not listed, or not for authentication).
func DIDWebBinds(raw []byte, did string, pub ed25519.PublicKey) error {
	var doc didDocument
	if err := json.Unmarshal(raw, &doc); err != nil {
		return finding(ErrInvalidDIDDocument, "the DID document of %s is not JSON of the expected shape: %v", did, err)
	}
	if doc.ID != did {
		return finding(ErrDIDMismatch, "the DID document fetched for %s has id %q", did, doc.ID)
	}
	mb := strings.TrimPrefix(DIDKey(pub), "did:key:")
	abs := func(ref string) string {
		if strings.HasPrefix(ref, "#") {
			return did + ref
		}
		return ref
	}
	matches := func(m didMethod) bool {
		return m.PublicKeyMultibase == mb && (m.Type == didKeyTypes[0] || m.Type == didKeyTypes[1])
	}
	auth := map[string]bool{}
	for _, a := range doc.Authentication {
		var ref string
		if json.Unmarshal(a, &ref) == nil {
			auth[abs(ref)] = true
			continue
		}
		var m didMethod
		if json.Unmarshal(a, &m) == nil && matches(m) {
			return nil
		}
	}
	listed := false
	for _, m := range doc.VerificationMethod {
		if !matches(m) {
			continue
		}
		if auth[abs(m.ID)] {
			return nil
		}
		listed = true
	}
	if listed {
		return finding(ErrUnknownKey, "the DID document of %s lists key %s in verificationMethod but not under authentication", did, Fingerprint(pub))
	}
	return finding(ErrUnknownKey, "the DID document of %s does not list key %s (no %s with publicKeyMultibase %s)",
		did, Fingerprint(pub), strings.Join(didKeyTypes, " or "), mb)
}
