package console

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
)

// What the console shows of the tamper-evident audit log (docs/audit.md):
// each conversation's verification state on its page, with the evidence
// bundle to download, and on the why page the inclusion of the decision's
// record. Both read GET /v1/audit/proof, which exports the records' bundle
// and verifies it as a third party would; the download is GET
// /v1/audit/bundle, written as `ifaced audit export` writes it
// (gossip.Bundle.File).
//
// The pages are the owner's, behind the session, as the conversation
// itself is: the bundle holds this daemon's decisions (what a peer asked
// for and which conditions it met), so it is offered to the owner, who
// hands it to the other side's owner or an arbiter; nothing here is
// shown to a peer or answers one.

// maxProofDetail bounds the daemon's words about a proof shown on a page:
// they may quote what a peer chose (a message or conversation ID).
const maxProofDetail = 600

// proofView is a proof state as a page shows it: a badge and what it
// means to the owner.
type proofView struct {
	ID          string // the page element's: proof (a conversation's) or inclusion (a decision's)
	State       string // gossip.ProofVerified, ProofPending, ProofUntracked, ProofFailed, or "unknown"
	Label       string // the badge's word
	Means       string // what the state means, for the owner
	Detail      string // the daemon's words, clipped to maxProofDetail
	Records     int
	Checkpoints []gossip.BundleCheckpoint
	Leaf        *int64 // one message's: its leaf in the day's tree
	Origin      string // and the tree (ifaced-audit/DAY)
}

// proofUnknown is the state shown when the daemon could not say.
const proofUnknown = "unknown"

// newProofView says what st means; err is why there is none.
func newProofView(st *gossip.ProofState, err error) *proofView {
	if err != nil {
		return &proofView{State: proofUnknown, Label: "Unknown",
			Means:  "The daemon could not say how these records stand in its tamper-evident log.",
			Detail: gossip.Clip(err.Error(), maxProofDetail)}
	}
	v := &proofView{State: st.State, Detail: gossip.Clip(st.Detail, maxProofDetail), Records: st.Records,
		Checkpoints: st.Checkpoints, Leaf: st.Leaf, Origin: st.Origin}
	every := gossip.CheckpointEvery.String()
	switch st.State {
	case gossip.ProofVerified:
		v.Label = "Verified"
		v.Means = fmt.Sprintf("Each of its %d records is included in a checkpoint this daemon signed with its key: "+
			"a later change, removal or reordering of any of them would show, and the evidence bundle proves them to anyone, offline.", st.Records)
		if st.Records == 1 {
			v.Means = "Its record is included in a checkpoint this daemon signed with its key: a later change or removal of it would show, " +
				"and its evidence bundle proves it to anyone, offline."
		}
	case gossip.ProofPending:
		v.Label = "Pending"
		v.Means = "Recorded after the newest checkpoint: pending until the next one, which the daemon signs within " + every +
			" while records arrive. Reload the page to see it verified."
	case gossip.ProofUntracked:
		v.Label = "Untracked"
		v.Means = "Recorded before this log was tamper-evident, or its day's tree is gone: nothing proves these records, " +
			"and a change to them would not show."
	case gossip.ProofFailed:
		v.Label = "Failed"
		v.Means = "These records do not verify against the log's signed checkpoints: a record was changed, removed or reordered " +
			"after it was written, or a file of the log was damaged. `ifaced audit verify` names the first record that does not verify."
	default:
		v.State, v.Label = proofUnknown, "Unknown"
		v.Means = "The daemon answered a state the console does not know."
	}
	return v
}

// Verified reports whether the records verified: the bundle is offered.
func (v *proofView) Verified() bool { return v.State == gossip.ProofVerified }

// Covering is the checkpoint that includes one message's record.
func (v *proofView) Covering() *gossip.BundleCheckpoint {
	for i := range v.Checkpoints {
		if v.Checkpoints[i].Origin == v.Origin {
			return &v.Checkpoints[i]
		}
	}
	return nil
}

// Day is the day of a tree's origin (ifaced-audit/DAY).
func (v *proofView) Day() string {
	_, d, _ := strings.Cut(v.Origin, "/")
	return d
}

// proof reads how sel's records stand, for the page element id.
func (p *auditPages) proof(r *http.Request, id string, sel gossip.BundleSelect) *proofView {
	v := newProofView(p.c.api.AuditProof(r.Context(), sel))
	v.ID = id
	return v
}

// bundle answers the evidence bundle of a conversation, as a file to
// save: the file `ifaced audit export --conversation ID` writes.
func (p *auditPages) bundle(w http.ResponseWriter, r *http.Request, v *visit) {
	id := r.PathValue("id")
	b, err := p.c.api.AuditBundle(r.Context(), gossip.BundleSelect{ConversationID: id})
	if err != nil {
		p.c.fail(w, v, apiStatus(err), fmt.Sprintf("the evidence bundle of conversation %q: %v", gossip.Clip(id, 200), err))
		return
	}
	raw, err := b.File()
	if err != nil {
		p.c.fail(w, v, http.StatusInternalServerError, fmt.Sprintf("the evidence bundle of conversation %q: %v", gossip.Clip(id, 200), err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": bundleFileName(id, p.c.now())}))
	w.Write(raw)
}

// bundleFileName is the name a browser saves a conversation's bundle
// under: the ID's letters, digits, '.', '-' and '_' only (a peer may have
// chosen it), at most 80 of them, and the day.
func bundleFileName(id string, now time.Time) string {
	var b strings.Builder
	for _, r := range id {
		if b.Len() == 80 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.' || r == '-' || r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return "ifaced-audit-bundle-" + strings.Trim(b.String(), ".-") + "-" + now.UTC().Format("2006-01-02") + ".json"
}
