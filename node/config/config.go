package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ifaced/ifaced/conditions"
	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/mcpagent"
	"github.com/ifaced/ifaced/node/trust"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multiaddr"
)

// ConfigVersion is the config format this daemon reads. A file without a
// version, or with another one, is refused rather than half understood.
const ConfigVersion = 1

// DefaultPort is the TCP and UDP port ifaced listens on unless configured:
// unassigned, above 1024, and not on any browser's list of refused ports.
const DefaultPort = 4817

// ErrNoConfig means there is no config file: the daemon runs on defaults.
// It is kept apart from a bad config, which is always an error.
var ErrNoConfig = errors.New("no config file")

// Config is the daemon's configuration (config.toml). Every key, with its
// default, is documented in config.example.toml; DefaultConfig returns the
// same values, and a test holds the two together.
type Config struct {
	Version     int               `toml:"version"`
	Identity    IdentityConfig    `toml:"identity"`
	Listen      ListenConfig      `toml:"listen"`
	API         APIConfig         `toml:"api"`
	HTTP        HTTPConfig        `toml:"http"`
	Limits      LimitsConfig      `toml:"limits"`
	Replay      ReplayConfig      `toml:"replay"`
	Trust       TrustConfig       `toml:"trust"`
	Tiers       TiersConfig       `toml:"tiers"`
	Disclosure  DisclosureConfig  `toml:"disclosure"`
	Temperature TemperatureConfig `toml:"temperature"`
	Agent       AgentConfig       `toml:"agent"`
	Rates       RatesConfig       `toml:"rates"`
	Relay       RelayConfig       `toml:"relay"`
	Mailbox     MailboxConfig     `toml:"mailbox"`
	Discovery   DiscoveryConfig   `toml:"discovery"`
	Durability  DurabilityConfig  `toml:"durability"`
	Audit       AuditConfig       `toml:"audit"`
	Metrics     MetricsConfig     `toml:"metrics"`
	Log         LogConfig         `toml:"log"`
	// Capabilities and AGUI are the owner's IFP-7 document, inline. They
	// are decoded by package negotiate's strict rules.
	Capabilities []map[string]any `toml:"capabilities"`
	AGUI         map[string]any   `toml:"agui"`
}

// IdentityConfig names the agent.
type IdentityConfig struct {
	AgentID string `toml:"agent_id"` // "" means the did:key of the daemon's key
	Display string `toml:"display"`
	Name    string `toml:"name"` // IFP-10 name, display only
}

// ListenConfig holds the libp2p listen addresses.
type ListenConfig struct {
	Addresses []string `toml:"addresses"`
}

// APIConfig is the local control API.
type APIConfig struct {
	Listen string `toml:"listen"` // must be a loopback address
}

// HTTPConfig is the public HTTP binding.
type HTTPConfig struct {
	Listen   string `toml:"listen"`    // "" is off
	CertFile string `toml:"cert_file"` // TLS certificate (PEM); required unless listen is loopback
	KeyFile  string `toml:"key_file"`  // its private key (PEM)
	URL      string `toml:"url"`       // how others reach it (for the agent card); "" derives it from listen
	// AllowedHosts are host names a loopback binding answers to besides
	// localhost, 127.0.0.1, [::1], the listen host and url's host: any
	// other Host (a DNS-rebinding page's) gets 421.
	AllowedHosts []string `toml:"allowed_hosts"`
	// CORSOrigins are the web origins (scheme://host[:port]) whose pages
	// may read the read-only views (the /.well-known/iface GETs, GET
	// /capabilities, the agent card); "*" is any origin, empty is none.
	// Nothing that acts (POST /invoke, /a2a, the inbox) is ever opened
	// to other origins.
	CORSOrigins []string `toml:"cors_origins"`
	// TrustedProxies are the addresses (IP or CIDR) of reverse proxies in
	// front of the binding: only a request whose direct peer is one of
	// them has its X-Forwarded-For read, to find the client it is limited
	// and audited as (node/httpapi). Empty trusts no proxy.
	TrustedProxies []string `toml:"trusted_proxies"`
}

