package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/ifaced/ifaced/node/wire"
)

// Bounds on the A2A task table. Anyone who can reach the binding can make
// a task (a message with blocking false or returnImmediately true), so
// the table is bounded in entries, per client and in the bytes of the
// replies it keeps, and every bound evicts rather than grows:
//
//   - A task that waits on the agent runs while it holds one of the
//     binding's invocation slots (slots.go), so at most maxInvocations
//     of those are working at once (a task for a standard skill, such as
//     ping, ends as it starts); the rest have ended and are kept for
//     a2aTaskKeep, for the client to read.
//   - A client (an IPv4 address or IPv6 /64, as the limiter counts them)
//     has at most maxA2AWorkingPerClient tasks working, a quarter of the
//     slots, so that it cannot take them all by sending messages it does
//     not wait for; and it holds at most maxA2ATasksPerClient tasks: past
//     that, its own oldest ended task makes room, so one client churning
//     tasks cannot evict another's.
//   - The table holds at most maxA2ATasks tasks and maxA2ATaskBytes of
//     replies: past either, the oldest ended task goes first.
//   - A reply over maxA2ATaskReply is not kept: the task fails saying so,
//     and the same message sent blocking gets the reply directly.
//
// Task IDs are 128 random bits: reading a task needs its ID, which only
// the client that made it was told. ListTasks (a2alist.go) shows a caller
// only the tasks its own client made in the context it names, so it tells
// no one an ID they were not already told.
const (
	maxA2ATasks            = 1024
	maxA2ATasksPerClient   = 32
	maxA2AWorkingPerClient = maxInvocations / 4
	maxA2ATaskBytes        = 16 << 20
	maxA2ATaskReply        = 1 << 20
	a2aTaskKeep            = 10 * time.Minute
)

// taskState is an A2A task state.
type taskState int

const (
	taskWorking taskState = iota
	taskCompleted
	taskFailed
)

// taskNever is a state this agent's tasks never take (SUBMITTED,
// CANCELED, …): a ListTasks filter by one of them lists nothing.
const taskNever taskState = -1

func (s taskState) terminal() bool { return s != taskWorking }

// name is the state as version v writes it.
func (s taskState) name(v a2aVersion) string {
	names := [...][2]string{taskWorking: {"working", "TASK_STATE_WORKING"}, taskCompleted: {"completed", "TASK_STATE_COMPLETED"},
		taskFailed: {"failed", "TASK_STATE_FAILED"}}
	return names[s][v]
}

// a2aTask is one task: a message the local agent is answering, or did.
type a2aTask struct {
	id, contextID string
	client        netip.Prefix
	state         taskState
	updated       time.Time     // when the state last changed
	status        *outMessage   // the reply, or the failure
	size          int           // bytes of status counted against maxA2ATaskBytes
	ended         chan struct{} // closed when the task ends; shared by its copies
}

// a2aTimestamp is the A2A form of a time: UTC, with milliseconds (A2A 1.0
// §5.6.1: YYYY-MM-DDTHH:mm:ss.sssZ).
func a2aTimestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// renderStatus is the task's TaskStatus in version v's shapes.
func (t *a2aTask) renderStatus(v a2aVersion) map[string]any {
	status := map[string]any{"state": t.state.name(v), "timestamp": a2aTimestamp(t.updated)}
	if t.status != nil {
		m := *t.status
		m.taskID, m.contextID = t.id, t.contextID
		status["message"] = m.render(v)
	}
	return status
}

func (t *a2aTask) render(v a2aVersion) map[string]any {
	out := map[string]any{"id": t.id, "contextId": t.contextID, "status": t.renderStatus(v)}
	if v == a2a03 {
		out["kind"] = "task"
	}
	return out
}

// renderUpdate is the task's current status as a TaskStatusUpdateEvent
// in version v's shapes (0.3 marks the last event of a stream final).
func (t *a2aTask) renderUpdate(v a2aVersion) map[string]any {
	out := map[string]any{"taskId": t.id, "contextId": t.contextID, "status": t.renderStatus(v)}
	if v == a2a03 {
		out["kind"], out["final"] = "status-update", t.state.terminal()
	}
	return out
}

// a2aTasks is the binding's table of A2A tasks, bounded as the constants
// above say; its clock is the binding's.
type a2aTasks struct {
	now func() time.Time

	mu    sync.Mutex
	byID  map[string]*a2aTask
	order []*a2aTask // oldest first
	bytes int
}

