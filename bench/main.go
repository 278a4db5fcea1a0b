// Command bench measures ifaced against its floor and its alternatives,
// side by side in one run on one machine, and prints the figures of
// DESIGN.md §8 as a table of absolute medians and of ratios against a
// baseline measured in the same run (never against constants):
//
//  1. A warm greeting on an open connection, 20-capability documents each
//     way: Node.QueryCapabilities and Node.Greet, against the floor — a raw
//     libp2p stream round trip on the same connection carrying the same
//     bytes, signed on send and verified on receipt in both directions —
//     and against fetching and verifying a JWS-signed A2A agent card over
//     keep-alive HTTPS (TLS 1.3) and an MCP initialize handshake (the MCP
//     Go SDK over streamable HTTP).
//  2. A cold greeting (a new peer: connect, identify, greet) over TCP and
//     over QUIC, against a cold HTTPS card fetch (a new TLS connection).
//  3. Greetings per second one daemon (a child process) serves to 1, 8 and
//     32 concurrent peers (in this process), and the daemon's CPU per
//     greeting, against one Ed25519 sign+verify pair of the same sizes.
//  4. The memory an idle peer connection costs a daemon (a child process;
//     the peers are lightweight libp2p hosts in this process), against a
//     bare libp2p host with the same transports.
//  5. DHT and gossip figures: pointers to the node tests that log them.
//
// Everything listens on 127.0.0.1. Latencies are medians of many
// iterations after warm-up, the variants of one table section interleaved
// in small blocks so that a shared machine's drift falls on all of them
// alike. The daemons' homes go in a temporary directory (-dir chooses
// where): their audit logs and stores are fsynced there, so the file
// system is printed with the figures, and row 1 also runs the greeting
// with durability.sync = "always" (an fsync per audit entry and seen ID)
// beside the default's batched fsyncs, to show what durability costs.
//
// It is a separate module so that what it compares against (the MCP SDK)
// never enters ifaced's own go.mod. Run it from the repository root:
//
//	cd bench && go run .                 # everything: a few minutes
//	cd bench && go run . -quick          # under a minute: rows 1-3 and 5, fewer iterations
//	cd bench && go run . -n 500          # 500 timed iterations per warm variant
//	cd bench && go run . -rows 4 -idle 1000
//	cd bench && go run . -rows 1 -cpuprofile greet.prof
//
// A child process is this program again, told its role by the
// environment (see child.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// settings are what the flags choose.
type settings struct {
	quick      bool
	warmN      int           // timed iterations per warm variant
	coldN      int           // timed iterations per cold variant
	loadFor    time.Duration // measuring window per concurrency level
	loadLevels []int         // concurrent peers in row 3
	idlePeers  []int         // idle connections in row 4
	rows       []int         // which sections to run
	skipIdle   bool          // -quick without -rows: row 4 is printed as not measured
	dir        string        // where daemon homes go
	cpuProfile string        // CPU profile of the warm greeting loop
}

