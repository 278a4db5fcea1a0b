package gossip

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// Container bounds. A decoder's memory follows the containers it builds,
// not the bytes it reads: one byte of CBOR (0xa0) or two of JSON ("{}")
// decode to an empty map of some fifty bytes, so a 1 MiB frame of tiny
// nested containers ([[{},{},…]]) used to decode to some 62 MiB of live
// heap, and checking its signature allocated another 33 MiB. The CBOR
// library bounds each container's length and the nesting, not their sum;
// so before any decoder allocates, a scan over the raw bytes (CBOR heads,
// or the JSON token stream) counts, for the whole item:
//
//	containers  arrays and maps (objects), at any depth
//	elements    the lengths of all of them added up: an array's elements,
//	            a map's pairs (a pair counts once)
//	depth       the nesting: a top-level array or map is at depth 1
//
// and refuses the item as soon as one count passes its bound, naming the
// count and the bound. The scan holds one counter per open container (at
// most the depth bound) and allocates nothing else; it judges only the
// counts, and leaves every other fault (a truncated item, a tag, bytes
// after the item) to the decoder that follows, whose message is more
// precise. A scalar at the top level is neither a container nor an
// element.
//
// The bounds come from real documents (measured by TestBoundsHeadroom):
// a greeting carrying the signed view of the 20-capability document of
// DESIGN §8 is 314 containers, 810 elements and 11 deep; one carrying a
// view of MaxCapabilities (256) such capabilities, the most a view may
// list, 3,618 containers, 9,070 elements and 11 deep; the conformance
// vectors and the test fixtures need less. MessageBounds leave four times
// the largest view's containers, fourteen times its elements (a flat
// array of numbers in a capability's result is legitimate, and an element
// costs a fifth of a container), and the depth the value rules allow
// (MaxValueDepth inside a part content, plus the members around it).
type Bounds struct {
	MaxContainers int // arrays and maps, all depths together
	MaxElements   int // array elements plus map pairs, all containers together
	MaxDepth      int // nesting of containers; the outermost is at depth 1
}

// Decoded size. Within MessageBounds, decoding a message allocates at
// most DecodeFactor times its size plus DecodeFloor bytes, whatever it
// holds (each decoder's fuzz target checks it, measuring the bytes
// allocated while decoding). The floor is what the counts can cost: a
// container with one pair costs up to ~400 bytes decoded (16,384 of them
// in 64 KiB of CBOR: 6.3 MiB), an element up to ~90 bytes as JSON
// (131,072 of them: 11 MiB); the factor is what bytes cost (a string is
// copied once or twice). Before the bounds, the 1 MiB [[{},{},…]] frame
// decoded to 62 MiB of live heap; now it is refused unread.
const (
	DecodeFactor = 4
	DecodeFloor  = 24 << 20
)

// MessageBounds bound one IFP-4 message, as CBOR (a frame, fetched mail)
// or as JSON (the HTTPS inbox, signed POST /invoke). node/wire/doc.go
// states them for other implementations.
var MessageBounds = Bounds{MaxContainers: 16384, MaxElements: 131072, MaxDepth: MaxValueDepth + 8}

// WithinDecodeFactor reports whether allocating allocated bytes to decode
// an input of size bytes is within DecodeFactor and DecodeFloor.
func WithinDecodeFactor(allocated uint64, size int) bool {
	return allocated <= uint64(DecodeFactor*size+DecodeFloor)
}

// ErrOverBound: an item has more containers or elements, or deeper
// nesting, than its Bounds allow. The refusal is a *FieldError with this
// sentinel, wrapped in ErrMalformed by the message decoders: on the wire,
// invalid_format.
var ErrOverBound = fmt.Errorf("%w: over a container bound", ErrInvalidMessage)

// boundError names the bound an item passed, the count reached and the
// maximum. It is a *FieldError for the whole item (Field "").
func boundError(what string, count, most int) *FieldError {
	return &FieldError{Err: ErrOverBound,
		Problem: fmt.Sprintf("has more than %d %s (counted %d when the scan stopped; at most %d per item): send a smaller item, or split the value", most, what, count, most)}
}

// counter keeps the running counts of a scan.
type counter struct {
	b Bounds
	Counts
}

// open counts a container of n elements at depth d (1 for the outermost).
func (c *counter) open(n uint64, d int) *FieldError {
	c.Containers++
	if c.Containers > c.b.MaxContainers {
		return boundError("containers (arrays and maps)", c.Containers, c.b.MaxContainers)
	}
	if d > c.b.MaxDepth {
		return boundError("levels of nesting", d, c.b.MaxDepth)
	}
	c.Depth = max(c.Depth, d)
	if n > uint64(c.b.MaxElements-c.Elements) {
		return boundError("elements (array elements and map pairs)", c.Elements+int(min(n, uint64(c.b.MaxElements)+1)), c.b.MaxElements)
	}
	c.Elements += int(n)
	return nil
}

// Counts are what a scan counted of one item (see Bounds).
type Counts struct {
	Containers, Elements, Depth int
}

// The costs Counts.Cost charges, from the measurements above, decoding
// and a signature check over the RFC 8785 form together: a container up
// to ~400 bytes decoded and ~40 canonicalized; an element up to ~90 bytes
// decoded (as JSON) and ~30 canonicalized; a byte of input up to eight
// (the input, its strings decoded, its canonical form built in a growing
// buffer: a 1 MiB text allocates 2 MiB decoded and 6–8.2 MiB verified,
// depending on where the buffer's doublings land), charged twelve for a
// margin (ten was exceeded by 2% on a loaded machine).
const (
	costPerContainer = 512
	costPerElement   = 128
	costPerByte      = 12
)

