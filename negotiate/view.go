package negotiate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
)

// View returns the document a requester with facts f may see under the
// owner's tier order. For each capability:
//
//   - a persona condition that excludes the active persona removes it: under
//     that persona the capability does not exist (and naming the personas it
//     does exist under would disclose them);
//   - an ineligible capability with advertise = "when-eligible" is removed:
//     it appears in no view, error, record or announcement this requester
//     can see;
//   - any other capability is shown with eligible set, and when false, with
//     the unmet conditions and how to meet them. Workload (max_concurrent)
//     is transient and does not make a capability ineligible.
//
// The peers allow list is never shown: an eligible requester sees only
// itself in it. The view carries the document's seq and no signature.
func (d *Document) View(f conditions.Facts, order *conditions.TierOrder) *Document {
	v := *d
	v.Signature, v.received = nil, nil
	v.Capabilities = make([]Capability, 0, len(d.Capabilities))
	for i := range d.Capabilities {
		c := d.Capabilities[i]
		dec := conditions.Evaluate(c.Conds(), f, order, 0)
		if dec.Absent() {
			continue
		}
		eligible := dec.Eligible()
		if !eligible && c.Hidden() {
			continue
		}
		c.Eligible = &eligible
		if !eligible {
			for _, u := range dec.Unmet {
				if u.Condition != conditions.CondMaxConcurrent {
					c.Unmet = append(c.Unmet, u)
				}
			}
		}
		if c.Conditions != nil {
			conds := *c.Conditions
			conds.Peers = nil
			if slices.Contains(c.Conditions.Peers, f.Peer) && f.Peer != "" {
				conds.Peers = []string{f.Peer}
			}
			if len(conds.Persona) > 0 {
				conds.Persona = []string{f.Persona}
			}
			c.Conditions = &conds
		}
		v.Capabilities = append(v.Capabilities, c)
	}
	v.SupportedCategories = v.SupportedToolCategories()
	return &v
}

// Advertised returns the names of the capabilities that may appear in
// public records (DHT provider records, announcements): those not marked
// when-eligible. A hidden capability is never advertised, whoever might
// be eligible for it.
func (d *Document) Advertised() []string {
	var names []string
	for i := range d.Capabilities {
		if !d.Capabilities[i].Hidden() {
			names = append(names, d.Capabilities[i].Name)
		}
	}
	return names
}

// Canonical returns the RFC 8785 form of the document without its
// signature: the bytes its signature covers. It changes only when the
// document does, so callers keep it per seq.
func (d *Document) Canonical() ([]byte, error) {
	c := *d
	c.Signature = nil
	raw, err := encodeDocument(&c)
	if err != nil {
		return nil, fmt.Errorf("canonicalizing capability document: %w", err)
	}
	b, err := identity.CanonicalizeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalizing capability document: %w", err)
	}
	return b, nil
}

// Sign sets the document's signature by id. It returns the canonical
// bytes it signed, for the caller to keep with the seq.
func (d *Document) Sign(id *identity.Identity, now time.Time) ([]byte, error) {
	canon, err := d.Canonical()
	if err != nil {
		return nil, err
	}
	sig, err := id.SignDocument(canon, now)
	if err != nil {
		return nil, fmt.Errorf("signing capability document: %w", err)
	}
	d.Signature, d.received = sig, nil // signed here: what it says now is what counts
	return canon, nil
}

// Verify checks the document's signature under pub.
func (d *Document) Verify(pub []byte) error {
	_, err := d.VerifyCanonical(pub)
	return err
}

