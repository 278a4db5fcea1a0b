package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/api"
)

// The record of refusals, /ui/audit/refusals: every message the door did
// not admit, as the bounded summary the daemon recorded
// (GET /v1/audit/refusals), newest first, searched by day, peer, code and
// text; each with why, for the owner. A refused event links here with
// its instant (at=), which finds its record.

type refusalView struct {
	gossip.Refusal
	Target bool // the one a refused event named
}

type refusalsData struct {
	List    *api.RefusalList
	Rows    []refusalView
	Day     string
	Peer    string
	Code    string
	Query   string
	At      string
	Missing string // an instant asked for holds no record: why
	Labels  labels
}

func (p *auditPages) refusals(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	q := r.URL.Query()
	d := refusalsData{Day: q.Get("day"), Peer: strings.TrimSpace(q.Get("peer")), Code: q.Get("code"), Query: strings.TrimSpace(q.Get("q")), At: q.Get("at"),
		Labels: p.c.labels(ctx)}
	rq := api.RefusalQuery{Day: d.Day, Peer: d.Labels.resolve(d.Peer), Code: d.Code, Text: d.Query}
	status := http.StatusOK
	pd := p.c.data(v, "Refused messages", "audit", &d)
	if d.At != "" {
		at, err := time.Parse(time.RFC3339Nano, d.At)
		if err != nil {
			pd.refuseField("", fmt.Sprintf("at: %q: want an instant in RFC 3339, as a refused event's link carries it", d.At))
			p.c.pages.render(w, http.StatusBadRequest, "refusals", pd)
			return
		}
		rq.At, rq.Day = at, ""
	}
	list, err := p.c.api.Refusals(ctx, rq)
	if err != nil {
		status = apiStatus(err)
		id := map[string]string{"day": "refusals-day", "peer": "refusals-peer", "code": "refusals-code"}[apiField(err)]
		pd.refuseField(id, "reading the record of refusals: "+err.Error())
		p.c.pages.render(w, status, "refusals", pd)
		return
	}
	d.List = list
	for _, rf := range list.Refusals {
		d.Rows = append(d.Rows, refusalView{Refusal: rf, Target: !rq.At.IsZero()})
	}
	if !rq.At.IsZero() && len(d.Rows) == 0 {
		d.Missing = "No refusal is recorded at that instant: it was counted but not written (over the refusal budget, or with the audit log out of room; " +
			"a later record says how many were left out), or the day's record was removed. The refusals of that day are below."
		if l, err := p.c.api.Refusals(ctx, api.RefusalQuery{Day: rq.At.UTC().Format("2006-01-02")}); err == nil {
			d.List = l
			for _, rf := range l.Refusals {
				d.Rows = append(d.Rows, refusalView{Refusal: rf})
			}
		}
	}
	p.c.pages.render(w, status, "refusals", pd)
}

// refusalsLink is where a refused event's record is shown.
func refusalsLink(at time.Time) string {
	return "/ui/audit/refusals?at=" + url.QueryEscape(at.UTC().Format(time.RFC3339Nano)) + "#refusals"
}
