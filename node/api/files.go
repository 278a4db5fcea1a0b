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
	"runtime"

	"github.com/google/renameio/v2"
	"github.com/ifaced/ifaced/node/config"
)

// TokenFile is where a daemon's API token lives.
func TokenFile(h config.Home) string { return filepath.Join(h.Dir, "api.token") }

// AddrFile is where a running daemon writes its API address.
func AddrFile(h config.Home) string { return filepath.Join(h.Dir, "api.addr") }

// SocketFile is the Unix socket a running daemon's API also listens on.
func SocketFile(h config.Home) string { return filepath.Join(h.Dir, "api.sock") }

const tokenBytes = 32

// newToken makes a new token and writes it to path (mode 0600), replacing
// the one a previous run left: a token lives as long as one run of the
// daemon, so one copied or leaked earlier opens nothing now. A reader sees
// the old file or the new one, never part of one.
func newToken(path string) ([]byte, error) {
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("creating API token: %w", err)
	}
	tok := []byte(hex.EncodeToString(raw))
	if err := writeFileAtomic(path, append(tok, '\n')); err != nil {
		return nil, fmt.Errorf("writing API token: %w", err)
	}
	return tok, nil
}

// readToken reads and checks a token file. A token others can read is
// refused rather than used, as ssh refuses such a key: anyone who could
// read it controls the daemon.
func readToken(path string) ([]byte, error) {
	if runtime.GOOS != "windows" {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("reading API token %s: others can read it (mode %#o); run `chmod 600 %s`, or restart the daemon for a new one",
				path, st.Mode().Perm(), path)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading API token: %w", err)
	}
	tok := bytes.TrimSpace(b)
	if _, err := hex.DecodeString(string(tok)); err != nil || len(tok) != 2*tokenBytes {
		return nil, fmt.Errorf("reading API token %s: not %d hex digits (restart the daemon; it writes a new one when it starts)", path, 2*tokenBytes)
	}
	return tok, nil
}

// writeAddr writes the API address so that a reader sees either no file
// or the whole address, never part of one.
func writeAddr(path, addr string) error {
	if err := writeFileAtomic(path, []byte(addr+"\n")); err != nil {
		return fmt.Errorf("writing API address: %w", err)
	}
	return nil
}

// writeFileAtomic writes body to a file of mode 0600 beside path, fsyncs
// it and renames it over path (renameio), so a reader sees the old file
// or the new one, never part of one.
func writeFileAtomic(path string, body []byte) error {
	return renameio.WriteFile(path, body, 0o600, renameio.WithTempDir(filepath.Dir(path)), renameio.WithStaticPermissions(0o600))
}

// errDaemonRunning: something answers on the API socket of the home a
// daemon is starting in.
var errDaemonRunning = errors.New("another ifaced is running for this data directory")

// maxSocketPath is the longest Unix socket path every platform binds
// (sun_path is 104 bytes on the BSDs and macOS, 108 on Linux, with the
// terminating zero).
const maxSocketPath = 103

// errSocketPathTooLong: the home's path is too long for a Unix socket in
// it; the daemon then listens on TCP only.
var errSocketPathTooLong = errors.New("the control socket's path is too long for a Unix socket")

// isSocket tells a Unix socket from other files.
func isSocket(st fs.FileInfo) bool { return st.Mode().Type() == fs.ModeSocket }
