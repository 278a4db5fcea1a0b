package wire

import (
	"bufio"
	"errors"
	"fmt"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
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

// Code is a wire error code.
type Code string

// Wire error codes (see the package comment).
const (
	CodeInvalidFormat      Code = "invalid_format"
	CodePayloadTooLarge    Code = "payload_too_large"
	CodeUnsupportedVersion Code = "unsupported_version"
	CodeInvalidSignature   Code = "invalid_signature"
	CodeWrongKey           Code = "wrong_key"
	CodeKeyRevoked         Code = "key_revoked"
	CodeReplay             Code = "replay"
	CodeOutOfSequence      Code = "out_of_sequence"
	CodeStaleSeq           Code = "stale_seq"
	CodeConditionsNotMet   Code = "conditions_not_met"
	CodeBusy               Code = "busy"
	CodeUnknownCapability  Code = "unknown_capability"
	CodeRateLimited        Code = "rate_limited"
	CodeInvalidParams      Code = "invalid_params"
	CodeAgentUnavailable   Code = "agent_unavailable"
	CodeAgentTimeout       Code = "agent_timeout"
	CodeAgentError         Code = "agent_error"
	CodeInternal           Code = "internal_error"
)

var (
	// ErrStaleSeq: a capability document older than the one already held.
	ErrStaleSeq = errors.New("capability document seq is older than the one held")
	// ErrKeyRevoked: the owner revoked trust in the sender's key.
	ErrKeyRevoked = errors.New("the owner revoked trust in this key")
	// ErrRateLimited: the peer sent more messages than its temperature allows.
	ErrRateLimited = errors.New("rate limited")
	// ErrAgentUnavailable: no local agent is there to answer (no webhook, no
	// event subscriber).
	ErrAgentUnavailable = errors.New("the local agent is unavailable")
	// ErrAgentTimeout: the local agent did not answer in time.
	ErrAgentTimeout = errors.New("the local agent did not answer in time")
	// ErrAgentFailed: the local agent answered with an error or nonsense.
	ErrAgentFailed = errors.New("the local agent failed")
)

// RetryAfterError is an error the peer may retry after a wait.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v; retry after %s", e.Err, e.After.Round(time.Second))
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// codes maps sentinels to wire codes, most specific first.
var codes = []struct {
	err  error
	code Code
}{
	{gossip.ErrFrameTooLarge, CodePayloadTooLarge},
	{gossip.ErrTooLarge, CodePayloadTooLarge},
	{gossip.ErrUnknownVersion, CodeUnsupportedVersion},
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
	{conditions.ErrBusy, CodeBusy},
	{conditions.ErrNotMet, CodeConditionsNotMet},
	{negotiate.ErrUnknownCapability, CodeUnknownCapability},
	{negotiate.ErrInvalidParams, CodeInvalidParams},
	{negotiate.ErrInvalidOutput, CodeAgentError},
	{ErrRateLimited, CodeRateLimited},
	{ErrMailboxRefused, CodeMailboxRefused},
	{ErrMailboxFull, CodeMailboxFull},
	{ErrMailboxUnknownOp, CodeInvalidFormat},
	{ErrAgentUnavailable, CodeAgentUnavailable},
	{ErrAgentTimeout, CodeAgentTimeout},
	{ErrAgentFailed, CodeAgentError},
	{gossip.ErrInvalidMessage, CodeInvalidFormat},
	{gossip.ErrMalformed, CodeInvalidFormat},
	{gossip.ErrTruncatedFrame, CodeInvalidFormat},
	{gossip.ErrEmptyFrame, CodeInvalidFormat},
}

// CodeOf returns the wire code for err; internal_error when none fits.
func CodeOf(err error) Code {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeInternal
}

// ErrorBody is the content of an error message's "error" part.
type ErrorBody struct {
	Code              Code               `json:"code"`
	Message           string             `json:"message"`
	Expected          string             `json:"expected,omitempty"`
	Hint              string             `json:"hint,omitempty"`
	Unmet             []conditions.Unmet `json:"unmet,omitempty"`
	RetryAfterSeconds int                `json:"retry_after_seconds,omitempty"`
}

// expectations says, per code, what this daemon expected and what would work.
var expectations = map[Code][2]string{
	CodeInvalidFormat:      {"one deterministic CBOR IFP-4 message per frame", "check the message against IFP-4 and resend"},
	CodePayloadTooLarge:    {"frames of at most 1 MiB", "send less per message, or split the content"},
	CodeUnsupportedVersion: {"IFP-4 messages (\"ifp\": 4)", "resend as an IFP-4 message"},
	CodeInvalidSignature:   {"an ed25519 signature covering message_id, date, from, to, conversation_id, sequence, phase, content_type and the body", "sign the whole message with the key of your peer ID"},
	CodeWrongKey:           {"a signature by the key of the peer ID that opened this stream", "sign with your own key"},
	CodeKeyRevoked:         {"a key the owner trusts", "ask the owner to compare fingerprints with you again and pin your key"},
	CodeReplay:             {"a new message_id and a current date", "send a new message"},
	CodeOutOfSequence:      {"the next sequence number of this conversation, a greeting first, nothing after close", "resend with the next sequence number, or start a new conversation"},
	CodeStaleSeq:           {"a capability document with a higher seq than the one held", "send your current document"},
	CodeUnknownCapability:  {"the name of a capability this agent offers you", "read the agent's view for you (ifaced caps PEER) and request one of those"},
	CodeConditionsNotMet:   {"a requester meeting every condition of the capability", "meet the unmet conditions listed, then ask again"},
	CodeBusy:               {"fewer invocations of this capability at once", "retry after the given time"},
	CodeRateLimited:        {"fewer messages per minute at this conversation's temperature", "wait the given time before sending again"},
	CodeInvalidParams:      {"parameters matching the capability's JSON Schema", "fix the parameters at the locations named and ask again"},
	CodeAgentUnavailable:   {"a local agent connected to this daemon", "try again later; the agent's owner has been told nothing is listening"},
	CodeAgentTimeout:       {"an answer from the local agent within its timeout", "try again later"},
	CodeAgentError:         {"a result from the local agent that matches the capability's output_schema", "try again later, or tell the agent's owner"},
	CodeMailboxRefused:     {"a recipient that registered here (reserved a relay slot or fetched its mail)", "deliver through another of the recipient's relays, or wait until it is back"},
	CodeMailboxFull:        {"room in the recipient's mailbox and within your own quota", "retry after the recipient fetched its mail"},
	CodeInternal:           {"", "try again later"},
}

// NewErrorBody describes err for the peer. Only what the peer may know is
// included: the error text the daemon produced for it, never internal
// detail (internal errors are reported as such without their text).
func NewErrorBody(err error) ErrorBody {
	code := CodeOf(err)
	b := ErrorBody{Code: code, Message: err.Error()}
	if code == CodeInternal {
		b.Message = "this daemon could not process the message"
	}
	if e, ok := expectations[code]; ok {
		b.Expected, b.Hint = e[0], e[1]
	}
	var nm *conditions.NotMetError
	if errors.As(err, &nm) {
		b.Unmet = nm.Unmet
		b.RetryAfterSeconds = int((nm.RetryAfter + time.Second - 1) / time.Second)
	}
	var ra *RetryAfterError
	if errors.As(err, &ra) {
		b.RetryAfterSeconds = max(1, int((ra.After+time.Second-1)/time.Second))
	}
	return b
}

// RemoteError is an error phase message received from a peer.
type RemoteError struct {
	Peer string
	Body ErrorBody
}

func (e *RemoteError) Error() string {
	s := fmt.Sprintf("peer %s answered %s: %s", e.Peer, e.Body.Code, e.Body.Message)
	if e.Body.Hint != "" {
		s += " (" + e.Body.Hint + ")"
	}
	return s
}

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

// Read reads one message. io.EOF means the peer closed its side.
func (s *Stream) Read() (*gossip.Message, error) {
	if err := s.SetReadDeadline(time.Now().Add(s.timeout)); err != nil {
		return nil, fmt.Errorf("setting read deadline: %w", err)
	}
	return gossip.ReadMessage(s.r)
}

// Write writes one message.
func (s *Stream) Write(m *gossip.Message) error {
	if err := s.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil {
		return fmt.Errorf("setting write deadline: %w", err)
	}
	return gossip.WriteMessage(s.Stream, m)
}
