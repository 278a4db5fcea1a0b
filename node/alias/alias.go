// Package alias holds the owner's local names for peers: `ifaced alias
// bob 12D3KooW…` writes bob into aliases.toml in the data directory,
// beside config.toml, and every verb that takes a peer then takes bob.
//
// An alias is the owner's own word for a peer ID, so it is trusted the way
// a peer ID is: it names exactly the key it was set to, whatever the peer
// later calls itself. (A display name is the peer's own claim; see
// cmd/ifaced for how the command line uses those.)
//
// The file is plain TOML, one `name = "peer ID"` per line, mode 0600, in a
// data directory only the owner may write; it is replaced whole (a new
// file renamed over the old one), so a reader sees the old book or the new
// one. A file others could write, or one over MaxFileBytes, is refused.
package alias

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/google/renameio/v2"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/pelletier/go-toml/v2"
)

// FileName is the alias book's file in the data directory.
const FileName = "aliases.toml"

// Bounds of the book: it is the owner's, but a file is read whole.
const (
	MaxAliases   = 10000
	MaxFileBytes = 1 << 20
)

// Errors of the book, compared with errors.Is.
var (
	ErrBadName  = errors.New("not a usable alias")
	ErrNotFound = errors.New("no such alias")
	ErrFull     = errors.New("the alias book is full")
)

// Reserved are the words a command reads as a subcommand where it takes a
// peer (`caps add`, `policy disclosure`, …): an alias spelled so could not
// be used there.
var Reserved = []string{"add", "remove", "validate", "disclosure", "temperature", "list", "show", "close", "set", "keys"}

var namePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,63}$`)

// CheckName tells whether name can be an alias: a letter, then up to 63
// letters, digits, '.', '_' or '-'; not a peer ID; not a reserved word.
func CheckName(name string) error {
	switch {
	case !namePattern.MatchString(name):
		return fmt.Errorf("%w: %q: an alias is a letter followed by up to 63 letters, digits, '.', '_' or '-' (e.g. bob, alice-work)", ErrBadName, name)
	case slices.Contains(Reserved, name):
		return fmt.Errorf("%w: %q is a subcommand word (%s); choose another name", ErrBadName, name, strings.Join(Reserved, ", "))
	}
	if _, err := peer.Decode(name); err == nil {
		return fmt.Errorf("%w: %q is itself a peer ID", ErrBadName, name)
	}
	return nil
}

// File is the alias file of one data directory.
type File struct {
	path string
}

// Open is the book in the data directory dir (the file need not exist).
func Open(dir string) *File { return &File{path: filepath.Join(dir, FileName)} }

// Path is the book's file.
func (b *File) Path() string { return b.path }

// All reads the book: alias → peer ID. A missing file is an empty book.
func (b *File) All() (map[string]peer.ID, error) {
	f, err := os.Open(b.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]peer.ID{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading aliases: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading aliases: %w", err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("reading aliases: %s is writable by group or others (mode %#o), so another user could point an alias at their own key; run `chmod 600 %s`",
			b.path, st.Mode().Perm(), b.path)
	}
	src, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading aliases: %w", err)
	}
	if len(src) > MaxFileBytes {
		return nil, fmt.Errorf("reading aliases: %s is over %d bytes", b.path, MaxFileBytes)
	}
	var raw map[string]string
	if err := toml.Unmarshal(src, &raw); err != nil {
		return nil, fmt.Errorf("reading aliases: %s: %w", b.path, err)
	}
	if len(raw) > MaxAliases {
		return nil, fmt.Errorf("reading aliases: %s holds %d aliases, over %d", b.path, len(raw), MaxAliases)
	}
	out := make(map[string]peer.ID, len(raw))
	for name, v := range raw {
		pid, err := peer.Decode(v)
		if err != nil {
			return nil, fmt.Errorf("reading aliases: %s: %s: %q is not a peer ID", b.path, name, v)
		}
		out[name] = pid
	}
	return out, nil
}

// Lookup is the peer an alias names; ok false when there is none.
func (b *File) Lookup(name string) (peer.ID, bool, error) {
	all, err := b.All()
	if err != nil {
		return "", false, err
	}
	pid, ok := all[name]
	return pid, ok, nil
}

// Set names pid name, replacing what name named before; it returns the
// peer it named before ("" when it is new).
func (b *File) Set(name string, pid peer.ID) (peer.ID, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	all, err := b.All()
	if err != nil {
		return "", err
	}
	before, existed := all[name]
	if !existed && len(all) >= MaxAliases {
		return "", fmt.Errorf("setting alias %s: %w (%d aliases; remove some with `ifaced alias --remove NAME`)", name, ErrFull, MaxAliases)
	}
	all[name] = pid
	return before, b.write(all)
}

// Remove forgets an alias and returns the peer it named.
func (b *File) Remove(name string) (peer.ID, error) {
	all, err := b.All()
	if err != nil {
		return "", err
	}
	pid, ok := all[name]
	if !ok {
		return "", fmt.Errorf("removing alias %q: %w", name, ErrNotFound)
	}
	delete(all, name)
	return pid, b.write(all)
}

const header = "# Local names for peers, written by `ifaced alias` (alias = \"peer ID\").\n"

func (b *File) write(all map[string]peer.ID) error {
	var buf bytes.Buffer
	buf.WriteString(header)
	for _, name := range slices.Sorted(maps.Keys(all)) {
		fmt.Fprintf(&buf, "%q = %q\n", name, all[name].String()) // quoted: "alice.work" is one key
	}
	if err := writeFileAtomic(b.path, buf.Bytes()); err != nil {
		return fmt.Errorf("writing aliases: %w", err)
	}
	return nil
}

// writeFileAtomic writes body to a file of mode 0600 beside path, fsyncs
// it and renames it over path (renameio).
func writeFileAtomic(path string, body []byte) error {
	return renameio.WriteFile(path, body, 0o600, renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(0o600))
}
