package p2phost

import (
	"fmt"

	"github.com/ifaced/ifaced/node/config"

	"github.com/ifaced/ifaced/identity"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
)

// fdReserve is the file descriptors kept out of the resource manager's
// hands for everything else the daemon opens: the store, the audit log's
// held files (up to 128, gossip.heldJSONL twice), spares, the control API
// and HTTP binding, logs.
const fdReserve = 512

// fdBudget is the file descriptors the resource manager may hand to
// connections: the process's limit (Go raises the soft limit to the hard
// one at start on Linux) less fdReserve, and at least 256 when the limit
// is tiny. It used to be a fixed 4,096, so a daemon allowed 20,000
// descriptors still held no more than 4,096 connections (the bench's
// 5,000 idle peers were 4,096).
func fdBudget(limit uint64) int {
	if limit > 1<<20 {
		limit = 1 << 20 // "unlimited" and the like: far more than memory allows anyway
	}
	return max(int(limit)-fdReserve, 256)
}

// peerStreamShare is how many inbound streams one peer may hold at once:
// an eighth of limits.max_streams, and at least 8, which is room for a
// handful of open conversations and the queries beside them.
func peerStreamShare(maxStreams int) int { return max(maxStreams/8, 8) }

// New builds the libp2p host: TCP and QUIC, Noise and TLS, yamux,
// identify and ping, a resource manager scaled to limits.max_memory_mb
// with the daemon-wide stream ceiling of limits.max_streams (of which one
// peer may hold an eighth), and a connection manager with the configured
// water marks. Metrics stay off. extra adds what reachability needs
// (node/mail: mail.Reach.HostOptions) and hole punching (Punch.HostOptions).
//
// Every configured listen address must be free (claimListenAddrs): a
// daemon never shares a port with another.
func New(cfg *config.Config, id *identity.Identity, extra ...libp2p.Option) (host.Host, error) {
	if err := claimListenAddrs(cfg.Listen.Addresses); err != nil {
		return nil, err
	}
	scaling := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&scaling)
	fds := fdBudget(processFDLimit())
	concrete := scaling.Scale(int64(cfg.Limits.MaxMemoryMB)<<20, fds)
	// Room for every connection the connection manager may keep (it trims
	// above connections_high), with headroom for the ones arriving meanwhile.
	conns := rcmgr.LimitVal(2 * cfg.Limits.ConnectionsHigh)
	concrete = rcmgr.PartialLimitConfig{System: rcmgr.ResourceLimits{
		Streams:      rcmgr.LimitVal(cfg.Limits.MaxStreams),
		Memory:       rcmgr.LimitVal64(int64(cfg.Limits.MaxMemoryMB) << 20),
		Conns:        conns,
		ConnsInbound: conns,
		FD:           rcmgr.LimitVal(fds),
	}, Transient: rcmgr.ResourceLimits{Conns: conns, ConnsInbound: conns},
		// One peer may open at most its share of the daemon-wide ceiling,
		// so a peer flooding idle streams cannot take the streams every
		// other peer needs (the scaled default lets one peer hold 288).
		PeerDefault: rcmgr.ResourceLimits{StreamsInbound: rcmgr.LimitVal(peerStreamShare(cfg.Limits.MaxStreams))},
	}.Build(concrete)
	// Without metrics, as the host is (libp2p.DisableMetrics below): the
	// resource manager otherwise reports every reservation to Prometheus
	// through a trace, formatting a timestamp each time, which nothing
	// here reads; that was 4 % of an answering daemon's CPU.
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(concrete), rcmgr.WithMetricsDisabled())
	if err != nil {
		return nil, fmt.Errorf("creating resource manager: %w", err)
	}
	cm, err := connmgr.NewConnManager(cfg.Limits.ConnectionsLow, cfg.Limits.ConnectionsHigh,
		connmgr.WithGracePeriod(cfg.Limits.GracePeriod.Duration))
	if err != nil {
		rm.Close()
		return nil, fmt.Errorf("creating connection manager: %w", err)
	}
	opts := append([]libp2p.Option{
		libp2p.Identity(id.LibP2PKey()),
		libp2p.ListenAddrStrings(cfg.Listen.Addresses...),
		libp2p.Transport(newPunchTCP), // go-libp2p's TCP, retrying the refused connects of a hole punch (punchtcp.go)
		libp2p.Transport(quic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ResourceManager(rm),
		libp2p.ConnectionManager(cm),
		libp2p.Ping(true),
		libp2p.DisableMetrics(),
	}, extra...)
	h, err := libp2p.New(opts...)
	if err != nil {
		rm.Close()
		cm.Close()
		return nil, fmt.Errorf("starting libp2p host: %w", err)
	}
	return h, nil
}

// ForgetDialFailures clears the swarm's dial backoff for p, which after
// failed dials refuses new ones for 5 s plus a second per failure
// squared, up to 5 minutes. The loops that dial the peers the owner named
// (bootstrap peers, relays) pace their own attempts, and a peer that came
// back is to be used at their next one.
func ForgetDialFailures(h host.Host, p peer.ID) {
	if sw, ok := h.Network().(*swarm.Swarm); ok {
		sw.Backoff().Clear(p)
	}
}
