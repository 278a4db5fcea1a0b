package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Protocol IDs.
const (
	Capabilities protocol.ID = "/ifp/7/capabilities/1.0.0"
	Conversation protocol.ID = "/ifp/4/conversation/1.0.0"
	Update       protocol.ID = "/ifp/7/update/1.0.0"
	Mailbox      protocol.ID = "/ifp/8/mailbox/1.0.0"
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

// Stream reads and writes frames on a libp2p stream with a deadline on
// every frame.
type Stream struct {
	network.Stream
	r       *bufio.Reader
	timeout time.Duration
}

// NewStream wraps s; timeout bounds each read and each write.
func NewStream(s network.Stream, timeout time.Duration) *Stream {
	return &Stream{Stream: s, r: bufio.NewReader(s), timeout: timeout}
}

// Read reads one message. io.EOF means the peer closed its side; ErrIdle
// that no frame began within the deadline.
func (s *Stream) Read() (*gossip.Message, error) {
	if err := s.awaitFrame(); err != nil {
		return nil, err
	}
	return gossip.ReadMessage(s.r)
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
