package auditproof

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// Hash is a node of a tree: 32 bytes of SHA-256.
type Hash = tlog.Hash

// HashSize is the size of a Hash.
const HashSize = tlog.HashSize

// The files of a day's tree, in the day's directory beside the records.
const (
	FilesFile       = "_tree.files"        // the file table: one record file name a line; a file's number is its line's, from 0
	LeavesFile      = "_tree.leaves"       // 16 bytes a leaf: file number (uint32), length (uint32), offset (uint64), big-endian
	HashesFile      = "_tree.hashes"       // the tree's stored hashes, 32 bytes each, in tlog's stored-hash order
	CheckpointsFile = "_checkpoints.jsonl" // the signed checkpoints, one JSON string (the signed note) a line, oldest first
)

// LeafSize is the size of a leaf in LeavesFile.
const LeafSize = 16

const leafSize = LeafSize

// DecodeLeaf reads a leaf of LeavesFile.
func DecodeLeaf(b []byte) Leaf { return decodeLeaf(b) }

// HashReader reads stored hashes (tlog's).
type HashReader = tlog.HashReader

// TreeHash is the root hash of the tree of n leaves, from its stored
// hashes.
func TreeHash(n int64, r HashReader) (Hash, error) { return tlog.TreeHash(n, r) }

// LeafHash is the RFC 9162 leaf hash of a record: SHA-256(0x00 || record).
func LeafHash(record []byte) Hash { return tlog.RecordHash(record) }

// Leaf is where a leaf's record is: the number of its file in the day's
// file table, the byte offset of the record in that file and its length
// (the line without its newline).
type Leaf struct {
	File   int
	Offset int64
	Length int
}

func (l Leaf) end() int64 { return l.Offset + int64(l.Length) + 1 }

func encodeLeaf(dst []byte, l Leaf) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(l.File))
	dst = binary.BigEndian.AppendUint32(dst, uint32(l.Length))
	return binary.BigEndian.AppendUint64(dst, uint64(l.Offset))
}

func decodeLeaf(b []byte) Leaf {
	return Leaf{File: int(binary.BigEndian.Uint32(b)), Length: int(binary.BigEndian.Uint32(b[4:])), Offset: int64(binary.BigEndian.Uint64(b[8:]))}
}

// node is one complete subtree on the tree's right edge.
type node struct {
	index int64 // its stored-hash index
	hash  Hash
}

// frontier is the right edge of a tree: its complete subtrees, left to
// right, which is all that appending a leaf or computing the root reads.
type frontier []node

func (f frontier) ReadHashes(indexes []int64) ([]Hash, error) {
	out := make([]Hash, len(indexes))
	for i, idx := range indexes {
		found := false
		for _, n := range f {
			if n.index == idx {
				out[i], found = n.hash, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("auditproof: stored hash %d is not on the tree's edge", idx)
		}
	}
	return out, nil
}

// edge lists the stored-hash indexes of the complete subtrees of a tree
// of size n, left to right.
func edge(n int64) []int64 {
	var out []int64
	lo := int64(0)
	for level := 62; level >= 0; level-- {
		if n&(1<<level) != 0 {
			out = append(out, tlog.StoredHashIndex(level, lo>>level))
			lo += 1 << level
		}
	}
	return out
}

// Tree appends to one day's tree. Appends are buffered in memory and
// written by Flush (a checkpoint flushes first): a crash loses what was
// not flushed, and the records it covered are found again and appended
// anew (see the audit log). Tree is safe for concurrent use.
type Tree struct {
	dir  string
	grow func(path string, size, n int64) // told of every write, for the quota

	mu       sync.Mutex
	size     int64
	edge     frontier
	names    []string       // the file table
	current  map[string]int // a file name → its current number
	ends     []int64        // by number: where its last leaf's line ends (0: no leaf yet)
	pending  [3][]byte      // unwritten: table lines, leaves, hashes
	closed   bool
	writeMu  sync.Mutex // one Flush at a time, so buffers reach the files in order
	fds      [3]*os.File
	fdSizes  [3]int64
	flushed  int64 // leaves written
	flushErr error
}

var treeFiles = [3]string{FilesFile, LeavesFile, HashesFile}

// OpenTree opens (creating when needed) the tree whose files are in dir.
// A tail cut by a crash (a partial table line, leaf or hash, or hashes
// missing for the last leaves) is cut off, so the tree is the longest
// whole prefix; grow, when not nil, is told of every write.
func OpenTree(dir string, grow func(path string, size, n int64)) (*Tree, error) {
	t := &Tree{dir: dir, grow: grow, current: map[string]int{}}
	r, err := readTree(dir)
	if err != nil {
		return nil, err
	}
	t.size, t.names, t.edge, t.ends, t.current = r.size, r.names, r.edge, r.ends, r.current
	lengths := [3]int64{r.tableBytes, r.size * leafSize, tlog.StoredHashCount(r.size) * HashSize}
	for i, name := range treeFiles {
		fd, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.closeFiles()
			return nil, fmt.Errorf("opening audit tree: %w", err)
		}
		t.fds[i] = fd
		st, err := fd.Stat()
		if err != nil {
			t.closeFiles()
			return nil, fmt.Errorf("opening audit tree: %w", err)
		}
		if st.Size() != lengths[i] {
			if err := fd.Truncate(lengths[i]); err != nil {
				t.closeFiles()
				return nil, fmt.Errorf("opening audit tree: cutting the torn tail of %s: %w", name, err)
			}
		}
		t.fdSizes[i] = lengths[i]
	}
	t.flushed = t.size
	return t, nil
}

