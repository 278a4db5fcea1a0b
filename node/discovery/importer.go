package discovery

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/events"
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

// importer keeps the imported outside agents: it fetches and converts
// their documents, refreshes them, and reports those naming a capability
// to Find. Its state is the store's; an importer is cheap to build.
type importer struct {
	store   importStore
	timeout time.Duration // one fetch
	events  eventSink
	now     func() time.Time
	log     *slog.Logger
}

// importStore is where imports are kept (node/store).
type importStore interface {
	Put(store.ImportRecord) error
	Get(url string) (store.ImportRecord, error)
	All() ([]store.ImportRecord, error)
	Delete(url string) error
}

// newImporter keeps imports in st, fetching each within timeout.
func newImporter(st importStore, timeout time.Duration, evs eventSink, now func() time.Time, log *slog.Logger) *importer {
	return &importer{store: st, timeout: timeout, events: evs, now: now, log: log}
}

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
func (d *Discovery) Import(ctx context.Context, rawURL string) (store.ImportRecord, error) {
	return d.imports.add(ctx, rawURL)
}

// Imports lists the imported agents.
func (d *Discovery) Imports() ([]store.ImportRecord, error) { return d.imports.store.All() }

// RemoveImport forgets an imported agent.
func (d *Discovery) RemoveImport(u string) error { return d.imports.store.Delete(u) }

// add fetches and keeps the outside agent at rawURL.
func (im *importer) add(ctx context.Context, rawURL string) (store.ImportRecord, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return store.ImportRecord{}, fmt.Errorf("%w: %q is not an http(s) URL", ErrImport, rawURL)
	}
	rec, err := im.fetch(ctx, u.String())
	if err != nil {
		return store.ImportRecord{}, err
	}
	if err := im.store.Put(rec); err != nil {
		return store.ImportRecord{}, err
	}
	im.events.Publish(events.Event{Type: events.EventPeerView, At: im.now(), Detail: fmt.Sprintf("imported %s (%s, %s)", rec.URL, rec.Format, signedWord(rec.Signed))})
	return im.store.Get(rec.URL)
}

func signedWord(signed bool) string {
	if signed {
		return "JWS verified, self-signed"
	}
	return "unsigned"
}

// fetch fetches the document at u and converts it.
func (im *importer) fetch(ctx context.Context, u string) (store.ImportRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, im.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return store.ImportRecord{}, fmt.Errorf("%w: %v", ErrImport, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := importClient(im.timeout).Do(req)
	var ne net.Error
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		// The request's deadline and the client's timeout are the same;
		// whichever fires first, it is one thing to the owner.
		return store.ImportRecord{}, fmt.Errorf("%w: fetching %s: no answer within the %s timeout", ErrImport, u, im.timeout)
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
	now := im.now()
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

// refreshLoop refreshes every import each interval (discovery.import_refresh)
// until ctx ends.
func (im *importer) refreshLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			im.refresh(ctx)
		}
	}
}

// refresh fetches every import again; a failed fetch keeps the last good
// document and records the error.
func (im *importer) refresh(ctx context.Context) {
	recs, err := im.store.All()
	if err != nil {
		im.log.Warn("reading imports", "err", err)
		return
	}
	for _, old := range recs {
		if ctx.Err() != nil {
			return
		}
		rec, err := im.fetch(ctx, old.URL)
		if err != nil {
			old.LastError = err.Error()
			rec = old
			im.log.Info("refreshing an import failed; keeping the last good document", "url", old.URL, "err", err)
		}
		if err := im.store.Put(rec); err != nil {
			im.log.Warn("storing an import", "url", old.URL, "err", err)
		}
	}
}

// providers are the imports whose document names capability.
func (im *importer) providers(capability string) []FindResult {
	recs, err := im.store.All()
	if err != nil {
		im.log.Warn("reading imports", "err", err)
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
