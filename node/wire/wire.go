package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Protocol IDs.
const (
	Capabilities protocol.ID = "/ifp/7/capabilities/1.0.0"
	Conversation protocol.ID = "/ifp/4/conversation/1.0.0"
	Update       protocol.ID = "/ifp/7/update/1.0.0"
	Mailbox      protocol.ID = "/ifp/8/mailbox/1.0.0"
	// MailWaiting: a mailbox relay tells a recipient connected to it that
	// mail is waiting there; the stream carries no bytes (package comment,
	// "Mailbox").
	MailWaiting protocol.ID = "/ifp/8/mail-waiting/1.0.0"
)

// ServiceName is the resource-manager service every ifaced stream is
// attached to, so its streams and memory are accounted together.
const ServiceName = "ifaced"

// ErrIdle: no frame began within the read deadline. On a conversation it
// is the quiet end of an idle conversation, not a failure: the waiting
// side closes the stream without an error message and logs at debug (see
// "Idle streams" in the package comment). A deadline that passes inside a
// frame is not ErrIdle: that peer stalled, and the stream is reset. The
// error also wraps the stream's own deadline error.
var ErrIdle = errors.New("no frame began within the read deadline")

// IsIdle reports whether err is an idle stream's (ErrIdle).
func IsIdle(err error) bool { return errors.Is(err, ErrIdle) }

// ReserveFactor is the memory a reader reserves from the stream's
// resource scope for a frame, in bytes per byte of its announced length,
// before reading the payload, and keeps until the message is decoded: the
// payload (its buffer grows by doubling, so up to twice its length at a
// moment) and the decoded message, which for real documents holds about
// twice the frame (strings copied out of it, and the values around them).
// A frame of 1 MiB reserves 4 MiB, so one peer (17 MiB for the ifaced
// service at the default limits.max_memory_mb) decodes at most four at
// once, and all peers together what the service's scope allows. What the
// counts of a dense frame cost beyond that is charged to the Budget.
const ReserveFactor = 4

// ErrOverloaded: this daemon has no memory for a frame now — its stream's
// resource scope refused the reservation, or the daemon-wide budget did
// not free up within the read deadline. The frame is not read; on the
// wire it is rate_limited, and the peer may send it again later.
var ErrOverloaded = fmt.Errorf("%w: no memory to read the frame now; send it again later", ErrRateLimited)

// Budget is the daemon-wide weight inbound messages hold while they are
// decoded and verified (admit.Budget). Acquire waits for n bytes of it for
// a message from peer from, or fails when ctx ends, and returns the
// function that gives them back (which may be called more than once).
type Budget interface {
	Acquire(ctx context.Context, from peer.ID, n int64) (release func(), err error)
}

// Stream reads and writes frames on a libp2p stream with a deadline on
// every frame.
type Stream struct {
	network.Stream
	r       *bufio.Reader
	timeout time.Duration
	budget  Budget  // nil: none
	from    peer.ID // the remote peer, whom the budget charges
}

// NewStream wraps s; timeout bounds each read and each write.
func NewStream(s network.Stream, timeout time.Duration) *Stream {
	return &Stream{Stream: s, r: bufio.NewReader(s), timeout: timeout}
}

// WithBudget makes each read take the cost of the message it decodes
// (gossip.Counts.Cost) from b, charged to from (the stream's remote
// peer), and returns s.
func (s *Stream) WithBudget(b Budget, from peer.ID) *Stream {
	s.budget, s.from = b, from
	return s
}

// Read reads one message. io.EOF means the peer closed its side; ErrIdle
// that no frame began within the deadline; ErrOverloaded that this daemon
// could not afford the frame now (see ReadHeld). The message's share of
// the budget is given back before Read returns.
func (s *Stream) Read() (*gossip.Message, error) {
	m, release, err := s.ReadHeld()
	release()
	return m, err
}

// ReadHeld is Read, the message keeping its share of the budget until the
// caller calls release (the door, after its verify step, so that the
// budget covers decoding and verifying at once). release is never nil.
//
// Before the payload is read, ReserveFactor times its announced length is
// reserved from the stream's resource scope (and released once the
// payload is decoded); before it is decoded, its counts are scanned
// (gossip.MessageBounds) and their cost taken from the budget, waiting
// at most the read deadline. A refusal of either is ErrOverloaded.
func (s *Stream) ReadHeld() (m *gossip.Message, release func(), err error) {
	release = func() {}
	if err := s.awaitFrame(); err != nil {
		return nil, release, err
	}
	payload, done, err := s.readPayload()
	if err != nil {
		return nil, release, err
	}
	defer done()
	if counts, err := gossip.MeasureCBOR(payload, gossip.MessageBounds); err == nil {
		// Over the bounds, DecodeCBOR refuses it before decoding anything.
		if release, err = s.acquire(counts.Cost(len(payload))); err != nil {
			return nil, func() {}, err
		}
	}
	if m, err = gossip.DecodeCBOR(payload); err != nil {
		release()
		return nil, func() {}, err
	}
	return m, release, nil
}

// readPayload reads one frame's payload, reserving ReserveFactor times
// its length from the stream's scope first; done releases it.
func (s *Stream) readPayload() (payload []byte, done func(), err error) {
	n, err := gossip.ReadFrameLength(s.r)
	if err != nil {
		return nil, nil, err
	}
	size := ReserveFactor * n
	scope := s.Scope()
	if err := scope.ReserveMemory(size, network.ReservationPriorityAlways); err != nil {
		return nil, nil, fmt.Errorf("reading frame of %d bytes: reserving %d bytes from the stream's resource scope: %w (%v)", n, size, ErrOverloaded, err)
	}
	done = func() { scope.ReleaseMemory(size) }
	if payload, err = gossip.ReadFramePayload(s.r, n); err != nil {
		done()
		return nil, nil, err
	}
	return payload, done, nil
}

// acquire takes n bytes from the budget, waiting at most the read
// deadline.
func (s *Stream) acquire(n int64) (func(), error) {
	if s.budget == nil {
		return func() {}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	release, err := s.budget.Acquire(ctx, s.from, n)
	if err != nil {
		return nil, fmt.Errorf("reading a message of cost %d bytes: %w: the daemon-wide decoding budget stayed full for %s (%v)", n, ErrOverloaded, s.timeout, err)
	}
	return release, nil
}

// awaitFrame sets the read deadline and waits for the first byte of the
// next frame, telling an idle stream (ErrIdle) and a closed one (io.EOF)
// from a failure.
func (s *Stream) awaitFrame() error {
	if err := s.SetReadDeadline(time.Now().Add(s.timeout)); err != nil {
		return fmt.Errorf("setting read deadline: %w", err)
	}
	_, err := s.r.Peek(1)
	switch {
	case err == nil:
		return nil
	case err == io.EOF:
		return io.EOF
	case isTimeout(err):
		return fmt.Errorf("reading frame: %w for %s: %w", ErrIdle, s.timeout, err)
	}
	return fmt.Errorf("reading frame length: %w", err)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// Write writes one message.
func (s *Stream) Write(m *gossip.Message) error {
	if err := s.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil {
		return fmt.Errorf("setting write deadline: %w", err)
	}
	return gossip.WriteMessage(s.Stream, m)
}
