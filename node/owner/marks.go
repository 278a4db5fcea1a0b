package owner

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/negotiate"
)

// What a requester can observe of the owner's document moves only when
// what its view shows does. A view carries, as its seq and updated, the
// document's seq and updated of the last change visible in it, not the
// document's own: the owner adding a capability that only close friends
// may see (advertise = "when-eligible") changes no stranger's view, so
// the stranger's view keeps its seq, updated and signature, the
// well-known ETag stays, and so do the projections' versions, the update
// pushes (node/converse: update.go), the announcements (node/discovery: announce.go)
// and the DHT records (node: dht.go), which are all cut from those views.
//
// The rule, per class of requester (the facts a view is cut for: the
// requester's peer ID when an allow list names it, its level, tier,
// temperature and persona): the class's mark is the content key of its
// view and the seq and updated at which that content last differed. At
// every document change each mark is cut again from the new document;
// a mark whose content changed takes the new seq, the others keep
// theirs. A class first shown takes the document's seq then.
//
// Seqs must not go down for a requester (its daemon refuses a lower seq
// than the one it holds: stale_seq), and a requester may move between
// classes (a raised tier, a warmer conversation) whose marks differ. So
// a requester is shown at least the highest seq it was shown before: its
// floor. Marks only rise, so a requester shown no more than the lowest
// mark can never be shown less later; only requesters shown more than
// the lowest mark need a floor, and only they are remembered.
//
// Marks and floors are stored beside the document (store.Own,
// SaveViewMarks) when the document changes, when a class is first shown,
// and at close, so a restart moves nothing either. Both are bounded: at
// most maxViewMarks classes (the owner's tiers, levels, temperatures and
// personas make far fewer) and maxViewFloors requesters, the least
// recently used going first. A class pushed out and shown again takes the
// document's seq then; a requester's floor pushed out is a requester that
// may, after moving to a class whose mark is lower, be shown a lower seq
// than it holds, and refuse it until that class's view changes.

const (
	maxViewMarks  = 1024
	maxViewFloors = 4096
)

// markFacts are the facts that make a class of view (classKey).
type markFacts struct {
	Peer        string `json:"peer,omitempty"`
	AuthLevel   int    `json:"auth_level"`
	Disclosure  string `json:"disclosure,omitempty"`
	Temperature string `json:"temperature,omitempty"`
	Persona     string `json:"persona,omitempty"`
}

func (m markFacts) facts() conditions.Facts {
	return conditions.Facts{Peer: m.Peer, AuthLevel: conditions.Level(m.AuthLevel), Disclosure: m.Disclosure,
		Temperature: m.Temperature, Persona: m.Persona}
}

// viewMark is one class's mark.
type viewMark struct {
	Facts   markFacts `json:"facts"`
	Key     string    `json:"key"` // hex content key (negotiate.ContentKey) of the class's view
	Seq     uint64    `json:"seq"`
	Updated string    `json:"updated,omitempty"`
}

// seqAt is a seq shown, with its updated.
type seqAt struct {
	Seq     uint64 `json:"seq"`
	Updated string `json:"updated,omitempty"`
}

// marksRecord is what the store keeps.
type marksRecord struct {
	Classes []viewMark       `json:"classes,omitempty"`
	Floors  map[string]seqAt `json:"floors,omitempty"`
}

// viewMarks are the marks and floors, held under documents.mu.
type viewMarks struct {
	loaded  bool
	classes *simplelru.LRU[string, *viewMark] // by classKey
	floors  *simplelru.LRU[string, seqAt]     // by requester
	lowest  uint64                            // the lowest mark's seq
	dirty   bool                              // changed since last saved
	saveMu  sync.Mutex                        // one save at a time, each of the latest state
}

func (m *viewMarks) init() {
	m.classes, _ = simplelru.NewLRU[string, *viewMark](maxViewMarks, nil)
	m.floors, _ = simplelru.NewLRU[string, seqAt](maxViewFloors, nil)
}

// classKey names the class of view facts cut (the document's seq aside).
func classKey(f conditions.Facts) string {
	return fmt.Sprintf("%s|%d|%s|%s|%s", f.Peer, f.AuthLevel, f.Disclosure, f.Temperature, f.Persona)
}

// relow recomputes the lowest mark (under mu).
func (m *viewMarks) relow() {
	m.lowest = 0
	for i, k := range m.classes.Keys() {
		mk, _ := m.classes.Peek(k)
		if i == 0 || mk.Seq < m.lowest {
			m.lowest = mk.Seq
		}
	}
}

// load reads the stored marks once (under mu).
func (d *Document) loadMarks() error {
	m := &d.marks
	if m.loaded {
		return nil
	}
	raw, err := d.store.ViewMarks()
	if err != nil {
		return err
	}
	m.loaded = true
	if raw == nil {
		return nil
	}
	var rec marksRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		// Marks are a courtesy to requesters: unreadable ones are
		// started again rather than stopping the daemon.
		d.log.Warn("reading the view marks; starting them again", "err", err)
		return nil
	}
	for i := range rec.Classes {
		mk := rec.Classes[i]
		m.classes.Add(classKey(mk.Facts.facts()), &mk)
	}
	for p, f := range rec.Floors {
		m.floors.Add(p, f)
	}
	m.relow()
	return nil
}