// LimitsConfig bounds what peers can make the daemon hold.
type LimitsConfig struct {
	ConnectionsLow  int      `toml:"connections_low"`
	ConnectionsHigh int      `toml:"connections_high"`
	GracePeriod     Duration `toml:"grace_period"`
	StreamTimeout   Duration `toml:"stream_timeout"`
	MaxStreams      int      `toml:"max_streams"`
	MaxMemoryMB     int      `toml:"max_memory_mb"`
}

// ReplayConfig is the replay window of IFP-5 §4.2.
type ReplayConfig struct {
	Window    Duration `toml:"window"`
	ClockSkew Duration `toml:"clock_skew"`
}

// TrustConfig holds trust defaults.
type TrustConfig struct {
	KeyTransition Duration `toml:"key_transition"` // how long a retired key still verifies
	IntroExpiry   Duration `toml:"intro_expiry"`   // default lifetime of minted introduction tokens
	CAFile        string   `toml:"ca_file"`        // extra PEM roots for identity document fetches; "" is the system roots only
	FetchPrivate  bool     `toml:"fetch_private"`  // allow identity document fetches to addresses that are not globally routable
}

// TiersConfig places custom disclosure tiers in the standard order.
type TiersConfig struct {
	Custom []conditions.CustomTier `toml:"custom"`
}

// DisclosureConfig is the IFP-12 disclosure map.
type DisclosureConfig struct {
	Default string `toml:"default"` // tier for peers the map does not name
	// Personas maps persona -> peer -> tier. The persona "default" is the
	// owner's undifferentiated context (no persona header).
	Personas map[string]map[string]string `toml:"personas"`
	// OpenPersonas are the personas any peer may take by proposing them.
	// Any other persona is granted only to the peers the map names under
	// it or an introduction token names it for: a peer's proposal alone
	// establishes nothing.
	OpenPersonas []string `toml:"open_personas"`
}

// TemperatureConfig caps the temperature each peer may reach.
type TemperatureConfig struct {
	DefaultMax string            `toml:"default_max"`
	Peers      map[string]string `toml:"peers"`
}

// AgentConfig says how invocations reach the local agent.
type AgentConfig struct {
	Webhook string   `toml:"webhook"` // http(s) URL; "" means the control API's event stream
	Timeout Duration `toml:"timeout"` // how long an invocation may take
	// MCP makes an MCP server the local agent for its tools (node/mcpagent);
	// nil without an [agent.mcp] table. Capabilities that are not its tools
	// still reach the webhook or the event stream.
	MCP *mcpagent.Config `toml:"mcp"`
}

// RatesConfig is how many messages per minute a peer may send, by the
// conversation's temperature (IFP-6 §6).
type RatesConfig struct {
	Cool int `toml:"cool"`
	Warm int `toml:"warm"`
	Hot  int `toml:"hot"`
}

// RelayConfig is circuit relay v2: serving it, and using others.
type RelayConfig struct {
	Service bool     `toml:"service"` // serve circuit relay v2 (and, with mailbox, IFP-8 mailboxes)
	Use     []string `toml:"use"`     // relays to reserve slots on: multiaddrs ending in /p2p/<relay peer ID>
	Mailbox bool     `toml:"mailbox"` // with service: hold messages for peers that are away
	// Resources of the relay service.
	MaxReservations int      `toml:"max_reservations"` // peers holding a slot at once
	MaxCircuits     int      `toml:"max_circuits"`     // relayed connections per peer
	CircuitDuration Duration `toml:"circuit_duration"` // how long one relayed connection may last
	CircuitDataKB   int      `toml:"circuit_data_kb"`  // bytes one relayed connection may carry, each way
}

// MailboxConfig sizes the IFP-8 mailboxes a relay holds, and how a daemon
// uses the mailboxes of others.
type MailboxConfig struct {
	Retention    Duration `toml:"retention"`      // how long an unacknowledged message is kept (IFP-8 §6: at least 7 days)
	MaxMessages  int      `toml:"max_messages"`   // per recipient
	MaxKB        int      `toml:"max_kb"`         // per recipient, message bytes
	MaxPerSender int      `toml:"max_per_sender"` // held at once from one sender, across recipients
	MaxTotalMB   int      `toml:"max_total_mb"`   // held for everyone together
	Poll         Duration `toml:"poll"`           // how often a daemon with relay.use fetches its mail
	GiveUp       Duration `toml:"give_up"`        // a queued outgoing message is dropped (and the owner told) after this
	// Held at once from one sender address (an IPv4 address, an IPv6 /64),
	// across its keys and recipients: fresh keys cost nothing, addresses do.
	MaxPerAddress int `toml:"max_per_address"`
	// A registration (made by a peer holding a reservation, when it
	// fetches) that holds no mail lapses this long after the last fetch.
	Idle Duration `toml:"idle"`
}

