package node

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Identity documents (levels 2 and 3): fetched from a peer's https
// agent_id, or resolved from its did:web. See the trust rules at the top
// of trust.go.

const (
	// docFetchTimeout bounds one fetch, redirects included.
	docFetchTimeout = 10 * time.Second
	// maxDocBytes bounds a fetched document.
	maxDocBytes = 1 << 20
	// docRecheck is how long a check stands before a greeting starts another.
	docRecheck = 24 * time.Hour
	// maxChecksInFlight bounds the checks running at once, in all.
	maxChecksInFlight = 4
	maxRedirects      = 5
)

// Outcomes of an identity document check (store.DocCheck.Outcome).
const (
	CheckBound           = "bound"            // level 3: the document binds the agent ID to the key
	CheckIDMismatch      = "id_mismatch"      // the document lists the key but names another agent ID
	CheckFetchFailed     = "fetch_failed"     // no document: network, TLS, status, size or redirect
	CheckInvalidDocument = "invalid_document" // the document is not a valid identity (or DID) document
	CheckKeyNotListed    = "key_not_listed"
	CheckKeyRetired      = "key_retired" // listed, but retired past trust.key_transition
	CheckKeyRevoked      = "key_revoked" // listed as revoked
	CheckNotFetched      = "not_fetched" // the agent ID is not an https URL or a did:web
	CheckNoAgentID       = "no_agent_id" // no agent ID known for the peer yet
)

// DID verification method types that carry an Ed25519 key as multibase.
var didKeyTypes = []string{"Ed25519VerificationKey2020", "Multikey"}

// LoadCAFile reads the PEM certificates of trust.ca_file.
func LoadCAFile(path string) ([]*x509.Certificate, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, raw = pem.Decode(raw)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return certs, nil
}

// docFetcher fetches identity documents: HTTPS only, verified against the
// system roots and trust.ca_file, bounded in time and size.
type docFetcher struct {
	client *http.Client
	err    error         // why nothing can be fetched, when trust.ca_file could not be used
	sem    chan struct{} // one slot per check in flight
}

// errPrivateAddress refuses a fetch that would reach this machine or its
// network: a peer names the URL, and must not make the daemon probe
// addresses only it can reach.
var errPrivateAddress = errors.New("refusing to fetch from a loopback, private or link-local address (set trust.fetch_private = true to allow it)")

// publicOnly is a net.Dialer Control hook that refuses non-public
// addresses at connect time, after DNS resolution, so a name that resolves
// to a private address is refused too.
func publicOnly(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return fmt.Errorf("%w: %s", errPrivateAddress, ip)
	}
	return nil
}

func newDocFetcher(caFile string, allowPrivate bool) (*docFetcher, error) {
	f := &docFetcher{sem: make(chan struct{}, maxChecksInFlight)}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile != "" {
		certs, err := LoadCAFile(caFile)
		if err != nil {
			f.err = fmt.Errorf("trust.ca_file: %w", err)
			return f, f.err
		}
		for _, c := range certs {
			pool.AddCert(c)
		}
	}
	dialer := &net.Dialer{Timeout: docFetchTimeout}
	if !allowPrivate {
		dialer.Control = publicOnly
	}
	tr := &http.Transport{
		// No proxy: the address check must see where the connection goes.
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    docFetchTimeout,
		ResponseHeaderTimeout:  docFetchTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		// Fetches are rare (a day apart per peer); a connection kept open
		// would only outlive the daemon's Close.
		DisableKeepAlives: true,
	}
	f.client = &http.Client{Transport: tr, Timeout: docFetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to %s: only https is followed", req.URL.Redacted())
			}
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			return nil
		}}
	return f, nil
}

// get fetches one document.
func (f *docFetcher) get(ctx context.Context, u string) ([]byte, error) {
	if f.err != nil {
		return nil, f.err
	}
	if !strings.HasPrefix(u, "https://") {
		return nil, fmt.Errorf("%s: only https is fetched", u)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, application/did+json, application/did+ld+json")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", u, resp.Status)
	}
	if resp.ContentLength > maxDocBytes {
		return nil, fmt.Errorf("%s: the document is %d bytes, over the %d-byte limit", u, resp.ContentLength, maxDocBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", u, err)
	}
	if len(body) > maxDocBytes {
		return nil, fmt.Errorf("%s: the document is over the %d-byte limit", u, maxDocBytes)
	}
	return body, nil
}

// fetchable tells an agent ID whose document can be fetched.
func fetchable(agentID string) bool {
	return strings.HasPrefix(agentID, "https://") || strings.HasPrefix(agentID, "did:web:")
}

