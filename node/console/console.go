package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/alias"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/trust"
)

// API is what the console needs of the control API; *api.Client has it.
type API interface {
	Status(ctx context.Context) (*api.Status, error)
	Peers(ctx context.Context) ([]api.Peer, error)
	Peer(ctx context.Context, peer string) (*api.Peer, error)
	PeerCapabilities(ctx context.Context, peer string, refresh bool) (*api.PeerCaps, error)
	OwnDocument(ctx context.Context) (*api.OwnDocument, error)
	AddCapability(ctx context.Context, capability json.RawMessage) (*negotiate.Document, error)
	RemoveCapability(ctx context.Context, name string) (*negotiate.Document, error)
	Seen(ctx context.Context, q api.SeenQuery) (*api.Seen, error)
	Policy(ctx context.Context) (*api.Policy, error)
	SetDisclosure(ctx context.Context, ch api.DisclosureChange) (*api.Policy, error)
	SetTemperature(ctx context.Context, ch api.TemperatureChange) (*api.Policy, error)
	Trust(ctx context.Context) ([]trust.Info, error)
	TrustPeer(ctx context.Context, peer string, a api.TrustAction) (*trust.Info, error)
	PeerTrust(ctx context.Context, peer string) (*trust.Info, error)
	Refusals(ctx context.Context, q api.RefusalQuery) (*api.RefusalList, error)
	Introductions() api.Introductions
	AuditConversations(ctx context.Context, peer string) (*api.AuditList, error)
	Conversations(ctx context.Context) ([]converse.ConversationInfo, error)
	AuditProof(ctx context.Context, sel gossip.BundleSelect) (*gossip.ProofState, error)
	AuditBundle(ctx context.Context, sel gossip.BundleSelect) (*gossip.Bundle, error)
	GetJSON(ctx context.Context, path string, out any) error
	Observe(ctx context.Context) (*api.EventStream, error)
}

var _ API = (*api.Client)(nil)

// Config is what a console is made of.
type Config struct {
	API  API
	Addr string // the control API's loopback TCP address (host:port), where the console is served
	// Home is the data directory, whose aliases.toml names peers; ""
	// shows peers by their display names only.
	Home string
	// Tiers is the daemon's tier order, to check an edited capability
	// before the old one is removed; nil is the standard order.
	Tiers *conditions.TierOrder
	Log   *slog.Logger
	Now   func() time.Time // nil: time.Now
}

// Console is the owner's console (see the package comment): the pages,
// the login and the sessions, and the events it follows for the overview.
type Console struct {
	api     API
	addr    string
	cookie  string // the session cookie's name: one per port, so two daemons on one host keep theirs apart
	aliases *alias.File
	tiers   *conditions.TierOrder
	log     *slog.Logger
	now     func() time.Time

	auth   *sessions
	events *recentEvents
	pages  *renderer
	mux    *http.ServeMux
	done   chan struct{} // closed by Close: the live event streams end

	pageDir  string // where login pages are written (loginpage.go); "" without a data directory
	timersMu sync.Mutex
	timers   map[*time.Timer]struct{} // pending sweeps of expired codes; nil once closed
}

//go:embed templates static
var assets embed.FS

// New makes a console; serve its Handler with api.Server.MountUI, and run
// Follow for its live events.
func New(cfg Config) (*Console, error) {
	if cfg.API == nil {
		return nil, errors.New("making the console: no control API client")
	}
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("making the console: the API address %q: %w", cfg.Addr, err)
	}
	pages, err := newRenderer()
	if err != nil {
		return nil, fmt.Errorf("making the console: %w", err)
	}
	c := &Console{api: cfg.API, addr: cfg.Addr, cookie: "ifaced_ui_" + port, tiers: cfg.Tiers, log: cfg.Log, now: cfg.Now,
		pages: pages, done: make(chan struct{})}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if cfg.Home != "" {
		c.aliases = alias.Open(cfg.Home)
		c.pageDir = filepath.Join(cfg.Home, pageDirName)
	}
	c.auth = newSessions(c.now)
	c.auth.gone = c.removePage
	c.timers = map[*time.Timer]struct{}{}
	c.removeStalePages()
	c.events = newRecentEvents(c.log)
	c.events.namer = c.eventNamer()
	c.routes()
	return c, nil
}

