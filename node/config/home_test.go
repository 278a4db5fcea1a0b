package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHomePermissions: a data directory or config.toml that group or
// others may write is refused, with the chmod that fixes it; modes that
// only let others read are fine.
func TestHomePermissions(t *testing.T) {
	for _, c := range []struct {
		dir, config os.FileMode
		bad         string // "dir", "config" or ""
	}{
		{0o700, 0o600, ""},
		{0o755, 0o644, ""},
		{0o775, 0o600, "dir"},
		{0o757, 0o600, "dir"},
		{0o700, 0o664, "config"},
		{0o700, 0o646, "config"},
	} {
		h := Home{Dir: filepath.Join(t.TempDir(), "my home")}
		if _, err := h.Init(time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(h.ConfigPath(), c.config); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(h.Dir, c.dir); err != nil {
			t.Fatal(err)
		}
		_, _, err := h.Open(false, time.Now())
		switch c.bad {
		case "":
			if err != nil {
				t.Errorf("dir %#o, config %#o: %v", c.dir, c.config, err)
			}
			continue
		case "dir":
			want := "run `chmod go-w '" + h.Dir + "'`"
			if !errors.Is(err, ErrBadPermissions) || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("dir %#o: %v, want ErrBadPermissions ending %q", c.dir, err, want)
			}
		case "config":
			want := "run `chmod go-w '" + h.ConfigPath() + "'`"
			if !errors.Is(err, ErrBadPermissions) || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("config %#o: %v, want ErrBadPermissions ending %q", c.config, err, want)
			}
		}
		// The command it gives fixes it.
		path := h.Dir
		if c.bad == "config" {
			path = h.ConfigPath()
		}
		st, _ := os.Stat(path)
		os.Chmod(path, st.Mode().Perm()&^0o022)
		if _, _, err := h.Open(false, time.Now()); err != nil {
			t.Errorf("after chmod go-w %s: %v", path, err)
		}
	}
	if got := shellQuote("/home/a/.ifaced"); got != "/home/a/.ifaced" {
		t.Errorf("shellQuote of a plain path: %s", got)
	}
	if got := shellQuote("/tmp/it's"); got != `'/tmp/it'\''s'` {
		t.Errorf("shellQuote with a quote: %s", got)
	}
}
