package negotiate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
)

// Body part names of the messages that carry views and greetings
// (application/json parts).
const (
	PartCapabilities = "capabilities" // the sender's signed view for the recipient
	PartGreeting     = "greeting"     // the proposal: temperature, ifp_support, tool categories, have_view, view_unchanged
	PartContext      = "context"      // the context the sender grants the recipient
)

// SignedView is a view as this daemon sends it: signed, and sealed as
// the content of a message part. Views change only when the document's
// seq or the requester's facts do, so a view is signed once and its
// encodings reused by every message that carries it. Nothing in it may
// change after SignView.
type SignedView struct {
	Doc     *Document             // the view, signed
	Content *gossip.SealedContent // the view as part content: JSON value, RFC 8785 form and CBOR, encoded once
	// Sum is the hex SHA-256 of the view's RFC 8785 form (signature
	// included): what a peer holding this view names in have_view.
	Sum string
	// Key is ContentKey of the view: equal for a view re-signed without
	// a change of content (a new seq, another time), different when what
	// the peer may see changed.
	Key []byte
}

// SignView signs view with id (the signature's time is now) and seals
// it. view becomes the SignedView's and must not be changed afterwards.
func SignView(view *Document, id *identity.Identity, now time.Time) (*SignedView, error) {
	if _, err := view.Sign(id, now); err != nil {
		return nil, err
	}
	raw, err := encodeDocument(view)
	if err != nil {
		return nil, fmt.Errorf("encoding view: %w", err)
	}
	var content any
	if err := json.Unmarshal(raw, &content); err != nil {
		return nil, fmt.Errorf("encoding view: %w", err)
	}
	sealed, err := gossip.SealContent(content)
	if err != nil {
		return nil, fmt.Errorf("encoding view: %w", err)
	}
	key, err := ContentKey(view)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(sealed.Canonical())
	return &SignedView{Doc: view, Content: sealed, Sum: hex.EncodeToString(sum[:]), Key: key}, nil
}

// Part is the message part that carries the view.
func (v *SignedView) Part() gossip.Part { return v.Content.Part("application/json", PartCapabilities) }

// Offer lists the capabilities the view's requester may use now, in the
// view's order: what a greeting names in headers.capabilities.offer.
func (v *SignedView) Offer() []string {
	var offer []string
	for _, c := range v.Doc.Capabilities {
		if c.Eligible != nil && *c.Eligible {
			offer = append(offer, c.Name)
		}
	}
	return offer
}

// Ordered is the view with the capabilities of the requested ACP tool
// categories first, signed, and the requested categories it supports. A
// request that changes nothing returns v itself. The result keeps v's Key:
// the order is the peer's request, not a change of what it may see.
func (v *SignedView) Ordered(requested []string, id *identity.Identity, now time.Time) (*SignedView, []string, error) {
	doc, honoured := OrderByCategories(v.Doc, requested)
	if len(honoured) == 0 {
		return v, nil, nil
	}
	doc.Signature = nil
	ordered, err := SignView(doc, id, now)
	if err != nil {
		return nil, nil, err
	}
	ordered.Key = v.Key
	return ordered, honoured, nil
}

// ContentKey is the SHA-256 of d's canonical form without what changes on
// every save (seq, updated, signature): equal keys, equal content.
func ContentKey(d *Document) ([]byte, error) {
	c := *d
	c.Seq, c.Updated, c.Signature = 0, "", nil
	canon, err := c.Canonical()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canon)
	return sum[:], nil
}
