package main

import (
	"bytes"
	"context"
	stdlog "log"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	golog "github.com/ipfs/go-log/v2"
	"github.com/libp2p/go-libp2p/gologshim"
	"go.uber.org/zap/zapcore"
)

// One log format. The daemon logs through log/slog in the format
// log.format names, and so do the libraries it runs, each through the
// door it logs by:
//   - go-libp2p's own packages log through gologshim (slog): given the
//     daemon's handler;
//   - packages on ipfs/go-log (kad-dht, pubsub, parts of the relay
//     stack) log through zap: go-log's primary core is replaced by one
//     that hands each entry to the daemon's handler, with the subsystem
//     as its component;
//   - packages that use the standard library's log (zeroconf, behind
//     mDNS) write lines: each line becomes a record, its "[WARN]" or
//     "[ERR]" prefix read as the level.
// Each library record carries component=<its subsystem> (or "log"), so
// the daemon's own components and the libraries' are told apart.

// routeLibraryLogs sends every library's log through log's handler.
func routeLibraryLogs(log *slog.Logger) {
	h := log.Handler()
	gologshim.SetDefaultHandler(h)
	golog.SetPrimaryCore(&slogCore{h: h})
	stdlog.SetFlags(0)
	stdlog.SetPrefix("")
	stdlog.SetOutput(&stdLogWriter{h: h})
}

// slogCore is a zapcore.Core that writes to a slog.Handler.
type slogCore struct {
	h      slog.Handler
	fields []zapcore.Field
}

func zapLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), zapLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h, fields: append(slices.Clone(c.fields), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, zapLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("component", e.LoggerName))
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clone(c.fields), fields...) {
		f.AddTo(enc)
	}
	for _, k := range sortedKeys(enc.Fields) {
		r.AddAttrs(slog.Any(k, enc.Fields[k]))
	}
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// stdLogWriter turns the standard library log's lines into records.
type stdLogWriter struct {
	h   slog.Handler
	mu  sync.Mutex
	buf []byte
}

// stdLevels are the level prefixes libraries write on log lines.
var stdLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn},
	{"[WARNING]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError},
}

func (w *stdLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimSpace(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
		if line == "" {
			continue
		}
		level := slog.LevelInfo
		for _, l := range stdLevels {
			if rest, ok := strings.CutPrefix(line, l.prefix); ok {
				level, line = l.level, strings.TrimSpace(rest)
				break
			}
		}
		if !w.h.Enabled(context.Background(), level) {
			continue
		}
		r := slog.NewRecord(time.Now(), level, line, 0)
		r.AddAttrs(slog.String("component", "log"))
		w.h.Handle(context.Background(), r)
	}
}