// DiscoveryConfig is how daemons find each other.
type DiscoveryConfig struct {
	MDNS        bool     `toml:"mdns"`         // find and greet daemons on the LAN
	MDNSService string   `toml:"mdns_service"` // the DNS-SD service name
	DHT         string   `toml:"dht"`          // auto, server, client or off
	Bootstrap   []string `toml:"bootstrap"`    // DHT and gossip bootstrap peers: multiaddrs ending in /p2p/<peer ID>
	Reprovide   Duration `toml:"reprovide"`    // how often provider records are renewed
	Gossip      bool     `toml:"gossip"`       // announce and follow capabilities.update on GossipSub
	// GossipStrangers is how many announcements by authors this daemon
	// does not know it verifies (and so forwards) a minute, all together;
	// past it they are ignored unverified. 0 forwards none.
	GossipStrangers int `toml:"gossip_strangers"`
	// ImportRefresh is how often imported outside agents are fetched again.
	ImportRefresh Duration `toml:"import_refresh"`
	// Other peers' provider records a DHT server keeps, in all and for one
	// capability name; past either, the record that would expire first goes.
	MaxProviderRecords int `toml:"max_provider_records"`
	MaxProvidersPerKey int `toml:"max_providers_per_key"`
}

// DHT modes.
const (
	DHTAuto   = "auto"
	DHTServer = "server"
	DHTClient = "client"
	DHTOff    = "off"
)

// MetricsConfig is the scraper's listener: the Prometheus exposition
// (GET /metrics) on an address of its own, without the control API's
// token (node/metrics). The control API serves it behind the token
// whatever this says.
type MetricsConfig struct {
	Listen      string `toml:"listen"`       // host:port; "" is off
	AllowRemote bool   `toml:"allow_remote"` // listen may be other than loopback
}

// CheckListen accepts a listen address on loopback (or localhost), and
// any host:port with AllowRemote; "" is off.
func (m MetricsConfig) CheckListen() error {
	if m.Listen == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(m.Listen)
	if err != nil || port == "" {
		return fmt.Errorf("%q is not host:port (e.g. \"127.0.0.1:9464\")", m.Listen)
	}
	if m.AllowRemote || host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address, and this listener serves the figures without the token to anyone who reaches it: "+
		"listen on 127.0.0.1 or [::1], or set metrics.allow_remote = true to serve them beyond this machine", m.Listen)
}

// LogConfig sets up log/slog.
type LogConfig struct {
	Level  string `toml:"level"`  // debug, info, warn, error
	Format string `toml:"format"` // text or json
}

// The bounds of audit.max_mb.
const (
	MinAuditMB = 16 // the least audit.max_mb: room for a day of conversations
	maxAuditMB = 16 << 20
)

// The values of durability.sync.
const (
	SyncInterval = "interval" // write before acting, fsync every durability.interval
	SyncAlways   = "always"   // fsync before acting on each message
)

// DurabilityConfig says when what the daemon records of each message (its
// audit entry, its ID in the replay seen-set) reaches the disk. Either way
// a crash or a kill -9 of the daemon loses none of it (the audit entry is
// written before acting, and the seen IDs are rebuilt from it); the choice
// is about power loss.
type DurabilityConfig struct {
	Sync     string   `toml:"sync"`     // SyncInterval or SyncAlways
	Interval Duration `toml:"interval"` // with SyncInterval: the most a power loss can take
}

// AuditConfig bounds the audit log on disk (gossip/audit_quota.go says
// how each limit is enforced). The quota counts the day directories;
// when they pass it, whole days are deleted, oldest first, never the
// current one. When the current day alone passes it, refusal summaries
// are counted instead of written; entries of admitted conversations are
// still written, and past the quota plus a quarter the daemon refuses new
// conversations (wire code unavailable) until days age out. Below
// min_free_mb free on the disk, the daemon likewise refuses new
// conversations and counts refusals instead of writing them, while
// admitted conversations go on as long as the disk takes their entries.
type AuditConfig struct {
	MaxMB         int `toml:"max_mb"`         // the quota of the audit log, in MiB
	RetentionDays int `toml:"retention_days"` // days older than this are deleted; 0 keeps them until the quota needs the room
	MinFreeMB     int `toml:"min_free_mb"`    // free MiB the disk must keep for new conversations; 0 turns the watermark off
}

