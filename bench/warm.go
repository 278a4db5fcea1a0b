package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// warmPair is two daemons, Bob connected to Alice over TCP, and what one
// greeting between them carries.
type warmPair struct {
	alice, bob *daemon
	alicePID   peer.ID
	request    []byte              // Bob's greeting, framed as on the wire
	reply      []byte              // Alice's answer, framed as on the wire
	view       *negotiate.Document // Alice's view for Bob, verified
}

// newWarmPair starts Alice and Bob with homes under root, connects them
// and greets twice, keeping the second greeting's two messages. sync is their
// durability.sync.
func newWarmPair(ctx context.Context, root, sync string) (*warmPair, error) {
	cfg := func() *node.Config {
		c := benchConfig()
		c.Durability.Sync = sync
		return c
	}
	alice, err := startDaemon(root, cfg())
	if err != nil {
		return nil, err
	}
	bob, err := startDaemon(root, cfg())
	if err != nil {
		alice.close()
		return nil, err
	}
	p := &warmPair{alice: alice, bob: bob}
	if err := p.greetOnce(ctx); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *warmPair) greetOnce(ctx context.Context) error {
	addr, err := addrFor(p.alice.Node, tcpTransport)
	if err != nil {
		return err
	}
	if p.alicePID, err = connectOver(ctx, p.bob.Node, addr, tcpTransport); err != nil {
		return err
	}
	r, err := p.bob.QueryCapabilities(ctx, p.alicePID, negotiate.Proposal{})
	if err != nil {
		return fmt.Errorf("first greeting: %w", err)
	}
	if got := len(r.View.Capabilities); got != 20 {
		return fmt.Errorf("first greeting: Alice's view has %d capabilities, want 20", got)
	}
	p.view = r.View
	// The floor carries what a warm greeting carries: the second one's
	// frames, where Alice, whose view Bob now holds, answers without it.
	if r, err = p.bob.QueryCapabilities(ctx, p.alicePID, negotiate.Proposal{}); err != nil {
		return fmt.Errorf("second greeting: %w", err)
	}
	entries, err := p.bob.Audit().Entries(r.ConversationID)
	if err != nil || len(entries) != 2 {
		return fmt.Errorf("reading the first greeting from the audit log: %d entries, %v", len(entries), err)
	}
	var out, back bytes.Buffer
	if err := gossip.WriteMessage(&out, entries[0].Message); err != nil {
		return fmt.Errorf("framing the greeting: %w", err)
	}
	if err := gossip.WriteMessage(&back, entries[1].Message); err != nil {
		return fmt.Errorf("framing the answer: %w", err)
	}
	p.request, p.reply = out.Bytes(), back.Bytes()
	return nil
}

func (p *warmPair) close() {
	p.bob.close()
	p.alice.close()
}

