// Package metrics is the daemon's Prometheus exposition: one registry per
// daemon (several daemons run in one test process, so nothing goes on the
// client library's global registry), holding the Go runtime's and the
// process's collectors and one collector of ifaced's own figures, served
// at GET /metrics on the control API behind its token (node/api) and, when
// metrics.listen names an address, on a listener of its own without the
// token, for a scraper (New starts it; Close stops it).
//
// Decision: the components do not import the client library or hold a
// registry. Each counts what it owns in atomic tallies (node/internal/tally)
// or answers from its own state (a map's length, the audit log's byte
// count), and exposes the read side through a small method; this package
// declares the interface it reads each component through (Deps) and turns
// it into metrics at scrape time, in Collect. So the walls stay where
// DESIGN §3 puts them — no component reaches another's figures, and the
// names, help texts and labels of every family live in one place (this
// file) — and the path that counts is one atomic add, with no lock and no
// label lookup: the labels are indexes into fixed lists, turned into
// strings only when a scraper asks. What is read at scrape time (the
// connected peers, a bucket's key count in the store, the pubsub topic's
// peers) costs the scraper's request, not a message's.
//
// Labels have low cardinality by construction: directions, kinds, door
// steps, wire codes from the wire-code table, shares. No peer ID,
// conversation ID or text a peer wrote is ever a label value.
//
// The families, with their types and labels, are listed in docs/metrics.md.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/internal/costlru"
	"github.com/ifaced/ifaced/node/internal/tally"
	"github.com/ifaced/ifaced/node/mail"
	"github.com/ifaced/ifaced/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Door is the admission pipeline's figures (node/admit's Door).
type Door interface {
	Latencies() tally.Latencies // each step timed
	Refusals() tally.Counts     // by step and wire code
}

// Budget is the decoding budget (node/admit's Budget).
type Budget interface {
	Size() (all, strangers int64)
	Used() (all, strangers int64)
}

// Conversations is the conversation table's figures (node/converse).
type Conversations interface {
	Greetings() tally.Counts // by direction, kind and outcome
	Requested() tally.Counts // capability requests sent, by outcome
	OpenCount() int
	GreetedPeers() int
}

// Invocations is the capability requests served (node/invoke's Invoker).
type Invocations interface {
	Served() tally.Counts // by outcome
}

// AuditLog is the audit log's use of its quota (gossip.AuditLog).
type AuditLog interface {
	Usage() int64
	StrangersUsage() int64
}

// Store is the store file (node/store).
type Store interface {
	Size() (int64, error)
}

// Mail is the relay and the mail queues (node/mail).
type Mail interface {
	RelayFigures() mail.RelayFigures
	Queues() (store.Queues, error)
}

// Discovery is the DHT and the announcement topic (node/discovery).
type Discovery interface {
	RoutingTableSize() (int, bool)
	GossipPeers() (subscribed, mesh int, on bool)
}

// Peers are the host's connected peers (the host's network.Network).
type Peers interface {
	Peers() []peer.ID
}

// Memory is one of the bounded memories of what peers make the daemon
// remember (views, records, memos of canonical forms), read at scrape
// time: its entries, the bytes they are counted as, and its budget.
type Memory struct {
	Name string // a fixed label value: peer_records, held_views, …
	Fill func() costlru.Fill
}

// Deps is what New reads the figures from, and where it listens.
type Deps struct {
	Door          Door
	Budget        Budget
	Conversations Conversations
	Invocations   Invocations
	Audit         AuditLog
	AuditQuota    int64 // audit.max_mb, in bytes
	StrangerShare int64 // the strangers' part of AuditQuota (gossip.StrangerShare)
	Store         Store
	Mail          Mail
	Discovery     Discovery
	Peers         Peers
	Memories      []Memory
	// Config is the [metrics] table: an address to serve GET /metrics on
	// without the token ("" serves it on the control API only), and
	// whether it may be other than loopback.
	Config config.MetricsConfig
	Log    *slog.Logger
}

// Metrics is the daemon's registry and its exposition.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	log     *slog.Logger
	srv     *http.Server // the scraper's listener; nil when metrics.listen is ""
	addr    string
}

// New builds the daemon's registry: the Go runtime's collector, the
// process's, and ifaced's own (the figures d reads). With d.Listen it
// also serves them there, and refuses an address that is not loopback
// unless d.Config.AllowRemote.
func New(d Deps) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newFigures(d),
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	m := &Metrics{reg: reg, log: d.Log}
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      errorLog{d.Log},
		ErrorHandling: promhttp.ContinueOnError, // a figure that could not be read is left out, and logged
		// Each scrape reads the store and walks the connected peers: a
		// local process polling the scraper's listener in a loop gets 503
		// beyond this, not the daemon's time.
		MaxRequestsInFlight: 2,
		Timeout:             10 * time.Second,
	})
	if d.Config.Listen != "" {
		if err := m.listen(d.Config); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Handler serves the exposition (GET /metrics): text format, or what the
// scraper's Accept header asks for among what the client library offers.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Gatherer is the registry, for a test to read the figures without HTTP.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// Addr is the scraper's listener's bound address; "" when metrics.listen
// is "" (the default: the figures are on the control API only).
func (m *Metrics) Addr() string { return m.addr }

// Path is where both listeners serve the exposition.
const Path = "/metrics"

// listen serves the exposition at Path on c.Listen, without the token.
func (m *Metrics) listen(c config.MetricsConfig) error {
	if err := c.CheckListen(); err != nil {
		return fmt.Errorf("metrics.listen: %w", err)
	}
	addr, allowRemote := c.Listen, c.AllowRemote
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics.listen: starting the metrics listener on %s: %w", addr, err)
	}
	bound := ln.Addr().String()
	if ap, err := netip.ParseAddrPort(bound); !allowRemote && (err != nil || !ap.Addr().Unmap().IsLoopback()) {
		ln.Close()
		return fmt.Errorf("metrics.listen: %s bound to %s, which is not loopback; set metrics.allow_remote = true to serve the figures beyond this machine", addr, bound)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, m.handler)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10,
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelDebug)}
	m.addr = bound
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("metrics listener stopped", "err", err)
		}
	}()
	m.log.Info("serving metrics without the token", "addr", bound, "path", Path)
	return nil
}

// Close stops the scraper's listener, if there is one.
func (m *Metrics) Close() error {
	if m.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("stopping the metrics listener: %w", err)
	}
	return nil
}

// errorLog is promhttp's error log, through the daemon's logger.
type errorLog struct{ log *slog.Logger }

func (l errorLog) Println(v ...any) { l.log.Warn("serving metrics", "err", fmt.Sprint(v...)) }
