package wire

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
)

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
	CodeUnavailable        Code = "unavailable"
	CodeUnknownCapability  Code = "unknown_capability"
	CodeRateLimited        Code = "rate_limited"
	CodeInvalidParams      Code = "invalid_params"
	CodeAgentUnavailable   Code = "agent_unavailable"
	CodeAgentTimeout       Code = "agent_timeout"
	CodeAgentError         Code = "agent_error"
	CodeInternal           Code = "internal_error"
)

// Key lifecycle codes (see "Key lifecycle" in the package comment).
const (
	CodeKeyRetired          Code = "key_retired"
	CodeKeyStatementRefused Code = "key_statement_refused"
)

// IFP-6 codes that only HTTP answers (and relayed mail) carry.
const (
	CodeUnknownSender Code = "unknown_sender"
	CodeNotFound      Code = "not_found"
)

var (
	// ErrStaleSeq: a capability document older than the one already held.
	ErrStaleSeq = errors.New("capability document seq is older than the one held")
	// ErrKeyRevoked: the owner revoked trust in the sender's key.
	ErrKeyRevoked = errors.New("the owner revoked trust in this key")
	// ErrKeyRetired: the sender's key was succeeded by another (a key
	// succession statement) and its transition period is over; the
	// message names the successor.
	ErrKeyRetired = errors.New("the sender's key was retired and its transition period is over")
	// ErrKeyStatementRefused: a key succession or revocation statement that
	// verifies but that this daemon will not follow (its key never met
	// here, a successor already someone else's, a second successor).
	ErrKeyStatementRefused = errors.New("key statement refused")
	// ErrRateLimited: the peer sent more messages than its temperature allows.
	ErrRateLimited = errors.New("rate limited")
	// ErrAgentUnavailable: no local agent is there to answer (no webhook, no
	// event subscriber).
	ErrAgentUnavailable = errors.New("the local agent is unavailable")
	// ErrAgentTimeout: the local agent did not answer in time.
	ErrAgentTimeout = errors.New("the local agent did not answer in time")
	// ErrAgentFailed: the local agent answered with an error or nonsense.
	ErrAgentFailed = errors.New("the local agent failed")
	// ErrUnknownSender: the key a message names cannot be resolved to a
	// sender (IFP-6 unknown_sender: the HTTPS inbox, relayed mail).
	ErrUnknownSender = errors.New("unknown sender")
	// ErrUnavailable: this daemon takes no new conversations for now (its
	// audit log is out of room: the disk is nearly full, or the log's
	// quota is used up by the current day); conversations it admitted go on.
	ErrUnavailable = errors.New("this daemon takes no new conversations for now")
	// ErrNotFound: no such endpoint (IFP-6 not_found; HTTP only).
	ErrNotFound = errors.New("not found")
	// ErrInternal: this daemon failed; nothing was accepted. It is the
	// sentinel of internal_error, which CodeOf also gives every error it
	// does not know.
	ErrInternal = errors.New("internal error")
)

