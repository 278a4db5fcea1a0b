package gossip

import (
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"
)

func TestConversationSequencing(t *testing.T) {
	alice, bob := Agent{Agent: "did:key:alice"}, Agent{Agent: "did:key:bob"}
	a := NewConversation("conv:1", alice, bob)
	b := NewConversation("conv:1", bob, alice)

	if _, err := a.Next(PhaseContext, testNow); !errors.Is(err, ErrUnexpectedPhase) {
		t.Fatalf("context before greeting: %v", err)
	}
	send := func(from, to *Conversation, phase Phase) *Message {
		t.Helper()
		m, err := from.Next(phase, testNow)
		if err != nil {
			t.Fatal(err)
		}
		from.Sent(m)
		if err := to.Accept(m); err != nil {
			t.Fatalf("%s seq %d: %v", phase, m.Headers.Sequence, err)
		}
		return m
	}
	g := send(a, b, PhaseGreeting)
	r := send(b, a, PhaseGreeting)
	if g.Headers.Sequence != 1 || r.Headers.Sequence != 2 || r.Headers.Thread.InReplyTo != g.Headers.MessageID {
		t.Fatalf("greeting %d, reply %d in reply to %+v", g.Headers.Sequence, r.Headers.Sequence, r.Headers.Thread)
	}
	c := send(a, b, PhaseContext)
	if c.Headers.Sequence != 3 {
		t.Fatalf("third message has sequence %d", c.Headers.Sequence)
	}
	if s, ok := b.SeqOf(g.Headers.MessageID); !ok || s != 1 {
		t.Fatalf("SeqOf greeting = %d %v", s, ok)
	}
	if id, ok := a.IDOf(2); !ok || id != r.Headers.MessageID {
		t.Fatalf("IDOf 2 = %s %v", id, ok)
	}

	// Replayed or reordered messages are out of sequence.
	if err := b.Accept(c); !errors.Is(err, ErrOutOfSequence) {
		t.Fatalf("same message twice: %v", err)
	}
	// Both sides sending at once may share a number; each is accepted.
	x, _ := a.Next(PhaseProbe, testNow)
	y, _ := b.Next(PhaseProbe, testNow)
	if x.Headers.Sequence != y.Headers.Sequence {
		t.Fatalf("concurrent sends numbered %d and %d", x.Headers.Sequence, y.Headers.Sequence)
	}
	a.Sent(x)
	b.Sent(y)
	if err := b.Accept(x); err != nil {
		t.Fatal(err)
	}
	if err := a.Accept(y); err != nil {
		t.Fatal(err)
	}

	// Wrong conversation, wrong sender, wrong recipient.
	other, _ := a.Next(PhaseProbe, testNow)
	other.Headers.ConversationID = "conv:2"
	if err := b.Accept(other); !errors.Is(err, ErrWrongConversation) {
		t.Fatalf("other conversation: %v", err)
	}
	spoof, _ := a.Next(PhaseProbe, testNow)
	spoof.Headers.From = Agent{Agent: "did:key:mallory"}
	if err := b.Accept(spoof); !errors.Is(err, ErrWrongConversation) {
		t.Fatalf("other sender: %v", err)
	}
	misaddressed, _ := a.Next(PhaseProbe, testNow)
	misaddressed.Headers.To = []Agent{{Agent: "did:key:carol"}}
	if err := b.Accept(misaddressed); !errors.Is(err, ErrWrongConversation) {
		t.Fatalf("other recipient: %v", err)
	}

	send(b, a, PhaseClose)
	if !a.Closed() || !b.Closed() {
		t.Fatal("close did not close both sides")
	}
	if _, err := a.Next(PhaseContext, testNow); !errors.Is(err, ErrConversationClosed) {
		t.Fatalf("sending after close: %v", err)
	}
	late, _ := b.Next(PhaseError, testNow)
	b.Sent(late)
	if err := a.Accept(late); err != nil {
		t.Fatalf("an error after close: %v", err)
	}
}

func TestConversationFirstMessageMustGreet(t *testing.T) {
	alice, bob := Agent{Agent: "a"}, Agent{Agent: "b"}
	b := NewConversation("c", bob, alice)
	m := &Message{IFP: Version, Headers: Headers{ConversationID: "c", From: alice, To: []Agent{bob}, Sequence: 1, Phase: PhaseProbe}}
	if err := b.Accept(m); !errors.Is(err, ErrUnexpectedPhase) {
		t.Fatalf("probe first: %v", err)
	}
}

// Answers built at once by several goroutines each get a number of their
// own when stamped, and the numbers follow the order of stamping.
func TestConversationStampNumbersConcurrentAnswers(t *testing.T) {
	alice, bob := Agent{Agent: "did:key:alice"}, Agent{Agent: "did:key:bob"}
	c := NewConversation("conv:1", alice, bob)
	g, _ := c.Next(PhaseGreeting, testNow)
	c.Stamp(g)
	c.Sent(g)
	const n = 16
	msgs := make([]*Message, n)
	for i := range msgs {
		msgs[i], _ = c.Next(PhaseContext, testNow) // all built before any is sent: one number
	}
	if msgs[0].Headers.Sequence != msgs[n-1].Headers.Sequence {
		t.Fatal("Next numbered unsent messages apart; the test assumes it does not")
	}
	var mu sync.Mutex
	var order []int64
	var wg sync.WaitGroup
	for _, m := range msgs {
		wg.Go(func() {
			mu.Lock() // the sender's write lock
			defer mu.Unlock()
			c.Stamp(m)
			order = append(order, m.Headers.Sequence)
		})
	}
	wg.Wait()
	for i, seq := range order {
		if seq != int64(i+2) {
			t.Fatalf("stamp %d gave sequence %d, want %d: %v", i, seq, i+2, order)
		}
	}
}

