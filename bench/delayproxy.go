package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// This kernel has no netem (tc qdisc … netem), and the bench runs
// unprivileged on loopback, so a path with a round-trip time is made in
// user space: a delayProxy listens on 127.0.0.1 and forwards to one
// destination, holding everything it forwards for the one-way time
// (half the RTT) in each direction. The latency section (latency.go) puts
// one in front of every party it measures.
//
// TCP. The proxy's kernel completes the client's handshake at once, so
// the proxy models it: it dials the destination at the moment the
// destination would accept in a real network (the client's SYN at the
// accept, the server's accept one RTT and one one-way time later), and
// releases no byte from the client before then, so that a connect costs
// its round trip as it does on a wire. Then each chunk read is released
// one one-way time after it arrived, in order (a chunk never overtakes
// the one before it), by a queue with release times: a slow reader on
// one side holds up delivery, as a full receive window would, but never
// the timer. Closing a direction (EOF) is delayed like data.
//
// UDP. One upstream socket per client address; each datagram is
// forwarded after the one-way time, both ways.
//
// Loss. For UDP a datagram is dropped with the loss probability, each
// way, and QUIC recovers as it would. A user-space proxy cannot drop a
// TCP segment (the kernels on either side have already acknowledged it),
// so for TCP a loss is modelled by its cost: a chunk is held back one
// retransmission timeout longer, with the probability that one of the
// 1,448-byte segments it would travel in is lost (and everything behind
// it waits, as TCP's in-order delivery makes it); the timeout is Linux's,
// the smoothed RTT plus at least TCP_RTO_MIN (200 ms). A lost SYN or
// SYN-ACK costs the initial timeout, 1 s (RFC 6298). Tail loss probes,
// fast retransmit and SACK, which recover some losses sooner, are not
// modelled: TCP rows under loss are an upper estimate.

// pathModel is what a proxy does to the path: the round-trip time, and
// the probability that a packet is lost.
type pathModel struct {
	rtt  time.Duration
	loss float64 // 0 to 1
}

func (m pathModel) oneWay() time.Duration { return m.rtt / 2 }

// rto is what a lost TCP segment costs: Linux's retransmission timeout,
// the smoothed RTT plus at least TCP_RTO_MIN.
func (m pathModel) rto() time.Duration { return m.rtt + 200*time.Millisecond }

const (
	synRTO      = time.Second // the initial retransmission timeout (RFC 6298 §2.1), what a lost SYN costs
	segmentSize = 1448        // a TCP segment's payload on a 1,500-byte MTU with timestamps
	queueLen    = 1024        // chunks (TCP) or datagrams (UDP) in flight per direction
)

// A delayProxy forwards one listening address on 127.0.0.1 to one
// destination through a pathModel. It counts what it forwards, so that
// a measurement can check its traffic went through it, and can record
// the chunks it sees (trace).
type delayProxy struct {
	network string // "tcp" or "udp"
	target  string // host:port
	model   pathModel
	ln      net.Listener // tcp
	pc      *net.UDPConn // udp

	mu      sync.Mutex
	rng     *rand.Rand
	closed  bool
	open    map[net.Conn]struct{} // connections to close with the proxy
	flows   map[string]*udpFlow   // udp: by client address
	tracing bool
	events  []chunkEvent
	wg      sync.WaitGroup

	accepted atomic.Int64 // connections (tcp) or client addresses (udp) served
	up, down atomic.Int64 // bytes forwarded toward the destination, and back
	lost     atomic.Int64 // udp: datagrams dropped; tcp: chunks held back a timeout
}

var proxySeed atomic.Uint64

// newDelayProxy listens on 127.0.0.1 (a port the system picks) and
// forwards network ("tcp" or "udp") traffic to target through m.
func newDelayProxy(network, target string, m pathModel) (*delayProxy, error) {
	if m.rtt < 0 || m.loss < 0 || m.loss > 1 {
		return nil, fmt.Errorf("a delaying proxy with RTT %s and loss %g: want an RTT of 0 or more and a loss from 0 to 1", m.rtt, m.loss)
	}
	seed := proxySeed.Add(1)
	p := &delayProxy{network: network, target: target, model: m, rng: rand.New(rand.NewPCG(seed, 26)),
		open: map[net.Conn]struct{}{}, flows: map[string]*udpFlow{}}
	switch network {
	case "tcp":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listening for a TCP proxy: %w", err)
		}
		p.ln = ln
		p.wg.Go(p.acceptTCP)
	case "udp":
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, fmt.Errorf("listening for a UDP proxy: %w", err)
		}
		p.pc = pc
		p.wg.Go(p.serveUDP)
	default:
		return nil, fmt.Errorf("a delaying proxy for %q: want tcp or udp", network)
	}
	return p, nil
}

