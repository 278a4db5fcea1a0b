// Command dhtnode is one node of the network lab's DHT: ifaced's capability
// DHT (capdht.DHT: the daemon's own kad-dht configuration, bounded
// provider store, provide loop and provider lookup) on a libp2p host of its
// own, and nothing else of the daemon — no documents, conversations,
// store, GossipSub or mDNS. It lets interop/netlab run 500 DHT nodes as
// separate processes where 500 full daemons (40 to 55 MB each) do not fit
// in one machine; the lab's full-daemon discovery test covers the rest of
// Find (asking each provider for its view).
//
// The host is kept small: TCP only, Noise, yamux, no relay, no metrics, a
// resource manager scaled to -max-memory-mb, and the connection manager's
// water marks of a daemon (limits.connections_low/high by default).
//
// Configuration comes from flags; each flag can also be given in the
// environment as IFACED_DHTNODE_<FLAG> (upper case, '-' as '_'), which a
// flag on the command line overrides. A fresh Ed25519 key is made at every
// start.
//
// Control channel: the parent talks to it over stdin and stdout, one JSON
// object a line (so nothing of it listens on a socket). Once the DHT runs,
// the first line on stdout is
//
//	{"peer_id": "12D3…", "addrs": ["/ip6/…/tcp/4817/p2p/12D3…"]}
//
// Then every request line on stdin gets one answer line carrying its id;
// requests run concurrently, so answers may come in any order:
//
//	{"id": 1, "op": "provide", "names": ["a.b"]}       → {"id": 1}
//	{"id": 2, "op": "status"}                           → {"id": 2, "routing_table": 23, "provided": ["a.b"], "conns": 40}
//	{"id": 3, "op": "find", "name": "a.b", "want": "12D3…", "limit": 3}
//	  → {"id": 3, "providers": ["12D3…"], "found": true, "hops": 2, "lookup_ms": 41.2, "dial_ms": 0.3}
//
// A find runs capdht.DHT.FindProviders (the lookup of `ifaced
// find`); when want is among the providers it then connects to want at the
// record's addresses, and found is true only if that worked. hops is the
// depth, in the lookup, of the peer whose answer carried want's record:
// peers from the routing table are depth 1, peers named in a depth-h
// answer depth h+1 (kad-dht's query events), 0 when this node held the
// record itself, -1 when unknown; which peer answered with the record is
// read from kad-dht's trace event "found provider", caught by a tracer
// this program installs (kad-dht reports it nowhere else). A request that
// fails answers {"id": N, "error": "…"}. The program ends on SIGTERM,
// SIGINT or the end of stdin, closing the DHT and the host.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/capdht"
	"github.com/ifaced/ifaced/node/config"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/routing"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"go.opentelemetry.io/otel"
)