func (t *Tree) closeFiles() {
	for i, fd := range t.fds {
		if fd != nil {
			fd.Close()
			t.fds[i] = nil
		}
	}
}

// Size is the number of leaves.
func (t *Tree) Size() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// Root is the tree's size and root hash now.
func (t *Tree) Root() (int64, Hash) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, _ := tlog.TreeHash(t.size, t.edge) // the edge holds what it reads
	return t.size, h
}

// Append adds the leaf of a record of file at offset, length bytes long,
// whose leaf hash is h, and returns its index.
func (t *Tree) Append(file string, offset int64, length int, h Hash) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, errors.New("appending to an audit tree: the tree is closed")
	}
	if strings.ContainsAny(file, "\n\r") || file == "" || strings.HasPrefix(file, RetiredPrefix) {
		return 0, fmt.Errorf("appending to an audit tree: file name %q", file)
	}
	num, ok := t.current[file]
	if !ok {
		num = len(t.names)
		t.names = append(t.names, file)
		t.current[file] = num
		t.ends = append(t.ends, 0)
		t.pending[0] = append(t.pending[0], file+"\n"...)
	}
	hashes, err := tlog.StoredHashesForRecordHash(t.size, h, t.edge)
	if err != nil {
		return 0, fmt.Errorf("appending to an audit tree: %w", err)
	}
	m := len(hashes) - 1
	t.edge = append(t.edge[:len(t.edge)-m], node{tlog.StoredHashIndex(m, t.size>>m), hashes[m]})
	l := Leaf{File: num, Offset: offset, Length: length}
	t.pending[1] = encodeLeaf(t.pending[1], l)
	for _, x := range hashes {
		t.pending[2] = append(t.pending[2], x[:]...)
	}
	t.ends[num] = l.end()
	n := t.size
	t.size++
	return n, nil
}

// End is where the last leaf of file's current generation ends (its
// offset, length and newline), and whether file has one.
func (t *Tree) End(file string) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	num, ok := t.current[file]
	if !ok {
		return 0, false
	}
	return t.ends[num], true
}

// Number is the current number of file in the table, and whether it has
// one.
func (t *Tree) Number(file string) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	num, ok := t.current[file]
	return num, ok
}

// Retire ends file's current generation: its content was deleted (a
// strangers' file pruned), and a file of that name written later is
// another generation, with a number of its own. The table says so with a
// line "-" + file (a number no leaf uses; no record file's name starts
// with "-").
func (t *Tree) Retire(file string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.current[file]; !ok || t.closed {
		return
	}
	delete(t.current, file)
	t.names = append(t.names, RetiredPrefix+file)
	t.ends = append(t.ends, 0)
	t.pending[0] = append(t.pending[0], RetiredPrefix+file+"\n"...)
}

// RetiredPrefix begins a line of the file table that ends the current
// generation of the file it names (Retire).
const RetiredPrefix = "-"

// Current is the number of each file's current generation in a file
// table (names, as Reader.Names gives it): the last line naming it,
// unless a retiring line follows.
func Current(names []string) map[string]int {
	cur := map[string]int{}
	for i, n := range names {
		if r, ok := strings.CutPrefix(n, RetiredPrefix); ok {
			delete(cur, r)
		} else {
			cur[n] = i
		}
	}
	return cur
}

