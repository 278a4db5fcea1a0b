package hostile

import (
	"bufio"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/multiformats/go-multiaddr"
)

// mailbox sends one mailbox request from p to target and reads the answer.
func (p *Peer) mailbox(ctx context.Context, target *Target, req wire.MailboxRequest) (*wire.MailboxResponse, error) {
	s, err := p.NewStream(ctx, target.PeerID, wire.Mailbox)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", wire.Mailbox, err)
	}
	defer s.Reset()
	if d, ok := ctx.Deadline(); ok {
		s.SetDeadline(d)
	}
	b, err := wire.EncodeMailbox(req)
	if err != nil {
		return nil, err
	}
	if err := gossip.WriteFrame(s, b); err != nil {
		return nil, err
	}
	answer, err := gossip.ReadFrame(bufio.NewReader(s))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return wire.DecodeMailboxResponse(answer)
}

// peerFrom is a fresh peer on its own loopback address (127.0.0.x), so
// the relay's per-address limits see it apart from the flood.
func peerFrom(t testing.TB, target *Target, ip string) *Peer {
	t.Helper()
	id, err := identity.Generate(nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(id.LibP2PKey()), libp2p.ListenAddrStrings("/ip4/"+ip+"/tcp/0"),
		libp2p.NoTransports, libp2p.Transport(tcpTransport), libp2p.EnableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Connect(ctx, peer.AddrInfo{ID: target.PeerID, Addrs: []multiaddr.Multiaddr{target.P2P}}); err != nil {
		t.Fatalf("connecting to the target from %s: %v", ip, err)
	}
	return &Peer{Host: h, ID: id}
}

// Many fresh keys, from many addresses, half of them holding a relay slot,
// ask the relay for their mail (which registers a mailbox); then a genuine peer, holding a reservation on the
// relay, must still get a mailbox and the mail left in it.
func TestMailboxRegistrationFlood(t *testing.T) {
	enabled(t)
	target := Start(t, Options{Relay: true})
	before := target.Measure(t)
	n := scale(600, 2000)
	answers := map[string]int{}
	var mu sync.Mutex
	parallel(n, 8, func(i int) {
		// Each from its own address, and every other one holding a relay
		// slot when it asks, which is what registers a mailbox.
		p := peerFrom(t, target, fmt.Sprintf("127.1.%d.%d", i/250, i%250+1))
		defer p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if i%2 == 0 {
			if _, err := client.Reserve(ctx, p.Host, peer.AddrInfo{ID: target.PeerID, Addrs: []multiaddr.Multiaddr{target.P2P}}); err != nil {
				mu.Lock()
				answers["reservation refused"]++
				mu.Unlock()
			}
		}
		r, err := p.mailbox(ctx, target, wire.MailboxRequest{Op: wire.OpRetrieve})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			answers["error: "+err.Error()]++
		case r.Error != nil:
			answers[string(r.Error.Code)]++
		default:
			answers["ok"]++
		}
	})
	t.Logf("%d fresh keys asked for their mail: %v", n, answers)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recipient := peerFrom(t, target, "127.0.0.3")
	if _, err := client.Reserve(ctx, recipient.Host, peer.AddrInfo{ID: target.PeerID, Addrs: []multiaddr.Multiaddr{target.P2P}}); err != nil {
		t.Fatalf("the genuine recipient's reservation: %v", err)
	}
	if r, err := recipient.mailbox(ctx, target, wire.MailboxRequest{Op: wire.OpRetrieve}); err != nil || r.Error != nil {
		t.Fatalf("the genuine recipient's first retrieve: %v %+v", err, r)
	}
	sender := peerFrom(t, target, "127.0.0.4")
	letter := sender.Message(target, gossip.PhaseGreeting, "while you were away")
	letter.Headers.To = []gossip.Agent{{Agent: recipient.ID.DID()}}
	if err := letter.Sign(sender.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	raw, err := gossip.EncodeCBOR(letter)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sender.mailbox(ctx, target, wire.MailboxRequest{Op: wire.OpPublish, To: recipient.ID.PeerID().String(), Message: raw})
	if err != nil || r.Error != nil {
		t.Fatalf("leaving mail for the genuine recipient after the flood: %v %+v", err, errBody(r))
	}
	r, err = recipient.mailbox(ctx, target, wire.MailboxRequest{Op: wire.OpRetrieve})
	if err != nil || r.Error != nil || len(r.Messages) != 1 {
		t.Fatalf("the genuine recipient's mail: %v %+v", err, r)
	}
	after := target.Measure(t)
	t.Logf("before: %s", before)
	t.Logf("after:  %s", after)
}

func errBody(r *wire.MailboxResponse) any {
	if r == nil || r.Error == nil {
		return r
	}
	return *r.Error
}
