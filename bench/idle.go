package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// idleSection is row 4: the memory a daemon holds per idle peer
// connection. The daemon is a child process, so its resident set is its
// own; the peers are lightweight libp2p hosts in this process (one key and
// one TCP connection each, Noise and yamux, identify as usual), which open
// their connections and then do nothing. The baseline is a bare libp2p
// host in a child process, with the same transports and no limits,
// holding as many.
func idleSection(ctx context.Context, root string, counts []int) section {
	sec := section{title: "4. Memory per idle peer connection, TCP (the daemon is a child process; its peers are libp2p hosts in this process)",
		baseline: "a bare libp2p host holding as many"}
	n := maxOf(counts)
	progress("4: starting %d peer hosts and signing their views", n)
	gs, err := greeters(n)
	if err != nil {
		sec.rows = append(sec.rows, failed("setup", err))
		return sec
	}
	peers, err := idlePeers(gs)
	defer closeHosts(peers)
	if err != nil {
		sec.rows = append(sec.rows, failed("setup", err))
		return sec
	}
	for _, count := range counts {
		if ctx.Err() != nil {
			break
		}
		progress("4: %d idle peers, bare libp2p host", count)
		bare, bareErr := measureIdle(ctx, root, roleBare, peers[:count], nil)
		progress("4: %d idle peers, ifaced", count)
		ifd, ifdErr := measureIdle(ctx, root, roleIfaced, peers[:count], nil)
		progress("4: %d greeted idle peers, ifaced", count)
		greeted, greetedErr := measureIdle(ctx, root, roleIfaced, peers[:count], gs[:count])
		var base float64
		name := fmt.Sprintf("bare libp2p host, %d peers", count)
		if bareErr != nil {
			sec.rows = append(sec.rows, failed(name, bareErr))
		} else {
			base = bare.perPeer()
			sec.rows = append(sec.rows, bare.row(name, base))
		}
		name = fmt.Sprintf("ifaced daemon, %d peers", count)
		if ifdErr != nil {
			sec.rows = append(sec.rows, failed(name, ifdErr))
		} else {
			sec.rows = append(sec.rows, ifd.row(name, base))
		}
		name = fmt.Sprintf("ifaced daemon, %d greeted idle peers (bar: 64 KB at 5,000)", count)
		if greetedErr != nil {
			sec.rows = append(sec.rows, failed(name, greetedErr))
		} else {
			sec.rows = append(sec.rows, greeted.row(name, base))
		}
	}
	sec.notes = append(sec.notes, "greeted idle peers: each peer, once connected, queries the daemon's capabilities once (a greeting carrying its own signed 20-capability view, answered with the daemon's) and then holds its connection idle; every peer is a fresh key, a stranger to the daemon")
	sec.notes = append(sec.notes, "figure: growth of the child's VmRSS (/proc/PID/status) per connection held, both readings taken after a GC that returns freed memory (debug.FreeOSMemory); notes give the growth before that GC and the Go heap in use")
	return sec
}

// nodeMaxFDs is the file descriptors node's resource manager hands out
// (maxFDs in node/host.go, unexported): each TCP connection takes one.
const nodeMaxFDs = 4096

// idleResult is one child holding connections.
type idleResult struct {
	asked, held        int
	rss0, rss1, rssRaw int64 // before, after (post-GC), after (before the GC)
	heap0, heap1       uint64
	firstErr           error
	dialErrs           int
	greetErrs          int // greetings that failed (greeted rows)
	firstGreetErr      error
}

func (r idleResult) perPeer() float64 { return float64(r.rss1-r.rss0) / float64(max(r.held, 1)) }

func (r idleResult) row(name string, base float64) row {
	out := row{name: name, figure: fmtKB(r.perPeer()) + " per peer",
		note: fmt.Sprintf("held %d of %d; RSS %.0f → %.0f MB; before GC %s per peer; Go heap %s per peer",
			r.held, r.asked, float64(r.rss0)/(1<<20), float64(r.rss1)/(1<<20),
			fmtKB(float64(r.rssRaw-r.rss0)/float64(max(r.held, 1))), fmtKB((float64(r.heap1)-float64(r.heap0))/float64(max(r.held, 1))))}
	if r.dialErrs > 0 {
		out.note += fmt.Sprintf("; %d dials failed, first: %s", r.dialErrs, oneLine(fmt.Sprint(r.firstErr)))
	}
	if r.greetErrs > 0 {
		out.note += fmt.Sprintf("; %d greetings failed, first: %s", r.greetErrs, oneLine(fmt.Sprint(r.firstGreetErr)))
	}
	if r.held == nodeMaxFDs && r.held < r.asked {
		out.note += "; 4096 is the resource manager's file descriptor ceiling (maxFDs in node/host.go)"
	}
	if base > 0 {
		out.ratio = fmtRatio(r.perPeer() / base)
	}
	return out
}

