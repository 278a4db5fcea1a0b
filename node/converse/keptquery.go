package converse

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// maxKeptQueries bounds the query streams kept open between queries, on
// each side: those this daemon keeps to ask peers again, and those it
// keeps open for peers that asked it, of which strangers (peers the owner
// has not made known) hold at most half, so fresh keys cannot take the
// room of the owner's peers. Past it, a stream carries one query and
// closes, as before.
const maxKeptQueries = 256

// keptSlots counts the query streams peers keep open to this daemon.
type keptSlots struct {
	mu             sync.Mutex
	all, strangers int
	max            int
}

// take reserves a slot for a stream of a stranger or not, and reports
// whether there was one; give gives it back.
func (k *keptSlots) take(stranger bool) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.all >= k.max || stranger && k.strangers >= k.max/2 {
		return false
	}
	k.all++
	if stranger {
		k.strangers++
	}
	return true
}

func (k *keptSlots) give(stranger bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.all--
	if stranger {
		k.strangers--
	}
}

// errStaleStream: a kept query stream had been closed or reset by the
// peer before it answered; the query goes again on a new stream.
var errStaleStream = errors.New("the kept query stream had ended")

// isStreamEnd tells a stream the peer closed or reset from other failures.
func isStreamEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, network.ErrReset) || errors.Is(err, io.ErrClosedPipe)
}

// keptQueries holds one query stream per peer between queries
// (/ifp/7/capabilities carries one query after another), each closed
// once idle for half the stream timeout, before the peer's read deadline
// closes it.
type keptQueries struct {
	mu   sync.Mutex
	m    map[peer.ID]*keptQuery
	idle time.Duration
	max  int // streams kept at once
}

type keptQuery struct {
	ws    *wire.Stream
	timer *time.Timer
}

func newKeptQueries(idle time.Duration, max int) *keptQueries {
	return &keptQueries{m: map[peer.ID]*keptQuery{}, idle: idle, max: max}
}

// take hands out pid's kept stream, if there is one; the caller owns it.
func (k *keptQueries) take(pid peer.ID) *wire.Stream {
	k.mu.Lock()
	defer k.mu.Unlock()
	q, ok := k.m[pid]
	if !ok {
		return nil
	}
	delete(k.m, pid)
	if !q.timer.Stop() {
		return nil // closing
	}
	return q.ws
}

// put keeps ws for pid's next query, or closes it when there is no room
// (or one is kept already).
func (k *keptQueries) put(pid peer.ID, ws *wire.Stream) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[pid]; ok || len(k.m) >= k.max {
		ws.Close()
		return
	}
	q := &keptQuery{ws: ws}
	q.timer = time.AfterFunc(k.idle, func() {
		k.mu.Lock()
		if k.m[pid] == q {
			delete(k.m, pid)
		}
		k.mu.Unlock()
		ws.Close()
	})
	k.m[pid] = q
}

// closeAll closes every kept stream (when the daemon closes).
func (k *keptQueries) closeAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for pid, q := range k.m {
		if q.timer.Stop() {
			q.ws.Close()
		}
		delete(k.m, pid)
	}
}
