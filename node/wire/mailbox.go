package wire

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ifaced/ifaced/gossip"
)

// Mailbox operations (/ifp/8/mailbox/1.0.0). Each stream carries one
// request frame and one response frame.
const (
	OpPublish  = "publish"  // leave a message for a peer that is away
	OpRetrieve = "retrieve" // fetch the messages waiting for the stream's peer
	OpAck      = "ack"      // delete fetched messages from the relay
)

// MaxMailMessage is the largest message a mailbox takes: a frame's worth
// less room for the envelope and the relay's trace entry.
const MaxMailMessage = gossip.MaxMessageSize - 16<<10

// MaxMailBatch is the most messages one retrieve answer carries.
const MaxMailBatch = 64

// Mailbox errors.
var (
	// ErrMailboxUnknownOp: a request with an operation this relay does not know.
	ErrMailboxUnknownOp = errors.New("unknown mailbox operation")
	// ErrMailboxRefused: the relay holds no mailbox for that recipient.
	ErrMailboxRefused = errors.New("the relay holds no mailbox for that recipient")
	// ErrMailboxFull: a quota of the recipient or the sender is used up.
	ErrMailboxFull = errors.New("mailbox full")
)

// Mailbox codes, beside the conversation codes.
const (
	CodeMailboxRefused Code = "mailbox_refused"
	CodeMailboxFull    Code = "mailbox_full"
)

// MailboxRequest is the one frame a client sends.
type MailboxRequest struct {
	Op      string   `cbor:"op"`
	To      string   `cbor:"to,omitempty"`      // publish: the recipient's peer ID
	Message []byte   `cbor:"message,omitempty"` // publish: the signed IFP-4 message, as CBOR
	Limit   int      `cbor:"limit,omitempty"`   // retrieve: at most this many (and at most MaxMailBatch)
	IDs     []string `cbor:"ids,omitempty"`     // ack: the mail IDs to delete
}

// MailboxResponse is the one frame the relay answers with.
type MailboxResponse struct {
	OK       bool       `cbor:"ok"`
	ID       string     `cbor:"id,omitempty"`       // publish: the relay's ID for the stored message
	Expires  string     `cbor:"expires,omitempty"`  // publish: when the relay will drop it unfetched (RFC 3339)
	Messages []Mail     `cbor:"messages,omitempty"` // retrieve
	More     bool       `cbor:"more,omitempty"`     // retrieve: more are waiting
	Acked    int        `cbor:"acked,omitempty"`    // ack: how many were deleted
	Error    *ErrorBody `cbor:"error,omitempty"`
}

// Mail is one waiting message in a retrieve answer.
type Mail struct {
	ID      string `cbor:"id"`
	Message []byte `cbor:"message"` // CBOR, with the relay's trace entry appended
}

var (
	mailEnc cbor.EncMode
	mailDec cbor.DecMode
)

// MailboxBounds bound a mailbox frame's containers, elements and nesting
// (gossip.Bounds), checked before it is decoded. The largest real frame,
// a retrieve answer of MaxMailBatch messages, is 66 containers and some
// 200 elements 3 deep (the messages are byte strings); an ack of the
// most IDs the decoder takes (1,024) is 2 containers and 1,025 elements.
var MailboxBounds = gossip.Bounds{MaxContainers: 2048, MaxElements: 8192, MaxDepth: 8}

func init() {
	var err error
	if mailEnc, mailDec, err = gossip.StrictCBOR(gossip.CBORLimits{MaxNested: 8, MaxArray: 1024, MaxMap: 64}); err != nil {
		panic(err)
	}
}

// EncodeMailbox encodes a request or response as one frame's payload.
func EncodeMailbox(v any) ([]byte, error) {
	b, err := mailEnc.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding mailbox frame: %w", err)
	}
	if len(b) > gossip.MaxMessageSize {
		return nil, fmt.Errorf("encoding mailbox frame: %w: %d bytes, at most %d", gossip.ErrFrameTooLarge, len(b), gossip.MaxMessageSize)
	}
	return b, nil
}

