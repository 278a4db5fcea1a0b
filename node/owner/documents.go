package owner

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/internal/costlru"
	"github.com/ifaced/ifaced/node/store"
	"golang.org/x/sync/singleflight"
)

// documents owns the owner's capability document: its seq (persisted and
// raised whenever the content changes, so peers can tell a new document
// from an old one across restarts), its signature, the signed views
// requesters are shown, and the compiled schemas of its capabilities.
//
// Signed views are kept by class, not by peer: two requesters whose facts
// cut the same view from the document (the same content, by
// negotiate.ContentKey) are shown the same signed view, signed once. A
// signed view names no recipient — it is the document's seq, updated and
// agent_id with the capabilities the facts let through, signed by the
// owner — so sharing it changes nothing a recipient verifies. A view is
// cut with the requester's peer ID only when an allow list in the
// document names it (anyRequester otherwise), since unmet conditions would
// otherwise quote every requester's own ID and no two views would match.
// Per facts only the class they fall in is remembered (classes: a few
// hundred bytes each, at most maxViewClasses; one per requester only for
// requesters an allow list names); the views themselves live in a
// cache bounded by bytes (maxSignedViewBytes, least recently used evicted
// one by one), so a flood of peers costs neither a signature each nor a
// signed view each, and never empties the cache at once.
//
// A view's seq and updated are not the document's: they are those of the
// last change visible in the view (marks.go), so that a change a
// requester cannot see — a capability advertised only when eligible,
// which no stranger is — moves nothing a stranger can observe: not the
// seq, updated or signature of its view, the well-known ETag, nor the
// version of a projection. Signed views are kept by that seq and their
// content, and outlive a document change that leaves them as they are.
type Document struct {
	id    *identity.Identity
	store ownDocumentStore
	order *conditions.TierOrder
	now   func() time.Time
	log   *slog.Logger

	changeMu sync.Mutex // one change at a time, so none is lost and no seq is reused

	mu      sync.Mutex
	doc     *negotiate.Document // signed; replaced on change
	named   map[string]bool     // the peers doc's allow lists name
	schemas *negotiate.Schemas  // of doc, compiled once per seq

	marks viewMarks // per class, the seq of the last visible change (marks.go); under mu

	classes *lru.Cache[string, viewClass]                                                 // facts (with seq) → the class of view they cut
	views   *costlru.Cache[viewClass, *signedView]                                        // signed views by class, bounded by bytes
	signing singleflight.Group                                                            // by class: requesters of one class arriving together wait for one signature
	signer  func(*negotiate.Document, *identity.Identity, time.Time) (*signedView, error) // negotiate.SignView; a test watches it

	signed atomic.Uint64 // views signed by View, since the start (Held)

	caps   *Capabilities     // the owner's run-time changes (owncaps.go)
	policy Policy            // for the view signed ahead (NewOwner)
	hub    *events.Hub       // told of every change
	spawn  func(func()) bool // runs the signing ahead
	subMu  sync.Mutex
	subs   []func(*negotiate.Document) // OnChange
}

// anyRequester stands for the requester's peer ID in views cut for
// requesters no allow list names: a how_to_meet text reads "ifaced trust
// <your peer ID> --verify …", the same for all of them.
const AnyRequester = "<your peer ID>"

// viewClass names a signed view by its seq and updated (those of the
// last change visible in it: marks.go) and its content key: requesters
// in one class are shown the same signed view.
type viewClass struct {
	seq     uint64
	updated string
	key     [sha256.Size]byte
}

// ownDocumentStore is what documents keeps in the store: the document
// and, written with it, the owner's run-time capability changes
// (OwnCapabilities) that made it.
type ownDocumentStore interface {
	OwnDocument() (uint64, json.RawMessage, error)
	SaveOwnDocument(seq uint64, raw json.RawMessage) error
	SaveOwnDocumentWith(seq uint64, raw json.RawMessage, rc store.RuntimeCapabilities) error
	ViewMarks() (json.RawMessage, error)
	SaveViewMarks(raw json.RawMessage) error
}

var _ ownDocumentStore = (*store.Own)(nil)

func newDocument(id *identity.Identity, st ownDocumentStore, order *conditions.TierOrder, now func() time.Time, log *slog.Logger) *Document {
	d := &Document{id: id, store: st, order: order, now: now, log: log,
		views: costlru.New[viewClass, *signedView](maxSignedViewBytes), signer: negotiate.SignView}
	d.classes, _ = lru.New[string, viewClass](maxViewClasses)
	d.marks.init()
	return d
}

