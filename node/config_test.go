package node

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
)

func TestExampleConfigIsTheDefaults(t *testing.T) {
	src, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseConfig(src)
	if err != nil {
		t.Fatalf("config.example.toml does not load: %v", err)
	}
	if want := DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("config.example.toml differs from DefaultConfig():\n got %+v\nwant %+v", got, want)
	}
}

func TestDefaultsSpelledOut(t *testing.T) {
	c := DefaultConfig()
	checks := map[string][2]any{
		"version":                 {c.Version, 1},
		"listen.addresses[0]":     {c.Listen.Addresses[0], "/ip4/0.0.0.0/tcp/4817"},
		"listen.addresses[1]":     {c.Listen.Addresses[1], "/ip4/0.0.0.0/udp/4817/quic-v1"},
		"api.listen":              {c.API.Listen, "127.0.0.1:4818"},
		"http.listen":             {c.HTTP.Listen, ""},
		"http.cors_origins":       {c.HTTP.CORSOrigins, []string{"*"}},
		"limits.connections_low":  {c.Limits.ConnectionsLow, 400},
		"limits.connections_high": {c.Limits.ConnectionsHigh, 600},
		"limits.stream_timeout":   {c.Limits.StreamTimeout.Duration, 30 * time.Second},
		"replay.window":           {c.Replay.Window.Duration, 24 * time.Hour},
		"replay.clock_skew":       {c.Replay.ClockSkew.Duration, 5 * time.Minute},
		"trust.key_transition":    {c.Trust.KeyTransition.Duration, 7 * 24 * time.Hour},
		"disclosure.default":      {c.Disclosure.Default, "public"},
		"temperature.default_max": {c.Temperature.DefaultMax, "cool"},
		"log.level":               {c.Log.Level, "info"},
		"durability.sync":         {c.Durability.Sync, "interval"},
		"durability.interval":     {c.Durability.Interval.Duration, time.Second},
		"audit.max_mb":            {c.Audit.MaxMB, 1024},
		"audit.retention_days":    {c.Audit.RetentionDays, 90},
		"audit.min_free_mb":       {c.Audit.MinFreeMB, 256},
		"capabilities":            {len(c.Capabilities), 6},
	}
	for key, v := range checks {
		if !reflect.DeepEqual(v[0], v[1]) {
			t.Errorf("default %s = %v, want %v", key, v[0], v[1])
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestConfigErrorsNameKeyAndLine(t *testing.T) {
	base := "version = 1\n\n[api]\nlisten = \"127.0.0.1:4818\"\n"
	cases := []struct {
		name, src, field string
		line             int
		says             string
	}{
		{"missing version", "[api]\nlisten = \"127.0.0.1:1\"\n", "version", 0, "version = 1"},
		{"future version", "version = 2\n", "version", 1, "reads version 1"},
		{"unknown key", base + "[limits]\nmax_conns = 3\n", "limits.max_conns", 6, "not a known key"},
		{"wrong type", base + "[limits]\nmax_streams = \"many\"\n", "limits.max_streams", 6, "string"},
		{"bad duration", base + "[replay]\nwindow = \"1 day\"\n", "replay.window", 6, "not a duration"},
		{"syntax", base + "[limits\n", "", 5, ""},
		{"public api", "version = 1\n[api]\nlisten = \"0.0.0.0:4818\"\n", "api.listen", 3, "loopback"},
		{"bad allowed host", "version = 1\n[http]\nallowed_hosts = [\"localhost\", \"http://agent.example:80\"]\n", "http.allowed_hosts[1]", 3, "not a host name"},
		{"cors origin with a path", "version = 1\n[http]\ncors_origins = [\"https://app.example\", \"https://app.example/ui\"]\n", "http.cors_origins[1]", 3, "not an origin"},
		{"bad multiaddr", "version = 1\n[listen]\naddresses = [\"tcp/4817\"]\n", "listen.addresses[0]", 3, "multiaddr"},
		{"unknown tier", "version = 1\n[disclosure]\ndefault = \"friends\"\n", "disclosure.default", 3, "friends"},
		{"bad custom tier", "version = 1\n[tiers]\ncustom = [{ name = \"lab\", after = \"profesional\" }]\n", "tiers.custom[0].after", 3, "profesional"},
		{"map names unknown tier", "version = 1\n[disclosure.personas.researcher]\n\"peerA\" = \"closest\"\n", "disclosure.personas.researcher.peerA", 3, "closest"},
		{"bad temperature", "version = 1\n[temperature.peers]\n\"peerA\" = \"boiling\"\n", "temperature.peers.peerA", 3, "boiling"},
		{"bad capability", "version = 1\n\n[[capabilities]]\nname = \"ok.one\"\ndescription = \"x\"\n\n[[capabilities]]\nname = \"two\"\n", "capabilities[1].description", 7, "required"},
		{"capability condition typo", "version = 1\n[[capabilities]]\nname = \"a.b\"\ndescription = \"x\"\n[capabilities.conditions]\nmin_auth = 1\n", "capabilities[0].conditions.min_auth", 6, "not a known condition"},
		{"connections inverted", "version = 1\n[limits]\nconnections_low = 700\n", "limits.connections_low", 3, "above"},
		{"unknown sync policy", "version = 1\n[durability]\nsync = \"never\"\n", "durability.sync", 3, "\"always\""},
		{"sync interval too long", "version = 1\n[durability]\ninterval = \"1h\"\n", "durability.interval", 3, "at most 1m"},
		{"audit quota too small", "version = 1\n[audit]\nmax_mb = 0\n", "audit.max_mb", 3, "at least 16"},
		{"negative retention", "version = 1\n[audit]\nretention_days = -1\n", "audit.retention_days", 3, "0 to keep days"},
		{"negative watermark", "version = 1\n[audit]\nmin_free_mb = -5\n", "audit.min_free_mb", 3, "0 (no watermark)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.src))
			if err == nil {
				t.Fatal("accepted")
			}
			var fe *negotiate.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%v: not a FieldError", err)
			}
			if tc.field != "" && fe.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", fe.Field, tc.field, err)
			}
			if tc.line != 0 && fe.Line != tc.line {
				t.Errorf("line %d, want %d (%v)", fe.Line, tc.line, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%q does not say %q", err, tc.says)
			}
		})
	}
}

func TestLoadConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	c, err := LoadConfig(path)
	if !errors.Is(err, ErrNoConfig) || c == nil {
		t.Fatalf("missing file: %v, want ErrNoConfig with defaults", err)
	}
	os.WriteFile(path, []byte("version = 1\n[log]\nlevel = \"loud\"\n"), 0o600)
	_, err = LoadConfig(path)
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), path+": line 3: log.level") {
		t.Fatalf("bad file: %v", err)
	}
	if errors.Is(err, ErrNoConfig) {
		t.Fatal("a bad config reads as a missing one")
	}
}