// measureIdle starts a child of role, connects every peer to it over TCP,
// has each greet it once when gs is given (the greeters of peers, in
// order), lets the connections settle, and measures the child's growth.
func measureIdle(ctx context.Context, root, role string, peers []host.Host, gs []greeter) (idleResult, error) {
	r := idleResult{asked: len(peers)}
	c, err := startChild(childSpec{Role: role, Dir: root, ConnsHigh: 2 * len(peers)})
	if err != nil {
		return r, err
	}
	defer c.stop()
	addr, err := c.addr(tcpTransport)
	if err != nil {
		return r, err
	}
	info, err := p2pInfo(addr)
	if err != nil {
		return r, err
	}
	before, err := c.settled()
	if err != nil {
		return r, err
	}
	if r.rss0, err = rssOf(c.pid()); err != nil {
		return r, err
	}
	r.heap0 = before.HeapInuse

	r.dialErrs, r.firstErr = dialAll(ctx, peers, info)
	if gs != nil {
		r.greetErrs, r.firstGreetErr = greetAll(ctx, peers, gs, info.ID)
	}
	defer func() {
		for _, p := range peers {
			p.Network().ClosePeer(info.ID)
			p.Peerstore().RemovePeer(info.ID)
		}
	}()
	// Let identify and whatever the daemon does on a new peer finish.
	var st childStats
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if st, err = c.command("stats"); err != nil {
			return r, err
		}
		if st.Conns >= len(peers)-r.dialErrs {
			break
		}
	}
	time.Sleep(3 * time.Second)
	if r.rssRaw, err = rssOf(c.pid()); err != nil {
		return r, err
	}
	after, err := c.settled()
	if err != nil {
		return r, err
	}
	if r.rss1, err = rssOf(c.pid()); err != nil {
		return r, err
	}
	r.heap1, r.held = after.HeapInuse, after.Conns
	if r.held == 0 {
		return r, fmt.Errorf("the child holds no connection (%d dials failed, first: %v)", r.dialErrs, r.firstErr)
	}
	return r, nil
}

// settled is the child's stats after two collections a moment apart.
func (c *child) settled() (childStats, error) {
	if _, err := c.command("gc"); err != nil {
		return childStats{}, err
	}
	time.Sleep(500 * time.Millisecond)
	return c.command("gc")
}

// dialAll connects every peer to info, 32 at a time, and returns how many
// failed and the first failure.
func dialAll(ctx context.Context, peers []host.Host, info peer.AddrInfo) (int, error) {
	var failed atomic.Int64
	var first error
	var once sync.Once
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := p.Connect(dctx, info); err != nil {
				failed.Add(1)
				once.Do(func() { first = err })
			}
		})
	}
	wg.Wait()
	return int(failed.Load()), first
}

// idlePeers starts a lightweight libp2p host for each greeter, with its
// key: TCP only, no listener, Noise and yamux, no resource limits, no
// metrics, no relay, no ping.
func idlePeers(gs []greeter) ([]host.Host, error) {
	hosts := make([]host.Host, 0, len(gs))
	for _, g := range gs {
		h, err := libp2p.New(
			libp2p.Identity(g.id.LibP2PKey()),
			libp2p.NoListenAddrs,
			libp2p.Transport(tcp.NewTCPTransport),
			libp2p.Security(noise.ID, noise.New),
			libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
			libp2p.ResourceManager(&network.NullResourceManager{}),
			libp2p.DisableMetrics(),
			libp2p.DisableRelay(),
			libp2p.Ping(false),
		)
		if err != nil {
			return hosts, fmt.Errorf("starting peer host %d: %w", len(hosts)+1, err)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

func closeHosts(hosts []host.Host) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, h := range hosts {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			h.Close()
		})
	}
	wg.Wait()
}