func newA2ATasks(now func() time.Time) *a2aTasks {
	return &a2aTasks{now: now, byID: map[string]*a2aTask{}}
}

// add makes a working task for client, evicting as the bounds say, or
// refuses when every task it could evict is still working.
func (ts *a2aTasks) add(client netip.Prefix, contextID string) (*a2aTask, *a2aError) {
	var b [16]byte
	rand.Read(b[:])
	t := &a2aTask{id: "task-" + hex.EncodeToString(b[:]), contextID: contextID, client: client, updated: ts.now(), ended: make(chan struct{})}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.expire()
	mine, working := 0, 0
	for _, o := range ts.order {
		if o.client == client {
			mine++
			if !o.state.terminal() {
				working++
			}
		}
	}
	if working >= maxA2AWorkingPerClient {
		return nil, busyTasks(fmt.Sprintf("this client has %d tasks working, its most", working))
	}
	if mine >= maxA2ATasksPerClient && !ts.evict(func(o *a2aTask) bool { return o.client == client }) {
		return nil, busyTasks(fmt.Sprintf("this client holds %d tasks, its most", mine))
	}
	if len(ts.order) >= maxA2ATasks && !ts.evict(func(*a2aTask) bool { return true }) {
		return nil, busyTasks(fmt.Sprintf("%d tasks are working", len(ts.order)))
	}
	ts.byID[t.id] = t
	ts.order = append(ts.order, t)
	cp := *t
	return &cp, nil
}

func busyTasks(why string) *a2aError {
	body := wire.ErrorBody{Code: wire.CodeBusy, Message: "no room for another task: " + why + "; wait for one to end, or send the message blocking", RetryAfterSeconds: 1}
	return &a2aError{code: rpcInternal, msg: body.Message, detail: &body}
}

// complete ends task id with the agent's reply.
func (ts *a2aTasks) complete(id string, reply *outMessage) {
	size := 0
	if b, err := json.Marshal(reply.render(a2a10)); err == nil {
		size = len(b)
	}
	if size > maxA2ATaskReply {
		ts.fail(id, fmt.Sprintf("the agent's reply is %d bytes, over the %d a task keeps; send the message blocking to get it directly", size, maxA2ATaskReply), nil)
		return
	}
	ts.end(id, taskCompleted, reply, size)
}

// fail ends task id with the reason it failed.
func (ts *a2aTasks) fail(id, reason string, detail *wire.ErrorBody) {
	m := &outMessage{text: &reason}
	if detail != nil {
		m.metadata = map[string]any{"error": detail}
	}
	ts.end(id, taskFailed, m, len(reason)+256)
}

func (ts *a2aTasks) end(id string, state taskState, status *outMessage, size int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok || t.state.terminal() {
		return // evicted meanwhile, or ended already (neither can be; kept for safety)
	}
	status.id = "msg-" + id
	t.state, t.status, t.size, t.updated = state, status, size, ts.now()
	close(t.ended)
	ts.bytes += size
	for ts.bytes > maxA2ATaskBytes && ts.evict(func(o *a2aTask) bool { return o != t }) {
	}
}

// get returns a copy of task id, if it is kept.
func (ts *a2aTasks) get(id string) (*a2aTask, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.expire()
	t, ok := ts.byID[id]
	if !ok {
		return nil, false
	}
	cp := *t
	return &cp, true
}

// len is the number of tasks kept.
func (ts *a2aTasks) len() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.order)
}

// expire drops tasks that ended more than a2aTaskKeep ago.
func (ts *a2aTasks) expire() {
	cutoff := ts.now().Add(-a2aTaskKeep)
	kept := ts.order[:0]
	for _, t := range ts.order {
		if t.state.terminal() && t.updated.Before(cutoff) {
			ts.drop(t)
			continue
		}
		kept = append(kept, t)
	}
	clear(ts.order[len(kept):])
	ts.order = kept
}

// evict drops the oldest ended task that which accepts, and reports
// whether there was one.
func (ts *a2aTasks) evict(which func(*a2aTask) bool) bool {
	for i, t := range ts.order {
		if t.state.terminal() && which(t) {
			ts.drop(t)
			ts.order = append(ts.order[:i], ts.order[i+1:]...)
			return true
		}
	}
	return false
}

// drop forgets t (not its place in order).
func (ts *a2aTasks) drop(t *a2aTask) {
	delete(ts.byID, t.id)
	ts.bytes -= t.size
}