// query is one QueryCapabilities from Bob to Alice.
func (p *warmPair) query(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if _, err := p.bob.QueryCapabilities(ctx, p.alicePID, negotiate.Proposal{}); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// greet is one Greet from Bob to Alice. The conversation it opens is then
// closed, untimed, and both sides are waited for until they let it go, so
// that closing costs nothing to the next iteration.
func (p *warmPair) greet(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	r, err := p.bob.Greet(ctx, p.alicePID, negotiate.Proposal{})
	if err != nil {
		return 0, err
	}
	d := time.Since(start)
	if _, err := p.bob.Say(r.ConversationID, gossip.PhaseClose, "Bye."); err != nil {
		return 0, fmt.Errorf("closing the conversation: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for open(p.alice, r.ConversationID) || open(p.bob, r.ConversationID) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("conversation %s still open 10 s after its close", r.ConversationID)
		}
		time.Sleep(100 * time.Microsecond) // polling observable state
	}
	return d, nil
}

func open(d *daemon, convID string) bool {
	return slices.ContainsFunc(d.Conversations().Open(), func(c node.ConversationInfo) bool { return c.ID == convID })
}

// floor is the physical floor of a greeting on the same connection: a
// new stream, Bob's greeting's bytes out and Alice's answer's bytes back,
// each signed by its sender and verified verifies times by its receiver
// (Ed25519 from the standard library, as ifaced uses).
type floor struct {
	p        *warmPair
	proto    protocol.ID
	verifies int
	bobKey   ed25519.PrivateKey
	aliceKey ed25519.PrivateKey
}

func (p *warmPair) newFloor(verifies int) (*floor, error) {
	f := &floor{p: p, verifies: verifies, proto: protocol.ID(fmt.Sprintf("/ifaced-bench/floor-%d/1.0.0", verifies))}
	var err error
	if _, f.bobKey, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	if _, f.aliceKey, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	bobPub := f.bobKey.Public().(ed25519.PublicKey)
	p.alice.Host().SetStreamHandler(f.proto, func(s network.Stream) {
		s.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := readVerified(s, bobPub, verifies); err != nil {
			s.Reset()
			return
		}
		if err := writeSigned(s, p.reply, f.aliceKey); err != nil {
			s.Reset()
			return
		}
		s.Close()
	})
	return f, nil
}

func (f *floor) once(ctx context.Context) (time.Duration, error) {
	alicePub := f.aliceKey.Public().(ed25519.PublicKey)
	start := time.Now()
	s, err := f.p.bob.Host().NewStream(ctx, f.p.alicePID, f.proto)
	if err != nil {
		return 0, fmt.Errorf("opening a stream: %w", err)
	}
	s.SetDeadline(time.Now().Add(10 * time.Second))
	if err := writeSigned(s, f.p.request, f.bobKey); err != nil {
		s.Reset()
		return 0, err
	}
	s.CloseWrite()
	if _, err := readVerified(s, alicePub, f.verifies); err != nil {
		s.Reset()
		return 0, err
	}
	io.Copy(io.Discard, s) // to the end of the stream, as a greeting's initiator sees it
	s.Close()
	return time.Since(start), nil
}

// fsyncProbe appends 1 KB to a file in dir and fsyncs it: the unit of
// durability an audit record or a store write pays.
type fsyncProbe struct{ f *os.File }

func newFsyncProbe(dir string) (*fsyncProbe, error) {
	f, err := os.OpenFile(filepath.Join(dir, "fsync-probe"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the fsync probe: %w", err)
	}
	return &fsyncProbe{f: f}, nil
}

func (p *fsyncProbe) once() (time.Duration, error) {
	line := bytes.Repeat([]byte("x"), 1023)
	start := time.Now()
	if _, err := p.f.Write(append(line, '\n')); err != nil {
		return 0, fmt.Errorf("fsync probe: %w", err)
	}
	if err := p.f.Sync(); err != nil {
		return 0, fmt.Errorf("fsync probe: %w", err)
	}
	return time.Since(start), nil
}

func (p *fsyncProbe) close() { p.f.Close() }

// warmSection is row 1 of the table.
func warmSection(ctx context.Context, root string, n int, profile string) section {
	sec := section{title: "1. Warm greeting on an open connection, 20-capability documents each way",
		baseline: "(b) the floor"}
	fail := func(err error) section {
		sec.rows = append(sec.rows, failed("setup", err))
		return sec
	}
	p, err := newWarmPair(ctx, root, node.SyncInterval)
	if err != nil {
		return fail(err)
	}
	defer p.close()
	// The same pair fsyncing each audit entry and seen ID before acting
	// (durable against power loss): what the default's batching saves.
	sp, err := newWarmPair(ctx, root, node.SyncAlways)
	if err != nil {
		return fail(fmt.Errorf("the pair with sync = always: %w", err))
	}
	defer sp.close()
	floor1, err := p.newFloor(1)
	if err != nil {
		return fail(err)
	}
	floor2, err := p.newFloor(2)
	if err != nil {
		return fail(err)
	}
	cards, err := startCardServer(p.view, p.alice.id)
	if err != nil {
		return fail(err)
	}
	defer cards.close()
	keepAlive := cards.client(true)
	mcps, err := startMCPServer(twentyCapabilities())
	if err != nil {
		return fail(err)
	}
	defer mcps.close()
	probe, err := newFsyncProbe(root)
	if err != nil {
		return fail(err)
	}
	defer probe.close()

	fetch := func(path string) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			start := time.Now()
			if _, err := cards.fetchCard(ctx, keepAlive, path); err != nil {
				return 0, err
			}
			return time.Since(start), nil
		}
	}
	var (
		query     = &variant{name: "(a) ifaced QueryCapabilities", once: func() (time.Duration, error) { return p.query(ctx) }}
		greet     = &variant{name: "(a) ifaced Greet (conversation stays open)", once: func() (time.Duration, error) { return p.greet(ctx) }}
		querySync = &variant{name: "(a′) QueryCapabilities, durability.sync = always", once: func() (time.Duration, error) { return sp.query(ctx) }}
		fl1       = &variant{name: "(b) floor: stream round trip, 1 sign + 1 verify each way", once: func() (time.Duration, error) { return floor1.once(ctx) }}
		fl2       = &variant{name: "(b′) floor, 1 sign + 2 verify each way", once: func() (time.Duration, error) { return floor2.once(ctx) }}
		card      = &variant{name: "(c) HTTPS keep-alive: signed A2A card, signed per request", once: fetch(cardPath)}
		cached    = &variant{name: "(c) HTTPS keep-alive: signed A2A card, signed once", once: fetch(cachedCardPath)}
		mcpInit   = &variant{name: "(d) MCP initialize (streamable HTTP)", once: func() (time.Duration, error) { return mcps.connect(ctx, false) }}
		mcpList   = &variant{name: "(d) MCP initialize + tools/list (20 tools)", once: func() (time.Duration, error) { return mcps.connect(ctx, true) }}
		fsync     = &variant{name: "fsync: append 1 KB + fsync in the homes' directory", once: probe.once}
	)
	vs := []*variant{query, greet, querySync, fl1, fl2, card, cached, mcpInit, mcpList, fsync}
	interleave(vs, max(n/10, 3), n, 10, func() bool { return ctx.Err() != nil })
	pair := measureSignVerify(n*5, len(p.reply), len(p.request))

	base := baseOf(fl1)
	sec.rows = append(sec.rows,
		rowOf(query, base, fmt.Sprintf("%.1f KB out, %.1f KB back (CBOR frames)", kb(p.request), kb(p.reply))),
		rowOf(greet, base, "close untimed"))
	sec.rows = append(sec.rows, rowOf(querySync, base, "an fsync per audit entry and seen ID before acting; (a) batches them every second"))
	sec.rows = append(sec.rows,
		rowOf(fl1, base, "same connection, same bytes; the floor of DESIGN §8"),
		rowOf(fl2, base, "what a greeting costs when the view in it is new and verified too"),
		rowOf(card, base, fmt.Sprintf("TLS 1.3, HTTP/1.1; card %.1f KB; JCS + JWS verify (negotiate.VerifyAgentCard)", float64(cards.size)/1024)),
		rowOf(cached, base, "the same card, signed once at start"),
		rowOf(mcpInit, base, "client.Connect: initialize + initialized; plain HTTP, no signatures"),
		rowOf(mcpList, base, "the same, then tools/list: the capabilities themselves"),
		rowOf(fsync, base, "a greeting fsyncs several times on each side (audit log, store)"),
	)
	if pair.err != nil {
		sec.rows = append(sec.rows, failed("Ed25519 sign + verify", pair.err))
	} else {
		sec.rows = append(sec.rows,
			latencyRow(fmt.Sprintf("Ed25519 sign, %.1f KB", float64(pair.signSize)/1024), pair.sign, base, "crypto/ed25519, one core"),
			latencyRow(fmt.Sprintf("Ed25519 verify, %.1f KB", float64(pair.verSize)/1024), pair.verify, base, ""))
	}
	for _, cmp := range []*variant{cached, card, mcpInit, mcpList} {
		if b := baseOf(cmp); b > 0 && baseOf(query) > 0 {
			sec.notes = append(sec.notes, fmt.Sprintf("(a) QueryCapabilities ÷ %s = %s", cmp.name, fmtRatio(float64(baseOf(query))/float64(b))))
		}
	}
	if profile != "" && ctx.Err() == nil {
		if err := profileQueries(ctx, p, n, profile); err != nil {
			sec.notes = append(sec.notes, "CPU profile failed: "+err.Error())
		} else {
			sec.notes = append(sec.notes, fmt.Sprintf("CPU profile of %d more warm QueryCapabilities: go tool pprof -top %s", n, profile))
		}
	}
	return sec
}

// profileQueries writes a CPU profile of n warm QueryCapabilities (both
// daemons are in this process, so it holds both sides of the greeting).
func profileQueries(ctx context.Context, p *warmPair, n int, path string) error {
	stop, err := profileTo(path)
	if err != nil {
		return err
	}
	for range n {
		if _, err := p.query(ctx); err != nil {
			stop()
			return err
		}
	}
	return stop()
}

// tmpfsDir makes a directory on /dev/shm for homes whose fsyncs cost
// nothing, unless root is on tmpfs already or there is no /dev/shm ("").
func kb(b []byte) float64 { return float64(len(b)) / 1024 }
