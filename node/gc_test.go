package node

import (
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/ifaced/ifaced/node/config"
)

// TuneGC sets GOGC and the memory limit from the limits, unless the
// environment set them.
func TestTuneGC(t *testing.T) {
	restore := func(percent int, limit int64) {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
	defer restore(debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64))

	t.Run("defaults", func(t *testing.T) {
		unsetenv(t, "GOGC")
		unsetenv(t, "GOMEMLIMIT")
		TuneGC(config.LimitsConfig{MaxMemoryMB: 256})
		if got := debug.SetGCPercent(100); got != gcPercent {
			t.Errorf("GOGC %d, want %d", got, gcPercent)
		}
		// Below the stated bound (twice max_memory_mb), with room for what
		// a soft limit lets past it.
		if got := debug.SetMemoryLimit(-1); got != 384<<20 {
			t.Errorf("memory limit %d, want 384 MiB (1.5 × max_memory_mb, a quarter below the bound of 2×)", got)
		}
	})
	t.Run("the environment wins", func(t *testing.T) {
		restore(100, math.MaxInt64)
		t.Setenv("GOGC", "150")
		t.Setenv("GOMEMLIMIT", "1GiB")
		TuneGC(config.LimitsConfig{MaxMemoryMB: 256})
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("GOGC changed to %d although the environment sets it", got)
		}
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("memory limit changed to %d although the environment sets it", got)
		}
	})
}

// unsetenv removes key for the test, putting it back after.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // registers the restore
	os.Unsetenv(key)
}
