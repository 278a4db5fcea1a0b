package p2phost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	msmux "github.com/multiformats/go-multistream"
)

// negotiationTimeout bounds how long Close waits for the peer's answer to
// the protocol choice, as go-libp2p's own streams do.
const negotiationTimeout = 10 * time.Second

// ErrProtocolNotSupported is the peer's answer when it does not speak the
// protocol a stream opened with OpenStream asked for; it comes with the
// first read.
var ErrProtocolNotSupported = msmux.ErrNotSupported[protocol.ID]{}

// OpenStream opens a stream to pid speaking proto, dialling first unless
// ctx says not to (network.WithNoDial), as host.NewStream does, but
// without waiting for identify to finish on a new connection: the
// protocol choice is written with the stream's first frame and its answer
// read before the peer's reply (multistream's lazy select). On a fresh
// connection this saves the round trip of waiting for the peer's identify
// before the first byte of a greeting goes out. A peer that does not speak
// proto fails the first read with an error that errors.Is
// ErrProtocolNotSupported.
func OpenStream(ctx context.Context, h host.Host, pid peer.ID, proto protocol.ID) (network.Stream, error) {
	if nodial, _ := network.GetNoDial(ctx); !nodial {
		if err := Dial(ctx, h, pid); err != nil {
			return nil, err
		}
	}
	s, err := h.Network().NewStream(network.WithNoDial(ctx, "already dialed"), pid)
	if err != nil {
		if errors.Is(err, network.ErrNoConn) {
			return nil, fmt.Errorf("opening a %s stream: no connection to %s", proto, pid)
		}
		return nil, fmt.Errorf("opening a %s stream: %w", proto, err)
	}
	if err := s.SetProtocol(proto); err != nil {
		s.ResetWithError(network.StreamProtocolNegotiationFailed)
		return nil, fmt.Errorf("opening a %s stream: %w", proto, err)
	}
	return &lazyStream{Stream: s, rw: msmux.NewMSSelect(s, proto), proto: proto}, nil
}

// Dial connects to pid at the addresses the peerstore holds, unless a
// connection ctx accepts is open already (a limited one counts when ctx
// allows it, network.WithAllowLimitedConn; network.WithForceDirectDial
// dials anyway), as host.Connect does, but returns as soon as the
// connection is secured and multiplexed: it does not wait for identify,
// which runs on the connection meanwhile. What identify brings (the
// peer's listen addresses, protocols, agent version) arrives moments
// later; nothing in a greeting needs it, and the greeting's own first
// frame need not wait a round trip for it.
func Dial(ctx context.Context, h host.Host, pid peer.ID) error {
	forceDirect, _ := network.GetForceDirectDial(ctx)
	limitedOK, _ := network.GetAllowLimitedConn(ctx)
	if !forceDirect {
		switch h.Network().Connectedness(pid) {
		case network.Connected:
			return nil
		case network.Limited:
			if limitedOK {
				return nil
			}
		}
	}
	if _, err := h.Network().DialPeer(ctx, pid); err != nil {
		return fmt.Errorf("failed to dial: %w", err)
	}
	return nil
}

// lazyStream reads and writes through multistream's lazy client, which
// writes the protocol choice with the first write and reads its answer on
// the first read.
type lazyStream struct {
	network.Stream
	rw       io.ReadWriteCloser
	proto    protocol.ID
	answered bool // a read returned data: the protocol was agreed
}

// Read reads through the lazy client. A peer that does not speak the
// protocol answers "na", and then, reading the frame that rode with the
// choice as its next proposal, resets the stream with
// StreamProtocolNegotiationFailed; over QUIC (and yamux) the reset can
// overtake the "na", so that reset, before anything was read, is the
// same answer and errors.Is ErrProtocolNotSupported too.
func (s *lazyStream) Read(b []byte) (int, error) {
	n, err := s.rw.Read(b)
	if n > 0 {
		s.answered = true
	}
	var se *network.StreamError
	if err != nil && !s.answered && errors.As(err, &se) && se.Remote && se.ErrorCode == network.StreamProtocolNegotiationFailed {
		return n, fmt.Errorf("%w (the peer reset the stream while choosing the protocol): %w", msmux.ErrNotSupported[protocol.ID]{Protos: []protocol.ID{s.proto}}, err)
	}
	return n, err
}

func (s *lazyStream) Write(b []byte) (int, error) { return s.rw.Write(b) }

// Close waits at most negotiationTimeout for the protocol's answer, which
// the lazy client reads before it closes.
func (s *lazyStream) Close() error {
	_ = s.Stream.SetReadDeadline(time.Now().Add(negotiationTimeout))
	return s.rw.Close()
}

// CloseWrite sends the protocol choice if nothing was written yet, then
// closes the write side.
func (s *lazyStream) CloseWrite() error {
	if f, ok := s.rw.(interface{ Flush() error }); ok {
		_ = f.Flush() // an error shows on the next read
	}
	return s.Stream.CloseWrite()
}