// Limits is the audit log's limits in bytes.
func (a AuditConfig) Limits() gossip.AuditLimits {
	return gossip.AuditLimits{MaxBytes: int64(a.MaxMB) << 20, Retention: time.Duration(a.RetentionDays) * 24 * time.Hour,
		MinFree: int64(a.MinFreeMB) << 20}
}

// Duration is a time.Duration written as a string: "30s", "24h", "7d"
// (ParseDuration, the command line's parser too).
type Duration struct{ time.Duration }

// UnmarshalText reads "24h", "5m", "7d", "1d12h".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration back.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String formats without trailing zero units ("24h", not "24h0m0s").
func (d Duration) String() string {
	s := d.Duration.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// StandardCapabilities are the IFP-7 §1.2 interoperability capabilities
// every ifaced daemon offers.
func StandardCapabilities() []map[string]any {
	caps := []struct{ name, desc string }{
		{"gossip.exchange", "Participate in IFP-3 gossip exchanges (greeting through close)"},
		{"message.receive", "Receive IFP-4 structured messages"},
		{"message.reply", "Reply to messages with correct threading"},
		{"identity.verify", "IFP-5 message signing and verification (Ed25519)"},
		{"capabilities.get", "Return this capability document"},
		{"ping", "Respond to connectivity tests"},
	}
	out := make([]map[string]any, len(caps))
	for i, c := range caps {
		out[i] = map[string]any{"name": c.name, "description": c.desc}
	}
	return out
}

// Default caps of the provider store (discovery.max_provider_records and
// discovery.max_providers_per_key): measured at about 650 bytes a record
// with its key and indexes at worst (every record a name of its own), so
// some 13 MiB when full. The providers' addresses go to the peerstore, as
// kad-dht puts them (24 h), under go-libp2p's own caps.
const (
	DefaultMaxProviderRecords = 20000
	DefaultMaxProvidersPerKey = 500
)

// DefaultConfig returns the configuration a daemon runs with when its
// config file sets nothing.
func DefaultConfig() *Config {
	p := fmt.Sprint(DefaultPort)
	return &Config{
		Version: ConfigVersion,
		Listen: ListenConfig{Addresses: []string{
			"/ip4/0.0.0.0/tcp/" + p, "/ip4/0.0.0.0/udp/" + p + "/quic-v1",
			"/ip6/::/tcp/" + p, "/ip6/::/udp/" + p + "/quic-v1",
		}},
		API:  APIConfig{Listen: fmt.Sprintf("127.0.0.1:%d", DefaultPort+1)},
		HTTP: HTTPConfig{AllowedHosts: []string{}, CORSOrigins: []string{"*"}, TrustedProxies: []string{}},
		Limits: LimitsConfig{
			ConnectionsLow: 400, ConnectionsHigh: 600, GracePeriod: Duration{20 * time.Second},
			StreamTimeout: Duration{30 * time.Second}, MaxStreams: 1024, MaxMemoryMB: 256,
		},
		Replay:      ReplayConfig{Window: Duration{identity.DefaultReplayWindow}, ClockSkew: Duration{identity.DefaultClockSkew}},
		Trust:       TrustConfig{KeyTransition: Duration{7 * 24 * time.Hour}, IntroExpiry: Duration{7 * 24 * time.Hour}},
		Tiers:       TiersConfig{Custom: []conditions.CustomTier{}},
		Disclosure:  DisclosureConfig{Default: "public", OpenPersonas: []string{}},
		Temperature: TemperatureConfig{DefaultMax: conditions.Cool},
		Agent:       AgentConfig{Timeout: Duration{30 * time.Second}},
		Rates:       RatesConfig{Cool: 10, Warm: 30, Hot: 60},
		Relay: RelayConfig{Use: []string{}, Mailbox: true, MaxReservations: 128, MaxCircuits: 16,
			CircuitDuration: Duration{30 * time.Minute}, CircuitDataKB: 16 << 10},
		Mailbox: MailboxConfig{Retention: Duration{7 * 24 * time.Hour}, MaxMessages: 1000, MaxKB: 16 << 10,
			MaxPerSender: 200, MaxTotalMB: 256, Poll: Duration{time.Minute}, GiveUp: Duration{24 * time.Hour},
			MaxPerAddress: 400, Idle: Duration{10 * time.Minute}},
		Discovery: DiscoveryConfig{MDNS: true, MDNSService: "_ifaced._udp", DHT: DHTAuto, Bootstrap: []string{},
			Reprovide: Duration{12 * time.Hour}, Gossip: true, GossipStrangers: 30, ImportRefresh: Duration{6 * time.Hour},
			MaxProviderRecords: DefaultMaxProviderRecords, MaxProvidersPerKey: DefaultMaxProvidersPerKey},
		Durability:   DurabilityConfig{Sync: SyncInterval, Interval: Duration{time.Second}},
		Audit:        AuditConfig{MaxMB: 1024, RetentionDays: 90, MinFreeMB: 256},
		Log:          LogConfig{Level: "info", Format: "text"},
		Capabilities: StandardCapabilities(),
	}
}

// LoadConfig reads a config file over the defaults. A missing file gives
// ErrNoConfig (with the defaults); anything wrong with an existing file is
// an error naming the file, line and key.
func LoadConfig(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return DefaultConfig(), fmt.Errorf("%s: %w", path, ErrNoConfig)
	}
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	c, err := ParseConfig(src)
	if err != nil {
		return nil, &ConfigError{File: path, Err: err}
	}
	return c, nil
}