// errorTable is the one table between wire codes, errors and HTTP
// statuses. CodeOf tries its rows in order, and an error that matches
// several gets the first one's code, so a sentinel that wraps another
// (gossip.ErrUnknownVersion wraps gossip.ErrInvalidMessage) comes before
// it. Statuses are IFP-6 §3.2's where it names one (400, 401, 404, 413,
// 429, 500, 503); the others are the HTTP statuses that say the same.
var errorTable = []struct {
	code     Code
	err      error   // the code's sentinel: ErrorOf returns it, a RemoteError with the code matches it
	also     []error // other errors this daemon answers with the code
	status   int     // the HTTP status of a refusal with the code
	expected string  // what this daemon expected (ErrorBody.Expected)
	hint     string  // what would work (ErrorBody.Hint)
}{
	{CodePayloadTooLarge, gossip.ErrTooLarge, []error{gossip.ErrFrameTooLarge}, http.StatusRequestEntityTooLarge,
		"frames of at most 1 MiB", "send less per message, or split the content"},
	{CodeUnsupportedVersion, gossip.ErrUnknownVersion, nil, http.StatusBadRequest,
		"IFP-4 messages (\"ifp\": 4)", "resend as an IFP-4 message"},
	{CodeWrongKey, gossip.ErrWrongKey, []error{identity.ErrStatementSigner}, http.StatusUnauthorized,
		"a signature by the sender's own key: on libp2p the key of the peer ID that opened the stream, and headers.from naming that key's did:key", "sign with your own key, and name yourself in from"},
	{CodeKeyRevoked, ErrKeyRevoked, nil, http.StatusUnauthorized,
		"a key the owner trusts", "ask the owner to compare fingerprints with you again and pin your key"},
	{CodeKeyRetired, ErrKeyRetired, nil, http.StatusUnauthorized,
		"a message signed by the sender's current key (the successor its key succession statement names)",
		"sign with the successor key named in the message; a retired key verifies only during its transition period"},
	{CodeKeyStatementRefused, ErrKeyStatementRefused, nil, http.StatusConflict,
		"a key statement about a key this daemon met, naming a successor that is nobody else's, and the only successor of its key",
		"nothing to do when the key was never met here; otherwise the reason names what conflicts, which only this daemon's owner can resolve"},
	{CodeInvalidSignature, identity.ErrBadSignature, []error{gossip.ErrUnsigned, gossip.ErrWeakSignature, identity.ErrMalformedSignature}, http.StatusUnauthorized,
		"an ed25519 signature by your key covering every IFP-4 header (message_id, date, from, to, conversation_id, sequence, phase, content_type, subject, thread, languages, disclosure, persona, priority, ttl_seconds, capabilities, extensions) and the body",
		"sign the whole message with the key of your peer ID"},
	{CodeReplay, identity.ErrReplay, []error{identity.ErrStale, identity.ErrFuture}, http.StatusBadRequest,
		"a new message_id and a current date", "send a new message"},
	{CodeOutOfSequence, gossip.ErrOutOfSequence, []error{gossip.ErrWrongConversation, gossip.ErrConversationClosed, gossip.ErrUnexpectedPhase}, http.StatusConflict,
		"the next sequence number of this conversation, a greeting first, nothing after close", "resend with the next sequence number, or start a new conversation"},
	{CodeStaleSeq, ErrStaleSeq, nil, http.StatusConflict,
		"a capability document with a higher seq than the one held", "send your current document"},
	{CodeBusy, conditions.ErrBusy, nil, http.StatusServiceUnavailable,
		"fewer invocations of this capability at once", "retry after the given time"},
	{CodeUnavailable, ErrUnavailable, []error{gossip.ErrNoRoom}, http.StatusServiceUnavailable,
		"a daemon with room to record a new conversation (it records every conversation before acting on it)",
		"retry later, or go on in a conversation already open"},
	{CodeConditionsNotMet, conditions.ErrNotMet, nil, http.StatusForbidden,
		"a requester meeting every condition of the capability", "meet the unmet conditions listed, then ask again"},
	{CodeUnknownCapability, negotiate.ErrUnknownCapability, nil, http.StatusNotFound,
		"the name of a capability this agent offers you", "read the agent's view for you (ifaced caps PEER) and request one of those"},
	{CodeAgentError, ErrAgentFailed, []error{negotiate.ErrInvalidOutput}, http.StatusBadGateway,
		"a result from the local agent that matches the capability's output_schema", "try again later, or tell the agent's owner"},
	{CodeInvalidParams, negotiate.ErrInvalidParams, nil, http.StatusBadRequest,
		"parameters matching the capability's JSON Schema", "fix the parameters at the locations named and ask again"},
	{CodeRateLimited, ErrRateLimited, nil, http.StatusTooManyRequests,
		"fewer messages per minute at this conversation's temperature", "wait the given time before sending again"},
	{CodeMailboxRefused, ErrMailboxRefused, nil, http.StatusNotFound,
		"a recipient that registered here (reserved a relay slot or fetched its mail)", "deliver through another of the recipient's relays, or wait until it is back"},
	{CodeMailboxFull, ErrMailboxFull, nil, http.StatusServiceUnavailable,
		"room in the recipient's mailbox and within your own quota", "retry after the recipient fetched its mail"},
	{CodeAgentUnavailable, ErrAgentUnavailable, nil, http.StatusServiceUnavailable,
		"a local agent connected to this daemon", "try again later; the agent's owner has been told nothing is listening"},
	{CodeAgentTimeout, ErrAgentTimeout, nil, http.StatusGatewayTimeout,
		"an answer from the local agent within its timeout", "try again later"},
	{CodeUnknownSender, ErrUnknownSender, nil, http.StatusUnauthorized,
		"a signature whose key_id names a key this daemon can resolve (a did:key, or a key it holds)", "sign with a did:key key_id"},
	{CodeNotFound, ErrNotFound, nil, http.StatusNotFound,
		"an endpoint this daemon serves", "see /.well-known/iface/capabilities"},
	{CodeInvalidFormat, gossip.ErrInvalidMessage, []error{identity.ErrMalformedStatement, gossip.ErrMalformed, gossip.ErrTruncatedFrame, gossip.ErrEmptyFrame, ErrMailboxUnknownOp}, http.StatusBadRequest,
		"one deterministic CBOR IFP-4 message per frame", "check the message against IFP-4 and resend"},
	{CodeInternal, ErrInternal, nil, http.StatusInternalServerError,
		"", "try again later"},
}

