package node

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/mail"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// pathCut forwards TCP connections to target until a direction is cut:
// from then on the bytes going that way are read and dropped, as on a
// path that died under a connection (a relay killed, a router gone): the
// writer's writes succeed, nothing arrives, and no close tells either
// side. Only loopback, only this test's own daemons.
type pathCut struct {
	ln      net.Listener
	target  string
	toward  atomic.Bool // dialer → target is cut
	back    atomic.Bool // target → dialer is cut
	mu      sync.Mutex
	conns   []net.Conn
	stopped bool
}

func newPathCut(t *testing.T, target string) *pathCut {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pathCut{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *pathCut) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go p.copy(out, in, &p.toward)
		go p.copy(in, out, &p.back)
	}
}

// copy moves bytes from src to dst, or drops them while cut holds.
func (p *pathCut) copy(dst, src net.Conn, cut *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

func (p *pathCut) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	for _, c := range p.conns {
		c.Close()
	}
}

// addr is the proxy's multiaddr for the daemon behind it.
func (p *pathCut) addr(behind peer.ID) string {
	a := p.ln.Addr().(*net.TCPAddr)
	return "/ip4/127.0.0.1/tcp/" + strconv.Itoa(a.Port) + "/p2p/" + behind.String()
}

// tcpAddrOf is the host:port of d's first TCP listen address.
func tcpAddrOf(t *testing.T, d *testDaemon) string {
	t.Helper()
	for _, a := range d.Host().Network().ListenAddresses() {
		parts := strings.Split(a.String(), "/")
		if len(parts) > 4 && parts[1] == "ip4" && parts[3] == "tcp" {
			return parts[2] + ":" + parts[4]
		}
	}
	t.Fatalf("%s listens on no TCP address: %v", d.pid(), d.Host().Network().ListenAddresses())
	return ""
}