// ConfigError is a config file that could not be used: Err lists each
// problem as a *negotiate.FieldError with its line.
type ConfigError struct {
	File string
	Err  error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	for i, p := range negotiate.Errors(e.Err) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.File + ": " + p.Error())
	}
	return b.String()
}

func (e *ConfigError) Unwrap() error { return e.Err }

// ParseConfig reads config TOML over the defaults and validates it.
// Unknown keys and wrong types are errors, never ignored, and all of them
// are reported at once (decodeConfig).
func ParseConfig(src []byte) (*Config, error) {
	c := DefaultConfig()
	c.Version = 0 // the file must say which version it is
	c.Capabilities = nil
	if err := decodeConfig(src, c); err != nil {
		return nil, err
	}
	if c.Capabilities == nil {
		// No capabilities key at all; `capabilities = []` offers none.
		c.Capabilities = StandardCapabilities()
	}
	if err := c.Validate(); err != nil {
		return nil, negotiate.Locate(err, src, negotiate.FormatTOML, "")
	}
	return c, nil
}

// Validate checks every key; each problem is a *negotiate.FieldError
// naming the key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &negotiate.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if c.Version != ConfigVersion {
		if c.Version == 0 {
			bad("version", "is required: add `version = %d` at the top", ConfigVersion)
		} else {
			bad("version", "is %d; this ifaced reads version %d", c.Version, ConfigVersion)
		}
	}
	if n := c.Identity.Name; n != "" {
		if err := identity.ValidateAgentName(n); err != nil {
			bad("identity.name", "%v", err)
		}
	}
	if len(c.Listen.Addresses) == 0 && len(c.Relay.Use) == 0 {
		// Without either, nobody could ever reach the daemon.
		bad("listen.addresses", "needs at least one multiaddr (e.g. \"/ip4/0.0.0.0/tcp/%d\"), or relay.use must name relays to be reached through", DefaultPort)
	}
	for i, a := range c.Listen.Addresses {
		if _, err := multiaddr.NewMultiaddr(a); err != nil {
			bad(fmt.Sprintf("listen.addresses[%d]", i), "%q is not a multiaddr: %v", a, err)
		}
	}
	if err := checkLoopback(c.API.Listen); err != nil {
		bad("api.listen", "%v", err)
	}
	if c.HTTP.Listen != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
			bad("http.listen", "%q is not host:port: %v", c.HTTP.Listen, err)
		} else if (c.HTTP.CertFile == "") != (c.HTTP.KeyFile == "") {
			bad("http.cert_file", "cert_file and key_file go together: set both for TLS, or neither")
		} else if c.HTTP.CertFile == "" && checkLoopback(c.HTTP.Listen) != nil {
			// IFP-6 §8: beyond this machine, only over TLS.
			bad("http.listen", "%q is not a loopback address, so the binding needs TLS: set http.cert_file and http.key_file", c.HTTP.Listen)
		}
	}
	for _, f := range []struct{ key, path string }{{"http.cert_file", c.HTTP.CertFile}, {"http.key_file", c.HTTP.KeyFile}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			bad(f.key, "%q is not an absolute path", f.path)
		}
	}
	for i, h := range c.HTTP.AllowedHosts {
		if err := checkHostName(h); err != nil {
			bad(fmt.Sprintf("http.allowed_hosts[%d]", i), "%v", err)
		}
	}
	for i, o := range c.HTTP.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			bad(fmt.Sprintf("http.cors_origins[%d]", i), "%v", err)
		}
	}
	for i, p := range c.HTTP.TrustedProxies {
		if _, err := ParseProxy(p); err != nil {
			bad(fmt.Sprintf("http.trusted_proxies[%d]", i), "%v", err)
		}
	}
	if u := c.HTTP.URL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			bad("http.url", "%q is not an http(s) URL", u)
		}
	}
	l := c.Limits
	positive := map[string]int{"limits.connections_low": l.ConnectionsLow, "limits.connections_high": l.ConnectionsHigh,
		"limits.max_streams": l.MaxStreams, "limits.max_memory_mb": l.MaxMemoryMB,
		"rates.cool": c.Rates.Cool, "rates.warm": c.Rates.Warm, "rates.hot": c.Rates.Hot,
		"relay.max_reservations": c.Relay.MaxReservations, "relay.max_circuits": c.Relay.MaxCircuits,
		"relay.circuit_data_kb": c.Relay.CircuitDataKB, "mailbox.max_messages": c.Mailbox.MaxMessages,
		"mailbox.max_kb": c.Mailbox.MaxKB, "mailbox.max_per_sender": c.Mailbox.MaxPerSender, "mailbox.max_total_mb": c.Mailbox.MaxTotalMB,
		"mailbox.max_per_address": c.Mailbox.MaxPerAddress, "discovery.max_provider_records": c.Discovery.MaxProviderRecords,
		"discovery.max_providers_per_key": c.Discovery.MaxProvidersPerKey}
	for _, k := range slices.Sorted(maps.Keys(positive)) {
		if positive[k] <= 0 {
			bad(k, "must be positive, got %d", positive[k])
		}
	}
	if c.Discovery.GossipStrangers < 0 {
		bad("discovery.gossip_strangers", "must be 0 (forward no stranger's announcement) or more, got %d", c.Discovery.GossipStrangers)
	}
	if l.ConnectionsLow > l.ConnectionsHigh {
		bad("limits.connections_low", "%d is above connections_high (%d)", l.ConnectionsLow, l.ConnectionsHigh)
	}
	durations := map[string]Duration{"limits.grace_period": l.GracePeriod, "limits.stream_timeout": l.StreamTimeout,
		"replay.window": c.Replay.Window, "replay.clock_skew": c.Replay.ClockSkew,
		"trust.key_transition": c.Trust.KeyTransition, "trust.intro_expiry": c.Trust.IntroExpiry,
		"agent.timeout": c.Agent.Timeout, "relay.circuit_duration": c.Relay.CircuitDuration,
		"mailbox.retention": c.Mailbox.Retention, "mailbox.poll": c.Mailbox.Poll, "mailbox.give_up": c.Mailbox.GiveUp, "mailbox.idle": c.Mailbox.Idle,
		"discovery.reprovide": c.Discovery.Reprovide, "discovery.import_refresh": c.Discovery.ImportRefresh}
	for _, k := range slices.Sorted(maps.Keys(durations)) {
		if durations[k].Duration <= 0 {
			bad(k, "must be a positive duration, got %s", durations[k])
		}
	}
	order, err := conditions.NewTierOrder(c.Tiers.Custom)
	for _, e := range negotiate.Errors(err) {
		var fe *conditions.FieldError
		if errors.As(e, &fe) {
			bad(fe.Field, "%s", fe.Problem)
		} else {
			bad("tiers.custom", "%v", e)
		}
	}
	if order == nil {
		order = conditions.DefaultTierOrder()
	}
	if !order.Known(c.Disclosure.Default) {
		bad("disclosure.default", "%q is not a known tier (known: %s)", c.Disclosure.Default, strings.Join(order.Tiers(), ", "))
	}
	for _, persona := range slices.Sorted(maps.Keys(c.Disclosure.Personas)) {
		peers := c.Disclosure.Personas[persona]
		for _, peer := range slices.Sorted(maps.Keys(peers)) {
			if !order.Known(peers[peer]) {
				bad(fmt.Sprintf("disclosure.personas.%s.%s", persona, peer), "%q is not a known tier (known: %s)", peers[peer], strings.Join(order.Tiers(), ", "))
			}
		}
	}
	for i, persona := range c.Disclosure.OpenPersonas {
		if persona == "" || len(persona) > 128 || strings.ContainsAny(persona, " \t\r\n") {
			bad(fmt.Sprintf("disclosure.open_personas[%d]", i), "%q: a persona is 1 to 128 bytes without white space", persona)
		}
	}
	if _, ok := conditions.TemperatureRank(c.Temperature.DefaultMax); !ok {
		bad("temperature.default_max", "%q: want cool, warm or hot", c.Temperature.DefaultMax)
	}
	for _, peer := range slices.Sorted(maps.Keys(c.Temperature.Peers)) {
		if _, ok := conditions.TemperatureRank(c.Temperature.Peers[peer]); !ok {
			bad("temperature.peers."+peer, "%q: want cool, warm or hot", c.Temperature.Peers[peer])
		}
	}
	if w := c.Agent.Webhook; w != "" {
		if u, err := url.Parse(w); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("agent.webhook", "%q is not an http(s) URL", w)
		}
	}
	if c.Agent.MCP != nil {
		errs = append(errs, c.Agent.MCP.Validate(order)...)
	}
	if f := c.Trust.CAFile; f != "" {
		if !filepath.IsAbs(f) {
			bad("trust.ca_file", "%q is not an absolute path", f)
		} else if _, err := trust.LoadCAFile(f); err != nil {
			bad("trust.ca_file", "%v", err)
		}
	}
	for i, a := range c.Relay.Use {
		if err := checkPeerAddr(a); err != nil {
			bad(fmt.Sprintf("relay.use[%d]", i), "%v", err)
		}
	}
	for i, a := range c.Discovery.Bootstrap {
		if err := checkPeerAddr(a); err != nil {
			bad(fmt.Sprintf("discovery.bootstrap[%d]", i), "%v", err)
		}
	}
	if c.Discovery.MDNS && c.Discovery.MDNSService == "" {
		bad("discovery.mdns_service", "is empty; the default is \"_ifaced._udp\"")
	}
	if !slices.Contains([]string{DHTAuto, DHTServer, DHTClient, DHTOff}, c.Discovery.DHT) {
		bad("discovery.dht", "%q: want auto, server, client or off", c.Discovery.DHT)
	}
	switch d := c.Durability; {
	case d.Sync != SyncInterval && d.Sync != SyncAlways:
		bad("durability.sync", "%q: want %q (fsync every durability.interval) or %q (fsync before acting on each message)", d.Sync, SyncInterval, SyncAlways)
	case d.Sync == SyncInterval && (d.Interval.Duration <= 0 || d.Interval.Duration > time.Minute):
		bad("durability.interval", "%s: want a duration above zero and at most 1m (the default is 1s)", d.Interval)
	}
	switch a := c.Audit; {
	case a.MaxMB < MinAuditMB:
		bad("audit.max_mb", "%d: want at least %d (MiB), room for a day of conversations; the default is 1024", a.MaxMB, MinAuditMB)
	case a.MaxMB > maxAuditMB:
		bad("audit.max_mb", "%d: want at most %d (MiB, 16 TiB)", a.MaxMB, maxAuditMB)
	}
	if r := c.Audit.RetentionDays; r < 0 || r > 36500 {
		bad("audit.retention_days", "%d: want a number of days from 1 to 36500, or 0 to keep days until the quota needs the room (the default is 90)", r)
	}
	if m := c.Audit.MinFreeMB; m < 0 || m > maxAuditMB {
		bad("audit.min_free_mb", "%d: want the free MiB the disk must keep, from 0 (no watermark) to %d; the default is 256", m, maxAuditMB)
	}
	if err := c.Metrics.CheckListen(); err != nil {
		bad("metrics.listen", "%v", err)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		bad("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "%q: want text or json", c.Log.Format)
	}
	if _, err := c.documentFrom("did:key:placeholder", order); err != nil {
		errs = append(errs, negotiate.Errors(err)...)
	}
	return errors.Join(errs...)
}

