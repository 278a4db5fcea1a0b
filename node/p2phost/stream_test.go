package p2phost

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// TestOpenStream: the protocol choice goes with the first write, the
// answer comes back, and a peer that does not speak the protocol fails the
// first read with ErrProtocolNotSupported; OpenStream dials a peer it is
// not connected to.
func TestOpenStream(t *testing.T) {
	net, err := mocknet.FullMeshLinked(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	a, b := net.Hosts()[0], net.Hosts()[1]
	const echo = "/ifaced-test/echo/1"
	b.SetStreamHandler(echo, func(s network.Stream) {
		defer s.Close()
		io.Copy(s, s)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.Peerstore().AddAddrs(b.ID(), b.Addrs(), time.Hour)
	if len(a.Network().ConnsToPeer(b.ID())) != 0 {
		t.Fatal("connected before the test dialled")
	}

	s, err := OpenStream(ctx, a, b.ID(), echo)
	if err != nil {
		t.Fatal(err)
	}
	if s.Protocol() != echo {
		t.Errorf("stream protocol %q, want %q", s.Protocol(), echo)
	}
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "hello" {
		t.Fatalf("echo: %q, %v", got, err)
	}
	s.Close()

	s, err = OpenStream(ctx, a, b.ID(), "/ifaced-test/unknown/1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(make([]byte, 8)); !errors.Is(err, ErrProtocolNotSupported) {
		t.Errorf("reading from a peer without the protocol: %v, want ErrProtocolNotSupported", err)
	}

	// Dial after the connection closed connects again.
	if err := a.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	if err := Dial(ctx, a, b.ID()); err != nil || len(a.Network().ConnsToPeer(b.ID())) == 0 {
		t.Errorf("Dial: %v, connections %d", err, len(a.Network().ConnsToPeer(b.ID())))
	}
}