// TestSaidMessagesAreAcknowledged: a message said in a conversation is
// reported said only once the peer acknowledged it (after its door
// admitted and recorded it); one whose acknowledgement does not come
// (the path died under it) goes, as the same signed message, to the
// peer's mailbox, which delivers it if it was lost and is dropped as a
// replay if it was not. Before acknowledgements, both sends below
// reported "conversation", and the first of them was lost.
func TestSaidMessagesAreAcknowledged(t *testing.T) {
	relay := startDaemon(t, relayConfig())
	bc := natConfig(relay)
	bc.Listen.Addresses = []string{"/ip4/127.0.0.1/tcp/0"} // reached through the proxies below
	bob := startDaemon(t, bc)
	testkit.WaitFor(t, "bob's slot on the relay", holdsSlots(bob, relay))
	testkit.WaitFor(t, "bob's mailbox at the relay", mailboxOpen(relay, bob.pid()))
	// Alice listens on nothing, so that every connection between the two
	// is one she dialled through a proxy.
	sender := func() *testDaemon {
		c := loopbackConfig()
		c.Listen.Addresses = nil
		return startDaemon(t, c)
	}
	alice := sender()
	bobEvents, stop := bob.Subscribe()
	defer stop()
	aliceEvents, stopAlice := alice.Subscribe()
	defer stopAlice()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Over a working path: said, acknowledged, and the acknowledgement is
	// recorded on both sides but is not an event for either agent.
	first := newPathCut(t, tcpAddrOf(t, bob))
	if _, err := alice.Connect(ctx, first.addr(bob.pid())); err != nil {
		t.Fatal(err)
	}
	onlyThrough(t, alice, bob, first)
	one, err := alice.Send(ctx, bob.pid(), "one")
	if err != nil || one.Delivered != "conversation" {
		t.Fatalf("send over a working path: %+v, %v; want said in the conversation", one, err)
	}
	waitMessage(t, bobEvents, one.MessageID)
	if acks := acksOf(t, alice, one.ConversationID, gossip.Received, one.MessageID); acks != 1 {
		t.Errorf("alice recorded %d acknowledgements of %s, want 1", acks, one.MessageID)
	}
	if acks := acksOf(t, bob, one.ConversationID, gossip.Sent, one.MessageID); acks != 1 {
		t.Errorf("bob recorded %d acknowledgements sent for %s, want 1", acks, one.MessageID)
	}
	for drained := false; !drained; {
		select {
		case e := <-aliceEvents:
			if e.Type == events.EventMessage && e.Message != nil {
				if _, ok := e.Message.Body.Part(converse.PartDelivered); ok {
					t.Errorf("alice's agent was told of an acknowledgement: %+v", e.Message.Headers)
				}
			}
		default:
			drained = true
		}
	}

	// The path toward bob dies under the conversation: the message is
	// written into it and lost. No acknowledgement comes, and the same
	// message reaches bob through his mailbox.
	onlyThrough(t, alice, bob, first)
	first.toward.Store(true)
	start := time.Now()
	two, err := alice.Send(ctx, bob.pid(), "two")
	if err != nil {
		t.Fatalf("send into a dead path: %v", err)
	}
	if two.Delivered != "queued" || two.ConversationID != one.ConversationID || !strings.Contains(two.Detail, "did not acknowledge") {
		t.Fatalf("send into a dead path: %+v, want the said message queued for the mailbox", two)
	}
	waitMessage(t, bobEvents, two.MessageID)
	t.Logf("a message lost on a dead path reached the peer through its mailbox %v after it was sent", time.Since(start).Round(time.Millisecond))
	if _, held := alice.convs.Holds(one.ConversationID); held {
		t.Error("the conversation whose message went unacknowledged is still open")
	}

	// Carol, on a path of her own; this time the acknowledgement is what
	// is lost. Bob has the message from the conversation, and drops the
	// mailbox's copy as a replay: his agent hears of it once. (A new
	// sender: alice, with the conversation gone, may reach bob again by
	// any address she knows, the relay's included.)
	carol := sender()
	second := newPathCut(t, tcpAddrOf(t, bob))
	if _, err := carol.Connect(ctx, second.addr(bob.pid())); err != nil {
		t.Fatal(err)
	}
	onlyThrough(t, carol, bob, second)
	three, err := carol.Send(ctx, bob.pid(), "three")
	if err != nil || three.Delivered != "conversation" {
		t.Fatalf("send over a working path: %+v, %v; want said in the conversation", three, err)
	}
	waitMessage(t, bobEvents, three.MessageID)
	onlyThrough(t, carol, bob, second)
	second.back.Store(true)
	four, err := carol.Send(ctx, bob.pid(), "four")
	if err != nil || four.Delivered != "queued" || four.ConversationID != three.ConversationID {
		t.Fatalf("send with the way back cut: %+v, %v; want the said message queued for the mailbox", four, err)
	}
	waitMessage(t, bobEvents, four.MessageID)
	testkit.WaitFor(t, "bob to refuse the mailbox's copy as a replay", func() bool {
		refusals, _ := bob.Audit().Refusals(time.Now().UTC().Format(time.DateOnly))
		for _, r := range refusals {
			if r.MessageID == four.MessageID && r.Transport == mail.ViaMailbox && r.Code == string(wire.CodeReplay) {
				return true
			}
		}
		return false
	})
	for drained := false; !drained; {
		select {
		case e := <-bobEvents:
			if e.Type == events.EventMessage && e.Message != nil && e.Message.Headers.MessageID == four.MessageID {
				t.Errorf("bob's agent was told of %s twice", four.MessageID)
			}
		default:
			drained = true
		}
	}
}

