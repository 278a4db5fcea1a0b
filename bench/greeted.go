package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/negotiate"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// greeter is a lightweight peer that greets: its key (the key of its
// host) and its signed 20-capability view, made before the measurement so
// that the parent's work does not slow the child's.
type greeter struct {
	id   *identity.Identity
	view *negotiate.SignedView
}

// greeters makes the identity and signed view of each of n peers.
func greeters(n int) ([]greeter, error) {
	cfg := benchConfig()
	out := make([]greeter, n)
	for i := range out {
		id, err := identity.Generate(nil)
		if err != nil {
			return nil, err
		}
		doc, err := cfg.Document(id.DID())
		if err != nil {
			return nil, fmt.Errorf("building a greeter's document: %w", err)
		}
		doc.Seq, doc.Updated = 1, gossip.FormatDate(time.Now())
		v, err := negotiate.SignView(doc, id, time.Now())
		if err != nil {
			return nil, fmt.Errorf("signing a greeter's view: %w", err)
		}
		out[i] = greeter{id: id, view: v}
	}
	return out, nil
}

// greetClient is one lightweight peer greeting one daemon on the
// capabilities protocol, as a daemon does: its first greeting carries its
// view; later ones name the daemon's view it holds (have_view) and leave
// its own out when the daemon said it holds it (view_unchanged), so that
// a warm greeting carries neither view when neither changed. It verifies
// the answer's signature, and the daemon's view whenever one comes.
type greetClient struct {
	h         host.Host
	g         greeter
	target    peer.ID
	targetPub ed25519.PublicKey
	remote    gossip.Agent
	held      string // the sum of the daemon's view this peer holds, verified; "" before the first answer
	theyHold  string // the sum of this peer's view the daemon said it holds
}

func newGreetClient(h host.Host, g greeter, target peer.ID) (*greetClient, error) {
	pub, err := identity.PublicKeyFromPeerID(target)
	if err != nil {
		return nil, err
	}
	return &greetClient{h: h, g: g, target: target, targetPub: pub, remote: gossip.Agent{Agent: identity.DIDKey(pub)}}, nil
}

// greet sends one greeting and reads and checks the answer; viewCame says
// whether the answer carried the daemon's view (a first greeting, or a
// view the daemon signed again or changed).
func (c *greetClient) greet(ctx context.Context) (viewCame bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := time.Now()
	conv := gossip.NewConversation(gossip.NewID("conv", now), gossip.Agent{Agent: c.g.id.DID()}, c.remote)
	m, err := conv.Next(gossip.PhaseGreeting, now)
	if err != nil {
		return false, err
	}
	prop := negotiate.Proposal{HaveView: c.held}
	if c.theyHold == c.g.view.Sum {
		prop.ViewUnchanged = c.g.view.Sum
	}
	negotiate.Greeting{Proposal: prop}.Write(m, c.g.view)
	m.Body.Text = "Greetings from a bench peer."
	if err := conv.TryStamp(m); err != nil {
		return false, err
	}
	if err := m.Sign(c.g.id, now); err != nil {
		return false, err
	}
	s, err := c.h.NewStream(ctx, c.target, wire.Capabilities)
	if err != nil {
		return false, fmt.Errorf("opening a capabilities stream: %w", err)
	}
	defer s.Close()
	ws := wire.NewStream(s, 30*time.Second)
	if err := ws.Write(m); err != nil {
		return false, fmt.Errorf("sending the greeting: %w", err)
	}
	reply, err := ws.Read()
	if err != nil {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	if reply.Headers.Phase != gossip.PhaseGreeting {
		return false, fmt.Errorf("answered with %s: %s", reply.Headers.Phase, reply.Body.Text)
	}
	if err := reply.Verify(c.targetPub); err != nil {
		return false, fmt.Errorf("verifying the answer: %w", err)
	}
	answer, err := negotiate.ReadGreeting(reply)
	if err != nil {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	if p, ok := reply.Body.Part(negotiate.PartCapabilities); ok {
		canon, err := p.CanonicalContent()
		if err != nil {
			return false, fmt.Errorf("reading the answer's view: %w", err)
		}
		vv, err := negotiate.VerifyView(c.targetPub, canon)
		if err != nil {
			return false, fmt.Errorf("verifying the answer's view: %w", err)
		}
		c.held, viewCame = hex.EncodeToString(vv.Sum[:]), true
	} else if c.held == "" || answer.ViewUnchanged != c.held {
		return false, errors.New("the answer has no view, and does not name the one this peer holds")
	}
	c.theyHold = answer.HaveView
	return viewCame, nil
}

// greetAll has every client whose host is connected to its target greet
// once, 32 at a time, and returns how many greeted, how many failed, and
// the first failure.
func greetAll(ctx context.Context, clients []*greetClient) (greeted, failed int, first error) {
	var ok, bad atomic.Int64
	var once sync.Once
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, c := range clients {
		if c.h.Network().Connectedness(c.target) != network.Connected {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := c.greet(ctx); err != nil {
				bad.Add(1)
				once.Do(func() { first = err })
				return
			}
			ok.Add(1)
		})
	}
	wg.Wait()
	return int(ok.Load()), int(bad.Load()), first
}

// greetClients makes a client for each host, greeting as the greeter of
// the same index.
func greetClients(hosts []host.Host, gs []greeter, target peer.ID) ([]*greetClient, error) {
	out := make([]*greetClient, len(hosts))
	for i, h := range hosts {
		c, err := newGreetClient(h, gs[i], target)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
