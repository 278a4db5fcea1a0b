package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ifaced/ifaced/node"
	"github.com/libp2p/go-libp2p/gologshim"
)

func runDaemon(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "run", "", false)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("run takes no arguments, got %q", f.Args())
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
	log, err := newLogger(e.stderr, cfg.Log)
	if err != nil {
		return err
	}
	// go-libp2p logs through a process-wide slog handler; route it into
	// ours once, before the host exists.
	gologshim.SetDefaultHandler(log.Handler())
	log.Info("data directory", "home", h.Dir)
	n, err := node.New(cfg, id, h, log)
	if err != nil {
		return err
	}
	return n.Run(ctx)
}

func newLogger(w io.Writer, c node.LogConfig) (*slog.Logger, error) {
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