// Flush writes what was appended, and returns the size and root written.
func (t *Tree) Flush() (int64, Hash, error) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.Lock()
	pending := t.pending
	t.pending = [3][]byte{}
	size := t.size
	root, _ := tlog.TreeHash(t.size, t.edge)
	closed := t.closed && t.fds[0] == nil
	t.mu.Unlock()
	if closed {
		return 0, Hash{}, errors.New("flushing an audit tree: the tree is closed")
	}
	if t.flushErr != nil {
		return 0, Hash{}, t.flushErr
	}
	for i, b := range pending {
		if len(b) == 0 {
			continue
		}
		n, err := t.fds[i].WriteAt(b, t.fdSizes[i])
		if n > 0 && t.grow != nil {
			t.grow(t.fds[i].Name(), t.fdSizes[i], int64(n))
		}
		t.fdSizes[i] += int64(n)
		if err != nil {
			// The files are torn now: nothing more is written (the next
			// open cuts the tail, and the records are found again).
			t.flushErr = fmt.Errorf("writing audit tree %s: %w", treeFiles[i], err)
			return 0, Hash{}, t.flushErr
		}
	}
	t.flushed = size
	return size, root, nil
}

// Sync fsyncs the tree's files.
func (t *Tree) Sync() error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	for i, fd := range t.fds {
		if fd == nil {
			continue
		}
		if err := fd.Sync(); err != nil {
			return fmt.Errorf("syncing audit tree %s: %w", treeFiles[i], err)
		}
	}
	return nil
}

