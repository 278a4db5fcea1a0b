package gossip

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/multiformats/go-varint"
)

// Frames. On a libp2p stream every message travels as one frame: an
// unsigned varint (multiformats, at most 9 bytes, minimally encoded) giving
// the length of the payload, then the payload, one deterministic CBOR item.
// A length over MaxMessageSize is refused before anything is allocated.

var (
	// ErrFrameTooLarge: the length prefix announces more than MaxMessageSize.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrTruncatedFrame: the stream ended inside a frame.
	ErrTruncatedFrame = errors.New("truncated frame")
	// ErrEmptyFrame: a zero-length frame carries no message.
	ErrEmptyFrame = errors.New("empty frame")
)

// WriteFrame writes payload as one frame.
func WriteFrame(w io.Writer, payload []byte) error {
	if len(payload) > MaxMessageSize {
		return fmt.Errorf("writing frame: %w: %d bytes, at most %d", ErrFrameTooLarge, len(payload), MaxMessageSize)
	}
	// One write, so a frame is never interleaved with another writer's.
	buf := make([]byte, varint.MaxLenUvarint63+len(payload))
	n := varint.PutUvarint(buf, uint64(len(payload)))
	n += copy(buf[n:], payload)
	if _, err := w.Write(buf[:n]); err != nil {
		return fmt.Errorf("writing frame: %w", err)
	}
	return nil
}

// ReadFrame reads one frame from r. io.EOF before the first byte means the
// peer closed cleanly; a stream that ends later gives ErrTruncatedFrame.
func ReadFrame(r *bufio.Reader) ([]byte, error) {
	n, err := varint.ReadUvarint(r)
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("reading frame length: %w", ErrTruncatedFrame)
	case err != nil:
		return nil, fmt.Errorf("reading frame length: %w", err)
	case n == 0:
		return nil, fmt.Errorf("reading frame: %w", ErrEmptyFrame)
	case n > MaxMessageSize:
		return nil, fmt.Errorf("reading frame: %w: %d bytes announced, at most %d", ErrFrameTooLarge, n, MaxMessageSize)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("reading frame of %d bytes: %w", n, ErrTruncatedFrame)
		}
		return nil, fmt.Errorf("reading frame of %d bytes: %w", n, err)
	}
	return payload, nil
}

// WriteMessage encodes m as CBOR and writes it as one frame.
func WriteMessage(w io.Writer, m *Message) error {
	b, err := EncodeCBOR(m)
	if err != nil {
		return err
	}
	return WriteFrame(w, b)
}

// ReadMessage reads one frame and decodes and validates the message in it.
func ReadMessage(r *bufio.Reader) (*Message, error) {
	b, err := ReadFrame(r)
	if err != nil {
		return nil, err
	}
	return DecodeCBOR(b)
}
