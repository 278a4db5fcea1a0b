//go:build !linux

package netlab

import (
	"context"
	"errors"
	"net"
)

func dialInNS(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("network namespaces exist on Linux only")
}