// AppendCheckpoint appends a signed checkpoint to the day's checkpoints
// and fsyncs them.
func (t *Tree) AppendCheckpoint(signed []byte) error {
	line, err := json.Marshal(string(signed))
	if err != nil {
		return err
	}
	line = append(line, '\n')
	path := filepath.Join(t.dir, CheckpointsFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("writing audit checkpoint: %w", err)
	}
	st, err := f.Stat()
	if err == nil {
		var n int
		n, err = f.Write(line)
		if n > 0 && t.grow != nil {
			t.grow(path, st.Size(), int64(n))
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing audit checkpoint: %w", err)
	}
	return nil
}

// Close flushes and closes the tree's files.
func (t *Tree) Close() error {
	_, _, err := t.Flush()
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.closeFiles()
	return err
}

// treeState is what readTree found.
type treeState struct {
	size       int64
	names      []string
	current    map[string]int
	tableBytes int64
	edge       frontier
	ends       []int64
}

// readTree reads the longest whole prefix of the tree in dir.
func readTree(dir string) (*treeState, error) {
	s := &treeState{}
	table, err := os.ReadFile(filepath.Join(dir, FilesFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading audit tree: %w", err)
	}
	if i := bytes.LastIndexByte(table, '\n'); i >= 0 {
		table = table[:i+1]
	} else {
		table = nil
	}
	s.tableBytes = int64(len(table))
	if len(table) > 0 {
		s.names = strings.Split(strings.TrimSuffix(string(table), "\n"), "\n")
	}
	s.ends = make([]int64, len(s.names))
	s.current = Current(s.names)
	hashesInfo, err := os.Stat(filepath.Join(dir, HashesFile))
	hashCount := int64(0)
	if err == nil {
		hashCount = hashesInfo.Size() / HashSize
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading audit tree: %w", err)
	}
	lf, err := os.Open(filepath.Join(dir, LeavesFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading audit tree: %w", err)
	}
	if lf != nil {
		defer lf.Close()
		r := bufio.NewReaderSize(lf, 64<<10)
		var b [leafSize]byte
		for {
			if _, err := io.ReadFull(r, b[:]); err != nil {
				break // EOF, or a torn last leaf
			}
			l := decodeLeaf(b[:])
			if l.File >= len(s.names) || tlog.StoredHashCount(s.size+1) > hashCount {
				break // a leaf whose table line or hashes did not reach the disk
			}
			s.ends[l.File] = l.end()
			s.size++
		}
	}
	if s.size > 0 {
		hf, err := os.Open(filepath.Join(dir, HashesFile))
		if err != nil {
			return nil, fmt.Errorf("reading audit tree: %w", err)
		}
		defer hf.Close()
		for _, idx := range edge(s.size) {
			var h Hash
			if _, err := hf.ReadAt(h[:], idx*HashSize); err != nil {
				return nil, fmt.Errorf("reading audit tree: stored hash %d: %w", idx, err)
			}
			s.edge = append(s.edge, node{idx, h})
		}
	}
	return s, nil
}

// Reader reads a day's tree as it is on disk, for proofs and
// verification, without changing it (the daemon may be appending: the
// reader sees the longest whole prefix when it opened).
type Reader struct {
	dir    string
	size   int64
	names  []string
	leaves *os.File
	hashes *os.File
}

// ErrNoTree: a day's directory holds no tree.
var ErrNoTree = errors.New("no audit tree")

// OpenReader opens the tree in dir for reading.
func OpenReader(dir string) (*Reader, error) {
	if _, err := os.Stat(filepath.Join(dir, LeavesFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoTree, dir)
	}
	s, err := readTree(dir)
	if err != nil {
		return nil, err
	}
	r := &Reader{dir: dir, size: s.size, names: s.names}
	if r.leaves, err = os.Open(filepath.Join(dir, LeavesFile)); err != nil {
		return nil, fmt.Errorf("reading audit tree: %w", err)
	}
	if r.hashes, err = os.Open(filepath.Join(dir, HashesFile)); err != nil {
		r.leaves.Close()
		return nil, fmt.Errorf("reading audit tree: %w", err)
	}
	return r, nil
}

// Close closes the reader's files.
func (r *Reader) Close() error {
	r.leaves.Close()
	return r.hashes.Close()
}

// Size is the number of whole leaves the reader found.
func (r *Reader) Size() int64 { return r.size }

// Names is the file table: a file's number is its index.
func (r *Reader) Names() []string { return r.names }

// Leaf is where leaf n's record is.
func (r *Reader) Leaf(n int64) (Leaf, error) {
	if n < 0 || n >= r.size {
		return Leaf{}, fmt.Errorf("leaf %d: the tree has %d", n, r.size)
	}
	var b [leafSize]byte
	if _, err := r.leaves.ReadAt(b[:], n*leafSize); err != nil {
		return Leaf{}, fmt.Errorf("reading leaf %d: %w", n, err)
	}
	return decodeLeaf(b[:]), nil
}

// LeafHash is the stored hash of leaf n.
func (r *Reader) LeafHash(n int64) (Hash, error) {
	h, err := r.ReadHashes([]int64{tlog.StoredHashIndex(0, n)})
	if err != nil {
		return Hash{}, err
	}
	return h[0], nil
}

// ReadHashes reads stored hashes (tlog.HashReader).
func (r *Reader) ReadHashes(indexes []int64) ([]Hash, error) {
	out := make([]Hash, len(indexes))
	for i, idx := range indexes {
		if _, err := r.hashes.ReadAt(out[i][:], idx*HashSize); err != nil {
			return nil, fmt.Errorf("reading stored hash %d: %w", idx, err)
		}
	}
	return out, nil
}

// TreeHash is the root hash of the first size leaves.
func (r *Reader) TreeHash(size int64) (Hash, error) {
	if size > r.size {
		return Hash{}, fmt.Errorf("tree hash at %d: the tree has %d leaves", size, r.size)
	}
	return tlog.TreeHash(size, r)
}

// Prove is the inclusion proof of leaf n in the tree of the first size
// leaves (RFC 9162 §2.1.3: the audit path, from the leaf up).
func (r *Reader) Prove(n, size int64) ([]Hash, error) {
	if size > r.size || n >= size {
		return nil, fmt.Errorf("proving leaf %d in a tree of %d: the tree has %d leaves", n, size, r.size)
	}
	p, err := tlog.ProveRecord(size, n, r)
	if err != nil {
		return nil, fmt.Errorf("proving leaf %d in a tree of %d: %w", n, size, err)
	}
	return p, nil
}

// CheckInclusion checks that leaf n with leaf hash h is in the tree of
// size leaves whose root is root, by its proof.
func CheckInclusion(proof []Hash, size int64, root Hash, n int64, h Hash) error {
	return tlog.CheckRecord(proof, size, root, n, h)
}

// StoredHashes are the hashes a tree stores when leaf n with leaf hash h
// is appended to it, from the edge of the tree of n leaves
// (tlog.StoredHashesForRecordHash); the verifier recomputes them.
func StoredHashes(n int64, h Hash, r HashReader) ([]Hash, error) {
	return tlog.StoredHashesForRecordHash(n, h, r)
}

// StoredHashIndex is where the hash of the subtree at level and index
// n is stored (tlog's order).
func StoredHashIndex(level int, n int64) int64 { return tlog.StoredHashIndex(level, n) }

// StoredHashCount is how many hashes a tree of n leaves stores.
func StoredHashCount(n int64) int64 { return tlog.StoredHashCount(n) }
