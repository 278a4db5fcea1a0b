package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ifaced/ifaced/gossip"
)

// ListTasks (A2A 1.0 §3.1.4, §9.4.4): the caller's own tasks, most
// recently updated first, a page at a time.
//
// Whose tasks: A2A callers of this endpoint prove nothing (no signature,
// no credential), so a caller is known only by its client — its IPv4
// address or IPv6 /64, as the limiter and the task table count clients —
// and by the contexts it talks in. A task is shown to a caller only when
// the caller's client made it and the caller names the task's context
// (params.contextId): callers that share an address (a NAT, a proxy) see
// one another's tasks only in a context both name, and the context ID the
// daemon makes for a message that names none is 128 random bits, which
// only the caller it answered was told. Without a contextId the request
// is refused (-32602) rather than answered with every task of the
// address. So a list tells no caller an ID it was not already told, and
// neither the count (totalSize) nor a page token says anything of tasks
// outside the caller's scope.
//
// Pages: pageSize 1 to 100 (50 when absent or 0; more is served as 100,
// which §3.1.4 allows: "may return fewer"), ordered by status timestamp,
// newest first, then by ID. pageToken is the cursor the previous page
// returned as nextPageToken (the timestamp and ID of its last task,
// base64url), so a page is the same whatever ended meanwhile; the last
// page's nextPageToken is "". Filters: status (a TaskState name) and
// statusTimestampAfter (RFC 3339; tasks updated at or after it). Tasks keep
// no history and no artifacts, so historyLength and includeArtifacts
// change nothing: history and artifacts are never written.
//
// The work is bounded by the table: at most maxA2ATasksPerClient tasks
// belong to one client, and the table is scanned once under its lock.

// ListTasks page sizes.
const (
	listPageDefault = 50
	listPageMax     = 100
)

// listParams are the params of ListTasks.
type listParams struct {
	Tenant               string `json:"tenant"`
	ContextID            string `json:"contextId"`
	Status               string `json:"status"`
	PageSize             *int   `json:"pageSize"`
	PageToken            string `json:"pageToken"`
	HistoryLength        *int   `json:"historyLength"`
	StatusTimestampAfter string `json:"statusTimestampAfter"`
	IncludeArtifacts     *bool  `json:"includeArtifacts"`
}

// listCursor is where a page ends: the sort key of its last task.
type listCursor struct {
	updated time.Time
	id      string
}

func (c listCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.updated.UnixNano(), 10) + "." + c.id))
}

func parseCursor(s string) (listCursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return listCursor{}, false
	}
	ns, id, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return listCursor{}, false
	}
	return listCursor{time.Unix(0, n), id}, true
}

// after reports whether a task updated at u with ID id comes after c in
// the list's order (newest first, then by ID).
func (c listCursor) after(u time.Time, id string) bool {
	return u.Before(c.updated) || u.Equal(c.updated) && id > c.id
}

// listQuery is a checked ListTasks request.
type listQuery struct {
	client    netip.Prefix
	contextID string
	state     *taskState
	after     time.Time
	size      int
	from      *listCursor
}

