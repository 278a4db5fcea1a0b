//go:build !faultclock

package main

import (
	"log/slog"

	"github.com/ifaced/ifaced/node"
)

// clockOptions is empty: the daemon runs on the system's clock. A binary
// built with -tags faultclock reads an offset instead
// (fakeclock_faults.go), for the clock-jump test only.
func clockOptions(*slog.Logger) []node.Option { return nil }
