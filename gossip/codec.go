package gossip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/fxamacker/cbor/v2"
	jsonv2 "github.com/go-json-experiment/json"
)

// MaxMessageSize is the largest encoded message accepted in either codec
// (1 MiB, the frame cap of DESIGN.md §6 and near the IFP-6 1 MB limit).
const MaxMessageSize = 1 << 20

var (
	// ErrTooLarge: the encoded message is over MaxMessageSize.
	ErrTooLarge = errors.New("message too large")
	// ErrMalformed: the bytes are not a well-formed encoding of a message.
	ErrMalformed = errors.New("malformed message encoding")
)

var (
	cborEnc cbor.EncMode
	cborDec cbor.DecMode
)

func init() {
	var err error
	// Core deterministic encoding (RFC 8949 §4.2.1): sorted keys, shortest
	// forms, no indefinite lengths, so equal messages give equal bytes.
	if cborEnc, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	cborDec, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   MaxValueDepth + 8,
		MaxArrayElements:  16384,
		MaxMapPairs:       16384,
		DefaultMapType:    reflect.TypeOf(map[string]any(nil)),
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
		NaN:               cbor.NaNDecodeForbidden,
		Inf:               cbor.InfDecodeForbidden,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// CBORLimits size a strict CBOR decoder for one kind of item.
type CBORLimits struct {
	MaxNested, MaxArray, MaxMap int
}

// StrictCBOR returns the encoder and decoder every ifaced CBOR item uses
// beside messages (mailbox frames, announcements): core deterministic
// encoding, and decoding that refuses duplicate keys, indefinite lengths,
// tags, NaN and infinities, field names matched only by case, and fields
// the target struct does not have.
func StrictCBOR(l CBORLimits) (cbor.EncMode, cbor.DecMode, error) {
	enc, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		return nil, nil, err
	}
	dec, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   l.MaxNested,
		MaxArrayElements:  l.MaxArray,
		MaxMapPairs:       l.MaxMap,
		DefaultMapType:    reflect.TypeOf(map[string]any(nil)),
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
		NaN:               cbor.NaNDecodeForbidden,
		Inf:               cbor.InfDecodeForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	return enc, dec, err
}

// EncodeCBOR returns the deterministic CBOR encoding of m.
func EncodeCBOR(m *Message) ([]byte, error) {
	b, err := cborEnc.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding message as CBOR: %w", err)
	}
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("encoding message as CBOR: %w: %d bytes, at most %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	return b, nil
}

// DecodeCBOR decodes and validates one CBOR message. Duplicate map keys,
// tags, indefinite lengths, NaN and infinities, trailing bytes, anything
// over MaxMessageSize, and an item past MessageBounds (refused before
// anything is decoded; ErrOverBound) are refused. Every refusal but the last
// wraps a *FieldError naming the IFP-4 member at fault and
// ErrInvalidMessage; one that does not decode also wraps ErrMalformed.
func DecodeCBOR(b []byte) (*Message, error) {
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("decoding CBOR message: %w: %d bytes, at most %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	if err := ScanCBOR(b, MessageBounds); err != nil {
		return nil, fmt.Errorf("decoding CBOR message: %w: %w", ErrMalformed, err)
	}
	var m Message
	rest, err := cborDec.UnmarshalFirst(b, &m)
	if err != nil {
		return nil, fmt.Errorf("decoding CBOR message: %w: %w", ErrMalformed, cborDecodeError(b, err))
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decoding CBOR message: %w: %w", ErrMalformed,
			&FieldError{Field: "", Problem: fmt.Sprintf("is followed by %d bytes; a frame holds one CBOR item", len(rest))})
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("decoding CBOR message: %w", err)
	}
	return &m, nil
}

// EncodeJSON returns the JSON encoding of m (compact).
func EncodeJSON(m *Message) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding message as JSON: %w", err)
	}
	return b, nil
}

// DecodeJSON decodes and validates one JSON message. Duplicate member
// names, invalid UTF-8, and member names that match a field only when
// case is ignored are refused, so that every reader sees the message this
// daemon verified, and so is a text past MessageBounds, before anything is
// decoded. Errors are as DecodeCBOR's.
func DecodeJSON(b []byte) (*Message, error) {
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("decoding JSON message: %w: %d bytes, at most %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	var m Message
	b = bytes.TrimSpace(b)
	if err := ScanJSON(b, MessageBounds); err != nil {
		return nil, fmt.Errorf("decoding JSON message: %w: %w", ErrMalformed, err)
	}
	if err := jsonv2.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decoding JSON message: %w: %w", ErrMalformed, jsonDecodeError(b, err))
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("decoding JSON message: %w", err)
	}
	return &m, nil
}