// namesFresh is how long the name a live event's peer is given is reused:
// a flood of events must not cost a lookup each.
const namesFresh = 5 * time.Second

// namedPeers is how many peers' names the live events keep at once.
const namedPeers = 1024

// eventNamer names the peers of events as the owner does: each peer
// looked up alone (GET /v1/peers/{peer}, from the daemon's cache and
// connections, which never asks the peer; and the alias book), the name
// reused for namesFresh, at most namedPeers names kept. It used to read
// the whole peer cache each time an event named a peer not in the last
// reading (at most once a second): with strangers arriving several times
// a second and a cache of thousands, a multi-megabyte read a second (11
// MB of the heap in a profile of a soak at 5,000 strangers).
func (c *Console) eventNamer() func(string) string {
	type named struct {
		name string
		at   time.Time
	}
	var mu sync.Mutex
	names, _ := simplelru.NewLRU[string, named](namedPeers, nil)
	return func(id string) string {
		now := c.now()
		mu.Lock()
		n, ok := names.Get(id)
		mu.Unlock()
		if ok && now.Sub(n.at) >= 0 && now.Sub(n.at) <= namesFresh {
			return n.name
		}
		l := labels{peers: map[string]string{}, aliases: map[string]string{}, byAlias: map[string]string{}}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if p, err := c.api.Peer(ctx, id); err == nil {
			l.peers[id] = p.Display
		}
		if c.aliases != nil {
			if all, err := c.aliases.All(); err == nil {
				for name, pid := range all {
					if pid.String() == id {
						l.aliases[id] = name
					}
				}
			}
		}
		name := l.Name(id)
		mu.Lock()
		names.Add(id, named{name, now})
		mu.Unlock()
		return name
	}
}

// Handler serves the console's paths (api.UIPath and the login code
// endpoint, api.UILoginCodePath); api.Server.MountUI mounts it behind its
// guard.
func (c *Console) Handler() http.Handler { return c.mux }

// Follow keeps the overview's recent events from the daemon's event
// stream until ctx ends.
func (c *Console) Follow(ctx context.Context) { c.events.follow(ctx, c.api.Observe) }

// Close ends the live event streams of the pages, and removes the login
// pages not used yet.
func (c *Console) Close() {
	select {
	case <-c.done:
	default:
		close(c.done)
		c.stopSweeps()
		c.auth.dropCodes()
	}
}

