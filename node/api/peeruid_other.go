//go:build !linux

package api

import (
	"fmt"
	"net/netip"
	"runtime"
)

// ownerCheck: this system has no /proc/net/tcp to find a connection's
// owner in (see peeruid.go).
const ownerCheck = false

func socketOwner(local, remote netip.AddrPort) (uint32, error) {
	return 0, fmt.Errorf("%w: %s does not list sockets with their owners", errOwnerUnknown, runtime.GOOS)
}