// Cost is an upper estimate of the bytes that decoding an item of size
// bytes with these counts, and checking a signature over it, hold at
// once: what a reader reserves for a message before decoding it (within
// MessageBounds at most 36 MiB, for a 1 MiB item as dense as the bounds
// allow; the 20-capability greeting, 14 KB, is charged 0.4 MiB).
// TestDecodeFactorWorstCases checks that decoding and a bogus signature's
// check allocate no more than charged.
func (c Counts) Cost(size int) int64 {
	return int64(costPerByte)*int64(size) + costPerContainer*int64(c.Containers) + costPerElement*int64(c.Elements)
}

// ScanCBOR checks that the CBOR item at the start of b stays within l. It
// returns a *FieldError wrapping ErrOverBound, or nil: when the bytes are
// not well-formed CBOR the scan stops and leaves the refusal to the
// decoder.
func ScanCBOR(b []byte, l Bounds) error {
	_, err := MeasureCBOR(b, l)
	return err
}

// MeasureCBOR is ScanCBOR, also returning the counts of an item within l
// (of what it scanned, when the bytes are not well-formed).
func MeasureCBOR(b []byte, l Bounds) (Counts, error) {
	c, fe := scanCBOR(b, l)
	if fe != nil {
		return Counts{}, fe
	}
	return c.Counts, nil
}

func scanCBOR(b []byte, l Bounds) (counter, *FieldError) {
	c := counter{b: l}
	// left[i] is how many items the container open at depth i still
	// holds; left[0] stands for the top level, which holds one item.
	left := make([]uint64, 1, 16)
	left[0] = 1
	for pos := 0; len(left) > 0; {
		top := len(left) - 1
		if left[top] == 0 {
			left = left[:top]
			continue
		}
		left[top]--
		if pos >= len(b) {
			return c, nil // truncated: the decoder says so
		}
		major, info := b[pos]>>5, b[pos]&0x1f
		pos++
		var arg uint64
		switch {
		case info < 24:
			arg = uint64(info)
		case info <= 27:
			w := 1 << (info - 24)
			if len(b)-pos < w {
				return c, nil
			}
			switch w {
			case 1:
				arg = uint64(b[pos])
			case 2:
				arg = uint64(binary.BigEndian.Uint16(b[pos:]))
			case 4:
				arg = uint64(binary.BigEndian.Uint32(b[pos:]))
			case 8:
				arg = binary.BigEndian.Uint64(b[pos:])
			}
			pos += w
		default:
			return c, nil // indefinite lengths and reserved values: refused by the decoder
		}
		switch major {
		case 2, 3: // byte and text strings: skip the content
			if arg > uint64(len(b)-pos) {
				return c, nil
			}
			pos += int(arg)
		case 4, 5: // arrays and maps
			if err := c.open(arg, len(left)); err != nil {
				return c, err
			}
			n := arg
			if major == 5 {
				n = 2 * arg // open bounded arg by MaxElements, so no overflow
			}
			if n > uint64(len(b)-pos) {
				return c, nil // more items announced than bytes left: truncated
			}
			if n > 0 {
				left = append(left, n)
			}
		case 6: // a tag: one more item follows in the same place
			left[top]++
		}
	}
	return c, nil
}

// ScanJSON checks that the JSON text b stays within l, counting as
// ScanCBOR does (an object member counts as one element). Like ScanCBOR it
// returns a *FieldError wrapping ErrOverBound or nil, leaving other faults
// (invalid JSON, duplicate names, invalid UTF-8) to the decoder. Values
// after the first are counted too.
func ScanJSON(b []byte, l Bounds) error {
	_, err := MeasureJSON(b, l)
	return err
}

// MeasureJSON is ScanJSON, also returning the counts of a text within l.
func MeasureJSON(b []byte, l Bounds) (Counts, error) {
	c, fe := scanJSON(b, l)
	if fe != nil {
		return Counts{}, fe
	}
	return c.Counts, nil
}

func scanJSON(b []byte, l Bounds) (counter, *FieldError) {
	c := counter{b: l}
	// The decoder checks names and UTF-8 later; the scan only counts.
	dec := jsontext.NewDecoder(bytes.NewBuffer(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		depth := dec.StackDepth()
		parent, n := dec.StackIndex(depth)
		kind := dec.PeekKind()
		if kind == 0 {
			return c, nil // the end, or invalid JSON: the decoder says which
		}
		switch {
		case kind == '}' || kind == ']':
		case parent == '{' && n%2 == 0:
			// a member name; its value counts
		case kind == '{' || kind == '[':
			if depth > 0 {
				c.Elements++
				if c.Elements > l.MaxElements {
					return c, boundError("elements (array elements and map pairs)", c.Elements, l.MaxElements)
				}
			}
			if err := c.open(0, depth+1); err != nil {
				return c, err
			}
		default:
			if depth > 0 {
				c.Elements++
				if c.Elements > l.MaxElements {
					return c, boundError("elements (array elements and map pairs)", c.Elements, l.MaxElements)
				}
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return c, nil // io.EOF, or invalid JSON: as above
		}
	}
}
