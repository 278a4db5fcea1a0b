package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ifaced/ifaced/node"
)

// TokenFile is where a daemon's API token lives.
func TokenFile(h node.Home) string { return filepath.Join(h.Dir, "api.token") }

// AddrFile is where a running daemon writes its API address.
func AddrFile(h node.Home) string { return filepath.Join(h.Dir, "api.addr") }

const tokenBytes = 32

// loadOrCreateToken returns the token in path, creating it first when
// missing. A token others can read is refused rather than used: anyone
// who can read it controls the daemon.
func loadOrCreateToken(path string) ([]byte, error) {
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("creating API token: %w", err)
	}
	tok := []byte(hex.EncodeToString(raw))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, werr := f.Write(append(tok, '\n'))
		if serr := f.Sync(); werr == nil {
			werr = serr
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path) // a half-written token would lock every client out
			return nil, fmt.Errorf("creating API token %s: %w", path, werr)
		}
		return tok, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("creating API token: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading API token: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("reading API token %s: others can read it (mode %#o); run `chmod 600 %s`", path, perm, path)
	}
	return readToken(path)
}

// readToken reads and checks a token file.
func readToken(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading API token: %w", err)
	}
	tok := bytes.TrimSpace(b)
	if _, err := hex.DecodeString(string(tok)); err != nil || len(tok) != 2*tokenBytes {
		return nil, fmt.Errorf("reading API token %s: not %d hex digits (delete it; the daemon makes a new one when it starts)", path, 2*tokenBytes)
	}
	return tok, nil
}

// writeAddr writes the API address so that a reader sees either no file
// or the whole address, never part of one.
func writeAddr(path, addr string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".api.addr-*") // mode 0600
	if err != nil {
		return fmt.Errorf("writing API address: %w", err)
	}
	_, err = f.WriteString(addr + "\n")
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing API address: %w", err)
	}
	return nil
}
