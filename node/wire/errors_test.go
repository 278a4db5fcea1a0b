package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/libp2p/go-libp2p/core/network"
)

// statuses pins the HTTP status of every code (IFP-6 §3.2 where it names
// one), as a second implementation would read them from the package
// comment.
var statuses = map[Code]int{
	CodeInvalidFormat:      400,
	CodePayloadTooLarge:    413,
	CodeUnsupportedVersion: 400,
	CodeInvalidSignature:   401,
	CodeWrongKey:           401,
	CodeKeyRevoked:         401,
	CodeReplay:             400,
	CodeOutOfSequence:      409,
	CodeStaleSeq:           409,
	CodeConditionsNotMet:   403,
	CodeBusy:               503,
	CodeUnavailable:        503,
	CodeUnknownCapability:  404,
	CodeRateLimited:        429,
	CodeInvalidParams:      400,
	CodeAgentUnavailable:   503,
	CodeAgentTimeout:       504,
	CodeAgentError:         502,
	CodeInternal:           500,
	CodeMailboxRefused:     404,
	CodeMailboxFull:        503,
	CodeUnknownSender:      401,
	CodeNotFound:           404,
}

// The key lifecycle codes' statuses, pinned beside the others.
func init() {
	statuses[CodeKeyRetired] = 401
	statuses[CodeKeyStatementRefused] = 409
}

func TestErrorTableBothWays(t *testing.T) {
	if len(Codes()) != len(statuses) {
		t.Fatalf("the table has %d codes, the test pins %d", len(Codes()), len(statuses))
	}
	for _, c := range Codes() {
		sentinel := ErrorOf(c)
		if sentinel == nil {
			t.Errorf("%s: no sentinel", c)
			continue
		}
		// Sending: the sentinel, bare or wrapped, gets its code.
		if got := CodeOf(sentinel); got != c {
			t.Errorf("CodeOf(ErrorOf(%s)) = %s", c, got)
		}
		if got := CodeOf(fmt.Errorf("doing something: %w", sentinel)); got != c {
			t.Errorf("CodeOf(wrapped ErrorOf(%s)) = %s", c, got)
		}
		// Receiving: a peer's answer with the code is its sentinel, and
		// gives the code back.
		remote := &RemoteError{Peer: "12D3KooWExample", Body: ErrorBody{Code: c, Message: "no"}}
		if !errors.Is(remote, sentinel) {
			t.Errorf("errors.Is(RemoteError %s, ErrorOf(%s)) is false", c, c)
		}
		if got := CodeOf(remote); got != c {
			t.Errorf("CodeOf(RemoteError %s) = %s", c, got)
		}
		if got := CodeOf(fmt.Errorf("invoking: %w", remote)); got != c {
			t.Errorf("CodeOf(wrapped RemoteError %s) = %s", c, got)
		}
		for _, d := range Codes() {
			if d != c && errors.Is(remote, ErrorOf(d)) && !errors.Is(sentinel, ErrorOf(d)) {
				t.Errorf("RemoteError %s matches %s's sentinel", c, d)
			}
		}
		if got, want := HTTPStatus(c), statuses[c]; got != want {
			t.Errorf("HTTPStatus(%s) = %d, want %d", c, got, want)
		}
		b := NewErrorBody(sentinel)
		if b.Code != c || b.Hint == "" || (b.Expected == "" && c != CodeInternal) {
			t.Errorf("NewErrorBody(ErrorOf(%s)) = %+v: want the code with what was expected and a hint", c, b)
		}
	}
	// unsupported_version is a kind of invalid_format, on both sides.
	remote := &RemoteError{Body: ErrorBody{Code: CodeUnsupportedVersion}}
	if !errors.Is(remote, gossip.ErrInvalidMessage) || !errors.Is(remote, gossip.ErrUnknownVersion) {
		t.Error("a peer's unsupported_version is not gossip.ErrUnknownVersion and gossip.ErrInvalidMessage")
	}
	if !errors.Is(&RemoteError{Body: ErrorBody{Code: CodeRateLimited}}, ErrRateLimited) {
		t.Error("a peer's rate_limited is not ErrRateLimited")
	}
	// A code this daemon does not know.
	unknown := &RemoteError{Body: ErrorBody{Code: "from_the_future"}}
	if ErrorOf("from_the_future") != nil || HTTPStatus("from_the_future") != 500 || CodeOf(unknown) != CodeInternal || errors.Is(unknown, ErrInternal) {
		t.Error("an unknown code has a sentinel, a status other than 500, or a code other than internal_error")
	}
	if CodeOf(errors.New("disk on fire")) != CodeInternal || NewErrorBody(errors.New("disk on fire")).Message == "disk on fire" {
		t.Error("an unknown error is not internal_error, or its text reached the peer")
	}
}

