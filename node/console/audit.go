package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/api"
)

// MaxSearched bounds the conversations a search or the refusals filter
// reads whole (newest first); the page says when there were more.
const MaxSearched = 100

// auditPages are /ui/audit, /ui/audit/c/{id} and /ui/audit/why/{id}: the
// recorded conversations by day and peer, searched; each message in IFP-3
// form and as JSON; and why a capability request was answered or refused
// (GET /v1/audit/why/{message_id}).
type auditPages struct{ c *Console }

// auditEntry is an entry as the console reads it: with its decision, as
// GET /v1/audit records it for a capability request's answer or refusal
// (kept as it came, so that whatever the daemon decides to record is
// shown).
type auditEntry struct {
	gossip.AuditEntry
	Decision json.RawMessage `json:"decision,omitempty"`
}

type auditConversation struct {
	ConversationID string       `json:"conversation_id"`
	File           string       `json:"file,omitempty"`
	Entries        []auditEntry `json:"entries"`
	Warning        string       `json:"warning,omitempty"`
}

// decision is a recorded decision: what was asked, the outcome, the facts
// established (shown member by member, whichever the daemon records) and
// each condition evaluated.
type decision struct {
	Capability string           `json:"capability"`
	Outcome    string           `json:"outcome"`
	Code       string           `json:"code,omitempty"`
	Facts      map[string]any   `json:"facts"`
	Conditions []map[string]any `json:"conditions"`
}

// whyAnswer is the answer of GET /v1/audit/why/{message_id}.
type whyAnswer struct {
	MessageID string          `json:"message_id"`
	Entry     *auditEntry     `json:"entry"`
	Decision  json.RawMessage `json:"decision"`
}

func (p *auditPages) entries(r *http.Request, id string) (*auditConversation, error) {
	var out auditConversation
	err := p.c.api.GetJSON(r.Context(), "/v1/audit?conversation="+url.QueryEscape(id), &out)
	return &out, err
}

type dayGroup struct {
	Day           string
	Conversations []gossip.AuditConversation
}

type auditData struct {
	Days     []dayGroup
	AllDays  []string
	Day      string
	Peer     string
	Query    string
	Refusals bool
	Searched int // conversations read whole for the search; 0 when none was
	Omitted  int // conversations a search did not read
	Warning  string
	Labels   labels
	// Refused are the refused messages that match (the record of
	// refusals: never in a conversation), with a search or the refusals
	// filter; RefusedErr why they could not be read.
	Refused    *api.RefusalList
	RefusedErr string
	RefusedAll string // the refusals page with the same filter
}

// maxRefusedListed bounds the refused messages the audit page lists; the
// refusals page has the rest.
const maxRefusedListed = 20

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

func (p *auditPages) list(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	q := r.URL.Query()
	d := auditData{Day: q.Get("day"), Peer: q.Get("peer"), Query: strings.TrimSpace(q.Get("q")), Refusals: q.Get("refusals") != "", Labels: p.c.labels(ctx)}
	if d.Day != "" {
		if _, err := time.Parse("2006-01-02", d.Day); err != nil {
			p.c.fail(w, v, http.StatusBadRequest, fmt.Sprintf("day: %q: want a date as YYYY-MM-DD", d.Day))
			return
		}
	}
	list, err := p.c.api.AuditConversations(ctx, d.Labels.resolve(d.Peer))
	if err != nil {
		p.c.fail(w, v, apiStatus(err), "reading the audit log: "+err.Error())
		return
	}
	d.Warning = list.Warning
	days := map[string]bool{}
	var kept []gossip.AuditConversation
	for _, c := range list.Conversations {
		first, last := day(c.First), day(c.Last)
		days[first], days[last] = true, true
		if d.Day == "" || first <= d.Day && d.Day <= last {
			kept = append(kept, c)
		}
	}
	d.AllDays = slices.Sorted(maps.Keys(days))
	slices.Reverse(d.AllDays)
	if d.Query != "" || d.Refusals {
		kept = p.search(r, &d, kept)
		rq := api.RefusalQuery{Day: d.Day, Peer: d.Labels.resolve(d.Peer), Text: d.Query, Limit: maxRefusedListed}
		if rl, err := p.c.api.Refusals(ctx, rq); err != nil {
			d.RefusedErr = "reading the record of refusals: " + err.Error()
		} else {
			d.Refused = rl
		}
		all := url.Values{}
		for k, val := range map[string]string{"day": d.Day, "peer": d.Peer, "q": d.Query} {
			if val != "" {
				all.Set(k, val)
			}
		}
		d.RefusedAll = "/ui/audit/refusals?" + all.Encode()
	}
	for _, c := range kept {
		k := day(c.Last)
		if n := len(d.Days); n == 0 || d.Days[n-1].Day != k {
			d.Days = append(d.Days, dayGroup{Day: k})
		}
		g := &d.Days[len(d.Days)-1]
		g.Conversations = append(g.Conversations, c)
	}
	p.c.pages.render(w, http.StatusOK, "audit", p.c.data(v, "Audit", "audit", d))
}