// TierOrder is the owner's tier order: the standard tiers plus the
// configured custom ones.
func (c *Config) TierOrder() (*conditions.TierOrder, error) {
	return conditions.NewTierOrder(c.Tiers.Custom)
}

// Document builds the owner's capability document from the config. agentID
// is used when identity.agent_id is empty (the daemon passes its did:key).
func (c *Config) Document(agentID string) (*negotiate.Document, error) {
	order, err := c.TierOrder()
	if err != nil {
		return nil, err
	}
	return c.documentFrom(agentID, order)
}

func (c *Config) documentFrom(agentID string, order *conditions.TierOrder) (*negotiate.Document, error) {
	if c.Identity.AgentID != "" {
		agentID = c.Identity.AgentID
	}
	tree := map[string]any{"ifp": negotiate.Version, "agent_id": agentID, "seq": 1,
		"ifp_support": []int{3, 4, 5, 7, 12}, "capabilities": c.Capabilities}
	if c.Capabilities == nil {
		tree["capabilities"] = []any{}
	}
	if c.AGUI != nil {
		tree["agui"] = c.AGUI
	}
	var d negotiate.Document
	if err := negotiate.DecodeValue(tree, &d); err != nil {
		return nil, err
	}
	if err := d.Validate(order); err != nil {
		return nil, err
	}
	return &d, nil
}

