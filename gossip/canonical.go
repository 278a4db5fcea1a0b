package gossip

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/fxamacker/cbor/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/ifaced/ifaced/identity"
)

// A greeting carries the sender's signed capability view, about 13 KB of
// JSON for 20 capabilities, and the message signature covers the RFC 8785
// form of the whole body. Canonicalizing that view is most of the CPU a
// naive greeting costs, yet it rarely changes: the sender re-sends the view
// it signed until its document's seq moves, and the receiver sees the same
// bytes greeting after greeting. So a part's canonical content is computed
// once and kept:
//
//   - the sender seals the view once (SealContent: its canonical JSON and
//     its CBOR) and builds each greeting's part from the seal;
//   - the receiver decodes each large CBOR content with its SHA-256, and
//     canonicalMemo maps that hash to the canonical bytes. Equal CBOR bytes
//     decode (deterministically) to equal values, so equal canonical forms:
//     the memo never changes what is verified, only how often the work is
//     done.
//
// Known canonical bytes also serve the JSON encoding of the part (the
// audit log writes every message), in place of encoding Content again.
// That is sound only while Content does not change, which a signed message
// guarantees anyway: any change would break its signature.

// SealedContent is a part content with its encodings computed once, for a
// content sent many times. It must not change after SealContent.
type SealedContent struct {
	value       any
	canon, cbor []byte
}

// SealContent computes the RFC 8785 JSON and deterministic CBOR of v, a
// JSON value as a message part holds it.
func SealContent(v any) (*SealedContent, error) {
	if path, problem := checkValue(v, 1); problem != "" {
		return nil, fmt.Errorf("sealing part content: %s: %s", path, problem)
	}
	canon, err := identity.Canonicalize(v)
	if err != nil {
		return nil, fmt.Errorf("sealing part content: %w", err)
	}
	c, err := cborEnc.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("sealing part content: %w", err)
	}
	return &SealedContent{value: v, canon: canon, cbor: c}, nil
}

// Canonical returns the content's RFC 8785 form.
func (s *SealedContent) Canonical() []byte { return s.canon }

// Part returns a part carrying the sealed content.
func (s *SealedContent) Part(contentType, name string) Part {
	return Part{ContentType: contentType, Name: name, Content: s.value, canon: s.canon, cborRaw: s.cbor}
}

// CanonicalContent returns the RFC 8785 form of the part's content
// ("null" for none): the known bytes when there are some, else computed,
// and kept when the content came in as CBOR.
func (p *Part) CanonicalContent() ([]byte, error) {
	if p.canon != nil {
		return p.canon, nil
	}
	if p.rawSum != nil {
		if c, ok := memo.get(*p.rawSum); ok {
			p.canon = c
			return c, nil
		}
	}
	c, err := identity.AppendCanonical(nil, p.Content)
	if err != nil {
		return nil, err
	}
	if p.rawSum != nil || p.decoded {
		// A received content does not change (its signature covers it):
		// its canonical form serves the reader of the part, the signing
		// input and the audit log's JSON alike, computed once. A large
		// one goes into the memo once the signature over it verified
		// (memoize).
		p.canon = c
	}
	return c, nil
}

// memoize keeps the canonical form and the decoded value of the message's
// large CBOR contents for the next message that carries the same bytes.
// Verify calls it once a signature over them verified, so that only
// contents someone signed can take the memos' room.
func (m *Message) memoize() {
	for i := range m.Body.Parts {
		p := &m.Body.Parts[i]
		if p.rawSum == nil || p.canon == nil || p.fromMemo {
			continue
		}
		memo.add(*p.rawSum, p.canon, len(p.canon))
		v, cost := copyValue(p.Content)
		decodedMemo.add(*p.rawSum, v, cost)
	}
}

