package trust

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
// agent_id, or resolved from its did:web, and judged by package identity.
// See the trust rules in the package comment.

const (
	// docFetchTimeout bounds one fetch, redirects included.
	docFetchTimeout = 10 * time.Second
	// maxDocBytes bounds a fetched document.
	maxDocBytes = 1 << 20
	// docRecheck is how long after a check (or a failed attempt) a greeting
	// starts another.
	docRecheck = 24 * time.Hour
	// docCheckLifetime is how long a successful check (level 2 or 3)
	// stands when later attempts fetch nothing: a week of daily attempts,
	// long enough to ride out a server's outage, short enough that a
	// document gone for good stops vouching for the key. A document that
	// is fetched and no longer lists the key replaces it at once.
	docCheckLifetime = 7 * 24 * time.Hour
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

// errPrivateAddress refuses a fetch that would reach this machine, its
// network or any address that is not globally routable (globalip.go): a
// peer names the URL, and must not make the daemon probe addresses only it
// can reach.
var errPrivateAddress = errors.New("refusing to fetch from an address that is not globally routable (set trust.fetch_private = true to allow loopback and private addresses)")

// publicOnly is a net.Dialer Control hook that refuses every address that
// is not globally routable, at connect time, after DNS resolution: a name
// that resolves to a private address is refused too, and so is each
// redirect's and each retry's address. trust.fetch_private (tests, or a
// daemon whose peers serve documents on a private network) leaves the hook
// out; nothing else does.
func publicOnly(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not host:port: %w", errPrivateAddress, address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address: %w", errPrivateAddress, host, err)
	}
	if why := notRoutable(ip); why != "" {
		return fmt.Errorf("%w: %s is %s", errPrivateAddress, ip, why)
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
func (b *Book) checkInBackground(pid peer.ID, agentID string, rec store.TrustRecord, now time.Time) {
	if !fetchable(agentID) {
		return
	}
	if last, ok := lastAttempt(rec, agentID); ok && now.Sub(last) < docRecheck {
		return
	}
	b.mu.Lock()
	if b.inflight[pid] || b.ctx.Err() != nil {
		b.mu.Unlock()
		return
	}
	select {
	case b.fetch.sem <- struct{}{}:
	default:
		b.mu.Unlock()
		b.log.Debug("identity document checks at their limit; checking later", "peer", pid, "agent_id", agentID)
		return
	}
	b.inflight[pid] = true
	b.mu.Unlock()
	started := b.spawn(func() {
		defer func() {
			b.mu.Lock()
			delete(b.inflight, pid)
			b.mu.Unlock()
			<-b.fetch.sem
		}()
		b.runCheck(b.ctx, pid, agentID)
	})
	if !started {
		b.mu.Lock()
		delete(b.inflight, pid)
		b.mu.Unlock()
		<-b.fetch.sem
	}
}

// lastAttempt is when the record's last check for agentID ran, success or
// not.
func lastAttempt(rec store.TrustRecord, agentID string) (time.Time, bool) {
	var last time.Time
	for _, c := range []*store.DocCheck{rec.Check, rec.CheckFailure} {
		if c != nil && c.AgentID == agentID && c.CheckedAt.After(last) {
			last = c.CheckedAt
		}
	}
	return last, !last.IsZero()
}

// checkStands tells whether c, a check kept in a record, still counts at
// now: one that reached level 2 or 3 stands for docCheckLifetime, one
// that did not has nothing to lose.
func checkStands(c *store.DocCheck, now time.Time) bool {
	return c.Level < int(conditions.Verified) || now.Sub(c.CheckedAt) < docCheckLifetime
}

// recordCheck keeps the outcome c of a check in r. A fetch that failed
// does not replace a success for the same agent ID that still stands: a
// transient failure must not drop a bound peer to level 1. It is kept
// beside it (CheckFailure) for people to see. Any other outcome, a
// document that no longer lists the key included, replaces the check.
func recordCheck(r *store.TrustRecord, c store.DocCheck, now time.Time) {
	if old := r.Check; c.Outcome == CheckFetchFailed && old != nil && old.AgentID == c.AgentID &&
		old.Level >= int(conditions.Verified) && checkStands(old, now) {
		r.CheckFailure = &c
		return
	}
	r.Check, r.CheckFailure = &c, nil
}

// Check checks pid's identity document now, for the agent ID of the
// view the peer cache holds, and returns what this daemon then establishes
// about pid; its Check says what the document showed, or why nothing was
// fetched.
func (b *Book) Check(ctx context.Context, pid peer.ID) (Info, error) {
	agentID := ""
	if rec, err := b.store.Peer(pid.String()); err == nil {
		agentID = rec.AgentID
	}
	if agentID == "" {
		info := b.Peer(pid)
		info.Check = &store.DocCheck{Level: int(conditions.Signed), Outcome: CheckNoAgentID, CheckedAt: b.now().UTC(),
			Reason: fmt.Sprintf("greet %s first, so that its agent_id is known (ifaced greet %s)", pid, pid)}
		return info, nil
	}
	sem := b.fetch.sem
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return Info{}, fmt.Errorf("checking %s: %w", pid, ctx.Err())
	}
	defer func() { <-sem }()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(b.ctx, stop)() // the daemon's Close ends the check too
	if _, err := b.runCheck(ctx, pid, agentID); err != nil {
		return Info{}, err
	}
	return b.Peer(pid), nil
}

// runCheck checks pid's document for agentID and keeps the outcome in
// pid's trust record, unless the daemon is closing.
func (b *Book) runCheck(ctx context.Context, pid peer.ID, agentID string) (store.DocCheck, error) {
	c := b.checkDocument(ctx, pid, agentID)
	if b.ctx.Err() != nil {
		return c, fmt.Errorf("checking %s: the daemon is stopping", pid)
	}
	if _, err := b.update(pid, func(r *store.TrustRecord) bool { recordCheck(r, c, b.now()); return true }); err != nil {
		b.log.Warn("recording an identity document check", "peer", pid, "err", err)
		return c, err
	}
	b.log.Info("checked identity document", "peer", pid, "agent_id", agentID, "level", conditions.Level(c.Level),
		"outcome", c.Outcome, "reason", c.Reason)
	return c, nil
}

// checkDocument fetches and judges the identity document of agentID for
// pid's key.
func (b *Book) checkDocument(ctx context.Context, pid peer.ID, agentID string) store.DocCheck {
	c := store.DocCheck{AgentID: agentID, Level: int(conditions.Signed), CheckedAt: b.now().UTC()}
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
		u, err := identity.DIDWebURL(agentID)
		if err != nil {
			return fail(CheckNotFetched, "%v", err)
		}
		c.URL = u
		raw, err := b.fetch.get(ctx, u)
		if err != nil {
			return fail(CheckFetchFailed, "fetching the DID document of %s: %v", agentID, err)
		}
		if err := identity.DIDWebBinds(raw, agentID, pub); err != nil {
			switch {
			case errors.Is(err, identity.ErrDIDMismatch):
				return fail(CheckIDMismatch, "%v", err)
			case errors.Is(err, identity.ErrUnknownKey):
				return fail(CheckKeyNotListed, "%v", err)
			}
			return fail(CheckInvalidDocument, "%v", err)
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
		raw, err := b.fetch.get(ctx, agentID)
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
		if err := doc.ListsKey(pub, b.now(), b.cfg.KeyTransition); err != nil {
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