// Codes lists every wire code, in the order of the table.
func Codes() []Code {
	out := make([]Code, len(errorTable))
	for i, row := range errorTable {
		out[i] = row.code
	}
	return out
}

func rowOf(code Code) int {
	for i, row := range errorTable {
		if row.code == code {
			return i
		}
	}
	return -1
}

// CodeOf returns the wire code for err: the code of the first row of the
// table whose sentinel (or another of its errors) err matches;
// internal_error when none does. A *RemoteError gives its own code back.
func CodeOf(err error) Code {
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return row.code
		}
		for _, e := range row.also {
			if errors.Is(err, e) {
				return row.code
			}
		}
	}
	return CodeInternal
}

// ErrorOf returns the sentinel error of a wire code, so that a received
// code can be tested with errors.Is like a local error; nil for a code
// this daemon does not know.
func ErrorOf(code Code) error {
	if i := rowOf(code); i >= 0 {
		return errorTable[i].err
	}
	return nil
}

// HTTPStatus returns the HTTP status of a refusal with the given code
// (IFP-6 §3.2; see the package comment); 500 for a code this daemon does
// not know. Every HTTP handler answers a refusal with this status.
func HTTPStatus(code Code) int {
	if i := rowOf(code); i >= 0 {
		return errorTable[i].status
	}
	return http.StatusInternalServerError
}

// RetryAfterError is an error the peer may retry after a wait.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v; retry after %s", e.Err, e.After.Round(time.Second))
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// ErrorBody is the content of an error message's "error" part.
type ErrorBody struct {
	Code              Code               `json:"code"`
	Message           string             `json:"message"`
	Expected          string             `json:"expected,omitempty"`
	Hint              string             `json:"hint,omitempty"`
	Unmet             []conditions.Unmet `json:"unmet,omitempty"`
	RetryAfterSeconds int                `json:"retry_after_seconds,omitempty"`
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
	if i := rowOf(code); i >= 0 {
		b.Expected, b.Hint = errorTable[i].expected, errorTable[i].hint
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

// Is reports whether the peer's code is target's: errors.Is(err,
// ErrRateLimited) holds for a peer's rate_limited answer as for this
// daemon's own, and so does every sentinel the code's sentinel wraps
// (gossip.ErrInvalidMessage for unsupported_version).
func (e *RemoteError) Is(target error) bool {
	s := ErrorOf(e.Body.Code)
	return s != nil && errors.Is(s, target)
}