// flags is what the command line sets.
type flags struct {
	listen      string
	dht         string
	bootstrap   string
	provide     string
	reprovide   time.Duration
	connsLow    int
	connsHigh   int
	maxMemoryMB int
	logLevel    string
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dhtnode:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return fmt.Errorf("-log %q: want debug, info, warn or error", cfg.logLevel)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	otel.SetTracerProvider(tracerProvider{})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	h, err := newHost(cfg)
	if err != nil {
		return err
	}
	defer h.Close()
	disc := config.DefaultConfig().Discovery
	disc.DHT, disc.Reprovide.Duration = cfg.dht, cfg.reprovide
	disc.Bootstrap = splitList(cfg.bootstrap)
	names := &provided{}
	if err := names.set(splitList(cfg.provide)); err != nil {
		return err
	}
	d, err := capdht.New(ctx, h, disc, names.get, time.Now, log)
	if err != nil {
		return err
	}
	defer d.Close()

	out := &lineWriter{w: stdout}
	ready := struct {
		PeerID string   `json:"peer_id"`
		Addrs  []string `json:"addrs"`
	}{PeerID: h.ID().String()}
	for _, a := range h.Addrs() {
		ready.Addrs = append(ready.Addrs, a.String()+"/p2p/"+h.ID().String())
	}
	if err := out.write(ready); err != nil {
		return err
	}
	s := &server{h: h, d: d, names: names, out: out}
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil // the parent is gone
			}
			wg.Go(func() { s.handle(ctx, line) })
		}
	}
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	def := config.DefaultConfig()
	var c flags
	fs := flag.NewFlagSet("dhtnode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", "/ip4/127.0.0.1/tcp/0", "TCP multiaddr to listen on")
	fs.StringVar(&c.dht, "dht", config.DHTServer, "DHT mode: auto, server or client (discovery.dht)")
	fs.StringVar(&c.bootstrap, "bootstrap", "", "comma-separated bootstrap multiaddrs ending in /p2p/<peer ID> (discovery.bootstrap)")
	fs.StringVar(&c.provide, "provide", "", "comma-separated capability names to provide from the start")
	fs.DurationVar(&c.reprovide, "reprovide", def.Discovery.Reprovide.Duration, "how often every record is sent again (discovery.reprovide)")
	fs.IntVar(&c.connsLow, "conns-low", def.Limits.ConnectionsLow, "connection manager low water mark (limits.connections_low)")
	fs.IntVar(&c.connsHigh, "conns-high", def.Limits.ConnectionsHigh, "connection manager high water mark (limits.connections_high)")
	fs.IntVar(&c.maxMemoryMB, "max-memory-mb", 64, "memory the resource manager may hand to connections and streams, MB")
	fs.StringVar(&c.logLevel, "log", "warn", "log level on stderr: debug, info, warn or error")
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		env := "IFACED_DHTNODE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(f.Name, v); err != nil && envErr == nil {
				envErr = fmt.Errorf("%s=%q: %w", env, v, err)
			}
		}
	})
	if envErr != nil {
		return c, envErr
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: every setting is a flag (-h lists them)", fs.Arg(0))
	}
	switch {
	case c.connsLow <= 0 || c.connsHigh < c.connsLow:
		return c, fmt.Errorf("-conns-low %d, -conns-high %d: want 0 < low <= high, e.g. %d and %d",
			c.connsLow, c.connsHigh, def.Limits.ConnectionsLow, def.Limits.ConnectionsHigh)
	case c.maxMemoryMB < 16:
		return c, fmt.Errorf("-max-memory-mb %d: want at least 16", c.maxMemoryMB)
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// newHost is a TCP-only libp2p host with a resource manager scaled to
// -max-memory-mb and room for every connection the connection manager
// may keep, as the daemon sizes its own (node/p2phost/host.go).
func newHost(c flags) (host.Host, error) {
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, fmt.Errorf("making a key: %w", err)
	}
	scaling := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&scaling)
	concrete := scaling.Scale(int64(c.maxMemoryMB)<<20, 1024)
	conns := rcmgr.LimitVal(2 * c.connsHigh)
	concrete = rcmgr.PartialLimitConfig{
		System:    rcmgr.ResourceLimits{Conns: conns, ConnsInbound: conns, ConnsOutbound: conns, FD: 1024},
		Transient: rcmgr.ResourceLimits{Conns: conns, ConnsInbound: conns, ConnsOutbound: conns},
	}.Build(concrete)
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(concrete))
	if err != nil {
		return nil, fmt.Errorf("creating resource manager: %w", err)
	}
	cm, err := connmgr.NewConnManager(c.connsLow, c.connsHigh)
	if err != nil {
		rm.Close()
		return nil, fmt.Errorf("creating connection manager: %w", err)
	}
	h, err := libp2p.New(
		libp2p.Identity(key),
		libp2p.ListenAddrStrings(c.listen),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
	)
	if err != nil {
		rm.Close()
		cm.Close()
		return nil, fmt.Errorf("starting libp2p host on %s: %w", c.listen, err)
	}
	return h, nil
}

// lineWriter writes one JSON object a line, whole lines only.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding an answer: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing an answer: %w", err)
	}
	return nil
}

// request is one line of the control channel (see the package comment).
type request struct {
	ID    int      `json:"id"`
	Op    string   `json:"op"`
	Names []string `json:"names,omitempty"` // provide
	Name  string   `json:"name,omitempty"`  // find
	Want  string   `json:"want,omitempty"`  // find
	Limit int      `json:"limit,omitempty"` // find
}

