// Package owner is the owner's capability document: its seq (persisted
// and raised whenever the content changes), its signature, the signed view
// each class of requester is shown (documents.go), the marks that keep a
// view's seq and updated still while nothing it shows changes (marks.go),
// and the owner's run-time capability changes (`caps add`, `caps remove`,
// owncaps.go). New builds it from the document the configuration
// describes; it imports no other component: whoever must act on a change
// (conversations push new views, discovery announces) subscribes with
// OnChange, and the owner's policy is read through a small interface.
package owner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/events"
	"github.com/ifaced/ifaced/node/store"
)

// ToolServer is an MCP server acting as the local agent, whose tools are
// capabilities of the document (node/mcpagent's Agent is one): Start
// merges its tools into the document built from the configuration, and
// Handles says which capabilities are its tools.
type ToolServer interface {
	Start(ctx context.Context, doc *negotiate.Document) error
	Handles(capability string) bool
}

// Policy is the owner's policy in force (node/policy's Book is one): the
// view a stranger's first greeting is shown is cut from it and signed
// ahead of time.
type Policy interface {
	InForce() *negotiate.Policy
}

// Store is what the owner's document keeps in the store
// (*store.Own is one): the document, its view marks and the owner's
// run-time capability changes.
type Store interface {
	ownDocumentStore
	runtimeCapsStore
}

var _ Store = (*store.Own)(nil)

// Deps is what New builds the owner's document from.
type Deps struct {
	ID     *identity.Identity
	Store  Store
	Order  *conditions.TierOrder
	Policy Policy
	Tools  ToolServer  // nil without [agent.mcp]
	Events *events.Hub // told of every change (events.EventDocument)
	Log    *slog.Logger
	Now    func() time.Time
	Spawn  func(func()) bool // runs a background task the daemon's Close waits for
}

// New builds the owner's document from doc, the document the
// configuration describes: the run-time changes stored are laid over it,
// the MCP server's tools merged in (Tools.Start), and the result signed
// and stored with its seq (raised only when its content changed since the
// last run). The view a stranger's first greeting is shown is signed
// ahead, now and at every change.
func New(ctx context.Context, d Deps, doc *negotiate.Document) (*Document, error) {
	docs := newDocument(d.ID, d.Store, d.Order, d.Now, d.Log)
	docs.policy, docs.hub, docs.spawn = d.Policy, d.Events, d.Spawn
	tools := func(string) bool { return false }
	if d.Tools != nil {
		tools = d.Tools.Handles
	}
	docs.caps = newOwnCapabilities(docs, d.Store, d.Log, tools)
	layered, err := docs.caps.layer(doc)
	if err != nil {
		return nil, err
	}
	if d.Tools != nil {
		if err := d.Tools.Start(ctx, doc); err != nil {
			return nil, fmt.Errorf("agent.mcp: %w", err)
		}
	}
	if err := docs.set(doc, layered); err != nil {
		return nil, err
	}
	docs.presignStranger()
	return docs, nil
}

// Capabilities is where the owner's capabilities come from, and the
// owner's run-time changes to them, kept across restarts (caps add, caps
// remove).
func (d *Document) Capabilities() *Capabilities { return d.caps }

// OnChange subscribes f to every change of the document, after it is
// signed and stored; f runs in the changer's goroutine, in the order
// subscribed. Subscribe before the daemon serves anyone.
func (d *Document) OnChange(f func(*negotiate.Document)) {
	d.subMu.Lock()
	defer d.subMu.Unlock()
	d.subs = append(d.subs, f)
}

// Update replaces the owner's capability list with what change makes of
// a copy of the current document: validated, given the next seq, signed,
// stored, and every subscriber told. It does not keep what it changes
// across restarts — the Capabilities' Add and Remove do.
func (d *Document) Update(change func(*negotiate.Document) error) (*negotiate.Document, error) {
	return d.change(func(doc *negotiate.Document) (*store.RuntimeCapabilities, error) { return nil, change(doc) })
}

// change is update, then the owner and the subscribers are told.
func (d *Document) change(f func(*negotiate.Document) (*store.RuntimeCapabilities, error)) (*negotiate.Document, error) {
	doc, err := d.update(f)
	if err != nil {
		return nil, err
	}
	d.hub.Publish(events.Event{Type: events.EventDocument, At: d.now(), Detail: fmt.Sprintf("seq %d, %d capabilities", doc.Seq, len(doc.Capabilities))})
	d.presignStranger()
	d.subMu.Lock()
	subs := d.subs
	d.subMu.Unlock()
	for _, f := range subs {
		f(doc)
	}
	return doc, nil
}

// Held is what the owner's signed views cost: how many are held, their
// bytes (as the cache counts them), and how many views were signed since
// the start — a requester of a class already held signs none.
type Held struct {
	Views  int
	Bytes  int64
	Signed uint64
}

// Held says what the signed views cost now.
func (d *Document) Held() Held {
	return Held{Views: d.views.Len(), Bytes: d.views.Used(), Signed: d.signed.Load()}
}

// Presigned is the view a stranger's first greeting is shown, as held
// (signed ahead at the start and at every change), signing nothing: nil
// until it is held.
func (d *Document) Presigned() *negotiate.SignedView { return d.held(d.strangerFacts()) }

// strangerFacts are the facts of a stranger's first greeting: a signed
// key, no proposal, granted what the policy in force grants anyone.
func (d *Document) strangerFacts() conditions.Facts {
	return d.policy.InForce().GrantTo(negotiate.Requester{Level: conditions.Signed}, negotiate.Proposal{}).Facts(AnyRequester, 0)
}

// presignStranger signs, in the background, the view a stranger's first
// greeting is shown (a signed key, no proposal), so that no stranger's
// cold greeting waits for it.
func (d *Document) presignStranger() {
	f := d.strangerFacts()
	d.spawn(func() { d.presign(f) })
}