func (c *Console) routes() {
	mux := http.NewServeMux()
	c.mux = mux
	// Behind the API's token (api.Server.MountUI).
	mux.HandleFunc("POST "+api.UILoginCodePath, c.mintCode)
	// Without a session: the assets and logging in.
	mux.HandleFunc("GET /ui/static/{file}", c.static)
	mux.HandleFunc("GET /ui/login", c.login)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, api.UIPath, http.StatusSeeOther) })
	// With one.
	mux.Handle("GET /ui/{$}", c.page(c.overview))
	mux.Handle("GET /ui/events", c.page(c.live))
	mux.Handle("POST /ui/logout", c.change(c.logout))
	peers := &peerPages{c: c}
	mux.Handle("GET /ui/peers", c.page(peers.list))
	mux.Handle("GET /ui/peers/{peer}", c.page(peers.one))
	caps := &capPages{c: c}
	mux.Handle("GET /ui/caps", c.page(caps.list))
	mux.Handle("POST /ui/caps/add", c.change(caps.add))
	mux.Handle("POST /ui/caps/remove", c.change(caps.remove))
	mux.Handle("GET /ui/caps/edit/{name}", c.page(caps.edit))
	mux.Handle("POST /ui/caps/edit/{name}", c.change(caps.save))
	policy := &policyPages{c: c}
	mux.Handle("GET /ui/policy", c.page(policy.show))
	mux.Handle("POST /ui/policy/disclosure", c.change(policy.disclosure))
	mux.Handle("POST /ui/policy/temperature", c.change(policy.temperature))
	tr := &trustPages{c: c}
	mux.Handle("GET /ui/trust", c.page(tr.show))
	mux.Handle("POST /ui/trust/pin", c.change(tr.pin))
	mux.Handle("POST /ui/trust/revoke", c.change(tr.revoke))
	mux.Handle("POST /ui/trust/check", c.change(tr.check))
	mux.Handle("POST /ui/intros", c.change(tr.mint))
	mux.Handle("POST /ui/intros/revoke", c.change(tr.revokeIntro))
	audit := &auditPages{c: c}
	mux.Handle("GET /ui/audit", c.page(audit.list))
	mux.Handle("GET /ui/audit/c/{id}", c.page(audit.conversation))
	mux.Handle("GET /ui/audit/c/{id}/bundle", c.page(audit.bundle))
	mux.Handle("GET /ui/audit/why/{id}", c.page(audit.why))
	mux.Handle("GET /ui/audit/refusals", c.page(audit.refusals))
	mux.Handle("/ui/", c.page(func(w http.ResponseWriter, r *http.Request, v *visit) {
		c.fail(w, v, http.StatusNotFound, fmt.Sprintf("%s %s: the console has no such page", r.Method, r.URL.Path))
	}))
}

// visit is one request of a logged-in browser.
type visit struct {
	r    *http.Request
	tok  string // the session cookie's value
	csrf string
}

type pageFunc func(w http.ResponseWriter, r *http.Request, v *visit)

// secure sets the headers every answer of the console carries.
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// page admits a request with a live session.
func (c *Console) page(h pageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		ck, err := r.Cookie(c.cookie)
		var csrf string
		ok := err == nil
		if ok {
			csrf, ok = c.auth.open(ck.Value)
		}
		if !ok {
			c.pages.render(w, http.StatusUnauthorized, "login", &pageData{Title: "Log in",
				Error: "Not logged in, or the session ended (sessions end after 12 hours idle and when the daemon restarts): nothing was shown or changed. " +
					"Run `ifaced ui` on this machine for a login link.", D: loginData{}})
			return
		}
		h(w, r, &visit{r: r, tok: ck.Value, csrf: csrf})
	})
}

// change admits a form post: a live session and its CSRF token.
func (c *Console) change(h pageFunc) http.Handler {
	return c.page(func(w http.ResponseWriter, r *http.Request, v *visit) {
		if err := r.ParseForm(); err != nil {
			c.fail(w, v, http.StatusBadRequest, "reading the form: "+err.Error()+": nothing was changed")
			return
		}
		if !c.auth.checkCSRF(v.tok, r.PostFormValue("csrf")) {
			c.fail(w, v, http.StatusForbidden, "refused: the form's CSRF token is missing or is not this session's, so nothing was changed. "+
				"Reload the page and submit the form again.")
			return
		}
		h(w, r, v)
	})
}

// fail renders a refusal on a page of its own.
func (c *Console) fail(w http.ResponseWriter, v *visit, status int, msg string) {
	c.pages.render(w, status, "message", &pageData{Title: http.StatusText(status), CSRF: v.csrf, Error: msg})
}

// changed redirects to a page after a change, with a notice for it.
func (c *Console) changed(w http.ResponseWriter, v *visit, to string, n notice) {
	c.auth.setNotice(v.tok, n)
	http.Redirect(w, v.r, to, http.StatusSeeOther)
}

// data is the frame of a page for v.
func (c *Console) data(v *visit, title, nav string, d any) *pageData {
	return &pageData{Title: title, Nav: nav, CSRF: v.csrf, Notice: c.auth.takeNotice(v.tok), D: d}
}

// apiStatus is the status to answer with when an API call failed: the
// API's own for a refusal of the request (4xx), 502 otherwise.
func apiStatus(err error) int {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
		return ae.Status
	}
	return http.StatusBadGateway
}