// answer is one answer line; the fields beyond id and error are the op's.
type answer struct {
	ID    int    `json:"id"`
	Error string `json:"error,omitempty"`
	// status
	RoutingTable *int     `json:"routing_table,omitempty"`
	Provided     []string `json:"provided,omitempty"`
	Conns        *int     `json:"conns,omitempty"`
	// find
	Providers []string `json:"providers,omitempty"`
	Found     bool     `json:"found,omitempty"`
	Hops      *int     `json:"hops,omitempty"`
	LookupMS  float64  `json:"lookup_ms,omitempty"`
	DialMS    float64  `json:"dial_ms,omitempty"`
}

// server answers the control channel's requests.
type server struct {
	h     host.Host
	d     *capdht.DHT
	names *provided
	out   *lineWriter
}

// dialTimeout bounds the connection to a found provider.
const dialTimeout = 10 * time.Second

func (s *server) handle(ctx context.Context, line []byte) {
	var req request
	var a answer
	if err := json.Unmarshal(line, &req); err != nil {
		a.Error = fmt.Sprintf("reading request %.80q: %v; want one JSON object a line, e.g. {\"id\":1,\"op\":\"status\"}", line, err)
		s.out.write(a)
		return
	}
	a.ID = req.ID
	switch req.Op {
	case "provide":
		if err := s.names.set(req.Names); err != nil {
			a.Error = err.Error()
			break
		}
		s.d.Changed()
	case "status":
		rt, conns := s.d.RoutingTableSize(), len(s.h.Network().Conns())
		a.RoutingTable, a.Conns, a.Provided = &rt, &conns, slices.Sorted(maps.Keys(s.d.Provided()))
	case "find":
		s.find(ctx, req, &a)
	default:
		a.Error = fmt.Sprintf("op %q: want provide, status or find", req.Op)
	}
	s.out.write(a)
}

// find looks name up and, when want is among the providers, connects to it.
func (s *server) find(ctx context.Context, req request, a *answer) {
	want, err := peer.Decode(req.Want)
	if req.Want != "" && err != nil {
		a.Error = fmt.Sprintf("want %q: not a peer ID: %v", req.Want, err)
		return
	}
	lt := &lookupTrace{from: map[string]string{}}
	qctx, cancel := context.WithCancel(context.WithValue(ctx, lookupKey{}, lt))
	qctx, events := routing.RegisterForQueryEvents(qctx)
	depth := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range events {
			id := e.ID.String()
			switch e.Type {
			case routing.SendingQuery:
				if _, ok := depth[id]; !ok {
					depth[id] = 1 // from the routing table
				}
			case routing.PeerResponse:
				for _, ai := range e.Responses {
					if _, ok := depth[ai.ID.String()]; !ok {
						depth[ai.ID.String()] = depth[id] + 1
					}
				}
			}
		}
	}()
	start := time.Now()
	provs, err := s.d.FindProviders(qctx, req.Name, req.Limit)
	a.LookupMS = ms(time.Since(start))
	cancel()
	<-done
	if err != nil {
		a.Error = err.Error()
		return
	}
	var target *peer.AddrInfo
	for i, p := range provs {
		a.Providers = append(a.Providers, p.ID.String())
		if p.ID == want {
			target = &provs[i]
		}
	}
	if target == nil {
		return
	}
	hops := -1
	if from, ok := lt.source(want.String()); ok {
		if from == s.h.ID().String() {
			hops = 0
		} else if d, ok := depth[from]; ok {
			hops = d
		}
	}
	a.Hops = &hops
	dctx, dcancel := context.WithTimeout(ctx, dialTimeout)
	defer dcancel()
	start = time.Now()
	err = s.h.Connect(dctx, *target)
	a.DialMS = ms(time.Since(start))
	if err != nil {
		a.Error = fmt.Sprintf("connecting to provider %s: %v", want, err)
		return
	}
	a.Found = true
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// provided are the names this node announces: those of -provide, then
// each "provide" request's (which replaces them). The DHT asks for them
// at every provide round.
type provided struct {
	mu    sync.Mutex
	names []string
}

// set replaces the names; a name that is not a valid capability name is
// refused (negotiate.ErrInvalidName) and nothing changes.
func (p *provided) set(names []string) error {
	for _, n := range names {
		if err := negotiate.CheckName(n); err != nil {
			return fmt.Errorf("providing %q: %w", n, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = slices.Sorted(slices.Values(names))
	return nil
}

func (p *provided) get() ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.names), nil
}