// checkInBackground starts a check of pid's identity document for agentID
// unless one ran within docRecheck, one is running for pid, or the global
// limit is reached (a later greeting tries again). It never waits.
func (n *Node) checkInBackground(pid peer.ID, agentID string, rec store.TrustRecord, now time.Time) {
	if !fetchable(agentID) {
		return
	}
	if c := rec.Check; c != nil && c.AgentID == agentID && now.Sub(c.CheckedAt) < docRecheck {
		return
	}
	t := n.trust
	t.mu.Lock()
	if t.inflight[pid] || n.ctx.Err() != nil {
		t.mu.Unlock()
		return
	}
	select {
	case t.fetch.sem <- struct{}{}:
	default:
		t.mu.Unlock()
		n.log.Debug("identity document checks at their limit; checking later", "peer", pid, "agent_id", agentID)
		return
	}
	t.inflight[pid] = true
	t.mu.Unlock()
	started := n.spawn(func() {
		defer func() {
			t.mu.Lock()
			delete(t.inflight, pid)
			t.mu.Unlock()
			<-t.fetch.sem
		}()
		n.runCheck(n.ctx, pid, agentID)
	})
	if !started {
		t.mu.Lock()
		delete(t.inflight, pid)
		t.mu.Unlock()
		<-t.fetch.sem
	}
}

// CheckTrust checks pid's identity document now, for the agent ID of the
// view the peer cache holds, and returns what this daemon then establishes
// about pid; its Check says what the document showed, or why nothing was
// fetched.
func (n *Node) CheckTrust(ctx context.Context, pid peer.ID) (TrustInfo, error) {
	agentID := ""
	if rec, err := n.store.Peer(pid.String()); err == nil {
		agentID = rec.AgentID
	}
	if agentID == "" {
		info := n.PeerTrust(pid)
		info.Check = &store.DocCheck{Level: int(conditions.Signed), Outcome: CheckNoAgentID, CheckedAt: n.now().UTC(),
			Reason: fmt.Sprintf("greet %s first, so that its agent_id is known (ifaced greet %s)", pid, pid)}
		return info, nil
	}
	sem := n.trust.fetch.sem
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return TrustInfo{}, fmt.Errorf("checking %s: %w", pid, ctx.Err())
	}
	defer func() { <-sem }()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(n.ctx, stop)() // the daemon's Close ends the check too
	if _, err := n.runCheck(ctx, pid, agentID); err != nil {
		return TrustInfo{}, err
	}
	return n.PeerTrust(pid), nil
}

// runCheck checks pid's document for agentID and keeps the outcome in
// pid's trust record, unless the daemon is closing.
func (n *Node) runCheck(ctx context.Context, pid peer.ID, agentID string) (store.DocCheck, error) {
	c := n.checkDocument(ctx, pid, agentID)
	if n.ctx.Err() != nil {
		return c, fmt.Errorf("checking %s: the daemon is stopping", pid)
	}
	if _, err := n.updateTrust(pid, func(r *store.TrustRecord) bool { r.Check = &c; return true }); err != nil {
		n.log.Warn("recording an identity document check", "peer", pid, "err", err)
		return c, err
	}
	n.log.Info("checked identity document", "peer", pid, "agent_id", agentID, "level", conditions.Level(c.Level),
		"outcome", c.Outcome, "reason", c.Reason)
	return c, nil
}

