package p2phost

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-varint"
)

// serverRole: a listener's header alone makes the server begin; an
// initiator's header and proposal, silence, or anything that is not
// multistream-select keep the responder's side; what was read is given
// back to the handshake.
func TestServerRole(t *testing.T) {
	proposal := append(varint.ToUvarint(uint64(len("/noise\n"))), "/noise\n"...)
	for _, tc := range []struct {
		name   string
		writes [][]byte
		want   network.Direction
	}{
		{"a listener's header", [][]byte{msHeader}, network.DirOutbound},
		{"an initiator's header and proposal", [][]byte{append(bytes.Clone(msHeader), proposal...)}, network.DirInbound},
		{"the proposal in a segment of its own", [][]byte{msHeader, proposal}, network.DirInbound},
		{"silence", nil, network.DirInbound},
		{"not multistream-select", [][]byte{[]byte("GET / HTTP/1.1\r\n")}, network.DirInbound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			here, there := net.Pipe()
			defer here.Close()
			defer there.Close()
			go func() {
				for _, w := range tc.writes {
					if _, err := there.Write(w); err != nil {
						return
					}
				}
			}()
			conn, dir := serverRole(here, 300*time.Millisecond)
			if dir != tc.want {
				t.Errorf("serverRole = %v, want %v", dir, tc.want)
			}
			want := bytes.Join(tc.writes, nil)
			if len(want) == 0 {
				return
			}
			// The handshake reads all that was sent, in order, from the
			// connection serverRole returned.
			got := make([]byte, len(want))
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, want) {
				t.Errorf("read back %q (%v), want %q", got, err, want)
			}
		})
	}
}

// The answering side of a TCP hole punch whose connect reaches the other
// side's listener (the other side's own connect was refused and gone)
// begins the security handshake, which the listener answers. Before, both
// sides waited for the other until the dial's deadline (issue 27).
func TestPunchServerReachingAListenerConnects(t *testing.T) {
	newHost := func() host.Host {
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		h, err := punchHost(t, key, "/ip4/127.0.0.1/tcp/0")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	server, client := newHost(), newHost()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// isClient false: the side DCUtR names the server, dialling.
	pctx := network.WithSimultaneousConnect(network.WithForceDirectDial(ctx, "test"), false, "hole-punching")
	if err := server.Connect(pctx, peer.AddrInfo{ID: client.ID(), Addrs: client.Network().ListenAddresses()}); err != nil {
		t.Fatalf("the hole punch's server reached the client's listener: %v, want a connection (its side of the handshake the initiator's)", err)
	}
	if server.Network().Connectedness(client.ID()) != network.Connected {
		t.Errorf("not connected after the punch")
	}
}