// DecodeMailboxRequest decodes and checks a request: a known operation with
// the fields it needs and no others.
func DecodeMailboxRequest(b []byte) (*MailboxRequest, error) {
	var r MailboxRequest
	if err := decodeMailbox(b, &r); err != nil {
		return nil, err
	}
	switch r.Op {
	case OpPublish:
		if r.To == "" || len(r.Message) == 0 {
			return nil, fmt.Errorf("decoding mailbox request: %w: publish needs \"to\" (the recipient's peer ID) and \"message\"", gossip.ErrMalformed)
		}
		if len(r.Message) > MaxMailMessage {
			return nil, fmt.Errorf("decoding mailbox request: %w: message of %d bytes, a mailbox takes at most %d", gossip.ErrTooLarge, len(r.Message), MaxMailMessage)
		}
	case OpRetrieve:
		if r.Limit < 0 {
			return nil, fmt.Errorf("decoding mailbox request: %w: limit %d is negative", gossip.ErrMalformed, r.Limit)
		}
	case OpAck:
		if len(r.IDs) == 0 {
			return nil, fmt.Errorf("decoding mailbox request: %w: ack needs \"ids\"", gossip.ErrMalformed)
		}
	default:
		return nil, fmt.Errorf("decoding mailbox request: %w %q: want publish, retrieve or ack", ErrMailboxUnknownOp, r.Op)
	}
	return &r, nil
}

// DecodeMailboxResponse decodes a relay's answer.
func DecodeMailboxResponse(b []byte) (*MailboxResponse, error) {
	var r MailboxResponse
	if err := decodeMailbox(b, &r); err != nil {
		return nil, err
	}
	if !r.OK && r.Error == nil {
		return nil, fmt.Errorf("decoding mailbox response: %w: not ok and no error", gossip.ErrMalformed)
	}
	return &r, nil
}

func decodeMailbox(b []byte, v any) error {
	if len(b) > gossip.MaxMessageSize {
		return fmt.Errorf("decoding mailbox frame: %w: %d bytes, at most %d", gossip.ErrTooLarge, len(b), gossip.MaxMessageSize)
	}
	if err := gossip.ScanCBOR(b, MailboxBounds); err != nil {
		return fmt.Errorf("decoding mailbox frame: %w: %w", gossip.ErrMalformed, err)
	}
	rest, err := mailDec.UnmarshalFirst(b, v)
	if ufe := (*cbor.UnknownFieldError)(nil); errors.As(err, &ufe) {
		return fmt.Errorf("decoding mailbox frame: %w: %s", gossip.ErrMalformed, unknownMembers(b, v))
	}
	if err != nil {
		return fmt.Errorf("decoding mailbox frame: %w: %v", gossip.ErrMalformed, err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("decoding mailbox frame: %w: %d bytes after the item", gossip.ErrMalformed, len(rest))
	}
	return nil
}

// ReadMailbox reads one mailbox frame's payload, with the stream's scope
// reservation (ReserveFactor) held while it is read and the cost of its
// counts (MailboxBounds) taken from the budget meanwhile; a frame past
// the bounds is left for the decoder to refuse. A refusal of either is
// ErrOverloaded.
func (s *Stream) ReadMailbox() ([]byte, error) {
	if err := s.awaitFrame(); err != nil {
		return nil, err
	}
	payload, done, err := s.readPayload()
	if err != nil {
		return nil, err
	}
	defer done()
	if counts, err := gossip.MeasureCBOR(payload, MailboxBounds); err == nil {
		release, err := s.acquire(counts.Cost(len(payload)))
		if err != nil {
			return nil, err
		}
		release()
	}
	return payload, nil
}

// WriteMailbox encodes v and writes it as one frame.
func (s *Stream) WriteMailbox(v any) error {
	b, err := EncodeMailbox(v)
	if err != nil {
		return err
	}
	if err := s.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil {
		return fmt.Errorf("setting write deadline: %w", err)
	}
	return gossip.WriteFrame(s.Stream, b)
}

// unknownMembers says which members of the frame b, decoded into v, this
// daemon does not know: a mailbox frame has no unknown keys, so a member
// a newer peer added is refused, and the refusal names it and the members
// this version speaks (node/wire "Versions").
func unknownMembers(b []byte, v any) string {
	t := reflect.TypeOf(v).Elem()
	var known []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("cbor"), ",")
		known = append(known, name)
	}
	var top map[string]cbor.RawMessage
	var unknown []string
	if mailDec.Unmarshal(b, &top) == nil {
		for k := range top {
			if !slices.Contains(known, k) {
				unknown = append(unknown, fmt.Sprintf("%q", k))
			}
		}
	}
	slices.Sort(unknown)
	what := "a member inside one of its values"
	if len(unknown) > 0 {
		what = "member " + strings.Join(unknown, ", ")
	}
	return fmt.Sprintf("%s is not part of %s as this daemon speaks it (a %s has %s); a peer of a newer version must leave it out for this one",
		what, Mailbox, strings.ToLower(t.Name()[len("Mailbox"):]), strings.Join(known, ", "))
}