func main() {
	if handled, err := childMain(); handled {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	s, err := parseFlags(os.Args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case errors.Is(err, errUsage):
		os.Exit(2) // the flag package has said what was wrong
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, s); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// errUsage wraps a command line the flag package refused (and has
// already explained).
var errUsage = errors.New("bad command line")

func parseFlags(args []string) (settings, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "fewer iterations and shorter windows, row 4 skipped: under a minute")
	n := fs.Int("n", 0, "timed iterations per warm variant (cold variants get a fifth, at least 10); 0 is 300, or 60 with -quick")
	rows := fs.String("rows", "", "comma-separated sections to run (1-5); empty is all (-quick skips 4 unless named here)")
	dir := fs.String("dir", "", "directory to make the daemons' homes in (their fsyncs land there); empty is the system temporary directory")
	idle := fs.String("idle", "1000,5000", "comma-separated idle peer counts for row 4")
	prof := fs.String("cpuprofile", "", "write a CPU profile of the warm QueryCapabilities loop to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return settings{}, err
		}
		return settings{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return settings{}, fmt.Errorf("unexpected arguments %q (see -h)", fs.Args())
	}
	s := settings{quick: *quick, warmN: 300, loadFor: 4 * time.Second, loadLevels: []int{1, 8, 32},
		rows: []int{1, 2, 3, 4, 5}, dir: *dir, cpuProfile: *prof}
	if s.quick {
		s.warmN, s.loadFor, s.skipIdle = 60, time.Second, true
	}
	if *n < 0 {
		return settings{}, fmt.Errorf("-n %d: want a positive count", *n)
	}
	if *n > 0 {
		s.warmN = *n
	}
	s.coldN = max(s.warmN/5, 10)
	if *rows != "" {
		r, err := parseInts(*rows, 1, 5)
		if err != nil {
			return settings{}, fmt.Errorf("-rows: %w", err)
		}
		s.rows, s.skipIdle = r, false
	}
	idlePeers, err := parseInts(*idle, 1, 100000)
	if err != nil {
		return settings{}, fmt.Errorf("-idle: %w", err)
	}
	s.idlePeers = idlePeers
	return s, nil
}

// parseInts reads comma-separated whole numbers from lo to hi.
func parseInts(list string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < lo || v > hi {
			return nil, fmt.Errorf("%q: want numbers from %d to %d, comma-separated", list, lo, hi)
		}
		out = append(out, v)
	}
	return out, nil
}

// run measures the chosen sections and prints the table.
func run(ctx context.Context, s settings) error {
	fds, err := raiseFDLimit()
	if err != nil {
		return err
	}
	root, cleanup, err := benchDir(s.dir)
	if err != nil {
		return err
	}
	defer cleanup()

	var t table
	m := describeMachine(root)
	m.fds = fds
	progress("machine: %s", m.oneLine())
	want := func(r int) bool { return slices.Contains(s.rows, r) && ctx.Err() == nil }

	if want(1) {
		progress("1: warm greeting (%d iterations per variant)", s.warmN)
		t.add(warmSection(ctx, root, s.warmN, s.cpuProfile))
	}
	if want(2) {
		progress("2: cold greeting (%d iterations per variant)", s.coldN)
		t.add(coldSection(ctx, root, s.coldN))
	}
	if want(3) {
		progress("3: greetings per second (%s per level)", s.loadFor)
		t.add(loadSection(ctx, root, s.loadLevels, s.loadFor))
	}
	if want(4) && s.skipIdle {
		t.add(section{title: "4. Memory per idle peer connection", rows: []row{
			notMeasured("idle TCP peers", "skipped by -quick (run without it, or with -rows 4)")}})
	} else if want(4) {
		progress("4: memory per idle peer connection (%v peers)", s.idlePeers)
		t.add(idleSection(ctx, root, s.idlePeers))
	}
	if want(5) {
		t.add(pointerSection())
	}
	fmt.Println()
	m.print(os.Stdout)
	fmt.Println()
	t.print(os.Stdout)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted; the table holds what was measured before: %w", err)
	}
	return nil
}

// benchDir makes the directory the daemons' homes go in, and returns how
// to remove it.
func benchDir(parent string) (string, func(), error) {
	if parent != "" {
		if err := os.MkdirAll(parent, 0o700); err != nil {
			return "", nil, fmt.Errorf("creating -dir: %w", err)
		}
	}
	root, err := os.MkdirTemp(parent, "ifaced-bench-")
	if err != nil {
		return "", nil, fmt.Errorf("creating the bench directory: %w", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		os.RemoveAll(root)
		return "", nil, fmt.Errorf("creating the bench directory: %w", err)
	}
	return abs, func() { os.RemoveAll(abs) }, nil
}

// profileTo starts a CPU profile into path and returns how to stop it.
func profileTo(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting CPU profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// progress tells the person waiting what is being measured (on stderr,
// so the table on stdout stays clean).
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