// addr is where the proxy listens, host:port.
func (p *delayProxy) addr() string {
	if p.ln != nil {
		return p.ln.Addr().String()
	}
	return p.pc.LocalAddr().String()
}

func (p *delayProxy) port() int {
	_, port, _ := net.SplitHostPort(p.addr())
	n, _ := strconv.Atoi(port)
	return n
}

// forwarded is the bytes forwarded so far, both ways.
func (p *delayProxy) forwarded() int64 { return p.up.Load() + p.down.Load() }

// close stops the proxy and every connection through it, and waits for
// its goroutines.
func (p *delayProxy) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.open {
		c.Close()
	}
	for _, f := range p.flows {
		f.up.Close() // ends its reader, which closes toClient
	}
	p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
	} else {
		p.pc.Close()
	}
	p.wg.Wait()
}

// track registers c to be closed with the proxy; false when the proxy is
// closing already (c is then closed).
func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.open[c] = struct{}{}
	return true
}

func (p *delayProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.open, c)
		c.Close()
	}
}

// lose reports whether a loss hits at least one of n packets.
func (p *delayProxy) lose(n int) bool {
	if p.model.loss == 0 || n <= 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64() < 1-math.Pow(1-p.model.loss, float64(n))
}

// A chunkEvent is one chunk (TCP) or datagram (UDP) as the proxy read it,
// before its delay: when, on which connection (numbered from 1 in
// accept order), which way ('>' toward the destination, '<' back), its
// size and its first bytes.
type chunkEvent struct {
	at   time.Time
	conn int64
	from string // the client's address, host:port
	via  string // the proxy's address
	dir  byte
	n    int
	head []byte
}

// startTrace starts recording chunks; takeTrace stops and returns them.
func (p *delayProxy) startTrace() {
	p.mu.Lock()
	p.tracing, p.events = true, nil
	p.mu.Unlock()
}

func (p *delayProxy) takeTrace() []chunkEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev := p.events
	p.tracing, p.events = false, nil
	return ev
}

func (p *delayProxy) record(conn int64, from string, dir byte, b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tracing {
		p.events = append(p.events, chunkEvent{at: time.Now(), conn: conn, from: from, via: p.addr(), dir: dir, n: len(b),
			head: append([]byte(nil), b[:min(len(b), 32)]...)})
	}
}

// A release is a chunk and when it may be delivered; eof is the end of
// the direction (reset: ended by an error, so the other side is closed
// rather than half-closed).
type release struct {
	at         time.Time
	data       []byte
	eof, reset bool
}

// sleepUntil waits for t.
func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

func (p *delayProxy) acceptTCP() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			return
		}
		p.wg.Go(func() { p.serveTCP(c) })
	}
}

// serveTCP forwards one client connection: the destination is dialled
// when it would accept on a wire, and each direction's chunks are
// released a one-way time after they were read.
func (p *delayProxy) serveTCP(client net.Conn) {
	id := p.accepted.Add(1)
	ow := p.model.oneWay()
	handshake := p.model.rtt
	if p.lose(2) { // the SYN or the SYN-ACK
		handshake += synRTO
		p.lost.Add(1)
	}
	connected := time.Now().Add(handshake) // when the client's connect would return
	acceptAt := connected.Add(ow)          // and the server's accept
	toUp := make(chan release, queueLen)
	var upConn atomic.Pointer[net.TCPConn]
	var ended sync.WaitGroup // the two directions
	ended.Add(2)
	p.wg.Go(func() {
		defer ended.Done()
		sleepUntil(acceptAt)
		c, err := net.DialTimeout("tcp", p.target, 10*time.Second)
		if err != nil || !p.track(c) {
			if c != nil {
				c.Close()
			}
			p.untrack(client)
			drain(toUp)
			ended.Done() // the other direction never starts
			return
		}
		up := c.(*net.TCPConn)
		upConn.Store(up)
		toClient := make(chan release, queueLen)
		p.wg.Go(func() { p.readInto(up, toClient, id, client.RemoteAddr().String(), '<', time.Time{}, &p.down) })
		p.wg.Go(func() {
			defer ended.Done()
			p.deliver(toClient, client, up)
		})
		p.deliver(toUp, up, client)
	})
	p.readInto(client, toUp, id, client.RemoteAddr().String(), '>', connected, &p.up)
	ended.Wait()
	if up := upConn.Load(); up != nil {
		p.untrack(up)
	}
	p.untrack(client)
}

