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

// manySettings are what section 4 measures: the memory of idle peers at
// each count, and warm greetings with rotate peers in rotation.
type manySettings struct {
	counts    []int         // idle peers held, per measurement
	rotate    int           // peers in rotation; 0 leaves the rotation out
	greets    int           // timed warm greetings per rotation variant (at least rotate)
	settle    time.Duration // the wait after the peers connect and greet, before measuring
	parentFDs uint64        // this process's file descriptor limit
}

// manySection is section 4: what many peers cost a daemon (a child
// process; the peers are lightweight libp2p hosts in this process, one
// key and one TCP connection each, Noise and yamux, identify as usual).
//
// Memory: the peers connect, greet once when the row says so, and then do
// nothing; the figure is the growth of the child's resident set per
// connection it holds. The baseline is a bare libp2p host in a child
// process, with the same transports and no limits, holding as many.
//
// Rotation: rotate peers greet the daemon once each, then warm greetings
// are timed, each from the next peer in turn (so each comes rotate-1
// greetings after the same peer's last), against warm greetings from one
// peer outside the rotation, on the same daemon, interleaved.
func manySection(ctx context.Context, root string, ms manySettings) section {
	sec := section{title: "4. Many peers: memory per idle peer connection, TCP, and warm greetings in rotation (the daemon is a child process; its peers are libp2p hosts in this process)"}
	n := max(maxOf(ms.counts), ms.rotate+1)
	progress("4: starting %d peer hosts and signing their views", n)
	gs, err := greeters(n)
	if err != nil {
		sec.rows = append(sec.rows, failed("memory.setup", "setup", err))
		return sec
	}
	peers, err := idlePeers(gs)
	defer closeHosts(peers)
	if err != nil {
		sec.rows = append(sec.rows, failed("memory.setup", "setup", err))
		return sec
	}
	for _, count := range ms.counts {
		if ctx.Err() != nil {
			break
		}
		progress("4: %d idle peers, bare libp2p host", count)
		bare, bareErr := measureIdle(ctx, root, roleBare, peers[:count], nil, ms.settle)
		progress("4: %d idle peers, ifaced", count)
		ifd, ifdErr := measureIdle(ctx, root, roleIfaced, peers[:count], nil, ms.settle)
		progress("4: %d greeted idle peers, ifaced", count)
		greeted, greetedErr := measureIdle(ctx, root, roleIfaced, peers[:count], gs[:count], ms.settle)
		bareKey := fmt.Sprintf("memory.bare.%d", count)
		fdNote := fdShortfall(count, ms.parentFDs)
		add := func(key, what string, r idleResult, err error, greetedRow bool) {
			greeted := -1 // not a greeted row
			if greetedRow {
				greeted = r.greeted
			}
			name := peersName(what, r.asked, r.held, greeted)
			if err != nil {
				name = peersName(what, count, count, -1)
			}
			var tgt *target
			if greetedRow && key == memoryTargetKey {
				tgt = memoryTarget(count, r.held, r.greeted)
			}
			if err != nil {
				sec.rows = append(sec.rows, row{key: key, name: name, failure: "failed: " + oneLine(err.Error()), target: tgt})
				return
			}
			x := r.row(key, name, fdNote)
			if greetedRow {
				x.greeted = &r.greeted
			}
			x.base, x.target = bareKey, tgt
			if key == bareKey {
				x.base = "-"
			}
			sec.rows = append(sec.rows, x)
		}
		add(bareKey, "bare libp2p host", bare, bareErr, false)
		add(fmt.Sprintf("memory.idle.%d", count), "ifaced daemon, peers that never greeted", ifd, ifdErr, false)
		add(fmt.Sprintf("memory.greeted.%d", count), "ifaced daemon, greeted idle peers", greeted, greetedErr, true)
	}
	if ms.rotate > 0 && ctx.Err() == nil {
		progress("4: warm greetings, %d peers in rotation against one peer", ms.rotate)
		sec.rows = append(sec.rows, rotationRows(ctx, root, peers[:ms.rotate+1], gs[:ms.rotate+1], ms.greets)...)
	}
	sec.notes = append(sec.notes,
		"greeted idle peers: each peer, once connected, greets the daemon once on the capabilities protocol (its own signed 20-capability view, answered with the daemon's) and then holds its connection idle; every peer is a fresh key, a stranger to the daemon",
		"the ifaced child's audit.max_mb is raised to 1 MiB per connection it may hold (strangers get a quarter of it a day; past that it takes no new conversation from them), so that every peer's greeting is admitted and recorded",
		"memory figure: growth of the child's VmRSS (/proc/PID/status) per connection held, both readings taken after a GC that returns freed memory (debug.FreeOSMemory); notes give the growth before that GC and the Go heap in use",
		"rotation: the peers are lightweight clients greeting as a daemon does (have_view, view_unchanged) and verifying each answer; absolute times are not those of warm.greeting (no daemon, no audit on the peer's side), the ratio is the daemon's")
	return sec
}

