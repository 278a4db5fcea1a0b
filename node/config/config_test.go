package config

import (
	"errors"
	"fmt"
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
	src, err := os.ReadFile("../../config.example.toml")
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
		"metrics.listen":          {c.Metrics.Listen, ""},
		"metrics.allow_remote":    {c.Metrics.AllowRemote, false},
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
		{"bad trusted proxy", "version = 1\n[http]\ntrusted_proxies = [\"127.0.0.1/32\", \"proxy.example\"]\n", "http.trusted_proxies[1]", 3, "not an IP address or CIDR prefix"},
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
		{"metrics beyond loopback", "version = 1\n[metrics]\nlisten = \"0.0.0.0:9464\"\n", "metrics.listen", 3, "set metrics.allow_remote = true"},
		{"metrics not host:port", "version = 1\n[metrics]\nlisten = \"9464\"\n", "metrics.listen", 3, "not host:port"},
		{"metrics opt-in misspelt", "version = 1\n[metrics]\nallow_remotely = true\n", "metrics.allow_remotely", 3, "allow_remote"},
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

// TestMetricsListenOptIn: a metrics listener beyond loopback is taken
// only with metrics.allow_remote; on loopback, without it.
func TestMetricsListenOptIn(t *testing.T) {
	for _, src := range []string{
		"version = 1\n[metrics]\nlisten = \"0.0.0.0:9464\"\nallow_remote = true\n",
		"version = 1\n[metrics]\nlisten = \"127.0.0.1:9464\"\n",
		"version = 1\n[metrics]\nlisten = \"[::1]:0\"\n",
		"version = 1\n[metrics]\nlisten = \"localhost:9464\"\n",
	} {
		c, err := ParseConfig([]byte(src))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if c.Metrics.Listen == "" {
			t.Errorf("%s: listen not read", src)
		}
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

// The config.toml that init writes explains itself: the example's
// comments for every key, not a pointer to a file a binary user lacks.
func TestInitWritesTheExamplesComments(t *testing.T) {
	h := Home{Dir: filepath.Join(t.TempDir(), "home")}
	if _, err := h.Init(time.Now()); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(h.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(written), string(example)) {
		t.Fatalf("config.toml written by init does not hold config.example.toml:\n%s", written)
	}
	for _, comment := range []string{"# Read and write deadline for every stream.", "# The config format version. Required."} {
		if !strings.Contains(string(written), comment) {
			t.Errorf("config.toml lacks the comment %q", comment)
		}
	}
	if strings.Contains(string(written), "in the ifaced sources") {
		t.Error("config.toml still sends the reader to the sources")
	}
	c, err := ParseConfig(written)
	if err != nil || !reflect.DeepEqual(c, DefaultConfig()) {
		t.Fatalf("the written config does not load as the defaults: %v", err)
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
	if src, err := os.ReadFile("../../config.example.toml"); err == nil {
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

// A newcomer's config with several mistakes hears of all of them in one
// go, each with its line, and a typo with the key it was meant to be.
func TestConfigReportsEveryProblemAtOnce(t *testing.T) {
	src := "version = 1\n" + // 1
		"[limits]\n" + // 2
		"max_stream = 4\n" + // 3: typo
		"max_conns = 3\n" + // 4: nothing like it
		"[rates]\n" + // 5
		"cool = \"10\"\n" + // 6: wrong type
		"coool = 1\n" + // 7: typo
		"[replay]\n" + // 8
		"window = 5\n" + // 9: a duration without a unit, and no quotes
		"clock_skew = \"1 day\"\n" // 10: not a duration
	_, err := ParseConfig([]byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	got := negotiate.Errors(err)
	want := []struct {
		field string
		line  int
		says  []string
	}{
		{"limits.max_stream", 3, []string{"not a known key", `did you mean "max_streams"?`}},
		{"limits.max_conns", 4, []string{"not a known key of [limits]", "max_streams", "connections_high"}},
		{"rates.cool", 6, []string{`is a string ("10")`, "want an integer", "e.g. cool = 10"}},
		{"rates.coool", 7, []string{`did you mean "cool"?`}},
		{"replay.window", 9, []string{"is an integer (5)", "want a duration string", `e.g. window = "24h"`}},
		{"replay.clock_skew", 10, []string{`"1 day" is not a duration`, `"7d"`}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(got), len(want), err)
	}
	for i, w := range want {
		var fe *negotiate.FieldError
		if !errors.As(got[i], &fe) {
			t.Fatalf("problem %d is not a FieldError: %v", i, got[i])
		}
		if fe.Field != w.field || fe.Line != w.line {
			t.Errorf("problem %d is %s at line %d, want %s at line %d", i, fe.Field, fe.Line, w.field, w.line)
		}
		for _, s := range w.says {
			if !strings.Contains(fe.Problem, s) {
				t.Errorf("%s: %q does not say %q", fe.Field, fe.Problem, s)
			}
		}
		if strings.Contains(fe.Problem, "node.") || strings.Contains(fe.Problem, "struct field") {
			t.Errorf("%s: %q names Go types", fe.Field, fe.Problem)
		}
	}
}

// Every misspelt member of every inline capability is reported at once,
// with the one meant; package negotiate alone would stop at the first.
func TestConfigReportsEveryCapabilityTypo(t *testing.T) {
	src := "version = 1\n[[capabilities]]\nname = \"a.b\"\ndescrption = \"x\"\nfoo = 1\n" +
		"[[capabilities]]\nname = \"a.c\"\ndescription = \"y\"\nadvertize = \"always\"\n"
	_, err := ParseConfig([]byte(src))
	got := negotiate.Errors(err)
	want := []struct {
		field string
		line  int
		says  string
	}{
		{"capabilities[0].descrption", 4, `did you mean "description"?`},
		{"capabilities[0].foo", 5, "not a known member of a capability (its members: name, version, description"},
		{"capabilities[1].advertize", 9, `did you mean "advertise"?`},
	}
	if len(got) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(got), len(want), err)
	}
	for i, w := range want {
		var fe *negotiate.FieldError
		if !errors.As(got[i], &fe) || fe.Field != w.field || fe.Line != w.line || !strings.Contains(fe.Problem, w.says) {
			t.Errorf("problem %d: %v, want %s at line %d saying %q", i, got[i], w.field, w.line, w.says)
		}
	}
}

// Wrong types anywhere in the tree name the key, the type wanted and an
// example, never the Go type.
func TestConfigTypeErrorsAreFriendly(t *testing.T) {
	cases := []struct{ name, src, field, says string }{
		{"int as string", "version = 1\n[rates]\ncool = \"x\"\n", "rates.cool", `want an integer (no quotes), e.g. cool = 10`},
		{"int as float", "version = 1\n[limits]\nmax_streams = 1.5\n", "limits.max_streams", `is a float (1.5); want an integer`},
		{"bool as string", "version = 1\n[discovery]\nmdns = \"yes\"\n", "discovery.mdns", `want true or false, e.g. mdns = true`},
		{"list as string", "version = 1\n[listen]\naddresses = \"/ip4/0.0.0.0/tcp/1\"\n", "listen.addresses", `want an array of strings, e.g. addresses = ["/ip4/0.0.0.0/tcp/4817"]`},
		{"list element", "version = 1\n[relay]\nuse = [3]\n", "relay.use[0]", `is an integer (3); want a string`},
		{"table as value", "version = 1\nlimits = 3\n", "limits", `want a table, e.g. [limits]`},
		{"map value", "version = 1\n[temperature.peers]\npeerA = 2\n", "temperature.peers.peerA", `want a string`},
		{"custom tier", "version = 1\n[tiers]\ncustom = [{ name = \"lab\", aftr = \"public\" }]\n", "tiers.custom[0].aftr", `did you mean "after"?`},
		{"mcp table", "version = 1\n[agent.mcp]\ncomand = \"x\"\n", "agent.mcp.comand", `did you mean "command"?`},
		{"top level", "version = 1\n[limit]\nmax_streams = 3\n", "limit", `not a known key at the top level; did you mean "limits"?`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.src))
			var fe *negotiate.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("%v: not a FieldError", err)
			}
			if fe.Field != tc.field || fe.Line == 0 {
				t.Errorf("field %q line %d, want %q with a line (%v)", fe.Field, fe.Line, tc.field, err)
			}
			if !strings.Contains(fe.Problem, tc.says) {
				t.Errorf("%q does not say %q", fe.Problem, tc.says)
			}
		})
	}
}

// "7d" works in config as it does for `ifaced introduce --expires 7d`.
func TestConfigDurationsTakeDaysAndWeeks(t *testing.T) {
	c, err := ParseConfig([]byte("version = 1\n[trust]\nintro_expiry = \"7d\"\nkey_transition = \"2w\"\n[mailbox]\nretention = \"1d12h\"\n[discovery]\nreprovide = \"12h\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	for key, v := range map[string][2]time.Duration{
		"trust.intro_expiry":   {c.Trust.IntroExpiry.Duration, 7 * day},
		"trust.key_transition": {c.Trust.KeyTransition.Duration, 14 * day},
		"mailbox.retention":    {c.Mailbox.Retention.Duration, 36 * time.Hour},
		"discovery.reprovide":  {c.Discovery.Reprovide.Duration, 12 * time.Hour},
	} {
		if v[0] != v[1] {
			t.Errorf("%s = %s, want %s", key, v[0], v[1])
		}
	}
}

func TestParseDuration(t *testing.T) {
	day := 24 * time.Hour
	good := map[string]time.Duration{
		"30s": 30 * time.Second, "1.5s": 1500 * time.Millisecond, "90m": 90 * time.Minute, "1h30m": 90 * time.Minute,
		"7d": 7 * day, "1.5d": 36 * time.Hour, "2w": 14 * day, "1d12h": 36 * time.Hour, "1w1d": 8 * day,
		"0": 0, "-1d": -day, "-1d12h": -36 * time.Hour, "250ms": 250 * time.Millisecond,
	}
	for s, want := range good {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"", "5", "1 day", "d", "7dd", "1.2.3d", "7x", "1d5", "-", "7days", "99999999999d"} {
		if d, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) = %s, want an error", s, d)
		} else if !strings.Contains(err.Error(), strconvQuote(s)) {
			t.Errorf("ParseDuration(%q): %v does not quote the input", s, err)
		}
	}
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// TestParseProxy: an http.trusted_proxies entry is an address (one proxy)
// or a prefix; mapped IPv4 counts as IPv4; anything else is refused.
func TestParseProxy(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1": "127.0.0.1/32", "::1": "::1/128", "10.1.2.3/8": "10.0.0.0/8",
		"::ffff:192.0.2.1": "192.0.2.1/32", "::ffff:192.0.2.0/120": "192.0.2.0/24", "2001:db8::/32": "2001:db8::/32",
	} {
		if p, err := ParseProxy(in); err != nil || p.String() != want {
			t.Errorf("ParseProxy(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "proxy.example", "10.0.0.0/33", "fe80::1%eth0", "::ffff:0:0/64"} {
		if p, err := ParseProxy(in); err == nil {
			t.Errorf("ParseProxy(%q) = %v, want an error", in, p)
		}
	}
}