// readList reads and checks the params of ListTasks for the caller at
// client.
func readList(raw json.RawMessage, client netip.Prefix) (*listQuery, *a2aError) {
	var p listParams
	if present(raw) {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, rpcErr(rpcInvalidParams, "%s", paramsError(err))
		}
	}
	q := &listQuery{client: client, contextID: p.ContextID, size: listPageDefault}
	if q.contextID == "" {
		return nil, rpcErr(rpcInvalidParams, "params.contextId is missing: this agent lists an anonymous caller's tasks one context at a time, "+
			"those its address made in the context it names (the contextId its messages were answered with); want {\"contextId\": \"…\"}")
	}
	if p.Status != "" && p.Status != "TASK_STATE_UNSPECIFIED" {
		st, ok := stateByName(p.Status)
		if !ok {
			return nil, rpcErr(rpcInvalidParams, "params.status is %q, not a task state; want one of TASK_STATE_SUBMITTED, TASK_STATE_WORKING, TASK_STATE_COMPLETED, TASK_STATE_FAILED, "+
				"TASK_STATE_CANCELED, TASK_STATE_INPUT_REQUIRED, TASK_STATE_REJECTED, TASK_STATE_AUTH_REQUIRED", gossip.Clip(p.Status, 40))
		}
		q.state = &st
	}
	if p.PageSize != nil {
		switch n := *p.PageSize; {
		case n < 0:
			return nil, rpcErr(rpcInvalidParams, "params.pageSize is %d; want 1 to %d (%d when absent)", n, listPageMax, listPageDefault)
		case n > 0:
			q.size = min(n, listPageMax)
		}
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return nil, rpcErr(rpcInvalidParams, "params.historyLength is %d; want 0 or more", *p.HistoryLength)
	}
	if p.StatusTimestampAfter != "" {
		t, err := time.Parse(time.RFC3339Nano, p.StatusTimestampAfter)
		if err != nil {
			return nil, rpcErr(rpcInvalidParams, "params.statusTimestampAfter is %q, not an ISO 8601 time; want e.g. \"2026-01-02T03:04:05.000Z\"", gossip.Clip(p.StatusTimestampAfter, 60))
		}
		q.after = t
	}
	if p.PageToken != "" {
		c, ok := parseCursor(p.PageToken)
		if !ok {
			return nil, rpcErr(rpcInvalidParams, "params.pageToken %q is not a token this agent gave: send the nextPageToken of the page before, or none for the first page", gossip.Clip(p.PageToken, 60))
		}
		q.from = &c
	}
	return q, nil
}

// stateByName is the task state a 1.0 TaskState name means. States this
// agent's tasks never take are states all the same: filtering by them
// lists nothing.
func stateByName(name string) (taskState, bool) {
	for s := taskWorking; s <= taskFailed; s++ {
		if s.name(a2a10) == name {
			return s, true
		}
	}
	switch name {
	case "TASK_STATE_SUBMITTED", "TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED":
		return taskNever, true
	}
	return 0, false
}

// list returns the page of tasks q asks for, the total before paging, and
// the cursor of the next page (nil on the last).
func (ts *a2aTasks) list(q *listQuery) (page []*a2aTask, total int, next *listCursor) {
	ts.mu.Lock()
	ts.expire()
	var mine []*a2aTask
	for _, t := range ts.order {
		if t.client != q.client || t.contextID != q.contextID || q.state != nil && t.state != *q.state || t.updated.Before(q.after) {
			continue
		}
		cp := *t
		mine = append(mine, &cp)
	}
	ts.mu.Unlock()
	slices.SortFunc(mine, func(a, b *a2aTask) int {
		if c := b.updated.Compare(a.updated); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	total = len(mine)
	if q.from != nil {
		i := slices.IndexFunc(mine, func(t *a2aTask) bool { return q.from.after(t.updated, t.id) })
		if i < 0 {
			i = len(mine)
		}
		mine = mine[i:]
	}
	if len(mine) > q.size {
		last := mine[q.size-1]
		next = &listCursor{last.updated, last.id}
		mine = mine[:q.size]
	}
	return mine, total, next
}

// a2aListTasks answers ListTasks.
func (s *Binding) a2aListTasks(r *http.Request, raw json.RawMessage) (any, *a2aError) {
	q, e := readList(raw, clientOf(s.callerOf(r).remote))
	if e != nil {
		return nil, e
	}
	page, total, next := s.tasks.list(q)
	tasks := make([]any, 0, len(page))
	for _, t := range page {
		tasks = append(tasks, t.render(a2a10))
	}
	token := ""
	if next != nil {
		token = next.String()
	}
	return map[string]any{"tasks": tasks, "nextPageToken": token, "pageSize": q.size, "totalSize": total}, nil
}