// canonical returns the RFC 8785 form of the body, as
// identity.Canonicalize(b) would, assembled from its parts' canonical
// contents. The member names are fixed ASCII, written in RFC 8785 order:
// "parts" < "text", and "content" < "content_type" < "name".
func (b *Body) canonical() ([]byte, error) {
	var out bytes.Buffer
	out.WriteByte('{')
	if len(b.Parts) > 0 {
		out.WriteString(`"parts":[`)
		for i := range b.Parts {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := b.Parts[i].appendCanonical(&out); err != nil {
				return nil, fmt.Errorf("body.parts[%d]: %w", i, err)
			}
		}
		out.WriteByte(']')
	}
	if b.Text != "" {
		if len(b.Parts) > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`"text":`)
		if err := appendCanonicalString(&out, b.Text); err != nil {
			return nil, err
		}
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

func (p *Part) appendCanonical(out *bytes.Buffer) error {
	out.WriteByte('{')
	sep := ""
	if p.Content != nil { // a free-form value: absent only when null
		c, err := p.CanonicalContent()
		if err != nil {
			return err
		}
		// A nil map or slice is null too: it travels as null, and comes
		// back as no content at all.
		if string(c) != "null" {
			out.WriteString(`"content":`)
			out.Write(c)
			sep = ","
		}
	}
	if p.ContentType != "" { // required, so only an invalid part lacks it
		out.WriteString(sep + `"content_type":`)
		if err := appendCanonicalString(out, p.ContentType); err != nil {
			return err
		}
		sep = ","
	}
	if p.Name != "" {
		out.WriteString(sep + `"name":`)
		if err := appendCanonicalString(out, p.Name); err != nil {
			return err
		}
	}
	out.WriteByte('}')
	return nil
}

func appendCanonicalString(out *bytes.Buffer, s string) error {
	c, err := identity.AppendCanonical(out.AvailableBuffer(), s)
	if err != nil {
		return err
	}
	out.Write(c)
	return nil
}

// partFields is Part without its methods, for the default encodings.
type partFields struct {
	ContentType string `json:"content_type"`
	Name        string `json:"name,omitempty"`
	Content     any    `json:"content,omitempty"`
}

// MarshalJSON writes the known canonical content rather than encoding the
// content again; the JSON is the same value either way. The part is
// assembled by hand: encoding/json would otherwise scan the content once
// more than the caller's encoder does, and a capability view is large.
func (p Part) MarshalJSON() ([]byte, error) {
	canon := p.canon
	if canon == nil && p.Content != nil {
		// A part built here and not sealed (a proposal, a context): its
		// canonical form is also its JSON, and cheaper than encoding/json.
		c, err := identity.AppendCanonical(nil, p.Content)
		if err != nil {
			return nil, err
		}
		canon = c
	}
	if canon == nil {
		return json.Marshal(partFields{p.ContentType, p.Name, p.Content})
	}
	var out bytes.Buffer
	out.Grow(len(canon) + len(p.ContentType) + len(p.Name) + 48)
	out.WriteString(`{"content_type":`)
	if err := appendCanonicalString(&out, p.ContentType); err != nil {
		return nil, err
	}
	if p.Name != "" {
		out.WriteString(`,"name":`)
		if err := appendCanonicalString(&out, p.Name); err != nil {
			return nil, err
		}
	}
	out.WriteString(`,"content":`)
	out.Write(canon)
	out.WriteByte('}')
	return out.Bytes(), nil
}

// MarshalCBOR writes a sealed content's CBOR as it is; other parts encode
// as the struct would.
func (p Part) MarshalCBOR() ([]byte, error) {
	if p.cborRaw == nil {
		return cborEnc.Marshal(partFields{p.ContentType, p.Name, p.Content})
	}
	return cborEnc.Marshal(struct {
		ContentType string          `json:"content_type"`
		Name        string          `json:"name,omitempty"`
		Content     cbor.RawMessage `json:"content"`
	}{p.ContentType, p.Name, p.cborRaw})
}

// memoMinSize is the smallest content worth hashing on arrival: below it,
// canonicalizing costs less than the lookup.
const memoMinSize = 1024

// UnmarshalCBOR decodes a part with the message decoder's rules (within
// MessageBounds, checked before decoding, as DecodeCBOR checks the whole
// message), and keeps the SHA-256 of a large content's CBOR for
// canonicalMemo.
func (p *Part) UnmarshalCBOR(data []byte) error {
	if err := ScanCBOR(data, MessageBounds); err != nil {
		return err
	}
	var w struct {
		ContentType string          `json:"content_type"`
		Name        string          `json:"name,omitempty"`
		Content     cbor.RawMessage `json:"content,omitempty"`
	}
	if err := cborDec.Unmarshal(data, &w); err != nil {
		return err
	}
	*p = Part{ContentType: w.ContentType, Name: w.Name}
	if w.Content == nil {
		return nil
	}
	p.decoded = true
	if len(w.Content) < memoMinSize {
		return cborDec.Unmarshal(w.Content, &p.Content)
	}
	sum := sha256.Sum256(w.Content)
	p.rawSum = &sum
	// Equal CBOR bytes decode to equal values: copying the value decoded
	// before costs a fraction of decoding again.
	if v, ok := decodedMemo.get(sum); ok {
		p.Content, _ = copyValue(v)
		p.fromMemo = true
		return nil
	}
	return cborDec.Unmarshal(w.Content, &p.Content)
}

// memoLRU maps the SHA-256 of a content to something derived from it (its
// canonical JSON, its decoded value, its indented rendering), least
// recently used first out, within a budget of bytes. A peer that sends
// ever-new contents only makes itself slower: each costs what it would
// without the memo.
type memoLRU[V any] struct {
	mu    sync.Mutex
	lru   *simplelru.LRU[[32]byte, memoEntry[V]]
	bytes int
	max   int
}

type memoEntry[V any] struct {
	v    V
	cost int
}

// memoBudget bounds each memo: a few hundred capability views.
const memoBudget = 8 << 20

var (
	memo        = newMemo[[]byte](memoBudget) // canonical JSON of CBOR contents
	decodedMemo = newMemo[any](memoBudget)    // decoded CBOR contents; handed out as copies
)

func newMemo[V any](budget int) *memoLRU[V] {
	m := &memoLRU[V]{max: budget}
	// The entry count only backs up the byte budget.
	m.lru, _ = simplelru.NewLRU(budget/memoMinSize, func(_ [32]byte, e memoEntry[V]) { m.bytes -= e.cost })
	return m
}

// Memo is one of this package's process-wide memos, and how full it is:
// its entries, the bytes they are counted as, and its budget.
type Memo struct {
	Name string // canonical, decoded, indented
	Fill func() (entries int, used, budget int64)
}

// Memos are the package's process-wide memos: canonical forms of
// contents, decoded contents, and indented renderings (the daemon's
// metrics show how full they are beside its own caches).
func Memos() []Memo {
	return []Memo{{"canonical", memo.fill}, {"decoded", decodedMemo.fill}, {"indented", indentMemo.fill}}
}

func (m *memoLRU[V]) fill() (entries int, used, budget int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len(), int64(m.bytes), int64(m.max)
}

func (m *memoLRU[V]) get(k [32]byte) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.lru.Get(k)
	return e.v, ok
}

