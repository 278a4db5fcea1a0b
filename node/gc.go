package node

import (
	"os"
	"runtime/debug"

	"github.com/ifaced/ifaced/node/config"
)

// The garbage collector is the process's, not a node's, so New never
// touches it: the program that runs a daemon (ifaced run, the bench's
// daemon child) calls TuneGC once, before New.
//
// Why: Go's default (GOGC=100) collects whenever the heap has doubled
// since the last collection. A daemon's live heap is small and its
// garbage comes in bursts (a greeting allocates about 220 KB, nearly all
// of it dead once the answer is written), so it collected very often:
// collection was 9-10 % of a warm greeting's CPU. At GOGC=200, on the
// node package's BenchmarkGreeting (3,000 warm greetings, both daemons in
// one process, three interleaved runs): user CPU 2.50/3.45/2.66 s at 100
// against 2.10/2.52/2.57 s at 200, and 791/1,122/832 against
// 726/841/840 µs per greeting. The heap may then grow to three times what
// is live rather than twice; the memory limit keeps that within the
// daemon's stated bound.
//
// The limit is soft: the runtime collects harder as the memory it holds
// nears it, but what is allocated while a collection runs, and memory not
// yet given back to the system, go past it. Set at the bound itself
// (twice limits.max_memory_mb, docs/bounds.md), a flood of 300 fresh
// keys greeting at once with 900 KiB views took the process to 516-541
// MiB of a 512 MiB bound; so it is set a quarter below the bound, at
// gcLimitFactor times max_memory_mb, which leaves that overshoot room.
const gcPercent = 200

// gcLimitFactor is the soft memory limit in units of max_memory_mb: 3/2,
// a quarter below the stated bound of 2.
const gcLimitFactor = 1.5

// TuneGC sets the collector for a daemon with these limits: GOGC 200,
// and a soft memory limit of gcLimitFactor times limits.max_memory_mb,
// below the bound docs/bounds.md states for its resident memory (twice
// max_memory_mb). GOGC and GOMEMLIMIT set in the environment are left as
// they are.
func TuneGC(l config.LimitsConfig) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && l.MaxMemoryMB > 0 {
		debug.SetMemoryLimit(int64(gcLimitFactor * float64(int64(l.MaxMemoryMB)<<20)))
	}
}
