package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/store"
)

// documents owns the owner's capability document: its seq (persisted and
// raised whenever the content changes, so peers can tell a new document
// from an old one across restarts), its signature, the signed view each
// requester is shown — signed once per seq and facts, since a view changes
// only when one of them does — and the compiled schemas of its
// capabilities.
type documents struct {
	id    *identity.Identity
	store ownDocumentStore
	order *conditions.TierOrder
	now   func() time.Time
	log   *slog.Logger

	changeMu sync.Mutex // one change at a time, so none is lost and no seq is reused

	mu      sync.Mutex
	doc     *negotiate.Document    // signed; replaced on change
	views   map[string]*signedView // signed views by seq and facts
	schemas *negotiate.Schemas     // of doc, compiled once per seq
}

// ownDocumentStore is what documents keeps in the store.
type ownDocumentStore interface {
	OwnDocument() (uint64, json.RawMessage, error)
	SaveOwnDocument(seq uint64, raw json.RawMessage) error
}

var _ ownDocumentStore = (*store.Store)(nil)

func newDocuments(id *identity.Identity, st ownDocumentStore, order *conditions.TierOrder, now func() time.Time, log *slog.Logger) *documents {
	return &documents{id: id, store: st, order: order, now: now, log: log, views: map[string]*signedView{}}
}

// signedView is a view as sent: signed, sealed for every transport, its
// have_view sum and content key (negotiate.SignedView). Views change only
// when the document's seq or the requester's facts do, so they are signed
// once and reused.
type signedView = negotiate.SignedView

// maxCachedViews bounds the signed views kept between document changes.
// Each holds the view as a document, a JSON value, and its canonical and
// CBOR bytes (some 120 KB for 20 capabilities), so about 60 MB at most;
// past it the cache starts again and views are signed anew.
const maxCachedViews = 512

// set makes doc the owner's document. Its seq continues from the stored
// one: unchanged content keeps the stored seq, changed content gets the
// next. The document is signed and stored before it is used.
func (d *documents) set(doc *negotiate.Document) error {
	newKey, err := negotiate.ContentKey(doc)
	if err != nil {
		return err
	}
	seq, stored, err := d.store.OwnDocument()
	switch {
	case errors.Is(err, store.ErrNotFound):
		doc.Seq = 1
	case err != nil:
		return fmt.Errorf("reading own document: %w", err)
	default:
		var old negotiate.Document
		if err := json.Unmarshal(stored, &old); err != nil {
			return fmt.Errorf("reading own document: %w", err)
		}
		oldKey, err := negotiate.ContentKey(&old)
		if err != nil {
			return err
		}
		if bytes.Equal(oldKey, newKey) {
			doc.Seq, doc.Updated = seq, old.Updated
		} else {
			doc.Seq = seq + 1
		}
	}
	if doc.Updated == "" {
		doc.Updated = gossip.FormatDate(d.now())
	}
	if _, err := doc.Sign(d.id, d.now()); err != nil {
		return err
	}
	if doc.Seq != seq {
		raw, err := json.Marshal(doc)
		if err != nil {
			return fmt.Errorf("saving own document: %w", err)
		}
		if err := d.store.SaveOwnDocument(doc.Seq, raw); err != nil {
			return fmt.Errorf("saving own document: %w", err)
		}
	}
	d.mu.Lock()
	d.doc = doc
	d.views = map[string]*signedView{}
	d.mu.Unlock()
	return nil
}

// current is the owner's current signed document.
func (d *documents) current() *negotiate.Document {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.doc
}

// update replaces the owner's capability list with what change makes of a
// copy of the current document: validated, given the next seq, signed and
// stored.
func (d *documents) update(change func(doc *negotiate.Document) error) (*negotiate.Document, error) {
	d.changeMu.Lock()
	defer d.changeMu.Unlock()
	cur := d.current()
	next := *cur
	next.Capabilities = slices.Clone(cur.Capabilities)
	next.Signature, next.Updated = nil, gossip.FormatDate(d.now())
	if err := change(&next); err != nil {
		return nil, err
	}
	if err := next.Validate(d.order); err != nil {
		return nil, err
	}
	if err := d.set(&next); err != nil {
		return nil, err
	}
	return d.current(), nil
}

// view returns the signed view of the owner's document for facts.
func (d *documents) view(f conditions.Facts) (*signedView, error) {
	d.mu.Lock()
	doc := d.doc
	key := fmt.Sprintf("%d|%s|%d|%s|%s|%s", doc.Seq, f.Peer, f.AuthLevel, f.Disclosure, f.Temperature, f.Persona)
	v, ok := d.views[key]
	d.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := d.sign(doc.View(f, d.order))
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.doc.Seq == doc.Seq {
		if len(d.views) >= maxCachedViews {
			d.views = map[string]*signedView{} // cheap to rebuild; bounded memory matters more
		}
		d.views[key] = v
	}
	d.mu.Unlock()
	return v, nil
}

// sign signs view (a view cut from the owner's document) as the owner.
func (d *documents) sign(view *negotiate.Document) (*signedView, error) {
	return negotiate.SignView(view, d.id, d.now())
}

// ordered is v with the capabilities of the requested ACP tool categories
// first, signed, and the requested categories it supports (v itself when
// the request changes nothing). It keeps v's content key: the order is the
// peer's request, not a change of what it may see.
func (d *documents) ordered(v *signedView, requested []string) (*signedView, []string, error) {
	return v.Ordered(requested, d.id, d.now())
}

// withSchemas returns the current document and its compiled schemas,
// compiling them once per seq.
func (d *documents) withSchemas() (*negotiate.Document, *negotiate.Schemas) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.schemas == nil || d.schemas.Seq() != d.doc.Seq {
		s, err := negotiate.NewSchemas(d.doc)
		if err != nil {
			// The document validated, so its schemas compile; keep the
			// previous ones rather than fail every request.
			d.log.Error("compiling schemas of a validated document", "err", err)
			if d.schemas == nil {
				s, _ = negotiate.NewSchemas(&negotiate.Document{Seq: d.doc.Seq})
			}
		}
		if s != nil {
			d.schemas = s
		}
	}
	return d.doc, d.schemas
}
