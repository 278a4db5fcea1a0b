package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
)

// The record of refusals: every message the door did not admit, recorded
// once as a bounded summary in <audit>/<day>/_refused.jsonl and never in
// the conversation it claims (gossip/refusals.go), read here:
//
//	GET /v1/audit/refusals[?day=D&at=T&peer=P&code=C&q=TEXT&limit=N]
//
// newest first. day reads one day (YYYY-MM-DD); at, an instant as a
// refused event carries it (RFC 3339), reads its day and keeps the
// refusals recorded at that instant, which is how a refusal event is
// found again; without either, the MaxRefusalDays newest days holding
// refusals are read. peer keeps the refusals of one peer (a peer ID, a
// did:key or a verified agent ID, else matched as written against the
// established peer and the claimed from), code those of one wire code,
// q those holding a text (in the code, reason, peer, from, message ID,
// conversation, transport or excerpt, case folded). At most limit
// (default 100, at most 1000) are answered; more says that others
// matched. A summary is what a stranger could make of it: bounded, and
// quoted as received.

// Bounds of GET /v1/audit/refusals.
const (
	MaxRefusalDays      = 14   // days read without day or at
	defaultRefusalLimit = 100  // refusals answered without limit
	maxRefusalLimit     = 1000 // the most limit may ask for
)

// RefusalList is the answer of GET /v1/audit/refusals.
type RefusalList struct {
	Days     []string         `json:"days"`     // the days holding refusals, newest first
	Read     []string         `json:"read"`     // the days read for this answer
	Refusals []gossip.Refusal `json:"refusals"` // newest first
	More     bool             `json:"more"`     // more matched than limit
	Warning  string           `json:"warning,omitempty"`
}

// RefusalQuery is what GET /v1/audit/refusals takes; every member is
// optional.
type RefusalQuery struct {
	Day   string
	At    time.Time
	Peer  string
	Code  string
	Text  string
	Limit int
}

func (q RefusalQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"day": q.Day, "peer": q.Peer, "code": q.Code, "q": q.Text} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.At.IsZero() {
		v.Set("at", q.At.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// refusalRoutes search the record of refusals (GET /v1/audit/refusals).
type refusalRoutes struct {
	log   refusalLog
	names peerNames
}

// refusalLog is the audit log's record of refusals, by day
// (gossip.AuditLog).
type refusalLog interface {
	RefusalDays() ([]string, error)
	Refusals(day string) ([]gossip.Refusal, error)
}

func (s *refusalRoutes) refusals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	day := q.Get("day")
	if day != "" {
		if _, err := time.Parse("2006-01-02", day); err != nil {
			writeError(w, badField("day", "%q: want a day as YYYY-MM-DD", day))
			return
		}
	}
	var at time.Time
	if a := q.Get("at"); a != "" {
		t, err := time.Parse(time.RFC3339Nano, a)
		if err != nil {
			writeError(w, badField("at", "%q: want an instant in RFC 3339 (2026-11-29T07:19:18.123456789Z), as a refused event's at", a))
			return
		}
		at = t.UTC()
		if d := at.Format("2006-01-02"); day != "" && day != d {
			writeError(w, badField("at", "%s is not on day %s", a, day))
			return
		}
		day = at.Format("2006-01-02")
	}
	limit := defaultRefusalLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxRefusalLimit {
			writeError(w, badField("limit", "%q: want a number from 1 to %d", l, maxRefusalLimit))
			return
		}
		limit = n
	}
	peerRef := q.Get("peer")
	if peerRef != "" {
		if pid, e := s.names.resolve(peerRef); e == nil {
			peerRef = pid.String()
		}
	}
	code, needle := q.Get("code"), strings.ToLower(q.Get("q"))
	days, err := s.log.RefusalDays()
	if err != nil {
		writeError(w, internal(err))
		return
	}
	out := RefusalList{Days: days, Read: []string{}, Refusals: []gossip.Refusal{}}
	if out.Days == nil {
		out.Days = []string{}
	}
	read := days[:min(len(days), MaxRefusalDays)]
	if day != "" {
		read = []string{day}
	}
	var warnings []string
	for _, d := range read {
		rs, err := s.log.Refusals(d)
		if err != nil {
			if !errors.Is(err, gossip.ErrTornAuditLine) {
				writeError(w, internal(err))
				return
			}
			warnings = append(warnings, err.Error())
		}
		out.Read = append(out.Read, d)
		for i := len(rs) - 1; i >= 0; i-- {
			rf := rs[i]
			if !at.IsZero() && !rf.At.Equal(at) || code != "" && rf.Code != code ||
				peerRef != "" && rf.Peer != peerRef && rf.From != peerRef || needle != "" && !refusalHolds(rf, needle) {
				continue
			}
			if len(out.Refusals) == limit {
				out.More = true
				break
			}
			out.Refusals = append(out.Refusals, rf)
		}
		if out.More {
			break
		}
	}
	out.Warning = strings.Join(warnings, "; ")
	writeJSON(w, http.StatusOK, out)
}

// refusalHolds reports whether a refusal's text holds needle (lower case).
func refusalHolds(rf gossip.Refusal, needle string) bool {
	for _, h := range []string{rf.Code, rf.Reason, rf.Peer, rf.From, rf.MessageID, rf.Claimed, rf.Transport, rf.Phase, rf.Excerpt} {
		if strings.Contains(strings.ToLower(h), needle) {
			return true
		}
	}
	return false
}

// Refusals reads the record of refusals (GET /v1/audit/refusals).
func (c *Client) Refusals(ctx context.Context, q RefusalQuery) (*RefusalList, error) {
	var out RefusalList
	path := "/v1/audit/refusals"
	if v := q.values(); len(v) > 0 {
		path += "?" + v.Encode()
	}
	if err := c.call(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
