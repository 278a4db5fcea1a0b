package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ifaced/ifaced"
	"github.com/ifaced/ifaced/identity"
	"github.com/libp2p/go-libp2p/core/peer"
)

// EnvHome names the environment variable that sets the data directory.
const EnvHome = "IFACED_HOME"

// Home is a daemon's data directory: key, config, API token and socket,
// store and audit log.
//
// Whoever can write in the data directory can replace the key, the config
// or the control socket a client trusts, so a daemon refuses to start on a
// directory or config.toml that group or others may write, the way ssh
// refuses a key others may read (CheckPermissions); the key itself must be
// 0600 (identity.LoadKey).
type Home struct{ Dir string }

// ErrBadPermissions: the data directory or its config is writable by
// users other than its owner.
var ErrBadPermissions = errors.New("bad permissions")

// ResolveHome picks the data directory: the flag value, else $IFACED_HOME,
// else ~/.ifaced.
func ResolveHome(flagValue string) (Home, error) {
	dir := flagValue
	if dir == "" {
		dir = os.Getenv(EnvHome)
	}
	if dir == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return Home{}, fmt.Errorf("finding the data directory: %w (set %s)", err, EnvHome)
		}
		dir = filepath.Join(h, ".ifaced")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Home{}, fmt.Errorf("finding the data directory: %w", err)
	}
	return Home{Dir: abs}, nil
}

// KeyPath is where the Ed25519 key lives.
func (h Home) KeyPath() string { return filepath.Join(h.Dir, "key.pem") }

// ConfigPath is where config.toml lives.
func (h Home) ConfigPath() string { return filepath.Join(h.Dir, "config.toml") }

// Init creates the data directory (mode 0700), a new key, and a config
// file holding the defaults with the example's comments
// (defaultConfigFile). It refuses to replace an existing key
// (identity.ErrKeyExists); an existing config is left alone.
func (h Home) Init(now time.Time) (*identity.Identity, error) {
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	if _, err := os.Stat(h.KeyPath()); err == nil {
		return nil, fmt.Errorf("initializing %s: %w: %s", h.Dir, identity.ErrKeyExists, h.KeyPath())
	}
	id, err := identity.Generate(nil)
	if err != nil {
		return nil, err
	}
	if err := identity.SaveKey(h.KeyPath(), id); err != nil {
		return nil, err
	}
	if err := h.writeDefaultConfig(); err != nil {
		return nil, err
	}
	return id, nil
}

// Open loads the key and config, creating both on first use when create
// is set (as `ifaced run` does). A missing config means the defaults.
func (h Home) Open(create bool, now time.Time) (*identity.Identity, *Config, error) {
	id, err := identity.LoadKey(h.KeyPath())
	if errors.Is(err, identity.ErrNoKey) && create {
		id, err = h.Init(now)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := h.CheckPermissions(); err != nil {
		return nil, nil, err
	}
	cfg, err := LoadConfig(h.ConfigPath())
	if errors.Is(err, ErrNoConfig) {
		err = nil
	}
	if err != nil {
		return nil, nil, err
	}
	return id, cfg, nil
}

// CheckPermissions refuses a data directory, or a config.toml in it,
// that group or others may write, with the chmod that fixes it. A missing
// config is fine (it means the defaults). Modes mean nothing on Windows,
// where it checks nothing.
func (h Home) CheckPermissions() error {
	if runtime.GOOS == "windows" {
		return nil
	}
	for _, path := range []string{h.Dir, h.ConfigPath()} {
		st, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) && path != h.Dir {
			continue
		}
		if err != nil {
			return fmt.Errorf("checking the permissions of %s: %w", path, err)
		}
		if perm := st.Mode().Perm(); perm&0o022 != 0 {
			return fmt.Errorf("%w: %s is writable by group or others (mode %#o), so another user could replace the daemon's key, config or control socket; run `chmod go-w %s`",
				ErrBadPermissions, path, perm, shellQuote(path))
		}
	}
	return nil
}

// shellQuote quotes a path for a shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// configHeader opens the config.toml that Init writes; the rest is
// config.example.toml, every key at its default with its comment.
const configHeader = "# Written by `ifaced init`: every key at its default, each with what it means.\n" +
	"# Change what you need; `ifaced run` reads it at start.\n#\n"

// defaultConfigFile is the config.toml Init writes: config.example.toml
// (embedded in the binary, package ifaced) under a line saying where it
// came from. It holds exactly the defaults (a test holds the example to
// DefaultConfig), with the example's comments.
func defaultConfigFile() []byte { return []byte(configHeader + ifaced.ExampleConfig) }

func (h Home) writeDefaultConfig() error {
	body := defaultConfigFile()
	f, err := os.OpenFile(h.ConfigPath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing default config: %w", err)
	}
	_, werr := f.Write(body)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing default config: %w", werr)
	}
	// The file we wrote must load: a daemon that cannot read its own
	// default config would fail on its next start instead of now.
	if _, err := ParseConfig(body); err != nil {
		return fmt.Errorf("default config does not load back: %w", err)
	}
	return nil
}

// RetiredKeyPath is where `ifaced key rotate` keeps the key it retired:
// the owner may still prepare a revocation statement with it (`ifaced key
// revocation-statement --key`), and it is nothing else's.
func (h Home) RetiredKeyPath(pid peer.ID) string {
	return filepath.Join(h.Dir, "retired", pid.String()+".pem")
}

// RetiredDIDs are the did:keys of the keys this home's key retired
// (named by their files under RetiredKeyPath's directory): the audit
// log's checkpoints signed before a rotation are theirs.
func (h Home) RetiredDIDs() []string {
	des, _ := os.ReadDir(filepath.Join(h.Dir, "retired"))
	var out []string
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".pem")
		pid, err := peer.Decode(name)
		if !ok || err != nil {
			continue
		}
		if pub, err := identity.PublicKeyFromPeerID(pid); err == nil {
			out = append(out, identity.DIDKey(pub))
		}
	}
	return out
}