// VerifyCanonical checks the signature and returns the canonical bytes it
// covers, so a caller that also needs them (to hash or cache the document)
// does not canonicalize twice.
//
// The signature covers the document as its signer wrote it. For a
// document this daemon signed, and for a peer's view that holds only what
// this package models, that is the canonical form of d itself. A view a
// peer sent (DecodeView) may say more (members this package does not
// model, persona written as a string): then the signature is checked over
// the bytes the view was decoded from, and holds only while d still says
// what those bytes say. VerifyView does the same in one step, for a view
// held as its canonical bytes.
func (d *Document) VerifyCanonical(pub []byte) ([]byte, error) {
	if d.Signature == nil {
		return nil, fmt.Errorf("verifying capability document: %w: no signature", identity.ErrMalformedSignature)
	}
	canon, err := d.Canonical()
	if err != nil {
		return nil, err
	}
	err = identity.VerifyDocument(pub, d.Signature, canon)
	if errors.Is(err, identity.ErrBadSignature) && d.received != nil {
		if signed, ok := d.verifyReceived(pub, canon); ok {
			return signed, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("verifying capability document: %w", err)
	}
	return canon, nil
}

// verifyReceived checks the signature over the bytes d was decoded from,
// and that d still says what they say: modeled is d's canonical form.
func (d *Document) verifyReceived(pub, modeled []byte) ([]byte, bool) {
	canon, err := identity.CanonicalizeJSON(d.received)
	if err != nil {
		return nil, false
	}
	vv, signed, err := verifyView(pub, canon)
	if err != nil || *vv.Doc.Signature != *d.Signature {
		return nil, false
	}
	again, err := vv.Doc.Canonical()
	if err != nil || !bytes.Equal(again, modeled) {
		return nil, false
	}
	return signed, true
}

// ErrNotAView wraps problems with a document a peer sent.
var ErrNotAView = errors.New("invalid capability view")

// ViewBounds bound the containers, elements and nesting of a view a peer
// sent (gossip.Bounds): those of a message, since a view travels as one
// message part. A view inside a message is within them already; a view
// from elsewhere (a GossipSub announcement, the peer cache) is checked
// against them before it is decoded. The largest view a document may
// give (MaxCapabilities rich capabilities) needs a quarter of them.
var ViewBounds = gossip.MessageBounds

// DecodeView reads the capability view a peer sent as a message part (a
// JSON value). It is lenient where an owner's file is strict — a peer may
// use members or custom tiers this daemon does not know — but the
// structure must hold: ifp 7, an agent_id, capabilities with unique
// non-empty names and descriptions, within the size limits.
//
// Members this package does not model, on the document, on a capability
// or in its conditions, are kept as received (Extra, ConditionsExtra) and
// written back when the view is encoded; persona may be a string (as
// IFP-12 writes it) or a list. Duplicate member names are refused, so
// that every reader of the same bytes reads the same view. A view past
// ViewBounds is refused before it is decoded (the error wraps
// gossip.ErrOverBound as well as ErrNotAView).
func DecodeView(content any) (*Document, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotAView, err)
	}
	return decodeView(raw)
}

// DecodeViewJSON is DecodeView for a view held as JSON text.
func DecodeViewJSON(raw []byte) (*Document, error) {
	return decodeView(bytes.Clone(raw))
}

// decodeView decodes raw, which it keeps (see VerifyCanonical): the
// caller must not change it afterwards.
func decodeView(raw []byte) (*Document, error) {
	if err := gossip.ScanJSON(raw, ViewBounds); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAView, err)
	}
	d := new(Document)
	if err := jsonv2.Unmarshal(raw, d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotAView, err)
	}
	d.received = raw
	if d.IFP != Version {
		return nil, fmt.Errorf("%w: ifp is %d, want %d", ErrNotAView, d.IFP, Version)
	}
	if d.AgentID == "" || len(d.AgentID) > 512 {
		return nil, fmt.Errorf("%w: agent_id is missing or longer than 512 bytes", ErrNotAView)
	}
	if len(d.Capabilities) > MaxCapabilities {
		return nil, fmt.Errorf("%w: %d capabilities, at most %d", ErrNotAView, len(d.Capabilities), MaxCapabilities)
	}
	seen := map[string]bool{}
	for i, c := range d.Capabilities {
		switch {
		case c.Name == "" || len(c.Name) > MaxNameLen:
			return nil, fmt.Errorf("%w: capabilities[%d].name %q", ErrNotAView, i, c.Name)
		case seen[c.Name]:
			return nil, fmt.Errorf("%w: capability %q appears twice", ErrNotAView, c.Name)
		case len(c.Description) > MaxDescriptionLen:
			return nil, fmt.Errorf("%w: capabilities[%d].description is too long", ErrNotAView, i)
		}
		seen[c.Name] = true
	}
	return d, nil
}