// checkPeerAddr accepts a multiaddr that names its peer, as a relay or
// bootstrap peer must: /ip4/198.51.100.7/tcp/4817/p2p/12D3KooW….
func checkPeerAddr(s string) error {
	ma, err := multiaddr.NewMultiaddr(s)
	if err != nil {
		return fmt.Errorf("%q is not a multiaddr: %v", s, err)
	}
	if _, err := peer.AddrInfoFromP2pAddr(ma); err != nil {
		return fmt.Errorf("%q must end in /p2p/<peer ID> (e.g. \"/ip4/198.51.100.7/tcp/%d/p2p/12D3KooW…\")", s, DefaultPort)
	}
	return nil
}

// checkLoopback accepts only host:port on a loopback address: the control
// API grants full control of the daemon and must not face a network.
func checkLoopback(hostport string) error {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", hostport, err)
	}
	if port == "" {
		return fmt.Errorf("%q has no port", hostport)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: the control API listens on 127.0.0.1 or [::1] only", hostport)
	}
	return nil
}

// checkHostName accepts a host name or IP address as a Host header names
// it, without scheme, port or path: "agent.example.org", "192.0.2.7",
// "::1" or "[::1]".
// checkOrigin checks an http.cors_origins entry: "*", or an origin as a
// browser writes it in Origin.
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an origin: want \"*\" or scheme://host[:port] (http or https, no path), e.g. \"https://app.example.com\"", o)
	}
	return nil
}

// ParseProxy reads an http.trusted_proxies entry: an IP address (one
// proxy) or a CIDR prefix (the proxies in it), "127.0.0.1", "::1",
// "10.0.0.0/8". An IPv4-mapped IPv6 entry counts as IPv4.
func ParseProxy(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix (e.g. \"127.0.0.1\", \"::1\" or \"10.0.0.0/8\")", s)
	}
	if p.Addr().Is4In6() {
		bits := p.Bits() - 96
		if bits < 0 {
			return netip.Prefix{}, fmt.Errorf("%q: an IPv4-mapped prefix needs at least 96 bits", s)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), bits)
	}
	return p.Masked(), nil
}

func checkHostName(h string) error {
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return nil
	}
	if h == "" || len(h) > 253 || strings.Trim(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != "" {
		return fmt.Errorf("%q is not a host name (letters, digits, '-' and '.'; no scheme, port or path, e.g. \"agent.example.org\")", h)
	}
	return nil
}
