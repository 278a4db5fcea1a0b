package node

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/node/config"
	"github.com/ifaced/ifaced/node/internal/testkit"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
)

// TestMailWaitingIsFetchedAtOnce: mail left for a recipient that holds a
// slot on the relay is fetched at once, on the relay's notice, not at the
// recipient's next poll (an hour here). Before the notice, it waited for
// the poll: in the network lab, the mail sent when the relay carrying a
// conversation died arrived 59.7 s later.
func TestMailWaitingIsFetchedAtOnce(t *testing.T) {
	relay := startDaemon(t, relayConfig())
	bc := natConfig(relay)
	bc.Mailbox.Poll = config.Duration{Duration: time.Hour}
	bob := startDaemon(t, bc)
	testkit.WaitFor(t, "bob's slot on the relay", holdsSlots(bob, relay))
	testkit.WaitFor(t, "bob's mailbox at the relay", mailboxOpen(relay, bob.pid()))

	held := func() int {
		items, _, _ := relay.Store().Mailboxes().Mail(bob.pid().String(), time.Now(), 100, 1<<20)
		return len(items)
	}
	s := newStranger(t)
	for i := range 3 {
		start := time.Now()
		if code := s.publish(t, relay, bob.pid(), "mail that waits"); code != "" {
			t.Fatalf("publish %d: refused with %s", i, code)
		}
		testkit.WaitFor(t, "bob to fetch the mail the relay told him of", func() bool { return held() == 0 })
		t.Logf("mail %d fetched and acknowledged %v after it was left", i, time.Since(start).Round(time.Millisecond))
	}
}

// fakeMailRelay is a circuit relay v2 with a mailbox that holds nothing
// and counts the retrieves it is asked.
type fakeMailRelay struct {
	*stranger
	mu        sync.Mutex
	retrieves []time.Time
}

func newFakeMailRelay(t *testing.T) *fakeMailRelay {
	t.Helper()
	f := &fakeMailRelay{stranger: newStranger(t)}
	svc, err := relayv2.New(f.h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	f.h.SetStreamHandler(wire.Mailbox, func(s network.Stream) {
		defer s.Close()
		ws := wire.NewStream(s, 10*time.Second)
		raw, err := ws.ReadMailbox()
		if err != nil {
			s.Reset()
			return
		}
		req, err := wire.DecodeMailboxRequest(raw)
		if err != nil {
			s.Reset()
			return
		}
		if req.Op == wire.OpRetrieve {
			f.mu.Lock()
			f.retrieves = append(f.retrieves, time.Now())
			f.mu.Unlock()
		}
		ws.WriteMailbox(&wire.MailboxResponse{OK: true})
	})
	return f
}

func (f *fakeMailRelay) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.retrieves)
}

func (f *fakeMailRelay) addr() string { return f.h.Addrs()[0].String() + "/p2p/" + f.h.ID().String() }

// TestMailWaitingIsHeardFromUsedRelaysOnly: a notice that mail waits
// makes the recipient fetch only from the relays it uses, and at most once
// a second per relay however many come: a stranger's notices are reset
// unheard, and a relay's flood of them is paced.
func TestMailWaitingIsHeardFromUsedRelaysOnly(t *testing.T) {
	fake := newFakeMailRelay(t)
	bc := tcpOnly(loopbackConfig())
	bc.Relay.Use = []string{fake.addr()}
	bc.Mailbox.Poll = config.Duration{Duration: time.Hour}
	bob := startDaemon(t, bc)
	testkit.WaitFor(t, "bob's slot on the relay", func() bool { return slices.Contains(bob.Mail().RelayReservations(), fake.h.ID()) })
	testkit.WaitFor(t, "bob's first fetch, on reserving", func() bool { return fake.count() == 1 })

	tell := func(h interface {
		NewStream(context.Context, peer.ID, ...protocol.ID) (network.Stream, error)
	}) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := h.NewStream(ctx, bob.pid(), wire.MailWaiting)
		if err != nil {
			return err
		}
		defer s.Close()
		s.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = s.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}

	// A stranger's notice is reset, unread.
	s := newStranger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.h.Connect(ctx, peer.AddrInfo{ID: bob.pid(), Addrs: bob.Addrs()}); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := tell(s.h); !errors.Is(err, network.ErrReset) {
			t.Fatalf("a stranger's notice: %v, want the stream reset", err)
		}
	}
	// The relay's notice is taken (the stream closed, not reset)...
	if err := tell(fake.h); err != nil {
		t.Fatalf("the relay's notice: %v, want the stream closed", err)
	}
	testkit.WaitFor(t, "bob to fetch on the relay's notice", func() bool { return fake.count() == 2 })

	// ... and a flood of them, the stranger's mixed in, is paced.
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		if err := tell(fake.h); err != nil {
			t.Fatalf("the relay's notice: %v", err)
		}
		tell(s.h)
	}
	elapsed := time.Since(start)
	prompted := fake.count() - 2
	// The first notice of the flood may come within the second of the
	// fetch above and wait out its end; then one a second.
	if most := int(elapsed/time.Second) + 1; prompted > most || prompted < 2 {
		t.Fatalf("%d fetches in %v of notices, want 2 to %d (one a second)", prompted, elapsed.Round(time.Millisecond), most)
	}
	t.Logf("%d fetches in %v of notices", prompted, elapsed.Round(time.Millisecond))
}