// search keeps the conversations that match the query (in their ID,
// peers' IDs and names, or any entry's message ID, phase, capabilities,
// text and note) and, with refusals, that hold a refusal: reading at most
// MaxSearched of them whole.
func (p *auditPages) search(r *http.Request, d *auditData, convs []gossip.AuditConversation) []gossip.AuditConversation {
	needle := strings.ToLower(d.Query)
	var out []gossip.AuditConversation
	for i, c := range convs {
		if i == MaxSearched {
			d.Omitted = len(convs) - i
			break
		}
		d.Searched++
		hay := []string{c.ID}
		for _, pr := range c.Peers {
			hay = append(hay, pr, d.Labels.Name(pr))
		}
		matched := needle == "" || containsFold(hay, needle)
		refused := false
		if !matched || d.Refusals {
			ac, err := p.entries(r, c.ID)
			if err != nil {
				continue
			}
			for _, e := range ac.Entries {
				refused = refused || isRefusal(&e.AuditEntry)
				if !matched && containsFold(entryWords(&e.AuditEntry), needle) {
					matched = true
				}
			}
		}
		if matched && (!d.Refusals || refused) {
			out = append(out, c)
		}
	}
	return out
}

func containsFold(hay []string, needle string) bool {
	for _, h := range hay {
		if strings.Contains(strings.ToLower(h), needle) {
			return true
		}
	}
	return false
}

// entryWords are what a search looks at in an entry.
func entryWords(e *gossip.AuditEntry) []string {
	words := []string{e.Note, e.Peer}
	if m := e.Message; m != nil {
		words = append(words, m.Headers.MessageID, string(m.Headers.Phase), m.Headers.Subject, m.Body.Text)
		if c := m.Headers.Capabilities; c != nil {
			words = append(words, c.Request...)
			words = append(words, c.Offer...)
		}
	}
	return words
}

// isRefusal reports whether an entry is a refusal: of a message this
// daemon refused (its note), or an error phase message either way.
func isRefusal(e *gossip.AuditEntry) bool {
	return strings.HasPrefix(e.Note, "refused") || e.Message != nil && e.Message.Headers.Phase == gossip.PhaseError
}

// decides reports whether an entry may have a decision: it has one, or
// it is this daemon's answer or refusal to a request.
func decides(e *auditEntry) bool {
	if len(e.Decision) > 0 && string(e.Decision) != "null" {
		return true
	}
	m := e.Message
	if e.Direction != gossip.Sent || m == nil || m.Headers.Thread == nil || m.Headers.Thread.InReplyTo == "" {
		return false
	}
	return m.Headers.Phase == gossip.PhaseError ||
		m.Headers.Phase == gossip.PhaseProbe && m.Headers.Capabilities != nil && len(m.Headers.Capabilities.Offer) > 0
}

type entryView struct {
	*auditEntry
	IFP3    string
	JSON    string
	Refusal bool
	Why     bool
}

type conversationData struct {
	ID      string
	File    string
	Warning string
	Entries []entryView
	Labels  labels
	Proof   *proofView // how its records stand in the tamper-evident log
}

func (p *auditPages) conversation(w http.ResponseWriter, r *http.Request, v *visit) {
	id := r.PathValue("id")
	ac, err := p.entries(r, id)
	if err != nil {
		p.c.fail(w, v, apiStatus(err), fmt.Sprintf("conversation %q: %v", id, err))
		return
	}
	seq := map[string]int64{}
	for _, e := range ac.Entries {
		if e.Message != nil {
			seq[e.Message.Headers.MessageID] = e.Message.Headers.Sequence
		}
	}
	seqOf := func(mid string) (int64, bool) { s, ok := seq[mid]; return s, ok }
	d := conversationData{ID: id, File: ac.File, Warning: ac.Warning, Labels: p.c.labels(r.Context()),
		Proof: p.proof(r, "proof", gossip.BundleSelect{ConversationID: id})}
	for i := range ac.Entries {
		e := &ac.Entries[i]
		ev := entryView{auditEntry: e, Refusal: isRefusal(&e.AuditEntry), Why: decides(e)}
		if e.Message != nil {
			if b, err := gossip.RenderIFP3(e.Message, seqOf); err == nil {
				ev.IFP3 = string(b)
			} else {
				ev.IFP3 = "(cannot render in IFP-3 form: " + err.Error() + ")"
			}
		}
		if b, err := json.MarshalIndent(e, "", "  "); err == nil {
			ev.JSON = string(b)
		}
		d.Entries = append(d.Entries, ev)
	}
	p.c.pages.render(w, http.StatusOK, "conversation", p.c.data(v, "Conversation "+id, "audit", d))
}

