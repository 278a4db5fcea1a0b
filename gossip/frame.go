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
// A length over MaxMessageSize is refused before anything is allocated,
// and the payload's buffer grows as its bytes arrive, never ahead of them.

var (
	// ErrFrameTooLarge: the length prefix announces more than MaxMessageSize.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrTruncatedFrame: the stream ended inside a frame.
	ErrTruncatedFrame = errors.New("truncated frame")
	// ErrEmptyFrame: a zero-length frame carries no message.
	ErrEmptyFrame = errors.New("empty frame")
	// ErrFrameLength: the length prefix is not a minimally encoded
	// unsigned varint of at most 9 bytes (it overflows 63 bits, or has
	// needless trailing zero groups). It wraps ErrMalformed: the bytes are
	// not a frame, whatever follows.
	ErrFrameLength = fmt.Errorf("%w: invalid frame length", ErrMalformed)
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
	n, err := ReadFrameLength(r)
	if err != nil {
		return nil, err
	}
	return ReadFramePayload(r, n)
}

// ReadFrameLength reads a frame's length prefix and checks it (not 0, at
// most MaxMessageSize), so that a reader can reserve what the payload
// will cost before reading it with ReadFramePayload. Errors are
// ReadFrame's.
func ReadFrameLength(r *bufio.Reader) (int, error) {
	n, err := varint.ReadUvarint(r)
	switch {
	case err == io.EOF:
		return 0, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return 0, fmt.Errorf("reading frame length: %w", ErrTruncatedFrame)
	case errors.Is(err, varint.ErrOverflow), errors.Is(err, varint.ErrNotMinimal):
		return 0, fmt.Errorf("reading frame length: %w: %v (want a minimally encoded unsigned varint of at most 9 bytes)", ErrFrameLength, err)
	case err != nil:
		return 0, fmt.Errorf("reading frame length: %w", err)
	case n == 0:
		return 0, fmt.Errorf("reading frame: %w", ErrEmptyFrame)
	case n > MaxMessageSize:
		return 0, fmt.Errorf("reading frame: %w: %d bytes announced, at most %d", ErrFrameTooLarge, n, MaxMessageSize)
	}
	return int(n), nil
}

// ReadFramePayload reads the n bytes of payload that follow a frame's
// length prefix (ReadFrameLength).
func ReadFramePayload(r *bufio.Reader, n int) ([]byte, error) {
	payload, err := readPayload(r, n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("reading frame of %d bytes: %w", n, ErrTruncatedFrame)
		}
		return nil, fmt.Errorf("reading frame of %d bytes: %w", n, err)
	}
	return payload, nil
}

// frameChunk is the buffer a frame's payload starts in; most frames fit.
const frameChunk = 64 << 10

// readPayload reads n bytes into a buffer that grows (doubling, never past
// n) only as they arrive, so a peer that announces 1 MiB and stalls holds
// no more memory than it sent, twice at most.
func readPayload(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, min(n, frameChunk))
	got := 0
	for {
		m, err := io.ReadFull(r, buf[got:])
		got += m
		if err != nil {
			if got > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if got == n {
			return buf, nil
		}
		next := make([]byte, min(n, 2*len(buf)))
		copy(next, buf)
		buf = next
	}
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
