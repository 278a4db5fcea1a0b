//go:build !unix

package p2phost

import (
	"fmt"
	"net"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

// refusingTarget is an address nothing listens on (a port listened on,
// then closed: another process may take it meanwhile, which the unix form
// prevents by holding the port bound).
func refusingTarget(t *testing.T) ma.Multiaddr {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", port))
}
