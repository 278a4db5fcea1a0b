// Package node is the ifaced daemon: it wires identity, conditions,
// messages and documents to the network. It owns the configuration and the
// data directory, the libp2p host (TCP and QUIC, Noise and TLS, yamux,
// identify and ping, with a resource manager and a connection manager sized
// from the configuration), and — as the daemon grows — the stream
// protocols, the peer cache, discovery, relays, the local control API and
// the public HTTP binding.
//
// # Configuration
//
// Config mirrors config.toml; DefaultConfig is what a daemon runs with
// when the file sets nothing, and config.example.toml documents the same
// values (a test holds them equal). ParseConfig is strict: a version key is
// required, unknown keys and wrong types are errors, and every problem is a
// *negotiate.FieldError with its line, so `ifaced caps validate` and
// `ifaced run` can say "config.toml:12: limits.max_streams: …". The
// capability document is written inline and decoded by package negotiate's
// rules. The control API address must be loopback: it grants full control
// of the daemon.
//
// # Data directory
//
// Home is $IFACED_HOME (default ~/.ifaced), created with mode 0700; the key
// is key.pem (0600), the configuration config.toml. The first `ifaced run`
// creates both, so the daemon starts with no setup.
//
// # Logging
//
// The daemon logs through the *slog.Logger it is given. go-libp2p logs
// through a process-wide handler (gologshim), which the command line points
// at the same handler before the host starts.
package node