// signedView is a view as sent: signed, sealed for every transport, its
// have_view sum and content key (negotiate.SignedView). Views change only
// when the document's seq or the requester's facts do, so they are signed
// once and reused.
type signedView = negotiate.SignedView

const (
	// maxSignedViewBytes bounds the signed views kept, by the estimate of
	// signedViewCost: about 120 views of 20 capabilities, which is more
	// classes than an owner's conditions and tiers make in practice.
	maxSignedViewBytes = 16 << 20
	// maxViewClasses bounds the facts remembered with their class (about
	// 250 bytes each, so some 4 MB); a requester pushed out has its view
	// cut and its class found again, without a signature when the class's
	// view is still held.
	maxViewClasses = 16384
	// signedViewFactor is what a signed view holds per byte of its RFC
	// 8785 form: the decoded document, the JSON value, the canonical and
	// CBOR bytes (measured: TestSignedViewCost).
	signedViewFactor = 10
)

// signedViewCost is what v is counted as in the signed-view cache.
func signedViewCost(v *signedView) int64 {
	return int64(signedViewFactor*len(v.Content.Canonical()) + 1024)
}

// SignedViewsFill is how full the memory of signed views is.
func (d *Document) SignedViewsFill() costlru.Fill { return d.views.Fill() }

// set makes doc the owner's document. Its seq continues from the stored
// one: unchanged content keeps the stored seq, changed content gets the
// next. The document is signed and stored before it is used. rc, when not
// nil, are the run-time capability changes that made doc: they are stored
// in the same transaction as the document, so that the seq never rises
// for a change the store does not keep (nor a change is kept under a seq
// the store did not take).
func (d *Document) set(doc *negotiate.Document, rc *store.RuntimeCapabilities) error {
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
	var raw json.RawMessage
	if doc.Seq != seq {
		if raw, err = json.Marshal(doc); err != nil {
			return fmt.Errorf("saving own document: %w", err)
		}
	}
	switch {
	case rc != nil:
		err = d.store.SaveOwnDocumentWith(doc.Seq, raw, *rc)
	case raw != nil:
		err = d.store.SaveOwnDocument(doc.Seq, raw)
	}
	if err != nil {
		return fmt.Errorf("saving own document: %w", err)
	}
	named := map[string]bool{}
	for i := range doc.Capabilities {
		for _, p := range doc.Capabilities[i].Conds().Peers {
			named[p] = true
		}
	}
	if err := d.remark(doc, func() {
		d.doc, d.named = doc, named
	}); err != nil {
		return err
	}
	// Classes name the document's seq, so none is taken for the new
	// document. Signed views are named by their own seq and content:
	// those the change left as they were are still shown.
	d.classes.Purge()
	return nil
}

// Current is the owner's current signed document.
func (d *Document) Current() *negotiate.Document {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.doc
}

// update replaces the owner's capability list with what change makes of a
// copy of the current document: validated, given the next seq, signed and
// stored. change may return run-time capability changes to store with the
// document (OwnCapabilities); nil leaves the stored ones as they are.
func (d *Document) update(change func(doc *negotiate.Document) (*store.RuntimeCapabilities, error)) (*negotiate.Document, error) {
	d.changeMu.Lock()
	defer d.changeMu.Unlock()
	cur := d.Current()
	next := *cur
	next.Capabilities = slices.Clone(cur.Capabilities)
	next.Signature, next.Updated = nil, gossip.FormatDate(d.now())
	rc, err := change(&next)
	if err != nil {
		return nil, err
	}
	if err := next.Validate(d.order); err != nil {
		return nil, err
	}
	if err := d.set(&next, rc); err != nil {
		return nil, err
	}
	return d.Current(), nil
}

// View returns the signed view of the owner's document for facts: the
// one of their class when it is held, otherwise signed now and kept. Its
// seq and updated are those of the last change visible in it (marks.go),
// and never lower than a seq this requester (f.Peer) was shown before.
func (d *Document) View(f conditions.Facts) (*signedView, error) {
	for {
		v, err := d.viewOnce(f)
		if !errors.Is(err, errReplaced) {
			return v, err
		}
	}
}