// add keeps v under k; cost is what it holds in bytes, or an estimate.
func (m *memoLRU[V]) add(k [32]byte, v V, cost int) {
	if cost > m.max/8 {
		return // one content must not flush everything else
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.lru.Peek(k); ok {
		m.bytes -= old.cost
	}
	m.lru.Add(k, memoEntry[V]{v, cost})
	m.bytes += cost
	for m.bytes > m.max {
		m.lru.RemoveOldest()
	}
}

// mapCost is the memory a map[string]any of n entries takes before its
// keys' bytes and its values' own allocations: Go's maps hold groups of 8
// slots (a string key and an interface value, 32 bytes, each) with a
// control word, filled to at most 7/8, behind a 48-byte header. Counting
// 32 bytes an entry instead, as this once did, put the decoded memo's
// real size at about twice its budget (15.5 MB held for 8 MiB, in a heap
// profile of a daemon greeted by 2,000 fresh peers).
func mapCost(n int) int {
	slots := 8
	for slots*7/8 < n {
		slots *= 2
	}
	return 48 + slots/8*(8+8*32)
}

// copyValue deep-copies a decoded JSON value (maps, slices, scalars), so
// that a memoized value is never shared with a message's owner, and
// estimates the bytes the copy holds (headers, entries, strings).
func copyValue(v any) (any, int) {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		cost := mapCost(len(v))
		for k, e := range v {
			c, n := copyValue(e)
			out[k] = c
			cost += len(k) + n
		}
		return out, cost
	case []any:
		out := make([]any, len(v))
		cost := 24
		for i, e := range v {
			c, n := copyValue(e)
			out[i] = c
			cost += 16 + n
		}
		return out, cost
	case string:
		return v, 16 + len(v)
	default:
		return v, 16 // numbers, booleans and nil are values
	}
}

// Footprint estimates the bytes a decoded message holds in memory: its
// text, and per part the encodings it keeps (canonical JSON, CBOR) and
// the decoded content, counted as twice the larger encoding (maps and
// slices of Go values take about that). A part with no encoding known
// counts a kilobyte. A holder that must bound what messages it keeps
// counts them by it (the daemon's event subscribers do).
func (m *Message) Footprint() int64 {
	n := int64(512 + len(m.Body.Text))
	for i := range m.Body.Parts {
		p := &m.Body.Parts[i]
		enc := max(len(p.canon), len(p.cborRaw))
		if enc == 0 && p.Content != nil {
			enc = 1 << 10
		}
		n += int64(len(p.canon) + len(p.cborRaw) + 2*enc + len(p.Name) + len(p.ContentType))
	}
	return n
}
