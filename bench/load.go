package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/libp2p/go-libp2p/core/peer"
)

// loadSection is row 3: one daemon, in a child process so that its CPU
// can be told apart, answers QueryCapabilities from 1, 8 and 32 peers
// greeting in a loop (daemons in this process, each with a connection of
// its own). The baseline is what one core pays for the least an answering
// daemon must do: verify one signature and make one, with the greeting's
// payload sizes.
func loadSection(ctx context.Context, root string, levels []int, window time.Duration) section {
	sec := section{title: "3. Greetings per second served by one daemon (a child process; its peers are daemons in this process, on the same cores)",
		baseline: "load.ed25519_pairs"}
	fail := func(err error) section {
		sec.rows = append(sec.rows, failed("load.setup", "setup", err))
		return sec
	}
	// Every greeting is recorded, a few KB each: strangers' quarter of the
	// default audit.max_mb (256 MiB) ran out within a full run's some
	// 25,000 greetings, and the daemon then refused (cheaply) most of the
	// 32 peers' greetings. 16 GiB is room for every one.
	c, err := startChild(childSpec{Role: roleIfaced, Dir: root, ConnsHigh: 1000, AuditMB: 16 << 10})
	if err != nil {
		return fail(err)
	}
	defer c.stop()
	addr, err := c.addr(tcpTransport)
	if err != nil {
		return fail(err)
	}
	peers, err := loadPeers(ctx, root, addr, max(1, maxOf(levels)))
	defer func() {
		for _, p := range peers {
			p.close()
		}
	}()
	if err != nil {
		return fail(err)
	}
	req, reply, err := greetingSizes(ctx, peers[0], addr)
	if err != nil {
		return fail(err)
	}
	pair := measureSignVerify(2000, reply, req)
	if pair.err != nil {
		return fail(pair.err)
	}
	perCore := float64(time.Second) / float64(pair.pair())
	sec.rows = append(sec.rows,
		row{key: "load.ed25519_pairs", name: "bound: Ed25519 verify + sign pairs, one core", unit: unitPerSec, value: perCore,
			note: fmt.Sprintf("verify %.1f KB + sign %.1f KB", float64(req)/1024, float64(reply)/1024)},
		withBase(cpuRow("load.ed25519_pair", "  one pair", pair.pair(), "the least an answering daemon does"), "-"))
	info, err := p2pInfo(addr)
	if err != nil {
		return fail(err)
	}
	for _, n := range levels {
		if ctx.Err() != nil {
			break
		}
		r, err := loadLevel(ctx, c, peers[:n], info.ID, window)
		rateKey, cpuKey := fmt.Sprintf("load.%d.rate", n), fmt.Sprintf("load.%d.daemon_cpu", n)
		name := fmt.Sprintf("%d peer(s): greetings per second", n)
		cpuName := fmt.Sprintf("%d peer(s): daemon CPU per greeting", n)
		var tgt *target
		if cpuKey == cpuTargetKey {
			tgt = cpuTarget()
		}
		if err != nil {
			sec.rows = append(sec.rows, failed(rateKey, name, err), row{key: cpuKey, name: cpuName, failure: "failed: see above", target: tgt})
			continue
		}
		note := fmt.Sprintf("%d greetings in %s", r.greetings, r.elapsed.Round(time.Millisecond))
		if r.errors > 0 {
			note += fmt.Sprintf("; %d failed, first: %s", r.errors, oneLine(fmt.Sprint(r.firstErr)))
		}
		cpu := cpuRow(cpuKey, cpuName, r.serverCPU(),
			fmt.Sprintf("the child's getrusage; the peers' own CPU: %s per greeting", fmtDur(r.clientCPU())))
		cpu.base, cpu.target = "load.ed25519_pair", tgt
		sec.rows = append(sec.rows, row{key: rateKey, name: name, unit: unitPerSec, value: r.rate(), note: note}, cpu)
	}
	sec.notes = append(sec.notes, "the daemon's CPU is measured in its own process; throughput is shared-core: peers and daemon compete for the same cores")
	return sec
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// loadPeers starts n daemons, connects each to addr over TCP and greets
// once (a warm connection).
func loadPeers(ctx context.Context, root, addr string, n int) ([]*daemon, error) {
	var peers []*daemon
	for range n {
		d, err := startDaemon(root, benchConfig())
		if err != nil {
			return peers, err
		}
		peers = append(peers, d)
		pid, err := connectOver(ctx, d.Node, addr, tcpTransport)
		if err != nil {
			return peers, err
		}
		if _, err := d.QueryCapabilities(ctx, pid, negotiate.Proposal{}); err != nil {
			return peers, fmt.Errorf("first greeting: %w", err)
		}
	}
	return peers, nil
}

// greetingSizes greets once more and returns the framed sizes of the
// greeting and of its answer.
func greetingSizes(ctx context.Context, d *daemon, addr string) (request, reply int, err error) {
	info, err := p2pInfo(addr)
	if err != nil {
		return 0, 0, err
	}
	r, err := d.QueryCapabilities(ctx, info.ID, negotiate.Proposal{})
	if err != nil {
		return 0, 0, err
	}
	entries, err := d.Audit().Entries(r.ConversationID)
	if err != nil || len(entries) != 2 {
		return 0, 0, fmt.Errorf("reading a greeting from the audit log: %d entries, %v", len(entries), err)
	}
	var a, b bytes.Buffer
	if err := errors.Join(gossip.WriteMessage(&a, entries[0].Message), gossip.WriteMessage(&b, entries[1].Message)); err != nil {
		return 0, 0, fmt.Errorf("framing a greeting: %w", err)
	}
	return a.Len(), b.Len(), nil
}

type loadResult struct {
	greetings, errors int64
	firstErr          error
	elapsed           time.Duration
	serverNanos       int64 // the child's CPU over the window
	clientNanos       int64 // this process's CPU over the window
}

func (r loadResult) rate() float64 { return float64(r.greetings) / r.elapsed.Seconds() }

func (r loadResult) serverCPU() time.Duration {
	return time.Duration(r.serverNanos / max(r.greetings, 1))
}

func (r loadResult) clientCPU() time.Duration {
	return time.Duration(r.clientNanos / max(r.greetings, 1))
}

// loadLevel has every peer greet target in a loop: a quarter of window to
// settle, then window measured.
func loadLevel(ctx context.Context, c *child, peers []*daemon, target peer.ID, window time.Duration) (loadResult, error) {
	var r loadResult
	var count, errs atomic.Int64
	var firstErr error
	var once sync.Once
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			for lctx.Err() == nil {
				if _, err := p.QueryCapabilities(lctx, target, negotiate.Proposal{}); err != nil {
					if lctx.Err() != nil {
						return
					}
					errs.Add(1)
					once.Do(func() { firstErr = err })
					time.Sleep(10 * time.Millisecond) // do not spin on a failing peer
					continue
				}
				count.Add(1)
			}
		})
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	time.Sleep(window / 4)
	s0, err := c.command("stats")
	if err != nil {
		return r, err
	}
	p0, err := cpuTime()
	if err != nil {
		return r, err
	}
	n0, e0, t0 := count.Load(), errs.Load(), time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return r, ctx.Err()
	}
	n1, e1, t1 := count.Load(), errs.Load(), time.Now()
	s1, err := c.command("stats")
	if err != nil {
		return r, err
	}
	p1, err := cpuTime()
	if err != nil {
		return r, err
	}
	r = loadResult{greetings: n1 - n0, errors: e1 - e0, elapsed: t1.Sub(t0),
		serverNanos: s1.CPUNanos - s0.CPUNanos, clientNanos: p1 - p0}
	once.Do(func() {}) // waits for a failure being recorded, and stops later ones
	r.firstErr = firstErr
	if r.greetings == 0 {
		return r, fmt.Errorf("no greeting completed in %s (%d failed; first: %v)", window, r.errors, firstErr)
	}
	return r, nil
}