func (d *Document) viewOnce(f conditions.Facts) (*signedView, error) {
	d.mu.Lock()
	doc, named := d.doc, d.named[f.Peer]
	d.mu.Unlock()
	requester := f.Peer
	if f.Peer != "" && !named {
		// Only an allow list makes a view depend on who the requester is;
		// otherwise its peer ID would only be quoted in how_to_meet texts
		// and make each requester's view a class of its own.
		f.Peer = AnyRequester
	}
	ck := classKey(f)
	fk := fmt.Sprintf("%d|%s", doc.Seq, ck)
	var cut *negotiate.Document
	class, ok := d.classes.Get(fk)
	if !ok {
		cut = doc.View(f, d.order)
		key, err := negotiate.ContentKey(cut)
		if err != nil {
			return nil, err
		}
		if class, err = d.mark(doc, ck, f, key); err != nil {
			return nil, err
		}
		d.classes.Add(fk, class)
	}
	class = d.floored(requester, class)
	if v, ok := d.views.Get(class); ok {
		return v, nil
	}
	signed, err, _ := d.signing.Do(fmt.Sprintf("%x|%d", class.key, class.seq), func() (any, error) {
		if v, ok := d.views.Get(class); ok {
			return v, nil // signed by the call that finished as this one began
		}
		view := cut
		if view == nil {
			view = doc.View(f, d.order) // the class was known, its signed view evicted
		}
		view.Seq, view.Updated = class.seq, class.updated
		v, err := d.sign(view)
		if err != nil {
			return nil, err
		}
		d.signed.Add(1)
		d.views.Add(class, v, signedViewCost(v))
		return v, nil
	})
	if err != nil {
		return nil, err
	}
	return signed.(*signedView), nil
}

// held is the view of f's class as held, signing nothing: nil when it is
// not (yet) held.
func (d *Document) held(f conditions.Facts) *signedView {
	d.mu.Lock()
	doc := d.doc
	d.mu.Unlock()
	requester := f.Peer
	class, ok := d.classes.Get(fmt.Sprintf("%d|%s", doc.Seq, classKey(f)))
	if !ok {
		return nil
	}
	v, _ := d.views.Peek(d.floored(requester, class))
	return v
}

// presign signs the view for f ahead of the first requester who needs it,
// and keeps it (view). The daemon calls it in the background when it
// starts and whenever its document changes, with the facts of a
// stranger's first greeting (they come from the config's default tier;
// run-time policy changes name peers, who are then no strangers).
// Signing a 20-capability view takes a couple of milliseconds, which a
// stranger's cold greeting would otherwise wait for. A greeting arriving
// while it signs waits for the same signature (signing), never makes a
// second.
func (d *Document) presign(f conditions.Facts) {
	if _, err := d.View(f); err != nil {
		d.log.Warn("signing the view for strangers ahead of time", "err", err)
	}
}

// Advertised is the view for f without the capabilities marked
// advertise = "when-eligible", even those f is eligible for, signed: what
// goes into announcements, which reach peers this daemon grants less than
// f (a lower tier in the disclosure map, a revoked key), so that a hidden
// capability never reaches anyone not eligible for it. It is the view
// for f itself when that has none.
func (d *Document) Advertised(f conditions.Facts) (*signedView, error) {
	v, err := d.View(f)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(v.Doc.Capabilities, func(c negotiate.Capability) bool { return c.Hidden() }) {
		return v, nil
	}
	doc := *v.Doc
	doc.Signature = nil
	doc.Capabilities = slices.DeleteFunc(slices.Clone(v.Doc.Capabilities), func(c negotiate.Capability) bool { return c.Hidden() })
	doc.SupportedCategories = doc.SupportedToolCategories()
	return d.sign(&doc)
}

// sign signs view (a view cut from the owner's document) as the owner.
func (d *Document) sign(view *negotiate.Document) (*signedView, error) {
	return d.signer(view, d.id, d.now())
}

// Ordered is v with the capabilities of the requested ACP tool categories
// first, signed, and the requested categories it supports (v itself when
// the request changes nothing). It keeps v's content key: the order is the
// peer's request, not a change of what it may see. An ordered view is kept
// like the others, by v and the categories honoured (owner-defined, so a
// peer's request cannot make the key long), in the same byte-bounded
// cache: requesters of one class asking for the same categories share it.
func (d *Document) Ordered(v *signedView, requested []string) (*signedView, []string, error) {
	_, honoured := negotiate.OrderByCategories(v.Doc, requested)
	if len(honoured) == 0 {
		return v, nil, nil
	}
	key := viewClass{seq: v.Doc.Seq, key: sha256.Sum256([]byte(v.Sum + "\x00" + strings.Join(honoured, "\x00")))}
	if o, ok := d.views.Get(key); ok {
		return o, honoured, nil
	}
	o, honoured, err := v.Ordered(requested, d.id, d.now())
	if err != nil {
		return nil, nil, err
	}
	d.views.Add(key, o, signedViewCost(o))
	return o, honoured, nil
}

// WithSchemas returns the current document and its compiled schemas,
// compiling them once per seq.
func (d *Document) WithSchemas() (*negotiate.Document, *negotiate.Schemas) {
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