// checkDocument fetches and judges the identity document of agentID for
// pid's key.
func (n *Node) checkDocument(ctx context.Context, pid peer.ID, agentID string) store.DocCheck {
	c := store.DocCheck{AgentID: agentID, Level: int(conditions.Signed), CheckedAt: n.now().UTC()}
	fail := func(outcome, format string, args ...any) store.DocCheck {
		c.Outcome, c.Reason = outcome, fmt.Sprintf(format, args...)
		return c
	}
	pub, err := identity.PublicKeyFromPeerID(pid)
	if err != nil {
		return fail(CheckInvalidDocument, "%v", err)
	}
	fp := identity.Fingerprint(pub)
	switch {
	case strings.HasPrefix(agentID, "did:web:"):
		c.Method = "did:web"
		u, err := didWebURL(agentID)
		if err != nil {
			return fail(CheckNotFetched, "%v", err)
		}
		c.URL = u
		raw, err := n.trust.fetch.get(ctx, u)
		if err != nil {
			return fail(CheckFetchFailed, "fetching the DID document of %s: %v", agentID, err)
		}
		outcome, reason := didWebBinds(raw, agentID, pub)
		if outcome != CheckBound {
			return fail(outcome, "%s", reason)
		}
		c.Level, c.Outcome = int(conditions.Bound), CheckBound
		c.Reason = fmt.Sprintf("the DID document of %s lists key %s for authentication", agentID, fp)
		return c
	case strings.HasPrefix(agentID, "https://"):
		c.Method = "url"
		if u, err := url.Parse(agentID); err != nil || u.Host == "" || u.User != nil {
			return fail(CheckNotFetched, "agent_id %q is not an https URL this daemon fetches", agentID)
		}
		c.URL = agentID
		raw, err := n.trust.fetch.get(ctx, agentID)
		if err != nil {
			return fail(CheckFetchFailed, "fetching the identity document: %v", err)
		}
		var doc identity.Document
		if err := json.Unmarshal(raw, &doc); err != nil {
			return fail(CheckInvalidDocument, "%s is not an IFP-5 identity document: %v", agentID, err)
		}
		if err := doc.Validate(); err != nil {
			return fail(CheckInvalidDocument, "%s: %v", agentID, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		if err := keyListed(&doc, pub, n.now(), n.cfg.Trust.KeyTransition.Duration); err != nil {
			switch {
			case errors.Is(err, identity.ErrKeyRevoked):
				return fail(CheckKeyRevoked, "the identity document at %s lists key %s as revoked", agentID, fp)
			case errors.Is(err, identity.ErrKeyRetired):
				return fail(CheckKeyRetired, "the identity document at %s: %v", agentID, err)
			case errors.Is(err, identity.ErrUnknownKey):
				return fail(CheckKeyNotListed, "the identity document at %s does not list key %s", agentID, fp)
			}
			return fail(CheckInvalidDocument, "the identity document at %s: %v", agentID, err)
		}
		if doc.AgentID != agentID {
			c.Level, c.Outcome = int(conditions.Verified), CheckIDMismatch
			c.Reason = fmt.Sprintf("the identity document at %s lists key %s, but names agent_id %q, not the URL it was fetched from: verified, not bound", agentID, fp, doc.AgentID)
			return c
		}
		c.Level, c.Outcome = int(conditions.Bound), CheckBound
		c.Reason = fmt.Sprintf("the identity document at %s lists key %s and names that URL as its agent_id", agentID, fp)
		return c
	case strings.HasPrefix(agentID, "http://"):
		c.Method = "url"
		return fail(CheckNotFetched, "agent_id %s is plain http: only https documents are fetched", agentID)
	default:
		return fail(CheckNotFetched, "agent_id %q is neither an https URL nor a did:web: there is no document to fetch (pin the key for level 2)", agentID)
	}
}

// keyListed checks that doc lists pub with a status that may verify now.
func keyListed(doc *identity.Document, pub ed25519.PublicKey, now time.Time, transition time.Duration) error {
	var first error
	for _, k := range doc.Keys {
		raw, err := base64.RawURLEncoding.DecodeString(k.PublicKey)
		if err != nil || !pub.Equal(ed25519.PublicKey(raw)) {
			continue
		}
		_, err = doc.KeyStatusAt(k.KeyID, now, transition)
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
	return fmt.Errorf("key %s: %w", identity.Fingerprint(pub), identity.ErrUnknownKey)
}

// didWebURL is where the DID document of a did:web lives (did:web method
// §3.2.1): did:web:example.com → https://example.com/.well-known/did.json,
// did:web:example.com:user:alice → https://example.com/user/alice/did.json,
// with a port written percent-encoded (did:web:localhost%3A8443).
func didWebURL(did string) (string, error) {
	rest := strings.TrimPrefix(did, "did:web:")
	if rest == "" || strings.ContainsAny(rest, "/?#") {
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

// didWebBinds says whether the DID document raw of did lists pub, as an
// Ed25519VerificationKey2020 or Multikey whose publicKeyMultibase is the
// multibase part of pub's did:key, under authentication (by reference or
// embedded). It returns CheckBound, or another outcome and why.
func didWebBinds(raw []byte, did string, pub ed25519.PublicKey) (string, string) {
	var doc didDocument
	if err := json.Unmarshal(raw, &doc); err != nil {
		return CheckInvalidDocument, fmt.Sprintf("the DID document of %s is not JSON of the expected shape: %v", did, err)
	}
	if doc.ID != did {
		return CheckIDMismatch, fmt.Sprintf("the DID document fetched for %s has id %q", did, doc.ID)
	}
	mb := strings.TrimPrefix(identity.DIDKey(pub), "did:key:")
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
			return CheckBound, ""
		}
	}
	listed := false
	for _, m := range doc.VerificationMethod {
		if !matches(m) {
			continue
		}
		if auth[abs(m.ID)] {
			return CheckBound, ""
		}
		listed = true
	}
	if listed {
		return CheckKeyNotListed, fmt.Sprintf("the DID document of %s lists key %s in verificationMethod but not under authentication", did, identity.Fingerprint(pub))
	}
	return CheckKeyNotListed, fmt.Sprintf("the DID document of %s does not list key %s (no %s with publicKeyMultibase %s)",
		did, identity.Fingerprint(pub), strings.Join(didKeyTypes, " or "), mb)
}