func TestConfigDocument(t *testing.T) {
	c, err := ParseConfig([]byte("version = 1\n[identity]\nagent_id = \"https://pete.example/.well-known/iface\"\n[[capabilities]]\nname = \"a.b\"\ndescription = \"x\"\n[capabilities.conditions]\nmin_disclosure = \"lab\"\n[tiers]\ncustom = [{ name = \"lab\", after = \"professional\" }]\n"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Document("did:key:z6Mk")
	if err != nil {
		t.Fatal(err)
	}
	if d.AgentID != "https://pete.example/.well-known/iface" || len(d.Capabilities) != 1 || d.Capabilities[0].Conds().MinDisclosure != "lab" {
		t.Fatalf("document %+v", d)
	}
}

func TestHomeInitAndOpen(t *testing.T) {
	h := Home{Dir: filepath.Join(t.TempDir(), "home")}
	now := time.Now()
	id, err := h.Init(now)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(h.Dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("home mode %v (%v), want 0700", st.Mode().Perm(), err)
	}
	if st, _ := os.Stat(h.KeyPath()); st.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := h.Init(now); !errors.Is(err, identity.ErrKeyExists) {
		t.Fatalf("second init: %v, want ErrKeyExists", err)
	}
	back, cfg, err := h.Open(false, now)
	if err != nil {
		t.Fatal(err)
	}
	if back.PeerID() != id.PeerID() || !reflect.DeepEqual(cfg, DefaultConfig()) {
		t.Fatal("Open did not give back the key and default config Init wrote")
	}
	// Open with create on an empty home does the first run's setup.
	h2 := Home{Dir: filepath.Join(t.TempDir(), "fresh")}
	if _, _, err := h2.Open(false, now); !errors.Is(err, identity.ErrNoKey) {
		t.Fatalf("open without create: %v, want ErrNoKey", err)
	}
	if _, _, err := h2.Open(true, now); err != nil {
		t.Fatalf("open with create: %v", err)
	}
}

func TestResolveHome(t *testing.T) {
	t.Setenv(EnvHome, "/tmp/from-env")
	if h, _ := ResolveHome("/tmp/from-flag"); h.Dir != "/tmp/from-flag" {
		t.Errorf("flag ignored: %s", h.Dir)
	}
	if h, _ := ResolveHome(""); h.Dir != "/tmp/from-env" {
		t.Errorf("env ignored: %s", h.Dir)
	}
	t.Setenv(EnvHome, "")
	t.Setenv("HOME", "/tmp/userhome")
	if h, _ := ResolveHome(""); h.Dir != "/tmp/userhome/.ifaced" {
		t.Errorf("default: %s", h.Dir)
	}
}

func FuzzParseConfig(f *testing.F) {
	if src, err := os.ReadFile("../config.example.toml"); err == nil {
		f.Add(src)
	}
	f.Add([]byte("version = 1\n[[capabilities]]\nname = \"a\"\n"))
	f.Add([]byte("version = 1\n[tiers]\ncustom = [{name=\"x\",after=\"x\"}]\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := ParseConfig(src)
		if err != nil {
			var fe *negotiate.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a FieldError: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
	})
}
