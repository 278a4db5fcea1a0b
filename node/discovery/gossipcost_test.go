package discovery_test

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/discovery"
	"github.com/ifaced/ifaced/node/internal/testkit"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
)

// TestGossipFloodCostPerHop measures what one daemon spends, per
// announcement, on a flood of announcements just under
// discovery.MaxAnnouncementSize from fresh keys arriving over GossipSub from one
// peer: pubsub's reading and signature check, then the validator. The
// whole process is measured (it includes the flooding peer's writes,
// which are small). "default": the daemon's default budget, which the
// flood soon spends; "unbudgeted": a budget no flood reaches, so every
// announcement is verified, as before the budget. It only logs (figures
// are not assertions); it runs when IFACED_MEASURE is set:
//
//	IFACED_MEASURE=1 go test ./node/discovery -run TestGossipFloodCostPerHop -count=1 -v
func TestGossipFloodCostPerHop(t *testing.T) {
	if os.Getenv("IFACED_MEASURE") == "" {
		t.Skip("a measurement; set IFACED_MEASURE=1")
	}
	size := discovery.MaxAnnouncementSize - 16<<10
	if s, err := strconv.Atoi(os.Getenv("IFACED_MEASURE_BYTES")); err == nil {
		size = s
	}
	const n = 40
	for _, budget := range []string{"default", "unbudgeted"} {
		t.Run(budget, func(t *testing.T) {
			cfg := gossipConfig()
			if budget == "unbudgeted" {
				cfg.Discovery.GossipStrangers = 1 << 30
			}
			r := startDaemon(t, cfg)
			f := newGossipFlooder(t, r)
			msgs := make([]*pb.Message, n)
			for i := range msgs {
				msgs[i] = f.freshAnnouncement(t, size)
			}
			start := judged(r)
			runtime.GC()
			var m0, m1 runtime.MemStats
			var ru0, ru1 syscall.Rusage
			runtime.ReadMemStats(&m0)
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			for i, m := range msgs {
				f.write(t, &pb.RPC{Publish: []*pb.Message{m}})
				testkit.WaitFor(t, "the announcement to be judged", func() bool { return judged(r) >= start+uint64(i+1) })
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			runtime.ReadMemStats(&m1)
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			t.Logf("%s: %d announcements of %d bytes from fresh keys: %d verified; per announcement %.1f ms CPU, %.1f MiB allocated",
				budget, n, len(msgs[0].Data), n-int(r.Discovery().GossipCounts().Throttled),
				float64(cpu.Microseconds())/1000/n, float64(m1.TotalAlloc-m0.TotalAlloc)/(1<<20)/n)
		})
	}
}