// peersName is a memory row's name, saying how many peers were asked for
// and, when fewer, how many were held, and, in a greeted row (greeted ≥
// 0), how many greeted when not all that were held: a row is never
// labelled with a count it did not hold or greet.
func peersName(what string, asked, held, greeted int) string {
	name := fmt.Sprintf("%s, %s peers", what, fmtCount(asked))
	if held != asked {
		name = fmt.Sprintf("%s, %s peers held of %s asked", what, fmtCount(held), fmtCount(asked))
	}
	if greeted >= 0 && greeted != held {
		name += fmt.Sprintf(", %s greeted", fmtCount(greeted))
	}
	return name
}

// fdHeadroom is the descriptors a process needs besides its connections
// (listeners, pipes, the store, the audit log, the Go runtime).
const fdHeadroom = 256

// fdShortfall says when limit (a process's descriptor limit, raised to
// its hard limit) is below what count connections need; "" when it is not.
func fdShortfall(count int, limit uint64) string {
	if need := uint64(count + fdHeadroom); limit < need {
		return fmt.Sprintf("the file descriptor hard limit (%d) is below the %d that %d peers need", limit, need, count)
	}
	return ""
}

// idleResult is one child holding connections.
type idleResult struct {
	asked, held        int
	rss0, rss1, rssRaw int64 // before, after (post-GC), after (before the GC)
	heap0, heap1       uint64
	disk0, disk1       int64  // the child's home on disk, before and after
	childFDs           uint64 // the child's file descriptor limit
	firstErr           error
	dialErrs           int
	greeted            int // peers whose greeting was answered (greeted rows)
	greetErrs          int // greetings that failed (greeted rows)
	firstGreetErr      error
}

func (r idleResult) perPeer() float64 { return float64(r.rss1-r.rss0) / float64(max(r.held, 1)) }

func (r idleResult) row(key, name, fdNote string) row {
	out := row{key: key, name: name, unit: unitKB, value: r.perPeer() / 1024, held: r.held, asked: r.asked,
		note: fmt.Sprintf("held %d of %d; RSS %.0f → %.0f MB; before GC %s per peer; Go heap %s per peer",
			r.held, r.asked, float64(r.rss0)/(1<<20), float64(r.rss1)/(1<<20),
			fmtKB(float64(r.rssRaw-r.rss0)/float64(max(r.held, 1))), fmtKB((float64(r.heap1)-float64(r.heap0))/float64(max(r.held, 1))))}
	if r.disk1 > r.disk0 {
		out.note += fmt.Sprintf("; on disk (audit log, store) %s per peer", fmtKB(float64(r.disk1-r.disk0)/float64(max(r.held, 1))))
	}
	if r.dialErrs > 0 {
		out.note += fmt.Sprintf("; %d dials failed, first: %s", r.dialErrs, oneLine(fmt.Sprint(r.firstErr)))
	}
	if r.greetErrs > 0 {
		out.note += fmt.Sprintf("; %d greetings failed, first: %s", r.greetErrs, oneLine(fmt.Sprint(r.firstGreetErr)))
	}
	if fdNote != "" {
		out.note += "; " + fdNote
	}
	if s := fdShortfall(r.asked, r.childFDs); s != "" {
		out.note += "; the child's: " + s
	}
	return out
}

// measureIdle starts a child of role, connects every peer to it over TCP,
// has each greet it once when gs is given (the greeters of peers, in
// order), lets the connections settle, and measures the child's growth.
func measureIdle(ctx context.Context, root, role string, peers []host.Host, gs []greeter, settle time.Duration) (idleResult, error) {
	r := idleResult{asked: len(peers)}
	c, err := startChild(childSpec{Role: role, Dir: root, ConnsHigh: 2 * len(peers)})
	if err != nil {
		return r, err
	}
	defer c.stop()
	r.childFDs = c.fds
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
	r.heap0, r.disk0 = before.HeapInuse, before.HomeBytes

	r.dialErrs, r.firstErr = dialAll(ctx, peers, info)
	defer func() {
		for _, p := range peers {
			p.Network().ClosePeer(info.ID)
			p.Peerstore().RemovePeer(info.ID)
		}
	}()
	if gs != nil {
		clients, err := greetClients(peers, gs, info.ID)
		if err != nil {
			return r, err
		}
		r.greeted, r.greetErrs, r.firstGreetErr = greetAll(ctx, clients)
	}
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
	time.Sleep(settle)
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
	r.heap1, r.held, r.disk1 = after.HeapInuse, after.Conns, after.HomeBytes
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
