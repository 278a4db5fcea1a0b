//go:build faultclock

package main

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ifaced/ifaced/node"
)

// faultClockEnv names a file holding the offset (a Go duration, "1h",
// "-1h") this daemon's clock reads from the system's. Only a binary built
// with -tags faultclock reads it: the process-level clock-jump test
// (faults_clock_test.go) builds one, to step the clock of a running
// daemon the way a laptop's sleep or an NTP step does.
const faultClockEnv = "IFACED_FAULT_CLOCK_FILE"

// clockOptions gives the node a clock shifted by the offset in the file
// $IFACED_FAULT_CLOCK_FILE names, read again on every reading so that a
// new offset takes effect at the next one. A file that is missing, empty
// or unreadable leaves the offset as it was.
func clockOptions(log *slog.Logger) []node.Option {
	path := os.Getenv(faultClockEnv)
	if path == "" {
		return nil
	}
	var mu sync.Mutex
	var offset time.Duration
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if b, err := os.ReadFile(path); err == nil {
			if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil && d != offset {
				log.Warn("fault clock: the offset changed", "from", offset, "to", d)
				offset = d
			}
		}
		return time.Now().Add(offset)
	}
	log.Warn("fault clock: this binary reads its clock's offset from a file (built with -tags faultclock, for tests only)", "file", path)
	return []node.Option{node.WithClock(now)}
}
