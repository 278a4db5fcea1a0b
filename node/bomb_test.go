package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ifaced/ifaced/gossip"
	"github.com/ifaced/ifaced/identity"
	"github.com/ifaced/ifaced/node/admit"
	"github.com/ifaced/ifaced/node/converse"
	"github.com/ifaced/ifaced/node/wire"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// bomber is a flooding peer whose key is known, so that it can send
// messages that claim to be its own.
type bomber struct {
	host.Host
	id *identity.Identity
}

func (r *floodRig) connectBomber() bomber {
	r.t.Helper()
	id, err := identity.Generate(nil)
	if err != nil {
		r.t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(id.LibP2PKey()), libp2p.NoListenAddrs,
		libp2p.Transport(tcp.NewTCPTransport), libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport), libp2p.DisableRelay(),
		libp2p.ResourceManager(&network.NullResourceManager{}), libp2p.DisableMetrics())
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { h.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Connect(ctx, r.target()); err != nil {
		r.t.Fatal(err)
	}
	r.peakMu.Lock()
	r.flooders = append(r.flooders, h.ID())
	r.peakMu.Unlock()
	return bomber{h, id}
}

// greetingWith is a greeting from b to the daemon whose part holds
// content, signed by b and then given a bogus signature.
func (b bomber) greetingWith(t *testing.T, to string, content any) []byte {
	t.Helper()
	now := time.Now()
	m := &gossip.Message{IFP: gossip.Version, Headers: gossip.Headers{
		MessageID: gossip.NewID("msg", now), Date: gossip.FormatDate(now),
		From: gossip.Agent{Agent: b.id.DID()}, To: []gossip.Agent{{Agent: to}},
		ConversationID: gossip.NewID("conv", now), Sequence: 1, Phase: gossip.PhaseGreeting, ContentType: gossip.DefaultContentType,
	}, Body: gossip.Body{Text: "Hello.", Parts: []gossip.Part{{ContentType: "application/json", Name: "x", Content: content}}}}
	if err := m.Sign(b.id, now); err != nil {
		t.Fatal(err)
	}
	sig := &m.Security.Signatures[0]
	if strings.HasPrefix(sig.Sig, "AAAA") {
		sig.Sig = "BBBB" + sig.Sig[4:]
	} else {
		sig.Sig = "AAAA" + sig.Sig[4:]
	}
	c, err := gossip.EncodeCBOR(m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dense is a part content of n maps of one pair each: what costs most
// decoded per byte within the container bounds.
func dense(n int) any {
	maps := make([]any, n)
	for i := range maps {
		maps[i] = map[string]any{"a": 0}
	}
	return []any{maps}
}

// bombs is a part content of tiny containers, [[{},{},…],…], of about
// size bytes of CBOR (as issue 13 measured it).
func bombs(size int) any {
	var outer []any
	for size > 16000 {
		maps := make([]any, 16000)
		for i := range maps {
			maps[i] = map[string]any{}
		}
		outer = append(outer, maps)
		size -= 16000 + 3
	}
	return outer
}

// TestFaultContainerBombs: unauthenticated peers send, on 48 streams at
// once (6 peers, 8 streams each: one peer's share of this daemon's
// streams), first 1 MiB frames of tiny containers, which before issue 13
// decoded to 62 MiB of live heap each (48 of them drove a daemon's heap
// to 6.2 GiB): each is refused unread, invalid_format naming the bound.
// Then the densest greetings the bounds let through (16,000 maps of one
// pair, 65 KB of CBOR, some 6 MiB decoded), with a bogus signature: each
// is decoded and its signature checked within the decoding budget, and
// refused invalid_signature. The established peer keeps greeting
// meanwhile, and the heap in use at the peak stays within twice the
// budget (the decoded messages the budget admits, and as much again of
// garbage the collector has not yet reclaimed) above the baseline.
func TestFaultContainerBombs(t *testing.T) {
	r := newFloodRig(t)
	const peers, perPeer = 6, 8
	var bombers []bomber
	for range peers {
		bombers = append(bombers, r.connectBomber())
	}
	self := r.d.ID().DID()
	for _, round := range []struct {
		name    string
		content func() any
		code    wire.Code
	}{
		{"1 MiB frames of tiny containers", func() any { return bombs(gossip.MaxMessageSize - 4096) }, wire.CodeInvalidFormat},
		{"dense greetings within the bounds, bogus signature", func() any { return dense(16000) }, wire.CodeInvalidSignature},
	} {
		content := round.content()
		frames := make([][]byte, len(bombers))
		for i, b := range bombers {
			frames[i] = b.greetingWith(t, self, content)
		}
		content = nil
		// The frames are this test's: the heap is measured from here.
		base := measure()
		r.peakMu.Lock()
		r.peak = usage{}
		r.peakMu.Unlock()
		var answered, overloaded, reset atomic.Int64
		var mu sync.Mutex
		var wrong []string
		st := r.during(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			for i, b := range bombers {
				for range perPeer {
					wg.Add(1)
					go func() {
						defer wg.Done()
						code, err := sendFrame(ctx, b, r.d.pid(), frames[i])
						switch {
						case errors.Is(err, network.ErrReset):
							reset.Add(1)
						case err == nil && code == wire.CodeRateLimited:
							overloaded.Add(1) // no room in the peer's scope or the budget now
						case err != nil:
							mu.Lock()
							wrong = append(wrong, err.Error())
							mu.Unlock()
						case code != round.code:
							mu.Lock()
							wrong = append(wrong, string(code))
							mu.Unlock()
						default:
							answered.Add(1)
						}
					}()
				}
			}
			wg.Wait()
		})
		r.peakMu.Lock()
		peak := r.peak
		r.peakMu.Unlock()
		t.Logf("%s (%d bytes each), %d at once: %d answered %s, %d rate_limited, %d reset; heap in use at the peak %.1f MiB above the baseline",
			round.name, len(frames[0]), peers*perPeer, answered.Load(), round.code, overloaded.Load(), reset.Load(), float64(int64(peak.heap)-int64(base.heap))/(1<<20))
		r.checkLiveness(st)
		if len(wrong) > 0 {
			t.Errorf("%s: %d got another answer, e.g. %s", round.name, len(wrong), strings.Join(wrong[:min(3, len(wrong))], "; "))
		}
		if answered.Load() == 0 {
			t.Errorf("%s: none was answered %s", round.name, round.code)
		}
		if bound := base.heap + 2*uint64(admit.BudgetSize(r.d.cfg.Limits.MaxMemoryMB)); peak.heap > bound {
			t.Errorf("%s: heap in use reached %.1f MiB, over the baseline %.1f MiB plus twice the decoding budget",
				round.name, float64(peak.heap)/(1<<20), float64(base.heap)/(1<<20))
		}
	}
	for _, b := range bombers {
		b.Close()
	}
	r.checkRecovery(recoveryTimeout)
}

// sendFrame opens a conversation stream from b, writes frame and returns
// the code of the error message that answers it.
func sendFrame(ctx context.Context, b bomber, to peer.ID, frame []byte) (wire.Code, error) {
	s, err := b.NewStream(ctx, to, wire.Conversation)
	if err != nil {
		return "", err
	}
	defer s.Reset()
	s.SetDeadline(time.Now().Add(30 * time.Second))
	// Written while the answer is read: a daemon that cannot afford the
	// frame answers without reading it.
	go gossip.WriteFrame(s, frame)
	m, err := gossip.ReadMessage(bufio.NewReader(s))
	if err != nil {
		return "", err
	}
	body, ok := converse.ErrorBody(m)
	if m.Headers.Phase != gossip.PhaseError || !ok {
		return "", fmt.Errorf("answered with a %s message", m.Headers.Phase)
	}
	return body.Code, nil
}
