package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/node/api"
	"github.com/ifaced/ifaced/node/events"
)

// Bounds of the live events.
const (
	RecentEvents    = 50  // events the overview keeps and shows
	MaxLiveViews    = 8   // pages following /ui/events at once
	liveBuffer      = 64  // events a slow page may fall behind before it is dropped (its script reconnects)
	eventTextBytes  = 240 // of a message's text shown with its event
	heartbeatPeriod = 15 * time.Second
)

// shownEvent is an event as the console shows it: no message body beyond
// the start of its text.
type shownEvent struct {
	Type         string    `json:"type"`
	At           time.Time `json:"at"`
	Peer         string    `json:"peer,omitempty"`
	Name         string    `json:"name,omitempty"` // how the owner calls the peer (labels.Name), when it has a name
	Conversation string    `json:"conversation_id,omitempty"`
	Link         string    `json:"link,omitempty"` // where the event is recorded: its conversation, or for a refusal the record of refusals
	Detail       string    `json:"detail,omitempty"`
	Text         string    `json:"text,omitempty"`
}

// Refused reports whether the event is a refusal, recorded in the record
// of refusals and never in the conversation it names.
func (s shownEvent) Refused() bool { return s.Type == events.EventRefused }

func shown(e events.Event) shownEvent {
	s := shownEvent{Type: e.Type, At: e.At, Peer: e.Peer, Conversation: e.ConversationID, Detail: gossip.Clip(e.Detail, eventTextBytes)}
	switch {
	case s.Refused():
		s.Link = refusalsLink(e.At)
	case s.Conversation != "":
		s.Link = "/ui/audit/c/" + url.PathEscape(s.Conversation)
	}
	if e.Message != nil {
		s.Text = gossip.Clip(e.Message.Body.Text, eventTextBytes)
	}
	if e.Invocation != nil && s.Detail == "" {
		s.Detail = "invocation of " + e.Invocation.Capability
	}
	return s
}

// recentEvents follows the daemon's event stream as an observer: it
// keeps the latest RecentEvents for the overview, which shows them
// without JavaScript, and fans each new one out to the pages following
// /ui/events. A page that falls liveBuffer behind is dropped; its
// EventSource reconnects.
type recentEvents struct {
	log   *slog.Logger
	namer func(peer string) string // how the owner calls a peer; nil: not named

	mu     sync.Mutex
	ring   []shownEvent // oldest first
	subs   map[chan shownEvent]struct{}
	status string // "" while following; otherwise why not
}

func newRecentEvents(log *slog.Logger) *recentEvents {
	return &recentEvents{log: log, subs: map[chan shownEvent]struct{}{}, status: "not following the daemon's events yet"}
}

func (re *recentEvents) add(e shownEvent) {
	re.mu.Lock()
	defer re.mu.Unlock()
	if len(re.ring) == RecentEvents {
		copy(re.ring, re.ring[1:])
		re.ring = re.ring[:RecentEvents-1]
	}
	re.ring = append(re.ring, e)
	for ch := range re.subs {
		select {
		case ch <- e:
		default:
			delete(re.subs, ch)
			close(ch)
		}
	}
}

// recent returns the kept events, newest first, and why they may be
// incomplete ("" when following).
func (re *recentEvents) recent() ([]shownEvent, string) {
	re.mu.Lock()
	defer re.mu.Unlock()
	out := make([]shownEvent, len(re.ring))
	for i, e := range re.ring {
		out[len(re.ring)-1-i] = e
	}
	return out, re.status
}

func (re *recentEvents) setStatus(s string) {
	re.mu.Lock()
	re.status = s
	re.mu.Unlock()
}

// subscribe adds a live page; false when MaxLiveViews follow already.
func (re *recentEvents) subscribe() (chan shownEvent, func(), bool) {
	re.mu.Lock()
	defer re.mu.Unlock()
	if len(re.subs) >= MaxLiveViews {
		return nil, nil, false
	}
	ch := make(chan shownEvent, liveBuffer)
	re.subs[ch] = struct{}{}
	return ch, func() {
		re.mu.Lock()
		defer re.mu.Unlock()
		if _, ok := re.subs[ch]; ok {
			delete(re.subs, ch)
			close(ch)
		}
	}, true
}

// follow reads the daemon's events until ctx ends, reopening a stream
// that ended after a pause that grows to 30 s.
func (re *recentEvents) follow(ctx context.Context, observe func(context.Context) (*api.EventStream, error)) {
	const firstPause = time.Second
	pause := firstPause
	for {
		opened, err := re.followOnce(ctx, observe)
		if ctx.Err() != nil {
			return
		}
		if opened {
			pause = firstPause
		}
		re.setStatus(fmt.Sprintf("the daemon's event stream ended (%v); reopening", err))
		re.log.Warn("daemon event stream ended; reopening", "err", err, "in", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, 30*time.Second)
	}
}

func (re *recentEvents) followOnce(ctx context.Context, observe func(context.Context) (*api.EventStream, error)) (bool, error) {
	ev, err := observe(ctx)
	if err != nil {
		return false, fmt.Errorf("subscribing to the daemon's events: %w", err)
	}
	defer ev.Close()
	stop := context.AfterFunc(ctx, func() { ev.Close() })
	defer stop()
	re.setStatus("")
	for {
		e, err := ev.Next()
		if errors.Is(err, io.EOF) {
			return true, errors.New("the daemon closed the stream")
		}
		if err != nil {
			return true, err
		}
		s := shown(e)
		if re.namer != nil && s.Peer != "" {
			s.Name = re.namer(s.Peer)
		}
		re.add(s)
	}
}

// serveLive streams new events to a page as server-sent events, each a
// shownEvent as its data (its type inside, so that a page's EventSource
// gets every type as a message), until the page goes away, the console
// closes, or the page falls behind.
func (re *recentEvents) serveLive(w http.ResponseWriter, r *http.Request, done <-chan struct{}, writeTimeout time.Duration) {
	ch, stop, ok := re.subscribe()
	if !ok {
		http.Error(w, fmt.Sprintf("refused: %d pages follow the events already; close one, or reload this page to see the recent events", MaxLiveViews),
			http.StatusServiceUnavailable)
		return
	}
	defer stop()
	rc := http.NewResponseController(w)
	// The stream outlives the server's timeouts; each write has its own
	// deadline instead, so a page that stops reading cannot hold it.
	rc.SetReadDeadline(time.Time{})
	write := func(format string, args ...any) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !write(": following\n\n") {
		return
	}
	tick := time.NewTicker(heartbeatPeriod)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done:
			return
		case <-tick.C:
			if !write(": heartbeat\n\n") {
				return
			}
		case e, ok := <-ch:
			if !ok {
				return // fell behind: the page's EventSource reconnects
			}
			data, err := json.Marshal(e)
			if err != nil {
				continue
			}
			if !write("data: %s\n\n", data) {
				return
			}
		}
	}
}
