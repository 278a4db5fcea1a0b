// Package config is the daemon's configuration and the data directory
// that holds it. Of the daemon's components it imports only two below it:
// node/mcpagent, whose section ([agent.mcp]) it carries as that package
// declares it, and node/trust, to check trust.ca_file when the file is
// read rather than at start. Every component is given the part of Config
// it reads.
//
// Config mirrors config.toml; DefaultConfig is what a daemon runs with
// when the file sets nothing, and config.example.toml documents the same
// values (a test holds them equal); `ifaced init` writes that file, comments
// and all, as the new config.toml. ParseConfig is strict: a version key is
// required, unknown keys and wrong types are errors, all reported at once
// (decodeConfig: "did you mean" for a misspelt key, the type wanted and an
// example for a wrong one), and every problem is a *negotiate.FieldError
// with its line, so `ifaced caps validate` and `ifaced run` can say
// "config.toml:12: limits.max_streams: …". Durations are ParseDuration's,
// the command line's too ("30s", "7d"). The
// capability document is written inline and decoded by package negotiate's
// rules. The control API address must be loopback: it grants full control
// of the daemon.
//
// Home is $IFACED_HOME (default ~/.ifaced), created with mode 0700; the key
// is key.pem (0600), the configuration config.toml. The first `ifaced run`
// creates both, so the daemon starts with no setup.
package config