// TestCodeOfEveryError: the errors this daemon produces get the codes the
// package comment gives them.
func TestCodeOfEveryError(t *testing.T) {
	cases := []struct {
		err  error
		want Code
	}{
		{gossip.ErrTooLarge, CodePayloadTooLarge},
		{gossip.ErrFrameTooLarge, CodePayloadTooLarge},
		{gossip.ErrUnknownVersion, CodeUnsupportedVersion},
		{&gossip.FieldError{Field: "ifp", Problem: "is 5", Err: gossip.ErrUnknownVersion}, CodeUnsupportedVersion},
		{gossip.ErrWrongKey, CodeWrongKey},
		{ErrKeyRevoked, CodeKeyRevoked},
		{gossip.ErrUnsigned, CodeInvalidSignature},
		{gossip.ErrWeakSignature, CodeInvalidSignature},
		{identity.ErrBadSignature, CodeInvalidSignature},
		{identity.ErrMalformedSignature, CodeInvalidSignature},
		{identity.ErrReplay, CodeReplay},
		{identity.ErrStale, CodeReplay},
		{identity.ErrFuture, CodeReplay},
		{gossip.ErrOutOfSequence, CodeOutOfSequence},
		{gossip.ErrWrongConversation, CodeOutOfSequence},
		{gossip.ErrConversationClosed, CodeOutOfSequence},
		{gossip.ErrUnexpectedPhase, CodeOutOfSequence},
		{ErrStaleSeq, CodeStaleSeq},
		{&conditions.NotMetError{}, CodeConditionsNotMet},
		{conditions.ErrBusy, CodeBusy},
		{gossip.ErrNoRoom, CodeUnavailable},
		{negotiate.ErrUnknownCapability, CodeUnknownCapability},
		{negotiate.ErrInvalidParams, CodeInvalidParams},
		{negotiate.ErrInvalidOutput, CodeAgentError},
		{&RetryAfterError{Err: ErrRateLimited, After: time.Second}, CodeRateLimited},
		{ErrMailboxRefused, CodeMailboxRefused},
		{ErrMailboxFull, CodeMailboxFull},
		{ErrMailboxUnknownOp, CodeInvalidFormat},
		{ErrAgentUnavailable, CodeAgentUnavailable},
		{ErrAgentTimeout, CodeAgentTimeout},
		{ErrAgentFailed, CodeAgentError},
		{gossip.ErrInvalidMessage, CodeInvalidFormat},
		{gossip.ErrMalformed, CodeInvalidFormat},
		{gossip.ErrFrameLength, CodeInvalidFormat},
		{gossip.ErrTruncatedFrame, CodeInvalidFormat},
		{gossip.ErrEmptyFrame, CodeInvalidFormat},
		{&gossip.FieldError{Field: "headers.sequence", Problem: "expected an integer"}, CodeInvalidFormat},
		{ErrUnknownSender, CodeUnknownSender},
		{ErrNotFound, CodeNotFound},
	}
	for _, tc := range cases {
		if got := CodeOf(fmt.Errorf("context: %w", tc.err)); got != tc.want {
			t.Errorf("CodeOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	// Frames and messages straight from the decoder.
	frames := map[string]struct {
		in   []byte
		want Code
	}{
		"overflowing varint":  {[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, CodeInvalidFormat},
		"non-minimal varint":  {[]byte{0x81, 0x00}, CodeInvalidFormat},
		"truncated":           {[]byte{0x05, 0xa0}, CodeInvalidFormat},
		"empty":               {[]byte{0x00}, CodeInvalidFormat},
		"oversized":           {[]byte{0x81, 0x80, 0x80, 0x01}, CodePayloadTooLarge},
		"wrong type":          {frameOf("\xa1\x63ifp\x63abc"), CodeInvalidFormat},
		"not CBOR":            {[]byte{0x03, 0xff, 0x00, 0x13}, CodeInvalidFormat},
		"trailing CBOR bytes": {[]byte{0x02, 0xa0, 0x00}, CodeInvalidFormat},
	}
	for name, tc := range frames {
		_, err := gossip.ReadMessage(bufio.NewReader(bytes.NewReader(tc.in)))
		if got := CodeOf(err); got != tc.want {
			t.Errorf("%s: %v is %s, want %s", name, err, got, tc.want)
		}
	}
}

func frameOf(payload string) []byte {
	var b bytes.Buffer
	gossip.WriteFrame(&b, []byte(payload))
	return b.Bytes()
}

// TestDocListsEveryCode: the package comment names every code and its
// HTTP status, so it cannot fall behind the table.
func TestDocListsEveryCode(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes() {
		line := fmt.Sprintf("//\t%-20s %d ", c, HTTPStatus(c))
		if !bytes.Contains(doc, []byte(line)) {
			t.Errorf("doc.go has no line %q", line)
		}
	}
}

// fakeStream is a network.Stream that reads from a script: bytes, then
// an error.
type fakeStream struct {
	network.Stream
	data []byte
	end  error
}

func (f *fakeStream) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.end
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func (f *fakeStream) SetReadDeadline(time.Time) error  { return nil }
func (f *fakeStream) SetWriteDeadline(time.Time) error { return nil }
func (f *fakeStream) Scope() network.StreamScope       { return &network.NullScope{} }

type timeoutError struct{}

func (timeoutError) Error() string { return "i/o deadline reached" }
func (timeoutError) Timeout() bool { return true }

func TestIdleIsToldApart(t *testing.T) {
	var frame bytes.Buffer
	gossip.WriteFrame(&frame, []byte{0xa0})
	cases := []struct {
		name      string
		data      []byte
		end       error
		idle, eof bool
	}{
		{"nothing came before the deadline", nil, timeoutError{}, true, false},
		{"nothing came, os deadline", nil, os.ErrDeadlineExceeded, true, false},
		{"the peer closed", nil, io.EOF, false, true},
		{"a frame began and stalled", frame.Bytes()[:1], timeoutError{}, false, false},
		{"a length began and stalled", []byte{0x80}, timeoutError{}, false, false},
		{"the stream was reset", nil, network.ErrReset, false, false},
	}
	for _, tc := range cases {
		for _, read := range []func(*Stream) error{
			func(s *Stream) error { _, err := s.Read(); return err },
			func(s *Stream) error { _, err := s.ReadMailbox(); return err },
		} {
			s := NewStream(&fakeStream{data: tc.data, end: tc.end}, time.Second)
			err := read(s)
			if IsIdle(err) != tc.idle || errors.Is(err, ErrIdle) != tc.idle {
				t.Errorf("%s: %v: IsIdle %v, want %v", tc.name, err, IsIdle(err), tc.idle)
			}
			if (err == io.EOF) != tc.eof {
				t.Errorf("%s: %v, want io.EOF %v", tc.name, err, tc.eof)
			}
			if tc.idle && !strings.Contains(err.Error(), "1s") {
				t.Errorf("%s: %v does not say how long it waited", tc.name, err)
			}
			if tc.end != nil && tc.end != io.EOF && !errors.Is(err, tc.end) {
				t.Errorf("%s: %v does not wrap the stream's error", tc.name, err)
			}
		}
	}
	// A whole frame still reads.
	s := NewStream(&fakeStream{data: frame.Bytes(), end: io.EOF}, time.Second)
	if b, err := s.ReadMailbox(); err != nil || !bytes.Equal(b, []byte{0xa0}) {
		t.Fatalf("a whole frame: %x, %v", b, err)
	}
}