// TestSequenceBounds: sequence numbers stay within 1..MaxSequence (2^53-1)
// everywhere, so a greeting at 2^63-1 is refused, not answered at -2^63.
func TestSequenceBounds(t *testing.T) {
	alice, bob := Agent{Agent: "did:key:alice"}, Agent{Agent: "did:key:bob"}
	greeting := func(seq int64) *Message {
		return &Message{IFP: Version, Headers: Headers{MessageID: "msg:" + strconv.FormatInt(seq, 10), Date: "2026-03-04T23:58:12Z",
			From: alice, To: []Agent{bob}, ConversationID: "conv:1", Sequence: seq, Phase: PhaseGreeting, ContentType: DefaultContentType}}
	}
	for _, seq := range []int64{-1, 0, MaxSequence + 1, math.MaxInt64, math.MinInt64} {
		m := greeting(seq)
		var fe *FieldError
		if err := m.Validate(); !errors.As(err, &fe) || fe.Field != "headers.sequence" || !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("Validate at sequence %d: %v, want a FieldError naming headers.sequence", seq, err)
		}
		b := NewConversation("conv:1", bob, alice)
		if err := b.Accept(m); !errors.Is(err, ErrOutOfSequence) {
			t.Errorf("Accept at sequence %d: %v, want ErrOutOfSequence", seq, err)
		}
	}
	if err := greeting(MaxSequence).Validate(); err != nil {
		t.Fatalf("sequence 2^53-1 is valid: %v", err)
	}

	// The answer to a greeting at the highest number cannot be numbered:
	// Next and TryStamp refuse; nothing wraps around.
	b := NewConversation("conv:1", bob, alice)
	if err := b.Accept(greeting(MaxSequence)); err != nil {
		t.Fatal(err)
	}
	if m, err := b.Next(PhaseGreeting, testNow); !errors.Is(err, ErrOutOfSequence) {
		t.Fatalf("Next after 2^53-1: %+v, %v; want ErrOutOfSequence", m, err)
	}
	m := greeting(1)
	if err := b.TryStamp(m); !errors.Is(err, ErrOutOfSequence) || m.Headers.Sequence != 1 {
		t.Fatalf("TryStamp after 2^53-1: sequence %d, %v; want it untouched and ErrOutOfSequence", m.Headers.Sequence, err)
	}
	b.Stamp(m)
	if m.Headers.Sequence != MaxSequence+1 {
		t.Fatalf("Stamp after 2^53-1 gave %d, want %d (refused by every receiver)", m.Headers.Sequence, int64(MaxSequence+1))
	}
	// Even a sender that recorded an absurd number never overflows.
	c := NewConversation("conv:2", alice, bob)
	c.Sent(greeting(math.MaxInt64))
	m = greeting(1)
	c.Stamp(m)
	if m.Headers.Sequence != MaxSequence+1 {
		t.Fatalf("Stamp after a recorded 2^63-1 gave %d", m.Headers.Sequence)
	}
	if err := c.TryStamp(greeting(1)); !errors.Is(err, ErrOutOfSequence) {
		t.Fatalf("TryStamp after a recorded 2^63-1: %v", err)
	}

	// TryStamp numbers like Stamp while numbers are left.
	d := NewConversation("conv:3", alice, bob)
	m = greeting(1)
	if err := d.TryStamp(m); err != nil || m.Headers.Sequence != 1 {
		t.Fatalf("TryStamp on a new conversation: %d, %v", m.Headers.Sequence, err)
	}
	m = greeting(1)
	if err := d.TryStamp(m); err != nil || m.Headers.Sequence != 2 {
		t.Fatalf("second TryStamp: %d, %v", m.Headers.Sequence, err)
	}
}

func TestTTLAndIntegerBounds(t *testing.T) {
	from, to := testIdentity(t, 1), testIdentity(t, 2)
	cases := map[string]struct {
		mutate func(*Message)
		field  string
	}{
		"ttl past 2^53-1":   {func(m *Message) { m.Headers.TTLSeconds = MaxSafeInteger + 1 }, "headers.ttl_seconds"},
		"content integer":   {func(m *Message) { m.Body.Parts[0].Content = map[string]any{"n": uint64(1) << 60} }, "body.parts[0].content.n"},
		"negative content":  {func(m *Message) { m.Body.Parts[0].Content = []any{int64(-MaxSafeInteger - 1)} }, "body.parts[0].content[0]"},
		"extension integer": {func(m *Message) { m.Headers.Extensions = map[string]any{"x": int64(math.MaxInt64)} }, "headers.extensions.x"},
	}
	for name, tc := range cases {
		m := sampleMessage(from, to)
		tc.mutate(m)
		var fe *FieldError
		if err := m.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: %v, want a FieldError naming %s", name, err, tc.field)
		}
	}
	m := sampleMessage(from, to)
	m.Headers.TTLSeconds = MaxSafeInteger
	m.Body.Parts[0].Content = map[string]any{"n": int64(MaxSafeInteger), "m": int64(-MaxSafeInteger), "u": uint64(MaxSafeInteger), "f": 1e300}
	if err := m.Validate(); err != nil {
		t.Fatalf("integers at the bounds and a large float: %v", err)
	}
}
