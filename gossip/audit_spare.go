package gossip

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Creating a file is the dearest thing a new conversation costs the audit
// log: on some file systems (ext4 on the virtual disks this was measured
// on) an open(O_CREAT) takes 0.5–0.8 ms, against 10 µs to append to a file
// or to link one into place. A capabilities query is a new conversation,
// and both of its files on each side were created while the peer waited.
// So the log keeps a few empty files made ahead in a subdirectory, and a
// new conversation links one into place under its name. os.Link never
// replaces an existing file, so a spare can only ever fill a gap. Spares
// left by a crash are found again at open; a file that is not empty there
// (which nothing here writes) is left alone and not used, and one with a
// second link (a crash between the link and the removal of the spare's
// name) loses the spare's name. On a file system without hard links the
// spares stop, and files are created as before.

const (
	spareDir    = ".spare"
	spareTarget = 16 // a burst of new conversations larger than this waits for creations, as before
)

type spareFiles struct {
	dir    string
	target int

	mu     sync.Mutex
	ready  []string      // empty files in dir, ready to be linked into place
	next   int           // for unique spare names
	closed bool          // no more spares are made (Close, or no hard links here)
	want   chan struct{} // wakes the refiller
	done   chan struct{} // closed when the refiller has returned
}

func openSpareFiles(dir string, target int) (*spareFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	s := &spareFiles{dir: dir, target: target, want: make(chan struct{}, 1), done: make(chan struct{})}
	for _, de := range des {
		info, err := de.Info()
		if err != nil || !de.Type().IsRegular() || info.Size() != 0 || !strings.HasPrefix(de.Name(), "spare-") {
			continue
		}
		path := filepath.Join(dir, de.Name())
		if links(info) > 1 {
			// A crash between place's link and its remove: the file is in
			// use under another name. Only this name goes.
			os.Remove(path)
			continue
		}
		s.ready = append(s.ready, path)
	}
	s.next = len(des)
	go s.refill()
	s.wake()
	return s, nil
}

// place links a spare file at path, if one is ready and nothing is at path.
// Whatever happens, the caller opens path with O_CREATE after: a missing
// spare only costs the creation it would have saved.
func (s *spareFiles) place(path string) {
	s.mu.Lock()
	if len(s.ready) == 0 {
		s.mu.Unlock()
		s.wake()
		return
	}
	spare := s.ready[0] // the oldest: new spares are still being made at the end
	s.ready = s.ready[1:]
	s.mu.Unlock()
	if err := os.Link(spare, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Someone else's file is there: keep the spare. The refiller
			// was not woken for it, so the spares stay at their target.
			s.put(spare)
			return
		}
		// A file system without hard links (vfat, some network mounts):
		// spares cannot work here; stop making them.
		os.Remove(spare)
		s.disable()
		return
	}
	os.Remove(spare)
	s.wake()
}

func (s *spareFiles) put(spare string) {
	s.mu.Lock()
	s.ready = append(s.ready, spare)
	s.mu.Unlock()
}

func (s *spareFiles) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return // a Record racing Close: no more spares are made
	}
	select {
	case s.want <- struct{}{}:
	default:
	}
}

// refill tops the spares up to target whenever place takes one.
func (s *spareFiles) refill() {
	defer close(s.done)
	for range s.want {
		for {
			s.mu.Lock()
			if s.closed || len(s.ready) >= s.target {
				s.mu.Unlock()
				break
			}
			s.next++
			name := filepath.Join(s.dir, fmt.Sprintf("spare-%d", s.next))
			s.mu.Unlock()
			f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if errors.Is(err, fs.ErrExist) {
				continue // a name a crash left behind, not empty
			}
			if err != nil {
				break // the next place tries again; conversations go on without spares
			}
			f.Close()
			s.put(name)
		}
	}
}

// disable stops the spares for good, removing those ready.
func (s *spareFiles) disable() {
	s.close()
	s.mu.Lock()
	ready := s.ready
	s.ready = nil
	s.mu.Unlock()
	for _, p := range ready {
		os.Remove(p)
	}
}

// close stops the refiller; the spares stay for the next open.
func (s *spareFiles) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.want)
	s.mu.Unlock()
	<-s.done
}
