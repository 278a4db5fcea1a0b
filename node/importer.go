package node

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
)

// Importing outside agents (ifaced import URL): the owner names the URL
// of an AG-UI /capabilities, an A2A agent card or an orchestrator
// /capabilities, and the daemon fetches it, converts it to IFP-7 form
// (negotiate.Import) and keeps it, marked with its source and whether a
// signature verified, beside (not in) the peer cache. `ifaced find`
// includes imports whose document names the capability.
//
// The owner chose the URL, so unlike identity document fetches (which
// peers name) it may be http and on a private network: an AG-UI server on
// localhost is the common case. What comes back is still hostile until
// proven otherwise: at most negotiate.MaxImportSize bytes, one timeout for
// the whole exchange, and no redirect to another host (the error names
// the target, so the owner can import that URL instead if it trusts it).
// Imports are refreshed every discovery.import_refresh; a failed refresh
// keeps the last good document and records the error.

// ErrImport wraps a failed import.
var ErrImport = errors.New("import failed")

const (
	// defaultImportTimeout bounds one fetch.
	defaultImportTimeout = 15 * time.Second
	// maxRedirects bounds the redirects one fetch follows.
	maxRedirects = 5
)

// WithImportTimeout shortens the fetch timeout (tests).
func WithImportTimeout(d time.Duration) Option { return func(n *Node) { n.importTimeout = d } }

func importClient(importTimeout time.Duration) *http.Client {
	return &http.Client{Timeout: importTimeout,
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: importTimeout,
			MaxResponseHeaderBytes: 64 << 10, DisableKeepAlives: true},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != via[0].URL.Scheme {
				return fmt.Errorf("redirected from %s to %s; import that URL instead if you trust it", via[0].URL.Scheme, req.URL.Redacted())
			}
			if req.URL.Host != via[0].URL.Host {
				return fmt.Errorf("redirected to another host, %s; import that URL instead if you trust it", req.URL.Redacted())
			}
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			return nil
		}}
}

// Import fetches and keeps the outside agent at rawURL.
func (n *Node) Import(ctx context.Context, rawURL string) (store.ImportRecord, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return store.ImportRecord{}, fmt.Errorf("%w: %q is not an http(s) URL", ErrImport, rawURL)
	}
	rec, err := n.fetchImport(ctx, u.String())
	if err != nil {
		return store.ImportRecord{}, err
	}
	if err := n.store.PutImport(rec); err != nil {
		return store.ImportRecord{}, err
	}
	n.events.publish(Event{Type: EventPeerView, At: n.now(), Detail: fmt.Sprintf("imported %s (%s, %s)", rec.URL, rec.Format, signedWord(rec.Signed))})
	return n.store.Import(rec.URL)
}

func signedWord(signed bool) string {
	if signed {
		return "JWS verified, self-signed"
	}
	return "unsigned"
}

func (n *Node) fetchImport(ctx context.Context, u string) (store.ImportRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, n.importTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return store.ImportRecord{}, fmt.Errorf("%w: %v", ErrImport, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := importClient(n.importTimeout).Do(req)
	var ne net.Error
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		// The request's deadline and the client's timeout are the same;
		// whichever fires first, it is one thing to the owner.
		return store.ImportRecord{}, fmt.Errorf("%w: fetching %s: no answer within the %s timeout", ErrImport, u, n.importTimeout)
	default:
		return store.ImportRecord{}, fmt.Errorf("%w: fetching %s: %v", ErrImport, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return store.ImportRecord{}, fmt.Errorf("%w: %s answered %s", ErrImport, u, resp.Status)
	}
	if resp.ContentLength > negotiate.MaxImportSize {
		return store.ImportRecord{}, fmt.Errorf("%w: %s is %d bytes, over the %d-byte limit", ErrImport, u, resp.ContentLength, negotiate.MaxImportSize)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, negotiate.MaxImportSize+1))
	if err != nil {
		return store.ImportRecord{}, fmt.Errorf("%w: reading %s: %v", ErrImport, u, err)
	}
	if len(raw) > negotiate.MaxImportSize {
		return store.ImportRecord{}, fmt.Errorf("%w: %s is over the %d-byte limit", ErrImport, u, negotiate.MaxImportSize)
	}
	imp, err := negotiate.Import(raw, u, resolveCardKey)
	if err != nil {
		return store.ImportRecord{}, fmt.Errorf("%w: %v", ErrImport, err)
	}
	view, err := json.Marshal(imp.Document)
	if err != nil {
		return store.ImportRecord{}, fmt.Errorf("%w: %v", ErrImport, err)
	}
	sum := sha256.Sum256(raw)
	now := n.now()
	return store.ImportRecord{URL: u, Format: imp.Format, Name: imp.Name, Signed: imp.Signed, Note: imp.Note,
		View: view, Hash: hex.EncodeToString(sum[:]), FetchedAt: now, ChangedAt: now}, nil
}

// resolveCardKey resolves an A2A signature's kid: a did:key key ID names
// its key; other kinds would need a fetch this daemon does not make for
// an outside card.
func resolveCardKey(kid string) (ed25519.PublicKey, error) {
	pub, err := identity.PublicKeyFromKeyID(kid)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not a did:key key ID", negotiate.ErrAgentCardUnknownKey, kid)
	}
	return pub, nil
}

// Imports lists the imported agents.
func (n *Node) Imports() ([]store.ImportRecord, error) { return n.store.Imports() }

// RemoveImport forgets an imported agent.
func (n *Node) RemoveImport(u string) error { return n.store.DeleteImport(u) }

// refreshImports refreshes every import each discovery.import_refresh.
func (n *Node) refreshImports() {
	t := time.NewTicker(n.cfg.Discovery.ImportRefresh.Duration)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.refreshImportsOnce()
		}
	}
}

func (n *Node) refreshImportsOnce() {
	recs, err := n.store.Imports()
	if err != nil {
		n.log.Warn("reading imports", "err", err)
		return
	}
	for _, old := range recs {
		if n.ctx.Err() != nil {
			return
		}
		rec, err := n.fetchImport(n.ctx, old.URL)
		if err != nil {
			old.LastError = err.Error()
			rec = old
			n.log.Info("refreshing an import failed; keeping the last good document", "url", old.URL, "err", err)
		}
		if err := n.store.PutImport(rec); err != nil {
			n.log.Warn("storing an import", "url", old.URL, "err", err)
		}
	}
}

// importedProviders are the imports whose document names capability.
func (n *Node) importedProviders(capability string) []FindResult {
	recs, err := n.store.Imports()
	if err != nil {
		n.log.Warn("reading imports", "err", err)
		return nil
	}
	var out []FindResult
	for _, rec := range recs {
		var view negotiate.Document
		if err := json.Unmarshal(rec.View, &view); err != nil {
			continue
		}
		c, ok := view.Capability(capability)
		if !ok {
			continue
		}
		r := FindResult{AgentID: rec.URL, Display: rec.Name, Status: FindImported, Capability: c,
			Source: rec.URL, Format: rec.Format, Signed: rec.Signed}
		if rec.Note != "" {
			r.Why = []string{rec.Note}
		}
		out = append(out, r)
	}
	return out
}
