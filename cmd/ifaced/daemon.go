package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/httpapi"
	"github.com/ifaced/ifaced/node/store"
)

func runDaemon(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "run", "", false)
	listen := f.String("listen", "", "comma-separated libp2p listen multiaddrs (overrides listen.addresses)")
	apiAddr := f.String("api", "", "control API address, a loopback host:port (overrides api.listen)")
	noMDNS := f.Bool("no-mdns", false, "do not multicast on the LAN (overrides discovery.mdns)")
	logLevel := f.String("log-level", "", "debug, info, warn or error (overrides log.level)")
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("run takes no arguments, got %q", f.Args())
	}
	if *logLevel != "" {
		var l slog.Level
		if err := l.UnmarshalText([]byte(*logLevel)); err != nil {
			return usageError("--log-level %q: want debug, info, warn or error", *logLevel)
		}
	}
	// The overrides are checked against the defaults first, so that a
	// mistyped flag fails before the data directory is created.
	if err := overrideListen(config.DefaultConfig(), *listen, *apiAddr); err != nil {
		return err
	}
	h, err := f.homeDir(e)
	if err != nil {
		return err
	}
	// The first run sets up the data directory, key and config by itself.
	_, keyErr := os.Stat(h.KeyPath())
	first := errors.Is(keyErr, fs.ErrNotExist)
	id, cfg, err := h.Open(true, time.Now())
	if err != nil {
		return err
	}
	if err := overrideListen(cfg, *listen, *apiAddr); err != nil {
		return err
	}
	if *noMDNS {
		cfg.Discovery.MDNS = false
	}
	if *logLevel != "" {
		cfg.Log.Level = *logLevel
	}
	// The control API's port is claimed before the host starts, so that a
	// port in use stops the daemon before it says it started.
	if err := claimAPIAddr(cfg.API.Listen, *apiAddr != ""); err != nil {
		return err
	}
	log, err := newLogger(e.stderr, cfg.Log)
	if err != nil {
		return err
	}
	// Libraries log through process-wide loggers; route them into ours
	// once, before the host exists (logging.go).
	routeLibraryLogs(log)
	log.Info("data directory", "home", h.Dir)
	if first {
		log.Info("first run: created a new key and config.toml (every default, commented)", "key", h.KeyPath(), "config", h.ConfigPath(), "peer", id.PeerID())
	}
	node.TuneGC(cfg.Limits)
	log.Info("starting: opening the store and audit log, then the libp2p host", "listen", cfg.Listen.Addresses)
	stopProgress := progress(log, startProgressEvery, "still starting: opening the store and audit log (a large log is measured at start), then the libp2p host")
	n, err := node.New(cfg, id, h, log, clockOptions(log)...)
	stopProgress()
	if errors.Is(err, store.ErrDamaged) {
		return fmt.Errorf("%w\n%s", err, damagedStoreHint(h.Dir))
	}
	if err != nil {
		return err
	}
	srv, err := api.Listen(n, h, cfg.API.Listen, log)
	if err != nil {
		n.Close()
		if errors.Is(err, syscall.EADDRINUSE) {
			return apiAddrInUse(cfg.API.Listen, *apiAddr != "") // taken since claimAPIAddr looked
		}
		return err
	}
	log.Info("control API listening", "addr", srv.Addr(), "socket", srv.Socket(), "token", api.TokenFile(h), "console", "http://"+srv.Addr()+api.UIPath)
	stopMCP, err := mountMCP(srv, h, log)
	if err != nil {
		srv.Close()
		n.Close()
		return err
	}
	stopUI, err := mountUI(srv, h, cfg, log)
	if err != nil {
		stopMCP()
		srv.Close()
		n.Close()
		return err
	}
	var public *httpapi.Binding
	if cfg.HTTP.Listen != "" {
		if public, err = httpapi.Listen(n, cfg.HTTP, log); err != nil {
			stopUI()
			stopMCP()
			srv.Close()
			n.Close()
			return err
		}
	}
	<-ctx.Done()
	// The APIs go first, so no request reaches a node that is shutting down.
	var errs []error
	if public != nil {
		errs = append(errs, public.Close())
	}
	stopUI()
	stopMCP()
	return errors.Join(append(errs, srv.Close(), n.Close())...)
}

// overrideListen applies --listen and --api to cfg and validates them as
// the config file's keys would be; a bad value is a usage error naming the
// flag.
func overrideListen(cfg *config.Config, listen, apiAddr string) error {
	if listen == "" && apiAddr == "" {
		return nil
	}
	if listen != "" {
		cfg.Listen.Addresses = splitList(listen)
	}
	if apiAddr != "" {
		cfg.API.Listen = apiAddr
	}
	var msgs []string
	for _, p := range negotiate.Errors(cfg.Validate()) {
		var fe *negotiate.FieldError
		switch {
		case !errors.As(p, &fe):
			msgs = append(msgs, p.Error())
		case listen != "" && strings.HasPrefix(fe.Field, "listen.addresses"):
			msgs = append(msgs, "--listen: "+fe.Describe())
		case apiAddr != "" && fe.Field == "api.listen":
			msgs = append(msgs, "--api: "+fe.Describe())
		default:
			msgs = append(msgs, fe.Error())
		}
	}
	if len(msgs) > 0 {
		return usageError("%s", strings.Join(msgs, "\n"))
	}
	return nil
}

func newLogger(w io.Writer, c config.LogConfig) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// claimAPIAddr refuses an api.listen address another process holds,
// saying what to do; the check binds and closes at once, before anything
// starts (the API binds it again once the node runs).
func claimAPIAddr(addr string, fromFlag bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" || net.ParseIP(host) == nil {
		return nil // the API's own checks name what is wrong
	}
	l, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return apiAddrInUse(addr, fromFlag)
	}
	if err == nil {
		l.Close()
	}
	return nil
}

func apiAddrInUse(addr string, fromFlag bool) error {
	where := "api.listen in config.toml"
	if fromFlag {
		where = "--api"
	}
	return fmt.Errorf("the control API address %s (%s) is in use by another process, another ifaced perhaps: "+
		"give each daemon its own port (--api 127.0.0.1:PORT, or 127.0.0.1:0 for any free one); nothing was started", addr, where)
}

// startProgressEvery is how long a start may be silent before the daemon
// says it is still at it.
const startProgressEvery = 5 * time.Second

// progress logs msg every interval until stop is called, so a slow step
// is never silent.
func progress(log *slog.Logger, every time.Duration, msg string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for waited := every; ; waited += every {
			select {
			case <-done:
				return
			case <-t.C:
				log.Info(msg, "waited", waited)
			}
		}
	}()
	return func() { close(done); <-finished }
}
