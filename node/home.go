package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/pelletier/go-toml/v2"
)

// EnvHome names the environment variable that sets the data directory.
const EnvHome = "IFACED_HOME"

// Home is a daemon's data directory: key, config, API token, store and
// audit log.
type Home struct{ Dir string }

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
// file holding the defaults. It refuses to replace an existing key
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
	cfg, err := LoadConfig(h.ConfigPath())
	if errors.Is(err, ErrNoConfig) {
		err = nil
	}
	if err != nil {
		return nil, nil, err
	}
	return id, cfg, nil
}

const configHeader = `# ifaced configuration, written by ifaced init with every default.
# config.example.toml in the ifaced sources documents each key.
`

func (h Home) writeDefaultConfig() error {
	body, err := toml.Marshal(DefaultConfig())
	if err != nil {
		return fmt.Errorf("writing default config: %w", err)
	}
	f, err := os.OpenFile(h.ConfigPath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing default config: %w", err)
	}
	_, werr := f.Write(append([]byte(configHeader), body...))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing default config: %w", werr)
	}
	// The file we wrote must load: a daemon that cannot read its own
	// default config would fail on its next start instead of now.
	if _, err := ParseConfig(append([]byte(configHeader), body...)); err != nil {
		return fmt.Errorf("default config does not load back: %w", err)
	}
	return nil
}