// TestSayWithoutAMailboxSaysItMayNotHaveArrived: a peer that names no
// mailbox relay leaves nowhere to fall back to; the sender is told the
// message went unacknowledged and may not have arrived, in words and as
// converse.ErrUnacknowledged.
func TestSayWithoutAMailboxSaysItMayNotHaveArrived(t *testing.T) {
	bob := startDaemon(t, tcpOnly(loopbackConfig()))
	alice := startDaemon(t, tcpOnly(loopbackConfig()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := newPathCut(t, tcpAddrOf(t, bob))
	if _, err := alice.Connect(ctx, path.addr(bob.pid())); err != nil {
		t.Fatal(err)
	}
	if res, err := alice.Send(ctx, bob.pid(), "one"); err != nil || res.Delivered != "conversation" {
		t.Fatalf("send over a working path: %+v, %v", res, err)
	}
	path.toward.Store(true)
	res, err := alice.Send(ctx, bob.pid(), "two")
	if !errors.Is(err, converse.ErrUnacknowledged) || !strings.Contains(err.Error(), "may not have arrived") {
		t.Fatalf("send into a dead path to a peer without a mailbox: %+v, %v; want ErrUnacknowledged saying it may not have arrived", res, err)
	}
}

// onlyThrough fails the test unless every connection from d to peer's
// daemon runs through p: a path it cuts must be the only one.
func onlyThrough(t *testing.T, d, to *testDaemon, p *pathCut) {
	t.Helper()
	port := "/tcp/" + strconv.Itoa(p.ln.Addr().(*net.TCPAddr).Port)
	for _, c := range d.Host().Network().ConnsToPeer(to.pid()) {
		if !strings.HasSuffix(c.RemoteMultiaddr().String(), port) {
			t.Fatalf("a connection to %s through %s, not the proxy %s", to.pid(), c.RemoteMultiaddr(), p.ln.Addr())
		}
	}
}

// waitMessage waits for the event of message id.
func waitMessage(t *testing.T, evs <-chan events.Event, id string) {
	t.Helper()
	waitEvent(t, evs, func(e events.Event) bool {
		return e.Type == events.EventMessage && e.Message != nil && e.Message.Headers.MessageID == id
	})
}

// acksOf counts the acknowledgements of id that d recorded in conversation
// convID in direction dir.
func acksOf(t *testing.T, d *testDaemon, convID string, dir gossip.Direction, id string) int {
	t.Helper()
	if err := d.Audit().Flush(); err != nil {
		t.Fatal(err)
	}
	entries, err := d.Audit().Entries(convID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Direction != dir || e.Message == nil || e.Message.Headers.Thread == nil || e.Message.Headers.Thread.InReplyTo != id {
			continue
		}
		if _, ok := e.Message.Body.Part(converse.PartDelivered); ok {
			n++
		}
	}
	return n
}

// TestAcknowledgementsAreNotChargedToThePeer: the acknowledgements a peer
// owes for what this daemon said are not taken from the peer's rate,
// whether the saying waited for them (send) or not (say). Before, alice
// saying nine things at cool left bob one message of his ten a minute.
func TestAcknowledgementsAreNotChargedToThePeer(t *testing.T) {
	alice := startDaemon(t, tcpOnly(loopbackConfig()))
	bob := startDaemon(t, tcpOnly(loopbackConfig()))
	connect(t, bob, alice)
	open := greet(t, bob, alice) // one of bob's ten at alice's door
	const said = 9
	for i := range said {
		if _, err := alice.Say(open.ConversationID, gossip.PhaseContext, "news "+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, "bob's acknowledgements of alice's messages to reach her", func() bool {
		if err := alice.Audit().Flush(); err != nil {
			t.Fatal(err)
		}
		entries, _ := alice.Audit().Entries(open.ConversationID)
		acks := 0
		for _, e := range entries {
			if e.Direction == gossip.Received && e.Message != nil {
				if _, ok := e.Message.Body.Part(converse.PartDelivered); ok {
					acks++
				}
			}
		}
		return acks == said
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := bob.Send(ctx, alice.pid(), "my own turn")
	if err != nil || res.Delivered != "conversation" || res.ConversationID != open.ConversationID {
		t.Fatalf("bob's first message after %d acknowledgements: %+v, %v; want it said in the open conversation", said, res, err)
	}
}
