// Package ifaced holds what the daemon carries from the repository's root
// inside its binary: config.example.toml, every config key at its default
// with what it means. `ifaced init` writes it as a new data directory's
// config.toml (config.Home.Init), so whoever installed only the binary has
// the same comments as a reader of the sources, and node's tests hold it
// equal to config.DefaultConfig.
package ifaced

import _ "embed"

// ExampleConfig is config.example.toml.
//
//go:embed config.example.toml
var ExampleConfig string