type loginData struct{ Code bool }

// login exchanges a code (in the query, or posted by the login page) for
// a session, and redirects to the overview.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	secure(w)
	code := r.URL.Query().Get("code")
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil {
			c.pages.render(w, http.StatusBadRequest, "login", &pageData{Title: "Log in", Error: "reading the form: " + err.Error(), D: loginData{}})
			return
		}
		code = r.PostFormValue("code")
	}
	if code == "" {
		c.pages.render(w, http.StatusOK, "login", &pageData{Title: "Log in", D: loginData{}})
		return
	}
	tok, ok, err := c.auth.redeem(code)
	if err != nil {
		c.pages.render(w, http.StatusInternalServerError, "login", &pageData{Title: "Log in", Error: err.Error(), D: loginData{}})
		return
	}
	if !ok {
		c.pages.render(w, http.StatusUnauthorized, "login", &pageData{Title: "Log in", D: loginData{Code: true},
			Error: "This login link is not valid: it was used already, it expired (a link works for 60 seconds), or it was mistyped. Run `ifaced ui` for a new one."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: c.cookie, Value: tok, Path: api.UIPath, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, api.UIPath, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, v *visit) {
	c.auth.end(v.tok)
	http.SetCookie(w, &http.Cookie{Name: c.cookie, Value: "", Path: api.UIPath, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// static serves the embedded style sheet, script and icon.
func (c *Console) static(w http.ResponseWriter, r *http.Request) {
	secure(w)
	name := r.PathValue("file")
	b, err := fs.ReadFile(assets, path.Join("static", path.Base(name)))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	default:
		http.NotFound(w, r)
		return
	}
	w.Write(b)
}

// live streams the recent events to the overview's script.
func (c *Console) live(w http.ResponseWriter, r *http.Request, v *visit) {
	c.events.serveLive(w, r, c.done, 30*time.Second)
}

// overviewData is the overview page's.
type overviewData struct {
	Status        *api.Status
	Direct, Relay int
	Reach         []string
	Peers         int
	Events        []shownEvent
	EventsStatus  string
	Sessions      int
	Labels        labels
	AsOf          time.Time // the counts are as of this load
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	st, err := c.api.Status(ctx)
	if err != nil {
		c.fail(w, v, apiStatus(err), "reading the daemon's status: "+err.Error())
		return
	}
	d := overviewData{Status: st, Sessions: c.auth.count(), Labels: c.labels(ctx), AsOf: c.now()}
	d.Peers = len(d.Labels.peers)
	for _, cn := range st.Connections {
		if cn.Via == "relay" {
			d.Relay++
		} else {
			d.Direct++
		}
	}
	d.Reach = reachability(st)
	d.Events, d.EventsStatus = c.events.recent()
	c.pages.render(w, http.StatusOK, "overview", c.data(v, "Overview", "overview", d))
}

// reachability says, from the status alone, how peers can reach this
// daemon: its addresses, the relay slots it holds, whether it relays.
func reachability(st *api.Status) []string {
	var public, circuit, private int
	for _, a := range st.Addrs {
		switch {
		case containsCircuit(a):
			circuit++
		case publicAddr(a):
			public++
		default:
			private++
		}
	}
	var out []string
	switch {
	case public > 0:
		out = append(out, fmt.Sprintf("%d public address(es): peers can dial this daemon directly, if no firewall is in the way", public))
	case private > 0:
		out = append(out, fmt.Sprintf("only loopback or private addresses (%d): peers outside this network reach it only through a relay", private))
	}
	if len(st.RelaySlots) > 0 {
		out = append(out, fmt.Sprintf("holds a slot on %d relay(s), advertised as %d /p2p-circuit address(es): reachable through them behind a NAT", len(st.RelaySlots), circuit))
	} else {
		out = append(out, "holds no relay slot ([relay] use names none, or none is reserved yet)")
	}
	if st.RelayService {
		out = append(out, "serves circuit relay v2 to others ([relay] service)")
	}
	return out
}