type fact struct{ Name, Value string }

type whyData struct {
	MessageID    string
	Conversation string
	Entry        *entryView
	Decision     *decision
	Facts        []fact
	NoDecision   string // why none is shown
	Labels       labels
	Inclusion    *proofView // the decision's record in the tamper-evident log; nil without a decision
}

// factOrder is the order the facts are shown in; members the daemon adds
// follow, by name.
var factOrder = []string{"level", "level_how", "tier", "temperature", "persona"}

func (p *auditPages) why(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	d := whyData{MessageID: r.PathValue("id"), Conversation: r.URL.Query().Get("conversation"), Labels: p.c.labels(ctx)}
	var ans whyAnswer
	status := http.StatusOK
	err := p.c.api.GetJSON(ctx, "/v1/audit/why/"+url.PathEscape(d.MessageID), &ans)
	var ae *api.Error
	switch {
	case err == nil && len(ans.Decision) > 0 && string(ans.Decision) != "null":
		var dec decision
		if err := json.Unmarshal(ans.Decision, &dec); err != nil {
			d.NoDecision = "the recorded decision could not be read: " + err.Error()
			break
		}
		d.Decision = &dec
		d.Inclusion = p.proof(r, "inclusion", gossip.BundleSelect{MessageID: d.MessageID})
		for _, k := range factOrder {
			if v, ok := dec.Facts[k]; ok {
				d.Facts = append(d.Facts, fact{k, factString(v)})
			}
		}
		for _, k := range slices.Sorted(maps.Keys(dec.Facts)) {
			if !slices.Contains(factOrder, k) {
				d.Facts = append(d.Facts, fact{k, factString(dec.Facts[k])})
			}
		}
	case err == nil:
		d.NoDecision = "the daemon recorded no decision for this message"
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		d.NoDecision = ae.Message
		status = http.StatusNotFound
	default:
		p.c.fail(w, v, apiStatus(err), fmt.Sprintf("reading the decision of %s: %v", d.MessageID, err))
		return
	}
	entry := ans.Entry
	if entry == nil && d.Conversation != "" {
		if ac, err := p.entries(r, d.Conversation); err == nil {
			for i := range ac.Entries {
				if m := ac.Entries[i].Message; m != nil && m.Headers.MessageID == d.MessageID {
					entry = &ac.Entries[i]
				}
			}
		}
	}
	if entry != nil {
		ev := entryView{auditEntry: entry, Refusal: isRefusal(&entry.AuditEntry)}
		if entry.Message != nil {
			if d.Conversation == "" {
				d.Conversation = entry.Message.Headers.ConversationID
			}
			if b, err := gossip.RenderIFP3(entry.Message, nil); err == nil {
				ev.IFP3 = string(b)
			}
		}
		d.Entry = &ev
	}
	p.c.pages.render(w, status, "why", p.c.data(v, "Why "+d.MessageID, "audit", d))
}

// factString shows one fact's value: text as it is, anything else as
// JSON (a list of how a level was reached, say).
func factString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		var parts []string
		for _, x := range v {
			parts = append(parts, factString(x))
		}
		return strings.Join(parts, "; ")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Rows are the evaluated conditions as the page shows them.
func (d *decision) Rows() []conditionRow {
	var out []conditionRow
	for _, c := range d.Conditions {
		row := conditionRow{Condition: factString(c["condition"]), Detail: factString(c["detail"])}
		if c["detail"] == nil {
			row.Detail = ""
		}
		met, ok := c["met"].(bool)
		row.Met, row.Known = met, ok
		for _, k := range slices.Sorted(maps.Keys(c)) {
			if k != "condition" && k != "met" && k != "detail" {
				row.Other = append(row.Other, k+": "+factString(c[k]))
			}
		}
		out = append(out, row)
	}
	return out
}

type conditionRow struct {
	Condition string
	Met       bool
	Known     bool // met was recorded
	Detail    string
	Other     []string
}
