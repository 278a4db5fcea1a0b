package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ifaced/ifaced/node/converse"

	"github.com/ifaced/ifaced/node/config"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node"
	"github.com/libp2p/go-libp2p/core/peer"
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
func newWarmPair(ctx context.Context, root, sync string, opts ...node.Option) (*warmPair, error) {
	cfg := func() *config.Config {
		c := benchConfig()
		c.Durability.Sync = sync
		return c
	}
	alice, err := startDaemon(root, cfg(), opts...)
	if err != nil {
		return nil, err
	}
	bob, err := startDaemon(root, cfg(), opts...)
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
	return slices.ContainsFunc(d.Conversations().Open(), func(c converse.ConversationInfo) bool { return c.ID == convID })
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

// warmSection is section 1 of the table.
func warmSection(ctx context.Context, root string, n int, profile string) section {
	sec := section{title: "1. Warm greeting on an open connection, 20-capability documents each way",
		baseline: "floor.long_lived"}
	fail := func(err error) section {
		sec.rows = append(sec.rows, failed("warm.setup", "setup", err))
		return sec
	}
	p, err := newWarmPair(ctx, root, config.SyncInterval)
	if err != nil {
		return fail(err)
	}
	defer p.close()
	// The same pair fsyncing each audit entry and seen ID before acting
	// (durable against power loss): what the default's batching saves.
	sp, err := newWarmPair(ctx, root, config.SyncAlways)
	if err != nil {
		return fail(fmt.Errorf("the pair with sync = always: %w", err))
	}
	defer sp.close()
	longLived, err := p.newLongLivedFloor(ctx, true)
	if err != nil {
		return fail(err)
	}
	defer longLived.close()
	unsigned, err := p.newLongLivedFloor(ctx, false)
	if err != nil {
		return fail(err)
	}
	defer unsigned.close()
	newStream, err := p.newStreamFloor()
	if err != nil {
		return fail(err)
	}
	cards, err := startCardServer(p.view, p.alice.id)
	if err != nil {
		return fail(err)
	}
	defer cards.close()
	keepAlive := cards.client(true)
	// The client that revalidates holds the card and its tag from a
	// first fetch, verified then.
	held, err := cards.fetchCard(ctx, keepAlive, cachedCardPath)
	if err != nil {
		return fail(fmt.Errorf("the first fetch of the card: %w", err))
	}
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

	timed := func(f func() error) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			start := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			return time.Since(start), nil
		}
	}
	fetch := func(path string) func() (time.Duration, error) {
		return timed(func() error { _, err := cards.fetchCard(ctx, keepAlive, path); return err })
	}
	mcpConnect := func(version string, list bool) func() (time.Duration, error) {
		return func() (time.Duration, error) { return mcps.connect(ctx, version, list) }
	}
	var (
		query      = &variant{key: "warm.greeting", name: "ifaced QueryCapabilities", once: func() (time.Duration, error) { return p.query(ctx) }}
		greet      = &variant{key: "warm.greet_conversation", name: "ifaced Greet (a conversation; its close untimed)", once: func() (time.Duration, error) { return p.greet(ctx) }}
		querySync  = &variant{key: "warm.greeting_sync_always", name: "QueryCapabilities, durability.sync = always", once: func() (time.Duration, error) { return sp.query(ctx) }}
		floorLL    = &variant{key: "floor.long_lived", name: "floor: long-lived stream, 1 sign + 1 verify each way", once: longLived.once}
		floorRaw   = &variant{key: "floor.long_lived_unsigned", name: "long-lived stream, no crypto (transport alone)", once: unsigned.once}
		floorNS    = &variant{key: "floor.new_stream", name: "floor: new stream, 1 sign + 1 verify each way", once: func() (time.Duration, error) { return newStream.once(ctx) }}
		cardOnce   = &variant{key: "a2a.full", name: "A2A card over HTTPS keep-alive: full fetch + verify (signed once)", once: fetch(cachedCardPath)}
		cardSigned = &variant{key: "a2a.full_signed_per_request", name: "the same, the server signing per request", once: fetch(cardPath)}
		card304    = &variant{key: "a2a.etag_304", name: "A2A card revalidated: If-None-Match → 304", once: timed(func() error { return cards.revalidate(ctx, keepAlive, cachedCardPath, held) })}
		discover   = &variant{key: "mcp.discover", name: "MCP " + mcpStateless + ": server/discover", once: mcpConnect(mcpStateless, false)}
		discList   = &variant{key: "mcp.discover_tools_list", name: "MCP " + mcpStateless + ": server/discover + tools/list", once: mcpConnect(mcpStateless, true)}
		initialize = &variant{key: "mcp.initialize", name: "MCP " + mcpSession + ": initialize + initialized", once: mcpConnect(mcpSession, false)}
		initList   = &variant{key: "mcp.initialize_tools_list", name: "MCP " + mcpSession + ": initialize + initialized + tools/list", once: mcpConnect(mcpSession, true)}
		fsync      = &variant{key: "fsync.1kb", name: "append 1 KB + fsync in the homes' directory", once: probe.once}
	)
	vs := []*variant{query, greet, querySync, floorLL, floorRaw, floorNS, cardOnce, cardSigned, card304, discover, discList, initialize, initList, fsync}
	interleave(vs, max(n/10, 3), n, 10, func() bool { return ctx.Err() != nil })
	pair := measureSignVerify(n*5, len(p.reply), len(p.request))

	sec.rows = append(sec.rows,
		rowOf(query, fmt.Sprintf("%.1f KB out, %.1f KB back (CBOR frames): neither unchanged view is sent again", kb(p.request), kb(p.reply))),
		rowOf(greet, ""),
		rowOf(querySync, "an fsync per audit entry and seen ID before acting; the default batches them every second"),
		rowOf(floorLL, "the same connection and bytes; the floor of DESIGN §8"),
		rowOf(floorRaw, ""),
		rowOf(floorNS, "a stream opened per round trip, as a conversation's greeting does (queries keep theirs)"),
		rowOf(cardOnce, fmt.Sprintf("TLS 1.3, HTTP/1.1; card %.1f KB; JCS + JWS verify (negotiate.VerifyAgentCard)", kb(cards.card))),
		rowOf(cardSigned, "as node/httpapi serves it"),
		rowOf(card304, "the client holds the card it verified; strong ETag = SHA-256 of the signed card's bytes; the analogue of view_unchanged"),
		rowOf(discover, "stateless: one POST; go-sdk, streamable HTTP, keep-alive, no signatures"),
		rowOf(discList, "then tools/list: the capabilities themselves"),
		rowOf(initialize, "a session: two POSTs (its DELETE untimed)"),
		rowOf(initList, ""),
		rowOf(fsync, "a greeting fsyncs on each side (audit log, store), batched by default"),
	)
	if pair.err != nil {
		sec.rows = append(sec.rows, failed("ed25519.sign", "Ed25519 sign + verify", pair.err))
	} else {
		sec.rows = append(sec.rows,
			latencyRow("ed25519.sign", fmt.Sprintf("Ed25519 sign, %.1f KB", float64(pair.signSize)/1024), pair.sign, "crypto/ed25519, one core"),
			latencyRow("ed25519.verify", fmt.Sprintf("Ed25519 verify, %.1f KB", float64(pair.verSize)/1024), pair.verify, ""))
	}
	if ctx.Err() == nil {
		rows, ratios := proofRows(ctx, root, n) // proofs.go
		sec.rows, sec.ratios = append(sec.rows, rows...), append(sec.ratios, ratios...)
	}
	for _, den := range []string{"floor.new_stream", "a2a.full", "a2a.full_signed_per_request", "a2a.etag_304",
		"mcp.discover_tools_list", "mcp.initialize_tools_list"} {
		sec.ratios = append(sec.ratios, ratioSpec{"warm.greeting", den})
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

func kb(b []byte) float64 { return float64(len(b)) / 1024 }
