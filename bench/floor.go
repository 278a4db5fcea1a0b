package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// floorKeys are the two Ed25519 keys of a floor: Bob signs what he sends,
// Alice what she answers (crypto/ed25519, as ifaced uses).
type floorKeys struct {
	bob, alice ed25519.PrivateKey
}

func newFloorKeys() (floorKeys, error) {
	var k floorKeys
	var err error
	if _, k.bob, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return k, fmt.Errorf("generating a key: %w", err)
	}
	if _, k.alice, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return k, fmt.Errorf("generating a key: %w", err)
	}
	return k, nil
}

func pubOf(k ed25519.PrivateKey) ed25519.PublicKey {
	if k == nil {
		return nil
	}
	return k.Public().(ed25519.PublicKey)
}

// newStreamFloor is a greeting's floor as a new stream per round trip on
// the pair's connection: Bob's greeting's bytes out and Alice's answer's
// bytes back, each signed by its sender and verified by its receiver.
type newStreamFloor struct {
	p     *warmPair
	proto protocol.ID
	keys  floorKeys
}

func (p *warmPair) newStreamFloor() (*newStreamFloor, error) {
	keys, err := newFloorKeys()
	if err != nil {
		return nil, err
	}
	f := &newStreamFloor{p: p, keys: keys, proto: "/ifaced-bench/floor-new-stream/1.0.0"}
	bobPub := pubOf(keys.bob)
	p.alice.Host().SetStreamHandler(f.proto, func(s network.Stream) {
		s.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := readVerified(s, bobPub, 1); err != nil {
			s.Reset()
			return
		}
		if err := writeSigned(s, p.reply, keys.alice); err != nil {
			s.Reset()
			return
		}
		s.Close()
	})
	return f, nil
}

func (f *newStreamFloor) once(ctx context.Context) (time.Duration, error) {
	alicePub := pubOf(f.keys.alice)
	start := time.Now()
	s, err := f.p.bob.Host().NewStream(ctx, f.p.alicePID, f.proto)
	if err != nil {
		return 0, fmt.Errorf("opening a stream: %w", err)
	}
	s.SetDeadline(time.Now().Add(10 * time.Second))
	if err := writeSigned(s, f.p.request, f.keys.bob); err != nil {
		s.Reset()
		return 0, err
	}
	s.CloseWrite()
	if _, err := readVerified(s, alicePub, 1); err != nil {
		s.Reset()
		return 0, err
	}
	io.Copy(io.Discard, s) // to the end of the stream, as a greeting's initiator sees it
	s.Close()
	return time.Since(start), nil
}

// longLivedFloor is the physical floor of a warm greeting (DESIGN.md §8):
// one stream, opened once and kept, carrying Bob's greeting's bytes out
// and Alice's answer's bytes back on every round trip, each signed once
// by its sender and verified once by its receiver. Unsigned, it is the
// transport alone.
type longLivedFloor struct {
	s    network.Stream
	r    *bufio.Reader
	keys floorKeys // zero: unsigned
	req  []byte
}

// newLongLivedFloor opens the stream; signed false leaves the crypto out.
func (p *warmPair) newLongLivedFloor(ctx context.Context, signed bool) (*longLivedFloor, error) {
	var keys floorKeys
	proto := protocol.ID("/ifaced-bench/floor-long-lived-unsigned/1.0.0")
	if signed {
		var err error
		if keys, err = newFloorKeys(); err != nil {
			return nil, err
		}
		proto = "/ifaced-bench/floor-long-lived/1.0.0"
	}
	bobPub := pubOf(keys.bob)
	p.alice.Host().SetStreamHandler(proto, func(s network.Stream) {
		defer s.Reset()
		r := bufio.NewReader(s)
		for {
			s.SetDeadline(time.Now().Add(5 * time.Minute)) // idle between blocks of the interleaving
			if _, err := readVerified(r, bobPub, 1); err != nil {
				return // the bench closed the stream, or it failed: both end it
			}
			if err := writeSigned(s, p.reply, keys.alice); err != nil {
				return
			}
		}
	})
	s, err := p.bob.Host().NewStream(ctx, p.alicePID, proto)
	if err != nil {
		return nil, fmt.Errorf("opening the long-lived stream: %w", err)
	}
	return &longLivedFloor{s: s, r: bufio.NewReader(s), keys: keys, req: p.request}, nil
}

func (f *longLivedFloor) once() (time.Duration, error) {
	start := time.Now()
	f.s.SetDeadline(time.Now().Add(10 * time.Second))
	if err := writeSigned(f.s, f.req, f.keys.bob); err != nil {
		return 0, err
	}
	if _, err := readVerified(f.r, pubOf(f.keys.alice), 1); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func (f *longLivedFloor) close() { f.s.Reset() }
