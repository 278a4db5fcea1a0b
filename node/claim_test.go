package node

import (
	"bufio"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/wire"
)

// TestConversationIDClaimIsAtomic: two peers greet with the same
// conversation ID at the same moment — both greetings held at the door
// until both have reached its fit step, then let go together. Exactly one
// is admitted; the other is refused with out_of_sequence, saying the ID is
// taken. The table names the winner for that ID, the owner lists one
// conversation, and once the owner closes it nothing goes on serving
// the ID.
func TestConversationIDClaimIsAtomic(t *testing.T) {
	convID := gossip.NewID("conv", time.Now())
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	alice := startDaemonWith(t, loopbackConfig(), WithBeforeFit(func(in *admit.Arrival) {
		if in.Msg.Headers.ConversationID != convID {
			return
		}
		mu.Lock()
		arrived++
		if arrived == 2 {
			close(all)
		}
		mu.Unlock()
		<-all // the barrier: neither goes on to fit until both are there
	}))
	a, b := newRawPeer(t, alice), newRawPeer(t, alice)

	evs, stop := alice.Subscribe()
	defer stop()

	type answer struct {
		peer *rawPeer
		m    *gossip.Message
		err  error
	}
	answers := make(chan answer, 2)
	for _, p := range []*rawPeer{a, b} {
		g := p.greeting(alice, nil)
		g.Headers.ConversationID = convID
		if err := g.Sign(p.id, time.Now()); err != nil {
			t.Fatal(err)
		}
		f := frame(t, g)
		go func() {
			// The stream stays open after the answer: a conversation.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := p.NewStream(ctx, alice.id.PeerID(), wire.Conversation)
			if err != nil {
				answers <- answer{p, nil, err}
				return
			}
			t.Cleanup(func() { s.Reset() })
			s.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := s.Write(f); err != nil {
				answers <- answer{p, nil, err}
				return
			}
			m, err := gossip.ReadMessage(bufio.NewReader(s))
			answers <- answer{p, m, err}
		}()
	}
	var won *rawPeer
	refused := 0
	for range 2 {
		r := <-answers
		if r.err != nil {
			t.Fatalf("a greeting got no answer: %v", r.err)
		}
		switch r.m.Headers.Phase {
		case gossip.PhaseGreeting:
			if won != nil {
				t.Fatalf("both greetings with conversation ID %s were admitted", convID)
			}
			won = r.peer
		case gossip.PhaseError:
			if code := errorCode(t, r.m); code != wire.CodeOutOfSequence {
				t.Fatalf("the losing greeting was refused with %s, want %s", code, wire.CodeOutOfSequence)
			}
			refused++
		default:
			t.Fatalf("answered with %s", r.m.Headers.Phase)
		}
	}
	if won == nil || refused != 1 {
		t.Fatalf("%d admitted, %d refused; want one of each", map[bool]int{true: 1}[won != nil], refused)
	}
	// The answer leaves before the conversation enters the table.
	waitEvent(t, evs, func(e events.Event) bool {
		return e.Type == events.EventConversation && e.ConversationID == convID && e.Detail == "open"
	})
	open := alice.Conversations().Open()
	if len(open) != 1 || open[0].ID != convID || open[0].Peer != won.ID().String() {
		t.Fatalf("the owner lists %+v, want only %s with %s", open, convID, won.ID())
	}
	if p, ok := alice.convs.Holds(convID); !ok || p != won.ID() {
		t.Fatalf("the table points %s at %v (held %v), want %s", convID, p, ok, won.ID())
	}
	if _, err := alice.Say(convID, gossip.PhaseClose, "bye"); err != nil {
		t.Fatal(err)
	}
	if open := alice.Conversations().Open(); len(open) != 0 {
		t.Fatalf("after the owner closed it, the owner still lists %+v", open)
	}
}