// remark makes the marks those of doc, the owner's new document, and runs
// install (which makes doc current) under the same lock, so that no view
// is cut from doc with the marks of another: each class's view is cut
// from doc, and a class whose content changed takes doc's seq and updated.
// The marks are saved when anything changed.
func (d *Document) remark(doc *negotiate.Document, install func()) error {
	d.mu.Lock()
	if err := d.loadMarks(); err != nil {
		d.mu.Unlock()
		return err
	}
	var facts []markFacts
	for _, k := range d.marks.classes.Keys() {
		mk, _ := d.marks.classes.Peek(k)
		facts = append(facts, mk.Facts)
	}
	d.mu.Unlock()
	// The views are cut outside the lock; a class first shown meanwhile
	// (from the document being replaced) is cut again below.
	keys := make(map[string]string, len(facts))
	for _, f := range facts {
		k, err := contentKeyHex(doc.View(f.facts(), d.order))
		if err != nil {
			return err
		}
		keys[classKey(f.facts())] = k
	}
	d.mu.Lock()
	install()
	for _, ck := range d.marks.classes.Keys() {
		mk, _ := d.marks.classes.Peek(ck)
		k, ok := keys[ck]
		if !ok {
			var err error
			if k, err = contentKeyHex(doc.View(mk.Facts.facts(), d.order)); err != nil {
				d.mu.Unlock()
				return err
			}
		}
		if k != mk.Key {
			mk.Key, mk.Seq, mk.Updated = k, doc.Seq, doc.Updated
			d.marks.dirty = true
		}
	}
	d.marks.relow()
	d.mu.Unlock()
	return d.SaveMarks()
}

func contentKeyHex(view *negotiate.Document) (string, error) {
	k, err := negotiate.ContentKey(view)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(k), nil
}

// mark is the class of the view cut from doc for f (class key ck,
// content key key): its mark's seq and updated. A class first shown is
// marked with doc's seq and updated, and the marks are saved.
func (d *Document) mark(doc *negotiate.Document, ck string, f conditions.Facts, key []byte) (viewClass, error) {
	class := viewClass{}
	copy(class.key[:], key)
	kh := hex.EncodeToString(key)
	d.mu.Lock()
	if err := d.loadMarks(); err != nil {
		d.mu.Unlock()
		return viewClass{}, err
	}
	mk, ok := d.marks.classes.Get(ck)
	switch {
	case ok && mk.Key == kh:
	case d.doc != doc:
		// doc was replaced while its view was cut: the marks are the new
		// document's and say nothing of doc's view. Cut it again.
		d.mu.Unlock()
		return viewClass{}, errReplaced
	default:
		// A class first shown, or (which remark makes impossible for the
		// current document) one whose content moved without a mark.
		mk = &viewMark{Facts: markFacts{Peer: f.Peer, AuthLevel: int(f.AuthLevel), Disclosure: f.Disclosure,
			Temperature: f.Temperature, Persona: f.Persona}, Key: kh, Seq: doc.Seq, Updated: doc.Updated}
		d.marks.classes.Add(ck, mk)
		d.marks.relow()
		d.marks.dirty = true
	}
	class.seq, class.updated = mk.Seq, mk.Updated
	dirty := d.marks.dirty
	d.mu.Unlock()
	if dirty {
		if err := d.SaveMarks(); err != nil {
			d.log.Warn("saving the view marks", "err", err)
		}
	}
	return class, nil
}

// errReplaced: the document a view was cut from was replaced meanwhile.
var errReplaced = errors.New("the document changed while its view was cut")

// floored is class as shown to requester (a peer ID; "" or anyRequester
// for nobody in particular): never with a lower seq than it was shown
// before. A requester shown more than the lowest mark is remembered.
func (d *Document) floored(requester string, class viewClass) viewClass {
	if requester == "" || requester == AnyRequester {
		return class
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.marks.floors.Get(requester); ok && f.Seq >= class.seq {
		class.seq, class.updated = f.Seq, f.Updated
		return class
	}
	switch {
	case class.seq > d.marks.lowest:
		d.marks.floors.Add(requester, seqAt{Seq: class.seq, Updated: class.updated})
		d.marks.dirty = true
	case d.marks.floors.Remove(requester): // no mark is lower: no floor needed
		d.marks.dirty = true
	}
	return class
}

// SaveMarks stores the marks and floors when they changed since last
// saved (at a document change, a class first shown, and at close).
func (d *Document) SaveMarks() error {
	m := &d.marks
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	d.mu.Lock()
	if !m.dirty {
		d.mu.Unlock()
		return nil
	}
	rec := marksRecord{Floors: map[string]seqAt{}}
	for _, k := range m.classes.Keys() {
		mk, _ := m.classes.Peek(k)
		rec.Classes = append(rec.Classes, *mk)
	}
	for _, p := range m.floors.Keys() {
		rec.Floors[p], _ = m.floors.Peek(p)
	}
	m.dirty = false
	d.mu.Unlock()
	raw, err := json.Marshal(rec)
	if err == nil {
		err = d.store.SaveViewMarks(raw)
	}
	if err != nil {
		d.mu.Lock()
		m.dirty = true
		d.mu.Unlock()
	}
	return err
}
