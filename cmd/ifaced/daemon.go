package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/ifaced/ifaced/node/config"

	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/httpapi"
	"github.com/libp2p/go-libp2p/gologshim"
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
	log, err := newLogger(e.stderr, cfg.Log)
	if err != nil {
		return err
	}
	// go-libp2p logs through a process-wide slog handler; route it into
	// ours once, before the host exists.
	gologshim.SetDefaultHandler(log.Handler())
	log.Info("data directory", "home", h.Dir)
	node.TuneGC(cfg.Limits)
	n, err := node.New(cfg, id, h, log)
	if err != nil {
		return err
	}
	srv, err := api.Listen(n, h, cfg.API.Listen, log)
	if err != nil {
		n.Close()
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
