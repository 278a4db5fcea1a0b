package main

import (
	"context"
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

// greeter is an idle peer that greets once: its key (the key of its
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

// greetAll has every peer connected to target query its capabilities
// once (a greeting with its own view, answered with the child's), 32 at a
// time, and returns how many failed and the first failure. Peers whose
// dial failed are left out. The connections stay open afterwards: the
// peers are greeted and idle.
func greetAll(ctx context.Context, hosts []host.Host, gs []greeter, target peer.ID) (int, error) {
	pub, err := identity.PublicKeyFromPeerID(target)
	if err != nil {
		return len(hosts), err
	}
	remote := gossip.Agent{Agent: identity.DIDKey(pub)}
	var failed atomic.Int64
	var first error
	var once sync.Once
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, h := range hosts {
		if h.Network().Connectedness(target) != network.Connected {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := greetOnce(ctx, h, gs[i], target, remote); err != nil {
				failed.Add(1)
				once.Do(func() { first = err })
			}
		})
	}
	wg.Wait()
	return int(failed.Load()), first
}

// greetOnce sends one capabilities query from h, as g, to target and
// reads the answer.
func greetOnce(ctx context.Context, h host.Host, g greeter, target peer.ID, remote gossip.Agent) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := time.Now()
	c := gossip.NewConversation(gossip.NewID("conv", now), gossip.Agent{Agent: g.id.DID()}, remote)
	m, err := c.Next(gossip.PhaseGreeting, now)
	if err != nil {
		return err
	}
	if err := (negotiate.Greeting{}).Write(m, g.view); err != nil {
		return err
	}
	m.Body.Text = "Greetings from a bench peer."
	if err := c.TryStamp(m); err != nil {
		return err
	}
	if err := m.Sign(g.id, now); err != nil {
		return err
	}
	s, err := h.NewStream(ctx, target, wire.Capabilities)
	if err != nil {
		return fmt.Errorf("opening a capabilities stream: %w", err)
	}
	defer s.Close()
	ws := wire.NewStream(s, 30*time.Second)
	if err := ws.Write(m); err != nil {
		return fmt.Errorf("sending the greeting: %w", err)
	}
	reply, err := ws.Read()
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if reply.Headers.Phase != gossip.PhaseGreeting {
		return fmt.Errorf("answered with %s: %s", reply.Headers.Phase, reply.Body.Text)
	}
	return nil
}
