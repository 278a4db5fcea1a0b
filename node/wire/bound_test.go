package wire

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// scope is a stream scope that records reservations and refuses those
// over limit.
type scope struct {
	network.NullScope
	limit, held, most int
}

func (s *scope) ReserveMemory(n int, _ uint8) error {
	if s.held+n > s.limit {
		return network.ErrResourceLimitExceeded
	}
	s.held += n
	s.most = max(s.most, s.held)
	return nil
}

func (s *scope) ReleaseMemory(n int) { s.held -= n }

type scopedStream struct {
	fakeStream
	scope *scope
}

func (s *scopedStream) Scope() network.StreamScope { return s.scope }

// budget is a Budget of a fixed size that records what is held.
type budget struct {
	size, held int64
	asked      []int64
}

func (b *budget) Acquire(ctx context.Context, _ peer.ID, n int64) (func(), error) {
	b.asked = append(b.asked, n)
	if b.held+n > b.size {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	b.held += n
	done := false
	return func() {
		if !done {
			done = true
			b.held -= n
		}
	}, nil
}

func messageFrame(t *testing.T) ([]byte, int) {
	t.Helper()
	alice, bob := vectorIdentity(t, "alice"), vectorIdentity(t, "bob")
	m := minimalMessage(alice, bob)
	if err := m.Sign(alice, time.Now()); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := gossip.WriteMessage(&buf, m); err != nil {
		t.Fatal(err)
	}
	payload, _ := gossip.EncodeCBOR(m)
	return buf.Bytes(), len(payload)
}

// TestReadReservesMemory: a frame's read reserves ReserveFactor times its
// length from the stream's scope before the payload is read, and gives
// it back once decoded; a scope that refuses makes the read fail with
// ErrOverloaded (rate_limited on the wire) without reading the payload.
func TestReadReservesMemory(t *testing.T) {
	frame, n := messageFrame(t)
	sc := &scope{limit: 1 << 20}
	s := NewStream(&scopedStream{fakeStream{data: frame}, sc}, time.Second)
	if _, err := s.Read(); err != nil {
		t.Fatal(err)
	}
	if sc.most != ReserveFactor*n || sc.held != 0 {
		t.Errorf("reserved %d at most and %d after the read, want %d and 0", sc.most, sc.held, ReserveFactor*n)
	}

	sc = &scope{limit: ReserveFactor*n - 1}
	s = NewStream(&scopedStream{fakeStream{data: frame}, sc}, time.Second)
	_, err := s.Read()
	if !errors.Is(err, ErrOverloaded) || CodeOf(err) != CodeRateLimited || !strings.Contains(err.Error(), "resource scope") {
		t.Fatalf("a refused reservation: %v (code %s), want ErrOverloaded, rate_limited", err, CodeOf(err))
	}
	if sc.held != 0 || s.r.Buffered() != n {
		t.Errorf("after a refused reservation: %d bytes held, %d of the payload's %d left unread", sc.held, s.r.Buffered(), n)
	}
}

// TestReadHeldBudget: a message read with ReadHeld keeps the cost of its
// counts taken from the budget until released; Read gives it back at
// once; a budget that stays full for the read deadline is ErrOverloaded;
// a frame past the bounds takes nothing and is invalid_format.
func TestReadHeldBudget(t *testing.T) {
	frame, n := messageFrame(t)
	payload := frame[len(frame)-n:]
	counts, err := gossip.MeasureCBOR(payload, gossip.MessageBounds)
	if err != nil {
		t.Fatal(err)
	}
	b := &budget{size: 1 << 20}
	s := NewStream(&fakeStream{data: bytes.Repeat(frame, 2)}, time.Second).WithBudget(b, "")
	if _, release, err := s.ReadHeld(); err != nil || b.held != counts.Cost(n) {
		t.Fatalf("ReadHeld: %v; %d held, want %d", err, b.held, counts.Cost(n))
	} else {
		release()
		release()
	}
	if _, err := s.Read(); err != nil || b.held != 0 {
		t.Fatalf("Read: %v; %d held after it, want 0", err, b.held)
	}

	full := &budget{size: 10}
	_, err = NewStream(&fakeStream{data: frame}, 10*time.Millisecond).WithBudget(full, "").Read()
	if !errors.Is(err, ErrOverloaded) || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("a full budget: %v, want ErrOverloaded", err)
	}

	m := make([]any, 8193)
	for i := range m {
		m[i] = map[string]any{}
	}
	alice, bob := vectorIdentity(t, "alice"), vectorIdentity(t, "bob")
	bomb := minimalMessage(alice, bob)
	bomb.Body.Parts = []gossip.Part{{ContentType: "application/json", Content: []any{m, m}}}
	var buf bytes.Buffer
	if err := gossip.WriteMessage(&buf, bomb); err != nil {
		t.Fatal(err)
	}
	b = &budget{size: 1 << 30}
	_, err = NewStream(&fakeStream{data: buf.Bytes()}, time.Second).WithBudget(b, "").Read()
	if !errors.Is(err, gossip.ErrOverBound) || CodeOf(err) != CodeInvalidFormat || len(b.asked) != 0 {
		t.Fatalf("a container bomb: %v (code %s, budget asked %v), want ErrOverBound, invalid_format, nothing taken", err, CodeOf(err), b.asked)
	}
}

// TestMailboxBound: a mailbox frame past MailboxBounds is refused before
// it is decoded, as invalid_format naming the bound.
func TestMailboxBound(t *testing.T) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "m"
	}
	b := mustEncode(t, &MailboxResponse{OK: true, Messages: make([]Mail, 1000)})
	if _, err := DecodeMailboxResponse(b); err != nil {
		t.Fatalf("1,000 mails: %v", err)
	}
	b = mustEncode(t, &MailboxResponse{OK: true, Messages: make([]Mail, 2100)})
	_, err := DecodeMailboxResponse(b)
	if !errors.Is(err, gossip.ErrOverBound) || CodeOf(err) != CodeInvalidFormat || !strings.Contains(err.Error(), "at most 2048") {
		t.Fatalf("2,100 mails: %v, want ErrOverBound naming the bound", err)
	}
}

// withinFactor fails when decode, reading an input of size bytes,
// allocates more than gossip.DecodeFactor times that plus
// gossip.DecodeFloor (fuzz targets run one input at a time).
func withinFactor(t *testing.T, size int, decode func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	decode()
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; !gossip.WithinDecodeFactor(n, size) {
		t.Fatalf("decoding %d bytes allocated %d, over %d × the input + %d", size, n, gossip.DecodeFactor, gossip.DecodeFloor)
	}
}
