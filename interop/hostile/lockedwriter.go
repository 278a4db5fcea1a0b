package hostile

import (
	"bytes"
	"sync"
)

var lockedLog sync.Mutex

// lockedWriter lets the daemon's stdout and stderr share one buffer the
// test reads while the process writes.
type lockedWriter struct{ buf *bytes.Buffer }

func (w *lockedWriter) Write(p []byte) (int, error) {
	lockedLog.Lock()
	defer lockedLog.Unlock()
	if w.buf.Len() > 1<<20 {
		return len(p), nil // keep the first MiB: enough to see why it failed
	}
	return w.buf.Write(p)
}