// readInto reads src's chunks into q, each with its release time: a
// one-way time after it was sent, and a retransmission timeout later
// when a segment of it is lost, but never before the chunk ahead of it.
// A chunk counts as sent when it was read, or at sendable when that is
// later (the client's bytes read before its connect would have completed
// on a wire). At the end it queues the EOF and closes q.
func (p *delayProxy) readInto(src net.Conn, q chan<- release, id int64, from string, dir byte, sendable time.Time, count *atomic.Int64) {
	defer close(q)
	ow := p.model.oneWay()
	var last time.Time
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		now := time.Now()
		if now.Before(sendable) {
			now = sendable
		}
		if n > 0 {
			data := append([]byte(nil), buf[:n]...)
			count.Add(int64(n))
			p.record(id, from, dir, data)
			at := now.Add(ow)
			if p.lose((n + segmentSize - 1) / segmentSize) {
				at = at.Add(p.model.rto())
				p.lost.Add(1)
			}
			if at.Before(last) {
				at = last
			}
			last = at
			q <- release{at: at, data: data}
		}
		if err != nil {
			at := now.Add(ow)
			if at.Before(last) {
				at = last
			}
			q <- release{at: at, eof: true, reset: !errors.Is(err, io.EOF)}
			return
		}
	}
}

// deliver writes q's chunks to dst, each at its release time. At the
// EOF it half-closes dst (or closes it, after an error); when a write
// fails it closes both sides, which ends their readers.
func (p *delayProxy) deliver(q <-chan release, dst, src net.Conn) {
	for r := range q {
		sleepUntil(r.at)
		if r.eof {
			if tc, ok := dst.(*net.TCPConn); ok && !r.reset {
				tc.CloseWrite()
			} else {
				dst.Close()
			}
			continue // the reader closes q after the EOF
		}
		if _, err := dst.Write(r.data); err != nil {
			dst.Close()
			src.Close()
			drain(q)
			return
		}
	}
}

func drain(q <-chan release) {
	for range q {
	}
}

// udpFlow is one client address's upstream socket and its two queues.
type udpFlow struct {
	id       int64
	client   *net.UDPAddr
	up       *net.UDPConn
	toUp     chan release
	toClient chan release
}

func (p *delayProxy) serveUDP() {
	target, err := net.ResolveUDPAddr("udp", p.target)
	if err != nil {
		return
	}
	defer func() {
		// This loop is the only sender on the flows' toUp queues.
		p.mu.Lock()
		for _, f := range p.flows {
			close(f.toUp)
		}
		p.mu.Unlock()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := p.pc.ReadFromUDP(buf)
		if err != nil {
			return // closed
		}
		now := time.Now()
		f := p.flow(from, target)
		if f == nil {
			return
		}
		data := append([]byte(nil), buf[:n]...)
		p.up.Add(int64(n))
		p.record(f.id, f.client.String(), '>', data)
		p.queueDatagram(f.toUp, data, now)
	}
}

// queueDatagram queues one datagram for release a one-way time from now,
// unless it is lost, or the queue is full (a router's queue overflowing
// drops too).
func (p *delayProxy) queueDatagram(q chan<- release, data []byte, now time.Time) {
	if p.lose(1) {
		p.lost.Add(1)
		return
	}
	select {
	case q <- release{at: now.Add(p.model.oneWay()), data: data}:
	default:
		p.lost.Add(1)
	}
}

// flow is from's flow, made on its first datagram; nil when the proxy is
// closing.
func (p *delayProxy) flow(from, target *net.UDPAddr) *udpFlow {
	key := from.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if f := p.flows[key]; f != nil {
		return f
	}
	up, err := net.DialUDP("udp", nil, target)
	if err != nil {
		return nil
	}
	f := &udpFlow{id: p.accepted.Add(1), client: from, up: up,
		toUp: make(chan release, queueLen), toClient: make(chan release, queueLen)}
	p.flows[key] = f
	p.wg.Go(func() {
		for r := range f.toUp {
			sleepUntil(r.at)
			f.up.Write(r.data) // a datagram that cannot be sent is lost, as on a wire
		}
	})
	p.wg.Go(func() {
		for r := range f.toClient {
			sleepUntil(r.at)
			p.pc.WriteToUDP(r.data, f.client)
		}
	})
	p.wg.Go(func() {
		defer close(f.toClient) // the only sender on it
		buf := make([]byte, 64<<10)
		for {
			n, err := f.up.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // ICMP unreachable and the like: the datagram is lost
			}
			now := time.Now()
			data := append([]byte(nil), buf[:n]...)
			p.down.Add(int64(n))
			p.record(f.id, f.client.String(), '<', data)
			p.queueDatagram(f.toClient, data, now)
		}
	})
	return f
}
